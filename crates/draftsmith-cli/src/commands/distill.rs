//! `draftsmith distill`: conversations in, a distilled dataset (manifest + Parquet shards) out.

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Args;
use draftsmith_data::Part;
use draftsmith_distill::DistillConfig;

use crate::jobs::distill::DistillJob;
use crate::model_arg::ModelArgs;

/// Distill the target into a training dataset for drafters: self-distilled responses and/or
/// ground-truth conversations, with per-position greedy teacher continuations.
///
/// Shards are written every --inputs-per-shard conversations; rerunning the same command
/// resumes after the last finished shard. Rerunning with other settings into the same --out is
/// refused.
#[derive(Debug, Args)]
pub struct DistillArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Conversations: a ShareGPT JSON, JSONL or Parquet file, or a dataset name (fetched on first use).
    #[arg(long, default_value = "sharegpt")]
    pub data: String,
    /// Number of conversations to read from --data.
    #[arg(long, default_value_t = 200)]
    pub limit: usize,
    /// Output directory. Default: `data/distilled/<model>-<data>`.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Do not write self-distilled records (the target's own responses).
    #[arg(long)]
    pub no_responses: bool,
    /// Also write ground-truth records: the whole conversation, trained on its assistant turns.
    #[arg(long)]
    pub ground_truth: bool,
    /// Greedy teacher continuation length T per trained position (0 = none; the ReDrafter paper
    /// uses 5). Its first token is the target's own next token, so `train redrafter --labels
    /// teacher` trains up to T − 1 draft steps (`--horizon` ≤ T − 1).
    #[arg(long, default_value_t = DistillConfig::default().teacher_len)]
    pub teacher_len: usize,
    /// Store the target's top-k next-token ids and log-probs at every position (0 = none).
    #[arg(long, default_value_t = DistillConfig::default().topk)]
    pub topk: usize,
    /// Response length cap of self-distilled records.
    #[arg(long, default_value_t = DistillConfig::default().max_new_tokens)]
    pub max_new_tokens: usize,
    /// Longer prompts are skipped (and counted).
    #[arg(long, default_value_t = DistillConfig::default().max_prompt_tokens)]
    pub max_prompt_tokens: usize,
    /// Ground-truth sequences are cut to this many tokens.
    #[arg(long, default_value_t = DistillConfig::default().max_seq_len)]
    pub max_seq_len: usize,
    /// Sampling temperature of the responses (0 = greedy).
    #[arg(long, default_value_t = DistillConfig::default().temperature)]
    pub temperature: f32,
    /// Base seed of sampled responses.
    #[arg(long, default_value_t = DistillConfig::default().seed)]
    pub seed: u64,
    /// Conversations per shard (the resume granularity).
    #[arg(long, default_value_t = DistillConfig::default().inputs_per_shard)]
    pub inputs_per_shard: usize,
    /// Responses generated together through one KV cache (continuous batching): speed only,
    /// the output is the same for any value.
    #[arg(long, default_value_t = DistillConfig::default().batch_size)]
    pub batch_size: usize,
    /// Prompt with the first user message as raw text instead of the model's chat template.
    #[arg(long)]
    pub no_chat_template: bool,
    /// Distil only part I of N (0-based) of the --limit conversations, a contiguous range, into
    /// `<out>/part-0000I-of-0000N/` (five digits each): run the N parts on N machines or
    /// processes with the same arguments (a Slurm job array, a Kubernetes Indexed Job, GNU
    /// parallel); `train` reads `<out>` as one dataset once every part has finished.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<Part>,
    /// Print the run's statistics as one JSON object on the last stdout line.
    #[arg(long)]
    pub json: bool,
}

impl DistillArgs {
    fn config(&self) -> DistillConfig {
        DistillConfig {
            responses: !self.no_responses,
            ground_truth: self.ground_truth,
            teacher_len: self.teacher_len,
            topk: self.topk,
            max_new_tokens: self.max_new_tokens,
            max_prompt_tokens: self.max_prompt_tokens,
            max_seq_len: self.max_seq_len,
            temperature: self.temperature,
            seed: self.seed,
            chat_template: !self.no_chat_template,
            inputs_per_shard: self.inputs_per_shard,
            batch_size: self.batch_size,
        }
    }
}

pub fn run(args: DistillArgs) -> Result<()> {
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("data/distilled").join(format!("{}-{}", stem(&args.model.model), stem(&args.data)))
    });
    let job = DistillJob {
        model: args.model.clone(),
        data: args.data.clone(),
        limit: args.limit,
        out,
        config: args.config(),
        shard: args.shard,
        json: args.json,
    };
    crate::jobs::distill::run(&job)
}

/// The last path component without its extension (`models/x.gguf` → `x`, `sharegpt` → `sharegpt`).
fn stem(spec: &str) -> String {
    Path::new(spec).file_stem().map_or_else(|| spec.to_string(), |s| s.to_string_lossy().into_owned())
}
