//! `draftsmith eval`: methods × prompts on one loaded engine, `ar` first as the baseline, every
//! output checked against it token for token; records, summary, report and plot in `--out`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use burn::tensor::backend::Backend;
use clap::builder::PossibleValuesParser;
use clap::Args;
use draftsmith_decode::methods::{KvMode, LoadedReDrafter, LoadedTokenSwift};
use draftsmith_decode::{DraftPolicy, Drafters, MethodParams, METHODS};
use draftsmith_eval::{EvalInput, Manifest, Progress, Summary};
use draftsmith_model::LoadedModel;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use crate::commands::fetch::fetch_with_progress;
use crate::model_arg::ModelArgs;

/// Compare decoding methods with the autoregressive baseline on a prompt set (greedy).
///
/// Every prompt runs `ar` first, then each method, on the same loaded model; any output that
/// differs from `ar`'s fails the run (exit code 1) after all records are written. Rerunning
/// with the same `--out` skips the (prompt, method) pairs already recorded.
#[derive(Debug, Args)]
pub struct EvalArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Methods, comma-separated; `ar` (the baseline) always runs, first.
    #[arg(long, required = true, value_delimiter = ',', value_parser = PossibleValuesParser::new(METHODS))]
    pub methods: Vec<String>,
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
    /// Output directory (resumed when it holds the same eval). Default: eval/runs/<UTC time>
    /// (git-ignored; recorded results go under eval/results/ by an explicit --out).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Reuse the `ar` records of an earlier eval's `records.jsonl` (same model, prompts and
    /// --max-new-tokens; records whose prompt ids differ are ignored) instead of decoding the
    /// baseline again.
    #[arg(long)]
    pub reuse_ar_from: Option<PathBuf>,
    /// Print the per-method summary as one JSON object on the last stdout line.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub params: MethodParamArgs,
}

/// Method parameters: the recipe keys, in kebab case. Each method uses the ones it needs.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Method parameters")]
pub struct MethodParamArgs {
    /// Draft length of chain methods (prompt-lookup).
    #[arg(long, default_value_t = MethodParams::default().draft_len)]
    pub draft_len: usize,
    /// Longest n-gram prompt lookup tries to match (down to 1).
    #[arg(long, default_value_t = MethodParams::default().lookup_ngram)]
    pub lookup_ngram: usize,
    /// N-gram trie: sliding-window length n (the paper's best: 13).
    #[arg(long, default_value_t = MethodParams::default().ngram_n)]
    pub ngram_n: usize,
    /// N-gram trie: maximum prefix length L_p (the paper's best: 3).
    #[arg(long, default_value_t = MethodParams::default().ngram_lp)]
    pub ngram_lp: usize,
    /// N-gram trie: most draft nodes per step.
    #[arg(long, default_value_t = MethodParams::default().num_draft)]
    pub num_draft: usize,
    /// N-gram trie: also index the generated tokens (the paper indexes the prompt only).
    #[arg(long)]
    pub ngram_update_output: bool,
    /// Drafter for `draft-model`, `precut` and `token-cache`: a model with the target's
    /// tokenizer (a .gguf, HF directory, hf:id or fetch name, e.g. qwen2.5-coder-0.5b).
    #[arg(long)]
    pub draft_model: Option<String>,
    /// Trained drafter directory for `redrafter` or `tokenswift` (`drafter.safetensors` +
    /// `config.json`, as written by `draftsmith train redrafter|tokenswift` / `draftsmith export`).
    #[arg(long)]
    pub drafter: Option<String>,
    /// ReDrafter: beams per step.
    #[arg(long, default_value_t = MethodParams::default().beam_width)]
    pub beam_width: usize,
    /// ReDrafter: tokens per beam, counting the target's guaranteed token.
    #[arg(long, default_value_t = MethodParams::default().beam_length)]
    pub beam_length: usize,
    /// ReDrafter: verify every beam as its own chain instead of packing shared prefixes into a
    /// tree (the dynamic-tree-attention ablation).
    #[arg(long)]
    pub no_tree_attention: bool,
    /// TokenSwift: candidates per depth, p0's first (`1,3,3,3`; `3,3,3,3`, `1,9,9,9`).
    #[arg(long, value_delimiter = ',', default_values_t = MethodParams::default().tree)]
    pub tree: Vec<usize>,
    /// TokenSwift: n-gram continuations added per step (0 = no token reutilization).
    #[arg(long, default_value_t = MethodParams::default().ngram_topk)]
    pub ngram_topk: usize,
    /// TokenSwift: the draft forward's KV cache: full, partial-static or dynamic.
    #[arg(long, default_value_t = MethodParams::default().kv_mode)]
    pub kv_mode: KvMode,
    /// TokenSwift: draft KV budget B in tokens (partial modes).
    #[arg(long, default_value_t = MethodParams::default().kv_budget)]
    pub kv_budget: usize,
    /// TokenSwift: sink tokens S always kept in the draft cache.
    #[arg(long, default_value_t = MethodParams::default().kv_sinks)]
    pub kv_sinks: usize,
    /// Contextual / repetition penalty θ of the target's greedy decoding, for every method
    /// (1 = off).
    #[arg(long, default_value_t = MethodParams::default().penalty)]
    pub penalty: f64,
    /// The penalty looks at the last W tokens (0 = the whole context).
    #[arg(long, default_value_t = MethodParams::default().penalty_window)]
    pub penalty_window: usize,
    /// `auto`: each step verifies only the part of the draft with the best expected tokens per
    /// second (cost model calibrated on this machine, acceptance learned online); `fixed`: the
    /// method's own draft settings.
    #[arg(long, default_value_t = MethodParams::default().draft_policy)]
    pub draft_policy: DraftPolicy,
}

/// Drafters loaded for a run.
pub struct LoadedDrafters<B: Backend> {
    pub draft_model: Option<LoadedModel<B>>,
    pub redrafter: Option<LoadedReDrafter<B>>,
    pub tokenswift: Option<LoadedTokenSwift<B>>,
}

impl<B: Backend> LoadedDrafters<B> {
    pub fn as_drafters(&self) -> Drafters<'_, B> {
        Drafters {
            draft_model: self.draft_model.as_ref().map(|d| &d.model),
            redrafter: self.redrafter.as_ref(),
            tokenswift: self.tokenswift.as_ref(),
        }
    }
}

impl From<&MethodParams> for MethodParamArgs {
    fn from(p: &MethodParams) -> Self {
        Self {
            draft_len: p.draft_len,
            lookup_ngram: p.lookup_ngram,
            ngram_n: p.ngram_n,
            ngram_lp: p.ngram_lp,
            num_draft: p.num_draft,
            ngram_update_output: p.ngram_update_output,
            draft_model: p.draft_model.clone(),
            drafter: p.drafter.clone(),
            beam_width: p.beam_width,
            beam_length: p.beam_length,
            no_tree_attention: !p.tree_attention,
            tree: p.tree.clone(),
            ngram_topk: p.ngram_topk,
            kv_mode: p.kv_mode,
            kv_budget: p.kv_budget,
            kv_sinks: p.kv_sinks,
            penalty: p.penalty,
            penalty_window: p.penalty_window,
            draft_policy: p.draft_policy,
        }
    }
}

impl MethodParamArgs {
    pub fn params(&self) -> MethodParams {
        MethodParams {
            draft_len: self.draft_len,
            lookup_ngram: self.lookup_ngram,
            ngram_n: self.ngram_n,
            ngram_lp: self.ngram_lp,
            num_draft: self.num_draft,
            ngram_update_output: self.ngram_update_output,
            draft_model: self.draft_model.clone(),
            drafter: self.drafter.clone(),
            beam_width: self.beam_width,
            beam_length: self.beam_length,
            tree_attention: !self.no_tree_attention,
            tree: self.tree.clone(),
            ngram_topk: self.ngram_topk,
            kv_mode: self.kv_mode,
            kv_budget: self.kv_budget,
            kv_sinks: self.kv_sinks,
            penalty: self.penalty,
            penalty_window: self.penalty_window,
            draft_policy: self.draft_policy,
        }
    }

    /// Loads the drafters that are named: a draft model (checked to share the target's
    /// tokenizer) and a trained drafter (checked to be trained for this target).
    pub fn load_drafters<B: Backend>(
        &self,
        target: &LoadedModel<B>,
        model: &ModelArgs,
        device: &B::Device,
    ) -> Result<LoadedDrafters<B>> {
        let draft_model = match &self.draft_model {
            Some(spec) => {
                let drafter = ModelArgs { model: spec.clone(), ..model.clone() }.load::<B>(device)?;
                draftsmith_decode::methods::check_tokenizers(&target.tokenizer, &drafter.tokenizer)?;
                Some(drafter)
            }
            None => None,
        };
        let (mut redrafter, mut tokenswift) = (None, None);
        if let Some(dir) = &self.drafter {
            let dir = std::path::Path::new(dir);
            let identity = crate::model_arg::target_identity(target)?;
            match draftsmith_heads::drafter_kind(dir)?.as_str() {
                "redrafter" => redrafter = Some(LoadedReDrafter::load(dir, &identity, device)?),
                "tokenswift" => tokenswift = Some(LoadedTokenSwift::load(dir, &identity, device)?),
                other => bail!(
                    "{}: unknown drafter kind `{other}` (redrafter, tokenswift)",
                    dir.join("config.json").display()
                ),
            }
        }
        Ok(LoadedDrafters { draft_model, redrafter, tokenswift })
    }
}

/// Where an eval without `--out` goes: ignored by git, unlike the recorded `eval/results/`.
pub const DEFAULT_RUNS_DIR: &str = "eval/runs";

pub fn run(args: EvalArgs) -> Result<()> {
    crate::with_backend!(args.model.device, |B, device| run_on::<B>(&args, &device))
}

fn run_on<B: Backend>(args: &EvalArgs, device: &B::Device) -> Result<()> {
    let params = args.params.params();
    let methods = draftsmith_eval::resolve_methods(&args.methods, &params)?;
    if args.limit == Some(0) {
        bail!("--limit must be at least 1");
    }
    let set = draftsmith_eval::read_prompts(&resolve_prompts(&args.prompts)?, args.limit)?;
    let out = args.out.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_RUNS_DIR).join(utc_stamp()));
    let loaded = args.model.load::<B>(device)?;
    let drafters = args.params.load_drafters(&loaded, &args.model, device)?;
    let prompts = draftsmith_eval::encode_prompts(&loaded.tokenizer, &set.prompts, !args.no_chat_template)?;
    let command_line = command_line();
    let manifest = Manifest {
        schema_version: draftsmith_eval::SCHEMA_VERSION,
        model: loaded.path.display().to_string(),
        engine: args.model.engine_label(&loaded.path)?,
        methods,
        params,
        max_new_tokens: args.max_new_tokens,
        prompts: set.path.display().to_string(),
        prompts_sha256: set.sha256.clone(),
        limit: args.limit,
        chat_template: !args.no_chat_template,
        drafter_sha256: args
            .params
            .drafter
            .as_deref()
            .map(|d| draftsmith_eval::drafter_sha256(Path::new(d)))
            .transpose()?,
        command: command_line.clone(),
    };
    let input = EvalInput {
        out_dir: &out,
        manifest: &manifest,
        prompts: &prompts,
        stop_tokens: loaded.tokenizer.eos_ids(),
        command_line: &command_line,
        reuse_ar_from: args.reuse_ar_from.as_deref(),
    };
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} pairs [{elapsed} < {eta}] {msg}").expect("valid template"),
    );
    let outcome = draftsmith_eval::evaluate(&loaded.model, drafters.as_drafters(), &input, &mut |p| match p {
        Progress::Start { total, done } => {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }
        Progress::Running { prompt_id, method } => bar.set_message(format!("{prompt_id} · {method}")),
        Progress::Finished { .. } => bar.inc(1),
    })
    .with_context(|| format!("eval into {}", out.display()))?;
    bar.finish_and_clear();
    if outcome.resumed {
        eprintln!("resumed {}: {} pair(s) run now, the rest from records.jsonl", out.display(), outcome.ran);
    }
    print_summary(&outcome.summary, &out, args.json);
    check_lossless(&outcome.summary)
}

/// A prompts file path, or a dataset name fetched into the data dir.
fn resolve_prompts(spec: &str) -> Result<PathBuf> {
    let path = Path::new(spec);
    if path.exists() {
        return Ok(path.to_path_buf());
    }
    match draftsmith_fetch::find(spec) {
        Ok(a) if a.kind == draftsmith_fetch::ArtifactKind::Dataset && a.output.ends_with(".jsonl") => {
            fetch_with_progress(a)
        }
        _ => bail!("--prompts {spec}: no such file, and not a prompt dataset (mt-bench, humaneval)"),
    }
}

fn print_summary(summary: &Summary, out: &Path, json: bool) {
    if json {
        println!(
            "{}",
            json!({ "methods": summary.methods, "lossless": summary.lossless, "near_tie_bound": summary.near_tie_bound, "out": out.display().to_string() })
        );
        return;
    }
    let f = |v: Option<f64>| v.map_or_else(|| "–".into(), |v| format!("{v:.2}"));
    println!("{:<16} {:>8} {:>8} {:>8} {:>14} {:>9}", "method", "τ", "accept%", "speedup", "w/ prefill", "lossless");
    for (name, s) in summary.iter() {
        println!(
            "{name:<16} {:>8.3} {:>8} {:>8} {:>14} {:>9}",
            s.tokens_per_step,
            f(s.acceptance_pct),
            f(s.speedup),
            f(s.speedup_with_prefill),
            s.lossless
        );
    }
    if let Some(b) = &summary.near_tie_bound {
        let ties: usize = summary.methods.values().map(|s| s.near_ties).sum();
        println!(
            "near-tie check (kernels not batch-invariant): drift {:.2e}, bound {:.2e}, near-ties {ties}",
            b.drift, b.bound
        );
    }
    println!("records, summary.json, report.md and plot.svg in {}", out.display());
}

/// Fails with the first mismatches when any method's output differs from `ar`'s.
fn check_lossless(summary: &Summary) -> Result<()> {
    if summary.lossless {
        return Ok(());
    }
    let tok = |t: Option<u32>| t.map_or_else(|| "end".to_string(), |t| t.to_string());
    let real: Vec<_> = summary.mismatches.iter().filter(|m| !m.near_tie).collect();
    let listed: Vec<String> = real
        .iter()
        .take(5)
        .map(|m| {
            format!(
                "prompt `{}`, {}: position {}: ar {} vs {}",
                m.prompt_id,
                m.method,
                m.position,
                tok(m.ar_token),
                tok(m.method_token)
            )
        })
        .collect();
    match listed.is_empty() {
        true => bail!("not lossless: some method has prompts without an ar record"),
        false => bail!("not lossless: {} mismatch(es) with ar:\n  {}", real.len(), listed.join("\n  ")),
    }
}

/// The command line as typed, shell-quoted where needed.
fn command_line() -> String {
    let quote = |a: String| {
        if !a.is_empty() && a.chars().all(|c| c.is_ascii_alphanumeric() || "-_./,:=@+".contains(c)) {
            a
        } else {
            format!("'{}'", a.replace('\'', r"'\''"))
        }
    };
    let mut args = std::env::args();
    let program = args
        .next()
        .map(|p| Path::new(&p).file_name().map_or(p.clone(), |n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    std::iter::once(program).chain(args.map(quote)).collect::<Vec<_>>().join(" ")
}

/// `YYYYMMDD-HHMMSS` in UTC.
fn utc_stamp() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}{month:02}{day:02}-{:02}{:02}{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}
