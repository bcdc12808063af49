//! `draftsmith distill`: conversations in, a distilled dataset (manifest + Parquet shards) out.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use burn::tensor::backend::Backend;
use clap::Args;
use draftsmith_data::{read_conversations, ShardWriter, TargetId};
use draftsmith_distill::{DistillConfig, DistillEvent, DistillStats};
use draftsmith_model::load_model;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use crate::model_arg::ModelArgs;
use crate::progress::fetch_with_progress;

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
    /// Output directory. Default: data/distilled/<model>-<data>.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Do not write self-distilled records (the target's own responses).
    #[arg(long)]
    pub no_responses: bool,
    /// Also write ground-truth records: the whole conversation, trained on its assistant turns.
    #[arg(long)]
    pub ground_truth: bool,
    /// Greedy teacher continuation length T per trained position (0 = none; the ReDrafter paper uses 5).
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
        json: args.json,
    };
    distill_job(&job)
}

/// One distillation, resolved (also run by `reproduce` for a recipe's drafters).
pub struct DistillJob {
    pub model: ModelArgs,
    pub data: String,
    pub limit: usize,
    pub out: PathBuf,
    pub config: DistillConfig,
    pub json: bool,
}

pub fn distill_job(job: &DistillJob) -> Result<()> {
    crate::with_backend!(job.model.device, |B, device| run_on::<B>(job, &device))
}

fn run_on<B: Backend>(args: &DistillJob, device: &B::Device) -> Result<()> {
    let cfg = args.config.clone();
    cfg.validate()?;
    if args.limit == 0 {
        bail!("--limit must be at least 1");
    }
    let data = resolve_data(&args.data)?;
    let out = args.out.clone();
    let report = read_conversations(&data, Some(args.limit))?;
    if report.skipped > 0 {
        eprintln!("{}: {} unusable conversation(s) skipped while reading", data.display(), report.skipped);
    }
    let model_path = args.model.resolve_path()?;
    let target = TargetId { name: file_name(&model_path), sha256: draftsmith_model::weights_sha256(&model_path)? };
    let bytes = std::fs::metadata(&data).with_context(|| format!("{}: cannot stat", data.display()))?.len();
    // The engine is part of the settings: answers differ between activation modes.
    let params = cfg
        .params(json!({ "file": file_name(&data), "bytes": bytes, "engine": args.model.engine_label(&model_path)? }));
    let mut writer = ShardWriter::open(&out, target, params, cfg.inputs_per_shard)?;
    let loaded = load_model::<B>(&model_path, args.model.load_options(&model_path)?, device)?;

    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} conversations [{elapsed} < {eta}] {msg}")
            .expect("valid template"),
    );
    let begin = Instant::now();
    let (mut generated, mut processed) = (0usize, 0usize);
    let show = |bar: &ProgressBar, generated: usize, processed: usize| {
        let s = begin.elapsed().as_secs_f64().max(1e-9);
        bar.set_message(format!(
            "{:.0} tok/s generated, {:.0} tok/s through the target",
            generated as f64 / s,
            processed as f64 / s
        ));
    };
    let stats = draftsmith_distill::distill(
        &loaded.model,
        &loaded.tokenizer,
        &report.conversations,
        &cfg,
        &mut writer,
        &mut |event| match event {
            DistillEvent::Start { total, done } => {
                bar.set_length(total as u64);
                bar.set_position(done as u64);
                bar.reset_eta();
            }
            // Answers tick the rate as they finish; the position moves as inputs are written.
            DistillEvent::Answer { tokens } => {
                generated += tokens;
                show(&bar, generated, processed);
            }
            DistillEvent::Input { processed: p, .. } => {
                processed += p;
                show(&bar, generated, processed);
                bar.inc(1);
            }
        },
    )
    .with_context(|| format!("distill into {}", out.display()))?;
    let manifest = writer.finish()?;
    bar.finish_and_clear();
    print_summary(&stats, manifest.records(), &out, args.json);
    Ok(())
}

fn print_summary(stats: &DistillStats, total_records: usize, out: &Path, json: bool) {
    let s = stats.seconds.max(1e-9);
    if json {
        println!(
            "{}",
            json!({ "stats": stats, "total_records": total_records, "generated_tokens_per_s": stats.tokens_generated as f64 / s, "processed_tokens_per_s": stats.tokens_processed as f64 / s, "out": out.display().to_string() })
        );
        return;
    }
    let skipped: Vec<String> = stats
        .skipped
        .iter()
        .map(|(r, n)| {
            format!(
                "{n} {}",
                serde_json::to_value(r).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default()
            )
        })
        .collect();
    let resumed =
        if stats.resumed_from > 0 { format!(" (resumed after {} done)", stats.resumed_from) } else { String::new() };
    println!(
        "{} records ({} self-distilled, {} ground truth) from {} conversations{resumed}, {} tokens; skipped: {}; {:.1}s, {:.1} tok/s generated, {:.1} tok/s through the target → {} ({total_records} records in all)",
        stats.records, stats.self_distilled, stats.ground_truth, stats.inputs, stats.tokens_written,
        if skipped.is_empty() { "none".into() } else { skipped.join(", ") },
        stats.seconds, stats.tokens_generated as f64 / s, stats.tokens_processed as f64 / s, out.display()
    );
}

/// A conversations file path, or a dataset name fetched into the data dir.
fn resolve_data(spec: &str) -> Result<PathBuf> {
    let path = Path::new(spec);
    if path.exists() {
        return Ok(path.to_path_buf());
    }
    match draftsmith_fetch::find(spec) {
        Ok(a) if a.kind == draftsmith_fetch::ArtifactKind::Dataset => fetch_with_progress(a),
        _ => bail!("--data {spec}: no such file, and not a dataset name (e.g. sharegpt)"),
    }
}

/// The last path component without its extension (`models/x.gguf` → `x`, `sharegpt` → `sharegpt`).
fn stem(spec: &str) -> String {
    Path::new(spec).file_stem().map_or_else(|| spec.to_string(), |s| s.to_string_lossy().into_owned())
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}
