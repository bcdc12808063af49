//! `train tokenswift`: the chained linear heads on a frozen target, trained on long texts.
//!
//! Each step runs the frozen target (inner backend, no gradients) over `batch_size` chunks of
//! `seq_len` tokens to get its pre-norm last hidden states, then trains the heads against the
//! tokens `2 + i` positions ahead (reference `train_legacy.py`), decoding through the target's
//! own LM head (a constant of the autodiff graph). AdamW, linear warm-up then cosine, gradient
//! norm clipped at 1 (the Hugging Face Trainer's default the reference ran with).

use std::path::Path;
use std::time::Instant;

use burn::grad_clipping::GradientClippingConfig;
use burn::optim::AdamWConfig;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Int, Tensor, TensorData};
use draftsmith_core::fsio::DirLock;
use draftsmith_heads::tokenswift::{
    load_tokenswift, save_tokenswift, shifted_loss, TokenSwiftBatch, TokenSwiftConfig, TokenSwiftHeads,
};
use draftsmith_heads::{DrafterKind, StepMetrics, TargetIdentity};
use draftsmith_model::{AttentionMask, Model};
use serde::{Deserialize, Serialize};

use crate::checkpoint::KIND;
use crate::error::TrainError;
use crate::run::{train_loop, DrafterTask, Epochs, LoopPlan, TrainEvent, TrainSummary};

/// Training settings (recipe keys); defaults are the reference's where it has one, except the
/// sequence length and batch, which are sized for a CPU (reference: 8192 tokens × 120 sequences).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TokenSwiftTrainConfig {
    /// Heads after the target's own (reference: 3).
    pub num_heads: usize,
    /// Tokens per training chunk.
    pub seq_len: usize,
    /// Chunks per micro-batch.
    pub batch_size: usize,
    /// Micro-batches per optimiser step.
    pub grad_accum: usize,
    /// Optimiser steps (reference: 200).
    pub steps: usize,
    /// Peak learning rate (reference: 5e-3).
    pub lr: f64,
    /// Warm-up steps (reference: 50).
    pub warmup_steps: usize,
    /// AdamW weight decay (reference: 0.1).
    pub weight_decay: f64,
    /// Gradient norm clip (reference: the Trainer's default, 1.0).
    pub max_grad_norm: f64,
    /// Validation chunks (from the held-out books).
    pub val_chunks: usize,
    pub checkpoint_every: usize,
    pub log_every: usize,
    pub seed: u64,
    /// Initialise the output norms to 1 as the reference does, instead of from the target's
    /// final norm (see `TokenSwiftConfig::init_with_post_norm`).
    pub reference_init: bool,
}

impl Default for TokenSwiftTrainConfig {
    fn default() -> Self {
        Self {
            num_heads: 3,
            seq_len: 512,
            batch_size: 2,
            grad_accum: 1,
            steps: 200,
            lr: 5e-3,
            warmup_steps: 50,
            weight_decay: 0.1,
            max_grad_norm: 1.0,
            val_chunks: 8,
            checkpoint_every: 50,
            log_every: 10,
            seed: 42,
            reference_init: false,
        }
    }
}

impl TokenSwiftTrainConfig {
    pub fn validate(&self) -> Result<(), TrainError> {
        let bad = |m: String| Err(TrainError::Config(m));
        crate::check_counts(&[
            ("num_heads", self.num_heads),
            ("batch_size", self.batch_size),
            ("grad_accum", self.grad_accum),
            ("steps", self.steps),
            ("checkpoint_every", self.checkpoint_every),
            ("log_every", self.log_every),
        ])?;
        if self.seq_len < self.num_heads + 3 {
            return bad(format!(
                "seq_len {} is too short for {} heads (each needs a token {} positions ahead)",
                self.seq_len,
                self.num_heads,
                self.num_heads + 1
            ));
        }
        if self.warmup_steps >= self.steps {
            return bad(format!(
                "warmup_steps {} is not below steps {}: the run would end inside its warm-up, before the learning \
                 rate reaches lr (lower --warmup-steps)",
                self.warmup_steps, self.steps
            ));
        }
        crate::check_positive("lr", self.lr)?;
        crate::check_positive("max_grad_norm", self.max_grad_norm)?;
        crate::check_non_negative("weight_decay", self.weight_decay)?;
        Ok(())
    }
}

/// Cuts each token stream into `seq_len`-token chunks (a shorter tail is dropped).
pub fn chunks(streams: &[Vec<u32>], seq_len: usize) -> Vec<Vec<u32>> {
    streams.iter().flat_map(|s| s.chunks_exact(seq_len).map(<[u32]>::to_vec)).collect()
}

/// Trains heads in `run_dir` (resuming from its checkpoint when there is one) on `train`
/// chunks, validating on `val` chunks, and exports them there (`drafter.safetensors` + `config.json`).
#[allow(clippy::too_many_arguments)]
pub fn train_tokenswift<AB: AutodiffBackend>(
    target: &Model<AB::InnerBackend>,
    target_id: &TargetIdentity,
    train: &[Vec<u32>],
    val: &[Vec<u32>],
    cfg: &TokenSwiftTrainConfig,
    run_dir: &Path,
    data_fingerprint: serde_json::Value,
    progress: &mut dyn FnMut(TrainEvent),
) -> Result<TrainSummary, TrainError> {
    cfg.validate()?;
    let begin = Instant::now();
    if train.is_empty() {
        return Err(TrainError::NoExamples(format!("no training chunk of {} tokens", cfg.seq_len)));
    }
    if let Some(bad) = train.iter().chain(val).find(|c| c.len() != cfg.seq_len) {
        return Err(TrainError::Config(format!("a chunk has {} tokens, seq_len is {}", bad.len(), cfg.seq_len)));
    }
    let _lock = DirLock::acquire(run_dir, "train tokenswift")?;
    let c = target.config();
    let config = TokenSwiftConfig::new(c.vocab_size, c.hidden_size)
        .with_num_heads(cfg.num_heads)
        .with_rms_norm_eps(c.rms_norm_eps as f64);
    let fingerprint = serde_json::json!({ KIND: DrafterKind::TokenSwift.to_string(), "train": cfg, "data": data_fingerprint, "target": target_id });
    let device = target.device().clone();
    let micro_per_epoch = train.len().div_ceil(cfg.batch_size);
    let val: Vec<Vec<u32>> = val.iter().take(cfg.val_chunks).cloned().collect();

    let optim = AdamWConfig::new()
        .with_weight_decay(cfg.weight_decay as f32)
        .with_grad_clipping(Some(GradientClippingConfig::Norm(cfg.max_grad_norm as f32)))
        .init::<AB, TokenSwiftHeads<AB>>();
    let post_norm = (!cfg.reference_init).then(|| Tensor::<AB, 1>::from_inner(target.final_norm_weight()));
    let fresh = config.init_with_post_norm::<AB>(&device, cfg.seed, post_norm);
    // The target's LM head, once: `[hidden, vocab]`, contiguous, a constant of the graph.
    let inner_lm = target.lm_head_matrix();
    let inner_lm = Tensor::<AB::InnerBackend, 2>::from_data(inner_lm.into_data(), &device);
    let task = TokenSwiftTask {
        target,
        train,
        val: &val,
        cfg,
        lm: Tensor::<AB, 2>::from_inner(inner_lm.clone()),
        inner_lm,
        config: &config,
        target_id,
        info: &|step: usize| serde_json::json!({ "config": cfg, "steps": step, "data": data_fingerprint }),
    };
    let plan = LoopPlan {
        total_steps: cfg.steps,
        batch_size: cfg.batch_size,
        grad_accum: cfg.grad_accum,
        lr: cfg.lr,
        warmup_steps: cfg.warmup_steps,
        log_every: cfg.log_every,
        checkpoint_every: cfg.checkpoint_every,
        seed: cfg.seed,
        epochs: Epochs::Continuous,
        examples: train.len() * cfg.seq_len,
        val_examples: val.len() * cfg.seq_len,
        params: config.num_params(),
    };
    let check = |dir: &Path| {
        load_tokenswift::<AB::InnerBackend>(dir, Some(target_id), &device)?;
        Ok(())
    };
    let chunk_ids: Vec<usize> = (0..train.len()).collect();
    let outcome = train_loop(&task, &chunk_ids, &plan, run_dir, &fingerprint, fresh, optim, &device, check, progress)?;
    let summary = TrainSummary {
        steps: cfg.steps,
        epochs: (cfg.steps * cfg.grad_accum).div_ceil(micro_per_epoch),
        examples: train.len() * cfg.seq_len,
        train_sequences: train.len(),
        val_sequences: val.len(),
        params: config.num_params(),
        seconds: begin.elapsed().as_secs_f64(),
        val_loss: Vec::new(),
        val_top1: Vec::new(),
        val_top5: Vec::new(),
        epoch_seconds: Vec::new(),
        hidden_source: None,
        hidden_seconds: None,
    }
    .with_outcome(&outcome);
    summary.write(run_dir)?;
    Ok(summary)
}

/// TokenSwift's part of the training loop: chunks run through the frozen target, the heads
/// trained on the tokens `2 + i` positions ahead.
struct TokenSwiftTask<'a, AB: AutodiffBackend> {
    target: &'a Model<AB::InnerBackend>,
    train: &'a [Vec<u32>],
    val: &'a [Vec<u32>],
    cfg: &'a TokenSwiftTrainConfig,
    lm: Tensor<AB, 2>,
    inner_lm: Tensor<AB::InnerBackend, 2>,
    config: &'a TokenSwiftConfig,
    target_id: &'a TargetIdentity,
    /// The `training` record of an export after `step` steps.
    info: &'a dyn Fn(usize) -> serde_json::Value,
}

impl<AB: AutodiffBackend> DrafterTask<AB> for TokenSwiftTask<'_, AB> {
    type Module = TokenSwiftHeads<AB>;
    /// An index into the training chunks.
    type Item = usize;

    fn metric_steps(&self) -> usize {
        self.cfg.num_heads
    }

    fn loss(
        &self,
        module: &TokenSwiftHeads<AB>,
        items: &[usize],
    ) -> Result<(Tensor<AB, 1>, Vec<StepMetrics>), TrainError> {
        let picked: Vec<&[u32]> = items.iter().map(|&i| self.train[i].as_slice()).collect();
        let batch = make_batch::<AB>(self.target, &picked, self.cfg.num_heads)?;
        Ok(shifted_loss(module, &self.lm, &batch))
    }

    fn holds_out(&self) -> bool {
        !self.val.is_empty()
    }

    fn validate(&self, module: &TokenSwiftHeads<AB::InnerBackend>) -> Result<Vec<StepMetrics>, TrainError> {
        validate(self.target, module, &self.inner_lm, self.val, self.cfg)
    }

    fn export(&self, dir: &Path, module: &TokenSwiftHeads<AB>, step: usize) -> Result<(), TrainError> {
        Ok(save_tokenswift(dir, module, self.config, self.target_id, (self.info)(step))?)
    }
}

/// [`inner_batch`] over `chunks`, concatenated and lifted onto the autodiff backend (as
/// constants: the target is frozen).
fn make_batch<AB: AutodiffBackend>(
    target: &Model<AB::InnerBackend>,
    chunks: &[&[u32]],
    num_heads: usize,
) -> Result<TokenSwiftBatch<AB>, TrainError> {
    let parts = chunks.iter().map(|c| inner_batch(target, c, num_heads)).collect::<Result<Vec<_>, _>>()?;
    let hidden = Tensor::cat(parts.iter().map(|p| p.hidden.clone()).collect(), 0);
    let labels = (0..num_heads)
        .map(|i| Tensor::from_inner(Tensor::cat(parts.iter().map(|p| p.labels[i].clone()).collect(), 0)))
        .collect();
    let weights = (0..num_heads)
        .map(|i| Tensor::from_inner(Tensor::cat(parts.iter().map(|p| p.weights[i].clone()).collect(), 0)))
        .collect();
    Ok(TokenSwiftBatch { hidden: Tensor::from_inner(hidden), labels, weights })
}

fn validate<B: Backend>(
    target: &Model<B>,
    heads: &TokenSwiftHeads<B>,
    lm: &Tensor<B, 2>,
    val: &[Vec<u32>],
    cfg: &TokenSwiftTrainConfig,
) -> Result<Vec<StepMetrics>, TrainError> {
    let mut total = vec![StepMetrics::default(); cfg.num_heads];
    for chunk in val {
        let batch = inner_batch(target, chunk, cfg.num_heads)?;
        let (_, metrics) = shifted_loss(heads, lm, &batch);
        metrics.iter().zip(total.iter_mut()).for_each(|(m, t)| t.add(m));
    }
    Ok(total)
}

/// The target's pre-norm hidden states over one chunk (one causal pass) and, per head `i`, the
/// token `2 + i` positions ahead (weight 0 where the chunk ends first).
fn inner_batch<B: Backend>(
    target: &Model<B>,
    chunk: &[u32],
    num_heads: usize,
) -> Result<TokenSwiftBatch<B>, TrainError> {
    let device = target.device().clone();
    let mut cache = target.new_cache(chunk.len());
    let positions: Vec<usize> = (0..chunk.len()).collect();
    let out = target.forward_hidden(chunk, &positions, &AttentionMask::Causal, &mut cache)?;
    let n = chunk.len();
    let label = |i: usize| -> (Tensor<B, 1, Int>, Tensor<B, 1>) {
        let ids: Vec<i32> = (0..n).map(|t| chunk.get(t + 2 + i).map_or(0, |&l| l as i32)).collect();
        let w: Vec<f32> = (0..n).map(|t| if t + 2 + i < n { 1.0 } else { 0.0 }).collect();
        (Tensor::from_data(TensorData::new(ids, [n]), &device), Tensor::from_data(TensorData::new(w, [n]), &device))
    };
    let (labels, weights) = (0..num_heads).map(label).unzip();
    Ok(TokenSwiftBatch { hidden: out.hidden_prenorm, labels, weights })
}
