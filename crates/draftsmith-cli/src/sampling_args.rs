//! The sampling flags shared by the commands that decode.

use clap::Args;
use draftsmith_decode::SamplingConfig;

/// Sampling flags shared by the commands that decode.
#[derive(Debug, Clone, Args)]
pub struct SamplingArgs {
    /// 0 = greedy.
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f32,
    /// Keep the k most likely tokens (0 = off).
    #[arg(long, default_value_t = 0)]
    pub top_k: usize,
    /// Nucleus sampling threshold (1 = off).
    #[arg(long, default_value_t = 1.0)]
    pub top_p: f32,
    /// Drop tokens below min-p × the top probability (0 = off).
    #[arg(long, default_value_t = 0.0)]
    pub min_p: f32,
    /// Penalty on tokens already in the context (1 = off); the same as --penalty.
    #[arg(long, default_value_t = 1.0)]
    pub repetition_penalty: f32,
    /// η-sampling threshold (0 = off).
    #[arg(long, default_value_t = 0.0)]
    pub eta: f32,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

impl SamplingArgs {
    pub fn config(&self) -> SamplingConfig {
        SamplingConfig {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repetition_penalty: self.repetition_penalty,
            eta: self.eta,
            penalty_window: 0,
            seed: self.seed,
        }
    }
}
