//! `train redrafter`: teacher-forced training of a ReDrafter drafter on a frozen target.

use std::path::Path;
use std::time::Instant;

use burn::optim::AdamWConfig;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{activation, Int, Tensor, TensorData};
use draftsmith_core::fsio::DirLock;
use draftsmith_heads::redrafter::{
    load_redrafter, save_redrafter, teacher_forced_loss, HeadKind, ReDrafter, ReDrafterConfig, SoftLabels, TrainBatch,
    VocabProjection,
};
use draftsmith_heads::{DrafterKind, StepMetrics, TargetIdentity};
use draftsmith_model::Model;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

use crate::checkpoint::KIND;
use crate::error::TrainError;
use crate::examples::{build_examples, example_steps, Example, LabelSource, Sequence};
use crate::hidden::{compute_hidden, HiddenStore};
use crate::run::{train_loop, DrafterTask, Epochs, LoopPlan, TrainEvent, TrainSummary};

/// Training settings (recipe keys of `[train]`); defaults follow the reference where it has one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReDrafterTrainConfig {
    /// Output layer: `tied` (through the target's frozen embeddings) or `full` (reference).
    pub head: HeadKind,
    /// Tied head only: the drafter proposes only the `draft_vocab` most frequent labels of its
    /// training split (0 = the whole vocabulary). The output layer's cost — most of training's —
    /// scales with it; the target still verifies every draft, so output is unchanged.
    pub draft_vocab: usize,
    /// ResBlocks in the head (reference: 2).
    pub num_draft_layers: usize,
    /// Recurrent state (reference: true).
    pub rnn: bool,
    /// `ground-truth` or `teacher` (distilled per-position continuations).
    pub labels: LabelSource,
    /// Weight in [0, 1] of the target's own next-token distribution in each step's loss
    /// (knowledge distillation through the target's frozen LM head at the label's position;
    /// `ground-truth` labels only). 0 trains on the labels alone.
    #[serde(skip_serializing_if = "is_zero")]
    pub soft_labels: f64,
    /// Future tokens per context position (reference: 5).
    pub horizon: usize,
    pub epochs: usize,
    /// Stop after this many optimiser steps (the cosine schedule spans them).
    pub max_steps: Option<usize>,
    /// Context positions per micro-batch.
    pub batch_size: usize,
    /// Micro-batches per optimiser step.
    pub grad_accum: usize,
    /// Peak learning rate (reference: 1e-3).
    pub lr: f64,
    /// Fraction of steps spent warming up (reference: 0.1).
    pub warmup_fraction: f64,
    pub weight_decay: f64,
    /// Fraction of sequences held out for validation.
    pub val_fraction: f64,
    /// At most this many validation positions are scored.
    pub val_max_examples: usize,
    pub checkpoint_every: usize,
    pub log_every: usize,
    pub seed: u64,
}

impl Default for ReDrafterTrainConfig {
    fn default() -> Self {
        Self {
            head: HeadKind::Tied,
            draft_vocab: 8192,
            num_draft_layers: 2,
            rnn: true,
            labels: LabelSource::GroundTruth,
            soft_labels: 0.0,
            horizon: 5,
            epochs: 2,
            max_steps: None,
            batch_size: 128,
            grad_accum: 1,
            lr: 1e-3,
            warmup_fraction: 0.1,
            weight_decay: 0.0,
            val_fraction: 0.05,
            val_max_examples: 2048,
            checkpoint_every: 100,
            log_every: 10,
            seed: 0,
        }
    }
}

/// Most future tokens a ReDrafter is trained to draft (`horizon`; the reference trains 5).
pub const MAX_HORIZON: usize = 32;

impl ReDrafterTrainConfig {
    pub fn validate(&self) -> Result<(), TrainError> {
        let bad = |m: &str| Err(TrainError::Config(m.into()));
        let counts = [
            ("horizon", self.horizon),
            ("batch_size", self.batch_size),
            ("grad_accum", self.grad_accum),
            ("epochs", self.epochs),
            ("max_steps", self.max_steps.unwrap_or(1)),
            ("checkpoint_every", self.checkpoint_every),
            ("log_every", self.log_every),
        ];
        crate::check_counts(&counts)?;
        if self.horizon > MAX_HORIZON {
            return bad(&format!(
                "horizon = {}: at most {MAX_HORIZON} (each step's loss runs the drafter that many tokens ahead)",
                self.horizon
            ));
        }
        crate::check_fraction("val_fraction", self.val_fraction, 0.0..1.0, "in [0, 1)")?;
        crate::check_fraction("warmup_fraction", self.warmup_fraction, 0.0..=1.0, "in [0, 1]")?;
        crate::check_positive("lr", self.lr)?;
        crate::check_non_negative("weight_decay", self.weight_decay)?;
        crate::check_fraction("soft_labels", self.soft_labels, 0.0..=1.0, "in [0, 1]")?;
        if self.soft_labels > 0.0 && self.labels == LabelSource::Teacher {
            return bad("soft_labels needs ground-truth labels (the target's distribution is read at the label's position in the sequence)");
        }
        Ok(())
    }
}

/// Fewer training positions than this get a warning: a run on them trains, but the drafter it
/// writes has seen too little to propose much.
pub const FEW_EXAMPLES: usize = 256;

/// Trains a drafter in `run_dir` (resuming from its checkpoint when there is one) and exports it
/// there (`drafter.safetensors` + `config.json`). The target's hidden states come from `cached`
/// (a `draftsmith hidden` cache opened with [`crate::hidden::open_cached`]) or, without one,
/// are computed first (online mode); the run's fingerprint is the same either way, so a run
/// started in one mode resumes in the other.
#[allow(clippy::too_many_arguments)]
pub fn train_redrafter<AB: AutodiffBackend>(
    target: &Model<AB::InnerBackend>,
    target_id: &TargetIdentity,
    seqs: &[Sequence],
    cfg: &ReDrafterTrainConfig,
    run_dir: &Path,
    data_fingerprint: serde_json::Value,
    cached: Option<HiddenStore>,
    progress: &mut dyn FnMut(TrainEvent),
) -> Result<TrainSummary, TrainError> {
    cfg.validate()?;
    let teacher_len = seqs.iter().filter(|s| s.teacher.is_some()).map(|s| s.teacher_len).max();
    if let (LabelSource::Teacher, Some(t)) = (cfg.labels, teacher_len) {
        // A continuation's first token is the target's own next token; each head learns one after it.
        if t <= cfg.horizon {
            return Err(TrainError::Config(format!(
                "--horizon {h} with --labels teacher needs continuations of at least {} tokens (the first is the \
                 target's own next token, each draft step learns one after it), and this dataset's have {t}: distill \
                 it with --teacher-len {}, or train with --horizon {}",
                cfg.horizon + 1,
                cfg.horizon + 1,
                t.saturating_sub(1).max(1),
                h = cfg.horizon
            )));
        }
    }
    let begin = Instant::now();
    let _lock = DirLock::acquire(run_dir, "train redrafter")?;
    let (train_idx, val_idx) = split(seqs.len(), cfg.val_fraction, cfg.seed);
    let subset = |idx: &[usize]| -> Vec<Example> {
        let picked: Vec<Sequence> = idx.iter().map(|&i| seqs[i].clone()).collect();
        build_examples(&picked, cfg.horizon, cfg.labels)
            .into_iter()
            .map(|e| Example { seq: idx[e.seq as usize] as u32, pos: e.pos })
            .collect()
    };
    let train = subset(&train_idx);
    let mut val = subset(&val_idx);
    val.truncate(cfg.val_max_examples);
    if train.is_empty() {
        return Err(TrainError::NoExamples(format!(
            "{} sequences gave no position with a {:?} label",
            train_idx.len(),
            cfg.labels
        )));
    }
    if train.len() < FEW_EXAMPLES {
        tracing::warn!(
            examples = train.len(),
            "only {} training positions with a {:?} label: a drafter learns little from so few (distil more \
             data, or raise --max-seq-len if it cut the responses off)",
            train.len(),
            cfg.labels
        );
    }
    let micro_per_epoch = train.len().div_ceil(cfg.batch_size);
    let steps_per_epoch = micro_per_epoch.div_ceil(cfg.grad_accum);
    let total = cfg.max_steps.map_or(steps_per_epoch * cfg.epochs, |m| m.min(steps_per_epoch * cfg.epochs).max(1));
    let warmup = (cfg.warmup_fraction * total as f64).round() as usize;
    let config = ReDrafterConfig::for_target(target.config().vocab_size, target.config().hidden_size, cfg.head)
        .with_num_draft_layers(cfg.num_draft_layers)
        .with_rnn(cfg.rnn);
    let fingerprint = serde_json::json!({ KIND: DrafterKind::ReDrafter.to_string(), "train": cfg, "data": data_fingerprint, "target": target_id, "total_steps": total });
    // A checkpoint of another run is refused before the target's hidden states are computed.
    crate::checkpoint::check_resumable(run_dir, &fingerprint)?;
    let total_tokens: usize = seqs.iter().map(|s| s.tokens.len()).sum();
    let hidden_begin = Instant::now();
    let hidden = match cached {
        Some(store) => store,
        None => compute_hidden(target, seqs, &mut |done| progress(TrainEvent::Hidden { done, total: total_tokens }))?,
    };
    let hidden_seconds = hidden_begin.elapsed().as_secs_f64();
    let vocab_size = target.config().vocab_size;
    let draft = draft_vocab(&train, seqs, cfg, vocab_size);
    let device = target.device().clone();

    let optim = AdamWConfig::new().with_weight_decay(cfg.weight_decay as f32).init::<AB, ReDrafter<AB>>();
    // One transposed copy of the frozen embeddings, shared by training (as a constant of the
    // autodiff backend) and validation (on the inner backend).
    let inner_embeddings = target.embeddings();
    // The draft vocabulary's token ids, which cut both the drafter's and the teacher's heads.
    let draft_ids = draft.as_ref().map(|d| {
        let ids: Vec<i32> = d.ids.iter().map(|&t| t as i32).collect();
        let n = ids.len();
        Tensor::<AB::InnerBackend, 1, Int>::from_data(TensorData::new(ids, [n]), &device)
    });
    let inner_vocab = match (cfg.head, &draft_ids) {
        (HeadKind::Full, _) => VocabProjection::None,
        (HeadKind::Tied, None) => VocabProjection::tied(&inner_embeddings),
        (HeadKind::Tied, Some(ids)) => VocabProjection::tied(&inner_embeddings.clone().select(0, ids.clone())),
    };
    let vocab = match &inner_vocab {
        VocabProjection::None => VocabProjection::None,
        VocabProjection::Embeddings(e) => VocabProjection::Embeddings(Tensor::from_inner(e.clone())),
    };
    // The target's next-token distribution needs its own LM head (which a tied drafter shares
    // only when the target ties its embeddings), on the drafter's vocabulary.
    let teacher = (cfg.soft_labels > 0.0).then(|| {
        let head = target.lm_head_matrix();
        let head = match &draft_ids {
            Some(ids) => head.select(1, ids.clone()),
            None => head,
        };
        VocabProjection::Embeddings(Tensor::<AB, 2>::from_inner(head))
    });
    let task = ReDrafterTask {
        seqs,
        hidden: &hidden,
        cfg,
        draft: draft.as_ref(),
        val: &val,
        embeddings: Tensor::<AB, 2>::from_inner(inner_embeddings.clone()),
        vocab,
        inner_embeddings,
        inner_vocab,
        teacher,
        device: device.clone(),
        config: &config,
        target_id,
        info: &|step: usize| {
            let coverage = draft.as_ref().map(|d| d.coverage);
            serde_json::json!({ "config": cfg, "steps": step, "total_steps": total, "examples": train.len(), "draft_vocab_label_coverage": coverage, "data": data_fingerprint })
        },
    };
    let plan = LoopPlan {
        total_steps: total,
        batch_size: cfg.batch_size,
        grad_accum: cfg.grad_accum,
        lr: cfg.lr,
        warmup_steps: warmup,
        log_every: cfg.log_every,
        checkpoint_every: cfg.checkpoint_every,
        seed: cfg.seed,
        epochs: Epochs::Aligned,
        examples: train.len(),
        val_examples: val.len(),
        params: config.num_params(),
    };
    let fresh = config.init::<AB>(&device, cfg.seed);
    let check = |dir: &Path| {
        load_redrafter::<AB::InnerBackend>(dir, Some(target_id), &device)?;
        Ok(())
    };
    let outcome = train_loop(&task, &train, &plan, run_dir, &fingerprint, fresh, optim, &device, check, progress)?;
    let summary = TrainSummary {
        steps: total,
        // The epochs the steps reach into (`max_steps` may end the run inside the first).
        epochs: total.div_ceil(steps_per_epoch).min(cfg.epochs),
        examples: train.len(),
        train_sequences: train_idx.len(),
        val_sequences: val_idx.len(),
        params: config.num_params(),
        seconds: begin.elapsed().as_secs_f64(),
        val_loss: Vec::new(),
        val_top1: Vec::new(),
        val_top5: Vec::new(),
        epoch_seconds: Vec::new(),
        hidden_source: Some(hidden.source()),
        hidden_seconds: Some(hidden_seconds),
    }
    .with_outcome(&outcome);
    summary.write(run_dir)?;
    Ok(summary)
}

/// ReDrafter's part of the training loop: teacher-forced batches of context positions over the
/// cached target hidden states.
struct ReDrafterTask<'a, AB: AutodiffBackend> {
    seqs: &'a [Sequence],
    hidden: &'a HiddenStore,
    cfg: &'a ReDrafterTrainConfig,
    draft: Option<&'a DraftVocab>,
    val: &'a [Example],
    embeddings: Tensor<AB, 2>,
    vocab: VocabProjection<AB>,
    inner_embeddings: Tensor<AB::InnerBackend, 2>,
    inner_vocab: VocabProjection<AB::InnerBackend>,
    /// The target's own LM head onto the logits' vocabulary, `[hidden, vocab]`, with soft labels.
    teacher: Option<VocabProjection<AB>>,
    device: AB::Device,
    config: &'a ReDrafterConfig,
    target_id: &'a TargetIdentity,
    /// The `training` record of an export after `step` steps.
    info: &'a dyn Fn(usize) -> serde_json::Value,
}

impl<AB: AutodiffBackend> DrafterTask<AB> for ReDrafterTask<'_, AB> {
    type Module = ReDrafter<AB>;
    type Item = Example;

    fn metric_steps(&self) -> usize {
        self.cfg.horizon
    }

    fn loss(&self, module: &ReDrafter<AB>, items: &[Example]) -> Result<(Tensor<AB, 1>, Vec<StepMetrics>), TrainError> {
        let soft = self.teacher.as_ref().map(|t| (t, self.cfg.soft_labels));
        let batch = make_batch::<AB>(items, self.seqs, self.hidden, self.cfg, self.draft, soft, &self.device);
        Ok(teacher_forced_loss(module, &self.embeddings, &self.vocab, &batch))
    }

    fn holds_out(&self) -> bool {
        !self.val.is_empty()
    }

    fn validate(&self, module: &ReDrafter<AB::InnerBackend>) -> Result<Vec<StepMetrics>, TrainError> {
        let (embeddings, vocab) = (&self.inner_embeddings, &self.inner_vocab);
        Ok(validate(module, self.val, self.seqs, self.hidden, self.cfg, self.draft, embeddings, vocab))
    }

    fn export(&self, dir: &Path, module: &ReDrafter<AB>, step: usize) -> Result<(), TrainError> {
        let draft_ids = self.draft.map(|d| d.ids.as_slice());
        Ok(save_redrafter(dir, module, self.config, self.target_id, draft_ids, (self.info)(step))?)
    }
}

/// Keeps a setting at its default out of serialized configs (and so out of run fingerprints
/// written before the setting existed).
fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// A seeded split of sequence indices into (train, validation).
fn split(n: usize, val_fraction: f64, seed: u64) -> (Vec<usize>, Vec<usize>) {
    let mut idx: Vec<usize> = (0..n).collect();
    idx.shuffle(&mut rand::rngs::StdRng::seed_from_u64(seed));
    let val =
        if n >= 2 && val_fraction > 0.0 { ((n as f64 * val_fraction).ceil() as usize).clamp(1, n - 1) } else { 0 };
    let train = idx.split_off(val);
    (train, idx)
}

/// A draft vocabulary: the ids the drafter may propose and the way labels map into it.
struct DraftVocab {
    /// Ascending token ids.
    ids: Vec<u32>,
    /// Token id → index in `ids` ([`u32::MAX`] outside).
    index: Vec<u32>,
    /// Fraction of the training split's counted labels inside.
    coverage: f64,
}

/// The `cfg.draft_vocab` most frequent counted labels of `examples` (ties: the lower id), for a
/// tied head; `None` for the whole vocabulary.
fn draft_vocab(
    examples: &[Example],
    seqs: &[Sequence],
    cfg: &ReDrafterTrainConfig,
    vocab_size: usize,
) -> Option<DraftVocab> {
    if cfg.head != HeadKind::Tied || cfg.draft_vocab == 0 || cfg.draft_vocab >= vocab_size {
        return None;
    }
    let mut counts = vec![0u64; vocab_size];
    for ex in examples {
        for st in example_steps(&seqs[ex.seq as usize], ex.pos as usize, cfg.horizon, cfg.labels) {
            if st.weight > 0.0 {
                counts[st.label as usize] += 1;
            }
        }
    }
    let mut ids: Vec<u32> = (0..vocab_size as u32).filter(|&t| counts[t as usize] > 0).collect();
    ids.sort_by_key(|&t| (std::cmp::Reverse(counts[t as usize]), t));
    ids.truncate(cfg.draft_vocab);
    ids.sort_unstable();
    let kept: u64 = ids.iter().map(|&t| counts[t as usize]).sum();
    let coverage = kept as f64 / counts.iter().sum::<u64>().max(1) as f64;
    let mut index = vec![u32::MAX; vocab_size];
    for (i, &t) in ids.iter().enumerate() {
        index[t as usize] = i as u32;
    }
    Some(DraftVocab { ids, index, coverage })
}

fn make_batch<B: Backend>(
    rows: &[Example],
    seqs: &[Sequence],
    hidden: &HiddenStore,
    cfg: &ReDrafterTrainConfig,
    draft: Option<&DraftVocab>,
    soft: Option<(&VocabProjection<B>, f64)>,
    device: &B::Device,
) -> TrainBatch<B> {
    let n = rows.len();
    let width = hidden.hidden_size();
    let mut h = Vec::with_capacity(n * width);
    // With soft labels: per step, the target's hidden state where it predicted the label.
    let mut ahead = vec![Vec::with_capacity(if soft.is_some() { n * width } else { 0 }); cfg.horizon];
    let mut inputs = vec![Vec::with_capacity(n); cfg.horizon];
    let mut labels = vec![Vec::with_capacity(n); cfg.horizon];
    let mut weights = vec![Vec::with_capacity(n); cfg.horizon];
    let mut in_vocab = vec![Vec::with_capacity(n); cfg.horizon];
    for ex in rows {
        hidden.extend_row(ex.seq as usize, ex.pos as usize, &mut h);
        for (i, st) in
            example_steps(&seqs[ex.seq as usize], ex.pos as usize, cfg.horizon, cfg.labels).into_iter().enumerate()
        {
            let label = draft.map_or(st.label, |d| d.index[st.label as usize]);
            inputs[i].push(st.input as i32);
            labels[i].push(if label == u32::MAX { 0 } else { label as i32 });
            weights[i].push(st.weight);
            in_vocab[i].push(if label == u32::MAX { 0.0 } else { 1.0 });
            if soft.is_some() {
                // Ground-truth labels: step i's label is token pos + 1 + i, which the target
                // predicted at position pos + i (padding rows get zeros; their weight is 0).
                let at = ex.pos as usize + 1 + i;
                if st.weight > 0.0 && at < seqs[ex.seq as usize].tokens.len() {
                    hidden.extend_row(ex.seq as usize, at, &mut ahead[i]);
                } else {
                    ahead[i].extend(std::iter::repeat_n(0.0, width));
                }
            }
        }
    }
    let soft = soft.map(|(head, weight)| SoftLabels {
        probs: ahead
            .into_iter()
            .map(|rows| {
                let states = Tensor::<B, 2>::from_data(TensorData::new(rows, [n, width]), device);
                activation::softmax(head.apply(states), 1)
            })
            .collect(),
        weight,
    });
    let ints = |v: Vec<i32>| Tensor::<B, 1, Int>::from_data(TensorData::new(v, [n]), device);
    TrainBatch {
        hidden: Tensor::from_data(TensorData::new(h, [n, width]), device),
        inputs: inputs.into_iter().map(ints).collect(),
        labels: labels.into_iter().map(ints).collect(),
        weights: weights.into_iter().map(|w| Tensor::from_data(TensorData::new(w, [n]), device)).collect(),
        in_vocab: in_vocab.into_iter().map(|w| Tensor::from_data(TensorData::new(w, [n]), device)).collect(),
        soft,
    }
}

#[allow(clippy::too_many_arguments)]
fn validate<B: Backend>(
    drafter: &ReDrafter<B>,
    val: &[Example],
    seqs: &[Sequence],
    hidden: &HiddenStore,
    cfg: &ReDrafterTrainConfig,
    draft: Option<&DraftVocab>,
    embeddings: &Tensor<B, 2>,
    vocab: &VocabProjection<B>,
) -> Vec<StepMetrics> {
    let mut total = vec![StepMetrics::default(); cfg.horizon];
    for rows in val.chunks(cfg.batch_size) {
        let batch = make_batch::<B>(rows, seqs, hidden, cfg, draft, None, &embeddings.device());
        let (_, metrics) = teacher_forced_loss(drafter, embeddings, vocab, &batch);
        metrics.iter().zip(total.iter_mut()).for_each(|(m, t)| t.add(m));
    }
    total
}
