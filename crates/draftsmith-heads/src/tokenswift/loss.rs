//! Training loss (reference `train_legacy.py`): at position `t`, head `i` (0-based) predicts
//! the token at `t + 2 + i` (the target's own head predicts `t + 1` and is not trained); the
//! loss is the sum over heads of each head's mean cross-entropy over its counted rows.

use burn::tensor::{activation, backend::Backend, ElementConversion, Int, Tensor};

use super::model::TokenSwiftHeads;
use crate::metrics::{step_metrics, StepMetrics};

/// Rows of (pre-norm hidden state, the tokens each head must predict).
#[derive(Debug, Clone)]
pub struct TokenSwiftBatch<B: Backend> {
    /// `[rows, hidden]`: the target's last layer output before its final norm.
    pub hidden: Tensor<B, 2>,
    /// Per head: `[rows]` label ids (token `t + 2 + i`).
    pub labels: Vec<Tensor<B, 1, Int>>,
    /// Per head: `[rows]` 1 where the label exists, 0 past the end of the sequence.
    pub weights: Vec<Tensor<B, 1>>,
}

/// The summed loss and per-head metrics. `lm_head` is the target's `[hidden, vocab]` matrix.
pub fn shifted_loss<B: Backend>(
    heads: &TokenSwiftHeads<B>,
    lm_head: &Tensor<B, 2>,
    batch: &TokenSwiftBatch<B>,
) -> (Tensor<B, 1>, Vec<StepMetrics>) {
    let [rows, _] = batch.hidden.dims();
    let device = batch.hidden.device();
    let mut total = Tensor::<B, 1>::zeros([1], &device);
    let mut metrics = Vec::with_capacity(heads.heads.len());
    for ((logits, label), weight) in
        heads.logits(batch.hidden.clone(), lm_head).into_iter().zip(&batch.labels).zip(&batch.weights)
    {
        let log_probs = activation::log_softmax(logits.clone(), 1);
        let picked = log_probs.gather(1, label.clone().reshape([rows, 1])).reshape([rows]);
        let nll = picked.neg() * weight.clone();
        let count = weight.clone().sum().into_scalar().elem::<f64>();
        let head_loss = nll.sum();
        total = total + head_loss.clone() / count.max(1.0);
        metrics.push(step_metrics(
            logits,
            label.clone(),
            weight.clone(),
            head_loss.into_scalar().elem::<f64>(),
            count as usize,
        ));
    }
    (total, metrics)
}
