//! Teacher-forced training loss: for a context position `t` with hidden state `h_t`, step `i`
//! (1-based) feeds the token at `t + i` through the RNN and predicts the token at `t + 1 + i`.
//! Labels are the ground truth or the target's own greedy continuation (distillation); the
//! loss is the cross-entropy summed over steps, each step averaged over its unmasked rows.
//! With [`SoftLabels`] each step's loss mixes in the cross-entropy against the target's own
//! next-token distribution at the label's position (knowledge distillation: the drafter learns
//! how sure the target is, not only its top token).

use burn::tensor::{activation, backend::Backend, ElementConversion, Int, Tensor};

use super::model::{ReDrafter, VocabProjection};
use crate::metrics::{step_metrics, StepMetrics};

/// One batch of context positions.
#[derive(Debug, Clone)]
pub struct TrainBatch<B: Backend> {
    /// `[rows, hidden]` target hidden states (after the final norm) at the context positions.
    pub hidden: Tensor<B, 2>,
    /// Per step: `[rows]` ids of the token fed to the RNN.
    pub inputs: Vec<Tensor<B, 1, Int>>,
    /// Per step: `[rows]` ids of the token to predict.
    pub labels: Vec<Tensor<B, 1, Int>>,
    /// Per step: `[rows]` 1 where the label counts, 0 where it is padding or a prompt token.
    pub weights: Vec<Tensor<B, 1>>,
    /// Per step: `[rows]` 1 where the label is in the vocabulary the logits cover (a draft
    /// vocabulary may not hold every label), else 0: such a row adds no loss and counts as a miss.
    pub in_vocab: Vec<Tensor<B, 1>>,
    /// The target's own distributions to learn besides the labels, if any.
    pub soft: Option<SoftLabels<B>>,
}

/// The target's next-token distributions at the labels' positions.
#[derive(Debug, Clone)]
pub struct SoftLabels<B: Backend> {
    /// Per step: `[rows, vocab]` probabilities over the vocabulary the logits cover (constants:
    /// no gradient flows into them).
    pub probs: Vec<Tensor<B, 2>>,
    /// Weight of the soft term in each step's loss, in (0, 1]; the labels' term gets the rest.
    pub weight: f64,
}

/// The summed loss (a scalar to back-propagate) and per-step metrics. With a draft vocabulary,
/// `vocab` projects onto it and the batch's labels are indices into it.
pub fn teacher_forced_loss<B: Backend>(
    drafter: &ReDrafter<B>,
    embeddings: &Tensor<B, 2>,
    vocab: &VocabProjection<B>,
    batch: &TrainBatch<B>,
) -> (Tensor<B, 1>, Vec<StepMetrics>) {
    let [rows, hidden] = batch.hidden.dims();
    let device = batch.hidden.device();
    let mut state = drafter.initial_state(rows, hidden, &device);
    let mut total = Tensor::<B, 1>::zeros([1], &device);
    let mut metrics = Vec::with_capacity(batch.inputs.len());
    for (step, (((input, label), weight), in_vocab)) in
        batch.inputs.iter().zip(&batch.labels).zip(&batch.weights).zip(&batch.in_vocab).enumerate()
    {
        state = drafter.next_state(state, embeddings.clone().select(0, input.clone()));
        let logits = drafter.logits(batch.hidden.clone(), state.clone(), vocab);
        let log_probs = activation::log_softmax(logits.clone(), 1);
        let picked = log_probs.clone().gather(1, label.clone().reshape([rows, 1])).reshape([rows]);
        let trained = weight.clone() * in_vocab.clone();
        let nll = picked.neg() * trained.clone();
        let count = weight.clone().sum().into_scalar().elem::<f64>();
        let trained_count = trained.clone().sum().into_scalar().elem::<f64>();
        let step_loss = nll.clone().sum();
        let mut term = step_loss.clone() / trained_count.max(1.0);
        if let Some(soft) = &batch.soft {
            // Every counted row learns the target's distribution over the logits' vocabulary,
            // also where its label lies outside it.
            let cross = (soft.probs[step].clone() * log_probs).sum_dim(1).reshape([rows]).neg();
            let soft_term = (cross * weight.clone()).sum() / count.max(1.0);
            term = term * (1.0 - soft.weight) + soft_term * soft.weight;
        }
        total = total + term;
        // Hits and the loss cover the trained rows; accuracy is over every counted row.
        let m =
            step_metrics(logits, label.clone(), trained, step_loss.into_scalar().elem::<f64>(), trained_count as usize);
        metrics.push(StepMetrics { count: count as usize, ..m });
    }
    (total, metrics)
}
