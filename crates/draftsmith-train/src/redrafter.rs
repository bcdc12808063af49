//! `train redrafter`: teacher-forced training of a ReDrafter drafter on a frozen target.

use std::path::Path;
use std::time::Instant;

use burn::module::AutodiffModule;
use burn::optim::{AdamWConfig, GradientsAccumulator, GradientsParams, Optimizer};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Int, Tensor, TensorData};
use draftsmith_heads::redrafter::{
    load_redrafter, save_redrafter, teacher_forced_loss, HeadKind, ReDrafter, ReDrafterConfig, StepMetrics, TrainBatch,
    VocabProjection,
};
use draftsmith_heads::TargetIdentity;
use draftsmith_model::Model;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

use crate::checkpoint::{resume, save_checkpoint, LoopState};
use crate::error::TrainError;
use crate::examples::{build_examples, example_steps, Example, LabelSource, Sequence};
use crate::hidden::{compute_hidden, HiddenStore};
use crate::metrics::MetricsCsv;
use crate::schedule::cosine_with_warmup;

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

impl ReDrafterTrainConfig {
    pub fn validate(&self) -> Result<(), TrainError> {
        let bad = |m: &str| Err(TrainError::Config(m.into()));
        if self.horizon == 0 || self.batch_size == 0 || self.grad_accum == 0 || self.epochs == 0 {
            return bad("horizon, batch_size, grad_accum and epochs must be positive");
        }
        if !(0.0..1.0).contains(&self.val_fraction) || !(0.0..=1.0).contains(&self.warmup_fraction) {
            return bad("val_fraction must be in [0, 1) and warmup_fraction in [0, 1]");
        }
        if self.lr <= 0.0 || self.checkpoint_every == 0 || self.log_every == 0 {
            return bad("lr, checkpoint_every and log_every must be positive");
        }
        Ok(())
    }
}

/// Progress of a training run.
#[derive(Debug, Clone)]
pub enum TrainEvent {
    /// Target hidden states: tokens done of total.
    Hidden {
        done: usize,
        total: usize,
    },
    Start {
        total_steps: usize,
        resumed_at: usize,
        examples: usize,
        val_examples: usize,
        params: usize,
    },
    Step {
        step: usize,
        total: usize,
        loss: f64,
        lr: f64,
        top1: Vec<f64>,
    },
    Validation {
        step: usize,
        heads: Vec<StepMetrics>,
    },
    Checkpoint {
        step: usize,
    },
}

/// What a finished run reports (also written to `summary.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrainSummary {
    pub steps: usize,
    pub epochs: usize,
    pub examples: usize,
    pub train_sequences: usize,
    pub val_sequences: usize,
    pub params: usize,
    pub seconds: f64,
    /// Per head: validation (loss, top-1, top-5).
    pub val_loss: Vec<f64>,
    pub val_top1: Vec<f64>,
    pub val_top5: Vec<f64>,
}

impl TrainSummary {
    /// Writes `run/summary.json`.
    pub(crate) fn write(&self, run: &Path) -> Result<(), TrainError> {
        let path = run.join("summary.json");
        std::fs::write(&path, serde_json::to_string_pretty(self).expect("serializable")).map_err(TrainError::io(&path))
    }
}

/// Trains a drafter in `run_dir` (resuming from its checkpoint when there is one) and exports it
/// there (`drafter.safetensors` + `config.json`).
#[allow(clippy::too_many_arguments)]
pub fn train_redrafter<AB: AutodiffBackend>(
    target: &Model<AB::InnerBackend>,
    target_id: &TargetIdentity,
    seqs: &[Sequence],
    cfg: &ReDrafterTrainConfig,
    run_dir: &Path,
    data_fingerprint: serde_json::Value,
    progress: &mut dyn FnMut(TrainEvent),
) -> Result<TrainSummary, TrainError> {
    cfg.validate()?;
    let begin = Instant::now();
    std::fs::create_dir_all(run_dir).map_err(TrainError::io(run_dir))?;
    let (train_idx, val_idx) = split(seqs.len(), cfg.val_fraction, cfg.seed);
    let total_tokens: usize = seqs.iter().map(|s| s.tokens.len()).sum();
    let hidden = compute_hidden(target, seqs, &mut |done| progress(TrainEvent::Hidden { done, total: total_tokens }))?;
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
    let micro_per_epoch = train.len().div_ceil(cfg.batch_size);
    let steps_per_epoch = micro_per_epoch.div_ceil(cfg.grad_accum);
    let total = cfg.max_steps.map_or(steps_per_epoch * cfg.epochs, |m| m.min(steps_per_epoch * cfg.epochs).max(1));
    let warmup = (cfg.warmup_fraction * total as f64).round() as usize;
    let config = ReDrafterConfig::for_target(target.config().vocab_size, target.config().hidden_size, cfg.head)
        .with_num_draft_layers(cfg.num_draft_layers)
        .with_rnn(cfg.rnn);
    let fingerprint =
        serde_json::json!({ "train": cfg, "data": data_fingerprint, "target": target_id, "total_steps": total });
    let vocab_size = target.config().vocab_size;
    let draft = draft_vocab(&train, seqs, cfg, vocab_size);
    let device = target.device().clone();

    let optim = AdamWConfig::new().with_weight_decay(cfg.weight_decay as f32).init::<AB, ReDrafter<AB>>();
    let (mut drafter, mut optim, start) =
        resume::<AB, _, _>(run_dir, &fingerprint, config.init::<AB>(&device, cfg.seed), optim, &device, |dir| {
            load_redrafter::<AB::InnerBackend>(dir, Some(target_id), &device)?;
            Ok(())
        })?;
    progress(TrainEvent::Start {
        total_steps: total,
        resumed_at: start,
        examples: train.len(),
        val_examples: val.len(),
        params: config.num_params(),
    });
    let csv = MetricsCsv::open(&run_dir.join("metrics.csv"), start)?;
    // One transposed copy of the frozen embeddings, shared by training (as a constant of the
    // autodiff backend) and validation (on the inner backend).
    let inner_embeddings = target.embeddings().clone();
    let inner_vocab = match (cfg.head, &draft) {
        (HeadKind::Full, _) => VocabProjection::None,
        (HeadKind::Tied, None) => VocabProjection::tied(&inner_embeddings),
        (HeadKind::Tied, Some(d)) => {
            let ids: Vec<i32> = d.ids.iter().map(|&t| t as i32).collect();
            let n = ids.len();
            VocabProjection::tied(
                &inner_embeddings
                    .clone()
                    .select(0, Tensor::<AB::InnerBackend, 1, Int>::from_data(TensorData::new(ids, [n]), &device)),
            )
        }
    };
    let embeddings = Tensor::<AB, 2>::from_inner(inner_embeddings.clone());
    let vocab = match &inner_vocab {
        VocabProjection::None => VocabProjection::None,
        VocabProjection::Embeddings(e) => VocabProjection::Embeddings(Tensor::from_inner(e.clone())),
    };
    let training_info = |step: usize| {
        let coverage = draft.as_ref().map(|d| d.coverage);
        serde_json::json!({ "config": cfg, "steps": step, "total_steps": total, "examples": train.len(), "draft_vocab_label_coverage": coverage, "data": data_fingerprint })
    };
    let draft_ids = draft.as_ref().map(|d| d.ids.as_slice());

    let mut order = Vec::new();
    let mut order_epoch = usize::MAX;
    let mut window = vec![StepMetrics::default(); cfg.horizon];
    for step in start..total {
        let epoch = step / steps_per_epoch;
        if epoch != order_epoch {
            order = train.clone();
            order.shuffle(&mut rand::rngs::StdRng::seed_from_u64(cfg.seed.wrapping_add(1 + epoch as u64)));
            order_epoch = epoch;
        }
        let lr = cosine_with_warmup(cfg.lr, step, total, warmup);
        let mut accum = GradientsAccumulator::new();
        let mut loss_sum = 0.0;
        for micro in 0..cfg.grad_accum {
            let index = (step % steps_per_epoch) * cfg.grad_accum + micro;
            if index >= micro_per_epoch {
                break;
            }
            let rows = &order[index * cfg.batch_size..((index + 1) * cfg.batch_size).min(order.len())];
            let batch = make_batch::<AB>(rows, seqs, &hidden, cfg, draft.as_ref(), &device);
            let (loss, metrics) = teacher_forced_loss(&drafter, &embeddings, &vocab, &batch);
            // The loss is the sum of the steps' mean losses, already on the host in `metrics`.
            loss_sum += metrics.iter().map(StepMetrics::mean_loss).sum::<f64>();
            metrics.iter().zip(window.iter_mut()).for_each(|(m, w)| w.add(m));
            accum.accumulate(&drafter, GradientsParams::from_grads(loss.backward(), &drafter));
        }
        drafter = optim.step(lr, drafter, accum.grads());
        let done = step + 1;
        if done % cfg.log_every == 0 || done == total {
            csv.log(done, epoch, "train", lr, &window)?;
            progress(TrainEvent::Step {
                step: done,
                total,
                loss: loss_sum / cfg.grad_accum as f64,
                lr,
                top1: window.iter().map(|m| m.top1_acc()).collect(),
            });
            window = vec![StepMetrics::default(); cfg.horizon];
        }
        if done % cfg.checkpoint_every == 0 || done == total {
            if !val.is_empty() {
                let heads = validate(
                    &drafter.valid(),
                    &val,
                    seqs,
                    &hidden,
                    cfg,
                    draft.as_ref(),
                    &inner_embeddings,
                    &inner_vocab,
                );
                csv.log(done, epoch, "val", lr, &heads)?;
                progress(TrainEvent::Validation { step: done, heads });
            }
            let state = LoopState { step: done, total_steps: total, fingerprint: fingerprint.clone() };
            save_checkpoint(run_dir, &state, &drafter, &optim, |dir| {
                Ok(save_redrafter(dir, &drafter, &config, target_id, draft_ids, training_info(done))?)
            })?;
            progress(TrainEvent::Checkpoint { step: done });
        }
    }
    let heads = if val.is_empty() {
        Vec::new()
    } else {
        validate(&drafter.valid(), &val, seqs, &hidden, cfg, draft.as_ref(), &inner_embeddings, &inner_vocab)
    };
    save_redrafter(run_dir, &drafter, &config, target_id, draft_ids, training_info(total))?;
    let summary = TrainSummary {
        steps: total,
        epochs: cfg.epochs,
        examples: train.len(),
        train_sequences: train_idx.len(),
        val_sequences: val_idx.len(),
        params: config.num_params(),
        seconds: begin.elapsed().as_secs_f64(),
        val_loss: heads.iter().map(|m| m.mean_loss()).collect(),
        val_top1: heads.iter().map(|m| m.top1_acc()).collect(),
        val_top5: heads.iter().map(|m| m.top5_acc()).collect(),
    };
    summary.write(run_dir)?;
    Ok(summary)
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
    device: &B::Device,
) -> TrainBatch<B> {
    let n = rows.len();
    let mut h = Vec::with_capacity(n * hidden.hidden);
    let mut inputs = vec![Vec::with_capacity(n); cfg.horizon];
    let mut labels = vec![Vec::with_capacity(n); cfg.horizon];
    let mut weights = vec![Vec::with_capacity(n); cfg.horizon];
    let mut in_vocab = vec![Vec::with_capacity(n); cfg.horizon];
    for ex in rows {
        h.extend_from_slice(hidden.row(ex.seq as usize, ex.pos as usize));
        for (i, st) in
            example_steps(&seqs[ex.seq as usize], ex.pos as usize, cfg.horizon, cfg.labels).into_iter().enumerate()
        {
            let label = draft.map_or(st.label, |d| d.index[st.label as usize]);
            inputs[i].push(st.input as i32);
            labels[i].push(if label == u32::MAX { 0 } else { label as i32 });
            weights[i].push(st.weight);
            in_vocab[i].push(if label == u32::MAX { 0.0 } else { 1.0 });
        }
    }
    let ints = |v: Vec<i32>| Tensor::<B, 1, Int>::from_data(TensorData::new(v, [n]), device);
    TrainBatch {
        hidden: Tensor::from_data(TensorData::new(h, [n, hidden.hidden]), device),
        inputs: inputs.into_iter().map(ints).collect(),
        labels: labels.into_iter().map(ints).collect(),
        weights: weights.into_iter().map(|w| Tensor::from_data(TensorData::new(w, [n]), device)).collect(),
        in_vocab: in_vocab.into_iter().map(|w| Tensor::from_data(TensorData::new(w, [n]), device)).collect(),
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
        let batch = make_batch::<B>(rows, seqs, hidden, cfg, draft, &embeddings.device());
        let (_, metrics) = teacher_forced_loss(drafter, embeddings, vocab, &batch);
        metrics.iter().zip(total.iter_mut()).for_each(|(m, t)| t.add(m));
    }
    total
}
