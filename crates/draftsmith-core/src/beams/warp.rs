//! Top-k logit warp (the reference's `warp_logits`) fused with `log_softmax`.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// The `k` most likely tokens of `logits` with their top-k-warped log-probs (`log_softmax` after
/// setting every other logit to −∞), best first; ties go to the lower token id. Costs one pass
/// over the vocabulary that keeps the best `k` so far in a small heap (most logits lose one
/// comparison with the heap's worst), and a log-sum-exp over `k` values only.
///
/// Unlike the reference (which keeps every token tied with the k-th logit and masks the rest
/// to −5e4), exactly `min(k, vocab)` tokens are kept and the rest have probability 0.
/// Panics if `logits` is empty, `k` is 0, or the best logit is NaN or −∞.
pub fn top_k_log_probs(logits: &[f32], k: usize) -> Vec<(u32, f32)> {
    assert!(!logits.is_empty() && k > 0, "top_k_log_probs: empty logits or k = 0");
    let k = k.min(logits.len());
    // Min-heap (by `Rank`) of the best k so far: its top is the worst kept token. Tokens come
    // in id order, so a later token with an equal logit never displaces a kept one.
    let mut heap: BinaryHeap<Reverse<Rank>> =
        logits[..k].iter().enumerate().map(|(t, &l)| Reverse(Rank(l, t as u32))).collect();
    let mut worst = heap.peek().expect("k ≥ 1").0 .0;
    for (t, &l) in logits.iter().enumerate().skip(k) {
        if l.total_cmp(&worst) == Ordering::Greater {
            *heap.peek_mut().expect("k ≥ 1") = Reverse(Rank(l, t as u32));
            worst = heap.peek().expect("k ≥ 1").0 .0;
        }
    }
    let mut ids: Vec<Rank> = heap.into_iter().map(|r| r.0).collect();
    ids.sort_unstable_by(|a, b| b.cmp(a));
    let max = ids[0].0;
    assert!(max.is_finite(), "top_k_log_probs: best logit is {max}; the drafter must return a finite logit");
    let sum: f32 = ids.iter().map(|r| (r.0 - max).exp()).sum();
    let log_z = max + sum.ln();
    ids.into_iter().map(|r| (r.1, r.0 - log_z)).collect()
}

/// A token's rank: a higher logit (IEEE total order) is better, then a lower id.
#[derive(Debug, Clone, Copy)]
struct Rank(f32, u32);

impl Ord for Rank {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0).then(other.1.cmp(&self.1))
    }
}

impl PartialOrd for Rank {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Rank {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Rank {}

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
        // Mostly −∞ with many ties (a draft vocabulary's rows): the same as the full sort.
        let logits: Vec<f32> = (0..20_000u64)
            .map(|_| match rng.next_u64() % 10 {
                0..=6 => f32::NEG_INFINITY,
                r => r as f32,
            })
            .collect();
        let mut order: Vec<u32> = (0..logits.len() as u32).collect();
        order.sort_by(|&a, &b| logits[b as usize].total_cmp(&logits[a as usize]).then(a.cmp(&b)));
        for k in [1, 7, 50] {
            let top = top_k_log_probs(&logits, k);
            assert_eq!(top.iter().map(|p| p.0).collect::<Vec<_>>(), order[..k], "k {k}");
        }
    }
}
