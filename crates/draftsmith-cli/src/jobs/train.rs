//! One ReDrafter training run, resolved: the target loaded, the distilled data read and checked
//! ([`draftsmith_train::read_sequences`]), progress shown, the outcome printed (run by `train
//! redrafter` and by `reproduce` for a recipe's drafters).

use std::path::PathBuf;

use anyhow::{Context, Result};
use burn::backend::Autodiff;
use burn::tensor::backend::Backend;
use draftsmith_train::{read_sequences, train_redrafter, ReDrafterTrainConfig};

use crate::model_arg::ModelArgs;
use crate::progress::TrainDisplay;

/// One ReDrafter training run, resolved.
pub struct TrainJob {
    pub model: ModelArgs,
    pub data: PathBuf,
    pub out: PathBuf,
    pub config: ReDrafterTrainConfig,
    pub limit: Option<usize>,
    pub max_seq_len: usize,
}

pub fn run(job: &TrainJob) -> Result<()> {
    crate::with_backend!(job.model.device, |B, device| redrafter::<B>(job, &device))
}

fn redrafter<B: Backend>(args: &TrainJob, device: &B::Device) -> Result<()> {
    let cfg = args.config.clone();
    cfg.validate()?;
    let loaded = args.model.load::<B>(device)?;
    let identity = draftsmith_decode::target_identity(&loaded)?;
    let max_len = args.max_seq_len.min(loaded.model.config().max_position_embeddings);
    let data = read_sequences(&args.data, &identity.sha256, cfg.labels, args.limit, max_len)?;
    let tokens = data.tokens();
    eprintln!(
        "training a ReDrafter ({:?} head) on {} sequences / {tokens} tokens from {} → {}",
        cfg.head,
        data.sequences.len(),
        args.data.display(),
        args.out.display()
    );
    let mut display = TrainDisplay::new(Some(tokens));
    let summary = train_redrafter::<Autodiff<B>>(
        &loaded.model,
        &identity,
        &data.sequences,
        &cfg,
        &args.out,
        data.fingerprint,
        &mut |event| display.on(event),
    )
    .context("training failed")?;
    display.finish();
    println!(
        "done: {} steps (this run: {:.0} s); validation top-1 % per head: {}; drafter exported to {}",
        summary.steps,
        summary.seconds,
        crate::progress::top1_percents(&summary.val_top1),
        args.out.display()
    );
    Ok(())
}
