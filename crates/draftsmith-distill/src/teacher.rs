//! Per-position teacher signals of one sequence, batched.
//!
//! For every trained position `t` (where `loss_mask[t + 1]` holds) the target's greedy
//! continuation `c_t[1..=T]` given `tokens[..=t]` is wanted; `c_t[j]` sits at position `t + j`.
//! Instead of one decode per position:
//!
//! 1. the sequence is prefilled once with logits at every row; row `t`'s argmax is `c_t[1]` for
//!    all `t` at once (and its log-softmax gives the top-k);
//! 2. pass `k = 2..=T` appends, for every trained `t`, the token `c_t[k-1]` at position
//!    `t + k - 1`. A [`AttentionMask::Visible`] row lets it see cache entries `0..=t` (its own
//!    prefix), the entries of `c_t[1..k-1]` appended by earlier passes, and itself — exactly
//!    the context of a per-position greedy decode. The pass's argmax rows are the `c_t[k]`.
//!
//! Passes are split into chunks of at most [`MAX_ROWS_PER_PASS`] new tokens to bound the mask
//! and logits. The cache is truncated back to its entry length afterwards.

use burn::tensor::backend::Backend;
use draftsmith_data::NO_TOKEN;
use draftsmith_decode::sampling::argmax;
use draftsmith_model::{AttentionMask, KvCache, LogitsSelect, Model, ModelError};

/// Most new tokens (rows) in one forward pass.
pub const MAX_ROWS_PER_PASS: usize = 256;

/// The teacher columns of one record.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TeacherColumns {
    /// Flattened `[len × T]` greedy continuations, [`NO_TOKEN`] at untrained positions.
    pub teacher: Option<Vec<u32>>,
    /// Flattened `[len × k]` next-token ids, most likely first.
    pub topk_ids: Option<Vec<u32>>,
    /// Their log-probabilities, same shape.
    pub topk_logprobs: Option<Vec<f32>>,
    /// Tokens run through the target to compute them.
    pub processed: usize,
}

/// Computes the teacher continuations (`teacher_len > 0`) and top-k log-probs (`topk > 0`) of
/// `tokens`, using `cache` (any length; restored on return) as scratch.
pub fn teacher_columns<B: Backend>(
    model: &Model<B>,
    cache: &mut KvCache<B>,
    tokens: &[u32],
    loss_mask: &[bool],
    teacher_len: usize,
    topk: usize,
) -> Result<TeacherColumns, ModelError> {
    let mut out = TeacherColumns::default();
    if (teacher_len == 0 && topk == 0) || tokens.is_empty() {
        return Ok(out);
    }
    let base = cache.len();
    let result = run(model, cache, tokens, loss_mask, teacher_len, topk, &mut out);
    cache.truncate(base);
    result.map(|()| out)
}

fn run<B: Backend>(
    model: &Model<B>,
    cache: &mut KvCache<B>,
    tokens: &[u32],
    loss_mask: &[bool],
    teacher_len: usize,
    topk: usize,
    out: &mut TeacherColumns,
) -> Result<(), ModelError> {
    let n = tokens.len();
    let base = cache.len();
    let mut first = Vec::with_capacity(n);
    let (mut ids, mut logprobs) = (Vec::with_capacity(n * topk), Vec::with_capacity(n * topk));
    for start in (0..n).step_by(MAX_ROWS_PER_PASS) {
        let chunk = &tokens[start..n.min(start + MAX_ROWS_PER_PASS)];
        let positions: Vec<usize> = (start..start + chunk.len()).collect();
        let logits = model.forward(chunk, &positions, &AttentionMask::Causal, LogitsSelect::All, cache)?.logits;
        for row in draftsmith_model::host_f32(logits).chunks_exact(model.config().vocab_size) {
            first.push(argmax(row));
            if topk > 0 {
                top_logprobs(row, topk, &mut ids, &mut logprobs);
            }
        }
    }
    out.processed += n;
    if topk > 0 {
        out.topk_ids = Some(ids);
        out.topk_logprobs = Some(logprobs);
    }
    if teacher_len > 0 {
        let trained: Vec<usize> = (0..n.saturating_sub(1)).filter(|&t| loss_mask[t + 1]).collect();
        out.teacher = Some(continuations(model, cache, base, &first, &trained, teacher_len, &mut out.processed)?);
    }
    Ok(())
}

/// Passes `k = 2..=T` over the prefilled sequence (cache entries `base..base + first.len()`).
fn continuations<B: Backend>(
    model: &Model<B>,
    cache: &mut KvCache<B>,
    base: usize,
    first: &[u32],
    trained: &[usize],
    t_len: usize,
    processed: &mut usize,
) -> Result<Vec<u32>, ModelError> {
    let n = first.len();
    let context = model.config().max_position_embeddings;
    let mut teacher = vec![NO_TOKEN; n * t_len];
    for &t in trained {
        teacher[t * t_len] = first[t];
    }
    // Cache entries holding c_t[1..k-1] of each position t.
    let mut appended: Vec<Vec<usize>> = vec![Vec::new(); n];
    for k in 2..=t_len {
        let active: Vec<usize> = trained.iter().copied().filter(|&t| t + k - 1 < context).collect();
        for chunk in active.chunks(MAX_ROWS_PER_PASS) {
            let cached = cache.len();
            let total = cached + chunk.len();
            let mut mask = vec![false; chunk.len() * total];
            for (r, &t) in chunk.iter().enumerate() {
                let row = &mut mask[r * total..(r + 1) * total];
                row[..base + t + 1].fill(true);
                for &j in &appended[t] {
                    row[j] = true;
                }
                row[cached + r] = true;
            }
            let inputs: Vec<u32> = chunk.iter().map(|&t| teacher[t * t_len + k - 2]).collect();
            let positions: Vec<usize> = chunk.iter().map(|&t| t + k - 1).collect();
            let logits =
                model.forward(&inputs, &positions, &AttentionMask::Visible(mask), LogitsSelect::All, cache)?.logits;
            for ((r, &t), row) in
                chunk.iter().enumerate().zip(draftsmith_model::host_f32(logits).chunks_exact(model.config().vocab_size))
            {
                teacher[t * t_len + k - 1] = argmax(row);
                appended[t].push(cached + r);
            }
            *processed += chunk.len();
        }
    }
    Ok(teacher)
}

/// Appends the `k` largest log-softmax entries of `row` (ties: lower id first) to `ids` and
/// `logprobs`, most likely first. `k` must not exceed the row length.
pub fn top_logprobs(row: &[f32], k: usize, ids: &mut Vec<u32>, logprobs: &mut Vec<f32>) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let log_sum = max + row.iter().map(|&x| (x - max).exp()).sum::<f32>().ln();
    debug_assert!(k <= row.len(), "top-{k} of a {}-entry row", row.len());
    // Kept sorted by (value desc, id asc); k is small, insertion is cheapest.
    let mut best: Vec<(f32, u32)> = Vec::with_capacity(k + 1);
    for (i, &x) in row.iter().enumerate() {
        if best.len() == k && x <= best[k - 1].0 {
            continue;
        }
        let at = best.partition_point(|&(v, _)| v >= x);
        best.insert(at, (x, i as u32));
        best.truncate(k);
    }
    for (v, i) in best {
        ids.push(i);
        logprobs.push(v - log_sum);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_logprobs_orders_and_normalizes() {
        let row = [1.0f32, 3.0, 3.0, -2.0, 0.5];
        let (mut ids, mut lp) = (Vec::new(), Vec::new());
        top_logprobs(&row, 3, &mut ids, &mut lp);
        assert_eq!(ids, vec![1, 2, 0], "ties keep the lower id first");
        let z: f32 = row.iter().map(|x| x.exp()).sum();
        assert!((lp[0] - (3.0 - z.ln())).abs() < 1e-5);
        assert!((lp[2] - (1.0 - z.ln())).abs() < 1e-5);
    }
}
