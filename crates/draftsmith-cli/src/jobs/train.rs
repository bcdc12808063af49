//! One ReDrafter training run, resolved: the target loaded, the distilled data read and checked
//! ([`draftsmith_train::read_sequences`]), progress shown, the outcome printed (run by `train
//! redrafter` and by `reproduce` for a recipe's drafters).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use burn::backend::Autodiff;
use burn::tensor::backend::Backend;
use draftsmith_data::hidden::{HIDDEN_DIR, HIDDEN_MANIFEST_FILE};
use draftsmith_heads::TargetIdentity;
use draftsmith_model::LoadedModel;
use draftsmith_train::{
    open_cached, read_sequences, train_redrafter, DistilledSequences, LabelSource, ReDrafterTrainConfig,
};

use crate::model_arg::ModelArgs;
use crate::out::outln;
use crate::progress::TrainDisplay;

/// One ReDrafter training run, resolved.
pub struct TrainJob {
    pub model: ModelArgs,
    pub data: PathBuf,
    pub out: PathBuf,
    pub config: ReDrafterTrainConfig,
    pub limit: Option<usize>,
    pub max_seq_len: usize,
    pub hidden: HiddenSource,
}

/// Where the target's hidden states come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HiddenSource {
    /// `<data>/hidden-states` when it holds a cache, else computed at the start (online).
    Auto,
    /// Computed at the start of the run; nothing stored.
    Online,
    /// This `draftsmith hidden` cache (refused when it does not fit the run).
    Cache(PathBuf),
}

impl HiddenSource {
    /// The cache to read, if any.
    fn cache_dir(&self, data: &Path) -> Option<PathBuf> {
        match self {
            Self::Auto => Some(data.join(HIDDEN_DIR)).filter(|d| d.join(HIDDEN_MANIFEST_FILE).exists()),
            Self::Online => None,
            Self::Cache(dir) => Some(dir.clone()),
        }
    }
}

/// Reads a distilled dataset as training sequences for `loaded` (cut to `max_seq_len` or the
/// model's context, whichever is shorter): one reading for `train redrafter` and `hidden`, so
/// that a cache fits the run.
pub fn read_dataset<B: Backend>(
    loaded: &LoadedModel<B>,
    identity: &TargetIdentity,
    data: &Path,
    labels: LabelSource,
    limit: Option<usize>,
    max_seq_len: usize,
) -> Result<DistilledSequences> {
    if max_seq_len < 2 {
        anyhow::bail!("--max-seq-len {max_seq_len}: must be at least 2 (a token and the one after it)");
    }
    let max_len = max_seq_len.min(loaded.model.config().max_position_embeddings);
    Ok(read_sequences(data, &identity.sha256, labels, limit, max_len)?)
}

pub fn run(job: &TrainJob) -> Result<()> {
    crate::with_backend!(job.model.device, |B, device| redrafter::<B>(job, &device))
}

fn redrafter<B: Backend>(args: &TrainJob, device: &B::Device) -> Result<()> {
    let cfg = args.config.clone();
    cfg.validate()?;
    let loaded = args.model.load::<B>(device)?;
    let identity = draftsmith_decode::target_identity(&loaded)?;
    let data = read_dataset(&loaded, &identity, &args.data, cfg.labels, args.limit, args.max_seq_len)?;
    let tokens = data.tokens();
    let cached = match args.hidden.cache_dir(&args.data) {
        Some(dir) => Some(open_cached(&dir, &identity.sha256, &args.model.engine_label(&loaded.path)?, &data)?),
        None => None,
    };
    eprintln!(
        "training a ReDrafter ({:?} head) on {} sequences / {tokens} tokens from {} → {}; target hidden states: {}",
        cfg.head,
        data.sequences.len(),
        args.data.display(),
        args.out.display(),
        cached.as_ref().map_or("computed now (online)".to_string(), |c| format!("cached in {}", c.source())),
    );
    let mut display = TrainDisplay::new(cached.is_none().then_some(tokens));
    let summary = train_redrafter::<Autodiff<B>>(
        &loaded.model,
        &identity,
        &data.sequences,
        &cfg,
        &args.out,
        data.fingerprint,
        cached,
        &mut |event| display.on(event),
    )
    .context("training failed")?;
    display.finish();
    outln!(
        "done: {} steps (this run: {:.0} s); validation top-1 % per head: {}; drafter exported to {}",
        summary.steps,
        summary.seconds,
        crate::progress::top1_percents(&summary.val_top1),
        args.out.display()
    )?;
    Ok(())
}
