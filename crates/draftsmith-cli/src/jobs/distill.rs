//! One distillation, resolved: the model and the conversations fetched and loaded, progress
//! shown, the summary printed (run by `distill` and by `reproduce` for a recipe's drafters).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use burn::tensor::backend::Backend;
use draftsmith_data::{read_conversations, Part, ShardWriter, TargetId};
use draftsmith_distill::{DistillConfig, DistillEvent, DistillStats};
use draftsmith_model::load_model;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use crate::model_arg::ModelArgs;
use crate::out::outln;
use crate::progress::{fetch_with_progress, OffTerminal};

/// One distillation, resolved.
pub struct DistillJob {
    pub model: ModelArgs,
    pub data: String,
    pub limit: usize,
    pub out: PathBuf,
    pub config: DistillConfig,
    /// Only this part of the conversations (`--shard I/N`), into `out/part-…-of-…/`.
    pub shard: Option<Part>,
    pub json: bool,
}

pub fn run(job: &DistillJob) -> Result<()> {
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
    let first_skip = report.first_skip.as_deref().unwrap_or("");
    if report.conversations.is_empty() && report.skipped == 0 {
        bail!("{}: holds no conversation", data.display());
    }
    if report.conversations.is_empty() {
        bail!(
            "{}: no usable conversation ({} skipped: empty or with an unknown role; the first: {first_skip})",
            data.display(),
            report.skipped
        );
    }
    if report.skipped > 0 {
        eprintln!(
            "{}: {} unusable conversation(s) skipped while reading (the first: {first_skip})",
            data.display(),
            report.skipped
        );
    }
    if let Some(part) = args.shard.as_ref().filter(|p| p.count > report.conversations.len()) {
        bail!(
            "--shard {part}: {} parts for {} conversations would leave some parts with none; split into at most {} parts",
            part.count,
            report.conversations.len(),
            report.conversations.len()
        );
    }
    if report.truncated_tail {
        eprintln!("{}: the file ends inside a record; every complete record before it is read", data.display());
    }
    let model_path = args.model.resolve_path()?;
    let target = TargetId { name: file_name(&model_path), sha256: draftsmith_model::weights_sha256(&model_path)? };
    let bytes = std::fs::metadata(&data).with_context(|| format!("{}: cannot stat", data.display()))?.len();
    // The engine is part of the settings: answers differ between activation modes.
    let mut settings =
        json!({ "file": file_name(&data), "bytes": bytes, "engine": args.model.engine_label(&model_path)? });
    settings[draftsmith_data::INPUT_SHA256] =
        json!(draftsmith_core::digest::sha256_file(&data).with_context(|| format!("{}: cannot read", data.display()))?);
    let params = cfg.params(settings);
    let mut writer = match args.shard {
        Some(part) => {
            ShardWriter::open_part(&out, part, report.conversations.len(), target, params, cfg.inputs_per_shard)?
        }
        None => ShardWriter::open(&out, target, params, cfg.inputs_per_shard)?,
    };
    let loaded = load_model::<B>(&model_path, args.model.load_options(&model_path)?, device)?;

    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} conversations [{elapsed} < {eta}] {msg}")
            .expect("valid template"),
    );
    let begin = Instant::now();
    let lines = OffTerminal::new("distill");
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
                lines.tick(&bar);
            }
        },
    )
    .with_context(|| format!("distill into {}", out.display()))?;
    let manifest = writer.finish()?;
    bar.finish_and_clear();
    let out = match args.shard {
        Some(part) => out.join(part.dir_name()),
        None => out,
    };
    print_summary(&stats, manifest.records(), &out, args.json)?;
    // A part may hold no record of its own; a whole dataset without one is nothing to train on.
    if manifest.records() == 0 && args.shard.is_none() {
        bail!(
            "{}: no records: every conversation read was skipped ({}); nothing to train on (the directory holds no record and can be deleted)",
            out.display(),
            skipped_text(&stats)
        );
    }
    Ok(())
}

/// The skip counts by reason (`390 prompt_too_long, 26 no_user_message`), or `none`.
fn skipped_text(stats: &DistillStats) -> String {
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
    if skipped.is_empty() {
        "none".into()
    } else {
        skipped.join(", ")
    }
}

fn print_summary(
    stats: &DistillStats,
    total_records: usize,
    out: &Path,
    json: bool,
) -> Result<(), crate::out::StdoutError> {
    let s = stats.seconds.max(1e-9);
    if json {
        outln!(
            "{}",
            json!({ "stats": stats, "total_records": total_records, "generated_tokens_per_s": stats.tokens_generated as f64 / s, "processed_tokens_per_s": stats.tokens_processed as f64 / s, "out": out.display().to_string() })
        )?;
        return Ok(());
    }
    let resumed =
        if stats.resumed_from > 0 { format!(" (resumed after {} done)", stats.resumed_from) } else { String::new() };
    outln!(
        "{} records ({} self-distilled, {} ground truth) from {} conversations{resumed}, {} tokens; skipped: {}; {:.1}s, {:.1} tok/s generated, {:.1} tok/s through the target → {} ({total_records} records in all)",
        stats.records, stats.self_distilled, stats.ground_truth, stats.inputs, stats.tokens_written,
        skipped_text(stats),
        stats.seconds, stats.tokens_generated as f64 / s, stats.tokens_processed as f64 / s, out.display()
    )
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

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}
