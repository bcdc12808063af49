//! The flags of `draftsmith eval` (also filled in by `reproduce` for each grid point).

use std::path::PathBuf;

use clap::Args;
use draftsmith_decode::{Method, MethodParams};

use crate::method_args::method_parser;
use crate::model_arg::ModelArgs;
use crate::sampling_args::SamplingArgs;

/// Compare decoding methods with the autoregressive baseline on a prompt set (greedy, or
/// sampled with --temperature).
///
/// Every prompt runs `ar` first, then each method (or all side by side, --turn-tokens), on the
/// same loaded model; greedy, any output that differs from `ar`'s fails the run (exit code 1)
/// after all records are written (sampled, outputs are not compared: each method keeps the
/// target's distribution but draws other tokens than `ar`). Rerunning with the same `--out`
/// skips the (prompt, method) pairs already recorded.
#[derive(Debug, Args)]
pub struct EvalArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Methods, comma-separated; `ar` (the baseline) always runs, first.
    #[arg(long, required = true, value_delimiter = ',', value_parser = method_parser())]
    pub methods: Vec<Method>,
    /// A JSONL file with one object per line: an id (`id`, `question_id` or `task_id`) and
    /// `prompt` (a string) or `turns` (user messages; the first is used). Or a dataset name:
    /// `mt-bench` (first turns) or `humaneval` (the function stubs); both are fetched on first use.
    /// Each prompt is the user message of the chat template unless --no-chat-template (for
    /// humaneval that gives raw code completion).
    #[arg(long)]
    pub prompts: String,
    /// Use only the first K prompts.
    #[arg(long, value_name = "K")]
    pub limit: Option<usize>,
    /// New tokens per prompt at most (generation also stops at the model's end-of-turn token).
    #[arg(long, default_value_t = 128)]
    pub max_new_tokens: usize,
    /// Tokenize each prompt as raw text instead of applying the model's chat template.
    #[arg(long)]
    pub no_chat_template: bool,
    /// Output directory (resumed when it holds the same eval). Default: `eval/runs/<UTC time>`
    /// (git-ignored; recorded results go under eval/results/ by an explicit --out).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Reuse the `ar` records of an earlier eval (its directory, or its `records.jsonl`; records whose prompt ids
    /// differ are ignored) instead of decoding the baseline again. The eval's `manifest.json`
    /// beside them must show the same model, engine, --max-new-tokens, chat template, EOS
    /// handling, sampling, penalty and --turn-tokens.
    #[arg(long)]
    pub reuse_ar_from: Option<PathBuf>,
    /// Generate exactly --max-new-tokens per prompt, past the model's end-of-turn token (long
    /// generations, as TokenSwift's tables run them).
    #[arg(long)]
    pub ignore_eos: bool,
    /// Run each prompt's methods side by side, taking turns on the machine every N new tokens
    /// (one computes while the others wait; each decode time counts its own turns), instead of
    /// one after another: on a shared machine whose speed drifts, `ar` and every method then
    /// see the same stretches of it. Worth it for few, long generations (one prompt × 4096
    /// tokens); prompt-by-prompt order already interleaves many short ones.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub turn_tokens: Option<u64>,
    /// Print the per-method summary as one JSON object on the last stdout line.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub params: MethodParams,
    /// Sampling (every method and `ar` alike, each generation seeded with --seed); greedy by
    /// default.
    #[command(flatten)]
    pub sampling: SamplingArgs,
}
