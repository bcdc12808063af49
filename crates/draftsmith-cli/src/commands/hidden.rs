//! `draftsmith hidden`: the frozen target's hidden states of a distilled dataset, written once
//! (f16 shards + manifest) so that `train redrafter` and its resumes skip the target's passes.

use std::path::PathBuf;

use anyhow::{Context, Result};
use burn::tensor::backend::Backend;
use clap::Args;
use draftsmith_data::hidden::HIDDEN_DIR;
use draftsmith_train::{cache_bytes, write_hidden, HiddenEvent, LabelSource};
use indicatif::{ProgressBar, ProgressStyle};

use crate::jobs::train::read_dataset;
use crate::model_arg::ModelArgs;
use crate::out::outln;

/// Compute the target's hidden states of a distilled dataset once, for offline training.
///
/// Writes f16 safetensors shards and `hidden-manifest.json` (tied to the target's sha256 and
/// the dataset's shards) into `<data>/hidden-states`, where `train redrafter` finds them.
/// Rerunning the same command resumes after the last finished shard. Read the dataset with the
/// same --limit and --max-seq-len as training will (a cache of the whole dataset also serves any
/// smaller --limit).
#[derive(Debug, Args)]
pub struct HiddenArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// A distilled dataset directory (written by `draftsmith distill`).
    #[arg(long)]
    pub data: PathBuf,
    /// Cache directory. Default: `<data>/hidden-states`.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Use at most this many sequences of the dataset.
    #[arg(long)]
    pub limit: Option<usize>,
    /// Sequences longer than this are cut (as `train redrafter --max-seq-len`).
    #[arg(long, default_value_t = draftsmith_train::DEFAULT_MAX_SEQ_LEN)]
    pub max_seq_len: usize,
    /// Sequences per shard (the resume granularity).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    pub sequences_per_shard: u64,
}

pub fn run(args: HiddenArgs) -> Result<()> {
    crate::with_backend!(args.model.device, |B, device| hidden::<B>(&args, &device))
}

fn hidden<B: Backend>(args: &HiddenArgs, device: &B::Device) -> Result<()> {
    let loaded = args.model.load::<B>(device)?;
    let identity = draftsmith_decode::target_identity(&loaded)?;
    let data = read_dataset(&loaded, &identity, &args.data, LabelSource::GroundTruth, args.limit, args.max_seq_len)?;
    let out = args.out.clone().unwrap_or_else(|| args.data.join(HIDDEN_DIR));
    let hidden_size = loaded.model.config().hidden_size;
    eprintln!(
        "hidden states of {} sequences / {} tokens × {hidden_size} (f16): {:.1} MB on disk → {}",
        data.sequences.len(),
        data.tokens(),
        cache_bytes(&data, hidden_size) as f64 / 1e6,
        out.display()
    );
    let bar = ProgressBar::new(data.tokens() as u64);
    bar.set_style(
        ProgressStyle::with_template("target hidden states {bar:30} {pos}/{len} tokens [{elapsed} < {eta}, {per_sec}]")
            .expect("valid template"),
    );
    let target = draftsmith_data::TargetId { name: identity.name.clone(), sha256: identity.sha256.clone() };
    let engine = args.model.engine_label(&loaded.path)?;
    let begin = std::time::Instant::now();
    let lines = crate::progress::OffTerminal::new("hidden");
    let manifest = write_hidden(
        &loaded.model,
        &target,
        &engine,
        &data,
        &out,
        args.sequences_per_shard as usize,
        &mut |e| match e {
            HiddenEvent::Opened { done, total, kept } => {
                if let Some(k) = kept {
                    bar.suspend(|| {
                        eprintln!(
                            "this cache was computed for an earlier state of the dataset (before a later \
                         `distill --limit`, say): {} of its {} sequences kept (the dataset's first {} \
                         unchanged), {} to compute",
                            k.sequences,
                            k.of,
                            if k.shards == 1 { "shard is".to_string() } else { format!("{} shards are", k.shards) },
                            data.sequences.len() - k.sequences
                        )
                    });
                } else if done > 0 && done < total {
                    bar.suspend(|| eprintln!("resuming: {done} of {total} tokens already written"));
                }
                bar.set_position(done as u64)
            }
            HiddenEvent::Progress { done, .. } => {
                bar.set_position(done as u64);
                lines.tick(&bar);
            }
        },
    )
    .with_context(|| format!("writing hidden states into {}", out.display()))?;
    bar.finish_and_clear();
    outln!(
        "done: {} sequences / {} tokens in {} shards, {:.1} MB, {:.0} s → {}",
        manifest.sequences,
        manifest.tokens,
        manifest.shards.len(),
        manifest.bytes() as f64 / 1e6,
        begin.elapsed().as_secs_f64(),
        out.display()
    )?;
    Ok(())
}
