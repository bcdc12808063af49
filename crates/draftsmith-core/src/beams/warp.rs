//! Top-k logit warp (the reference's `warp_logits`) fused with `log_softmax`.

/// The `k` most likely tokens of `logits` with their top-k-warped log-probs (`log_softmax` after
/// setting every other logit to −∞), best first; ties go to the lower token id. Costs one
/// partial selection over the vocabulary and a log-sum-exp over `k` values only.
///
/// Unlike the reference (which keeps every token tied with the k-th logit and masks the rest
/// to −5e4), exactly `min(k, vocab)` tokens are kept and the rest have probability 0.
/// Panics if `logits` is empty, `k` is 0, or the best logit is NaN or −∞.
pub fn top_k_log_probs(logits: &[f32], k: usize) -> Vec<(u32, f32)> {
    assert!(!logits.is_empty() && k > 0, "top_k_log_probs: empty logits or k = 0");
    let by_logit = |a: &u32, b: &u32| logits[*b as usize].total_cmp(&logits[*a as usize]).then(a.cmp(b));
    let k = k.min(logits.len());
    let mut ids: Vec<u32> = (0..logits.len() as u32).collect();
    if k < ids.len() {
        ids.select_nth_unstable_by(k - 1, by_logit);
        ids.truncate(k);
    }
    ids.sort_unstable_by(by_logit);
    let max = logits[ids[0] as usize];
    assert!(max.is_finite(), "top_k_log_probs: best logit is {max}; the drafter must return a finite logit");
    let sum: f32 = ids.iter().map(|&t| (logits[t as usize] - max).exp()).sum();
    let log_z = max + sum.ln();
    ids.into_iter().map(|t| (t, logits[t as usize] - log_z)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_log_probs_normalises_over_the_top_k_only() {
        let lp = top_k_log_probs(&[1.0, 3.0, 2.0, 3.0, 0.0], 3);
        let z = (3.0f32.exp() * 2.0 + 2.0f32.exp()).ln();
        assert_eq!(lp.iter().map(|p| p.0).collect::<Vec<_>>(), vec![1, 3, 2], "ties: lower id first");
        for (t, p) in lp {
            assert!((p - ([1.0, 3.0, 2.0, 3.0, 0.0][t as usize] - z)).abs() < 1e-6);
        }
        assert_eq!(top_k_log_probs(&[0.5, f32::NEG_INFINITY], 5).len(), 2, "k is capped at vocab");
    }

    #[test]
    fn matches_a_full_sort_on_a_large_vocabulary() {
        let mut rng = crate::beams::XorShift::new(3);
        let logits: Vec<f32> = (0..150_000).map(|_| (rng.next_u64() % 20_000) as f32 / 1000.0).collect();
        let mut order: Vec<u32> = (0..logits.len() as u32).collect();
        order.sort_by(|&a, &b| logits[b as usize].total_cmp(&logits[a as usize]).then(a.cmp(&b)));
        let top = top_k_log_probs(&logits, 50);
        assert_eq!(top.iter().map(|p| p.0).collect::<Vec<_>>(), order[..50]);
        let total: f64 = top.iter().map(|p| f64::from(p.1).exp()).sum();
        assert!((total - 1.0).abs() < 1e-5, "probabilities over the top k sum to 1");
    }
}
