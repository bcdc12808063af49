//! The sampling flags shared by the commands that decode.

use clap::Args;
use draftsmith_decode::{MethodParams, SamplingConfig};

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
    /// Penalty on tokens already in the context (1 = off); the same as --penalty (give one).
    #[arg(long, default_value_t = 1.0, conflicts_with = "penalty")]
    pub repetition_penalty: f32,
    /// η-sampling threshold (0 = off).
    #[arg(long, default_value_t = 0.0)]
    pub eta: f32,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

impl Default for SamplingArgs {
    /// Greedy: the flags' defaults.
    fn default() -> Self {
        let c = SamplingConfig::default();
        Self {
            temperature: c.temperature,
            top_k: c.top_k,
            top_p: c.top_p,
            min_p: c.min_p,
            repetition_penalty: c.repetition_penalty,
            eta: c.eta,
            seed: c.seed,
        }
    }
}

impl SamplingArgs {
    /// The sampling these flags ask for, with the penalty of `--penalty` / `--penalty-window`
    /// (method parameters, shared by `generate` and `eval`) where `--repetition-penalty` is off.
    pub fn config_with(&self, params: &MethodParams) -> SamplingConfig {
        let mut config = self.config();
        if config.repetition_penalty == 1.0 {
            config.repetition_penalty = params.penalty as f32;
        }
        config.penalty_window = params.penalty_window;
        config
    }

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
