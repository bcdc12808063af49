//! Lossless verification under sampling, for chains and trees of deterministic drafts
//! (prompt lookup, n-gram trie, greedy draft models): recursive rejection sampling over the
//! siblings of each node, as in SpecInfer's multi-draft verification with one-hot draft
//! distributions. A drafted token `x` is accepted with probability `p(x)`; on rejection `p(x)`
//! is set to 0 and `p` renormalized before the next sibling is tried; when every sibling is
//! rejected the bonus token is drawn from what is left. Each emitted token therefore has
//! exactly the target's (processed) distribution, whatever the drafts were.
//!
//! The reference implementations of ReDrafter and TokenSwift are not exactly lossless at
//! temperature > 0 (ReDrafter's beam drafts are deterministic but its acceptance ratio uses the
//! drafter's probabilities; TokenSwift samples every tree node independently); this one is.

use draftsmith_core::DraftTree;
use rand::Rng;

use super::verify::Acceptance;
use crate::sampling::{probabilities, sample_from, SamplingConfig};

/// Verifies `tree` by rejection sampling. `rows` holds the target's logits, row 0 after the
/// root and row `i + 1` after node `i` (`vocab` values each); `context` is every token up to and
/// including the root (for repetition/contextual penalties).
pub fn verify_sampled(
    tree: &DraftTree,
    context: &[u32],
    rows: &[f32],
    vocab: usize,
    cfg: &SamplingConfig,
    rng: &mut impl Rng,
) -> Acceptance {
    let mut ctx = context.to_vec();
    let mut path = Vec::new();
    let mut parent: Option<usize> = None;
    loop {
        let row = parent.map_or(0, |p| p + 1);
        let mut p = probabilities(&rows[row * vocab..(row + 1) * vocab], &ctx, cfg);
        let mut accepted = None;
        for child in (0..tree.len()).filter(|&i| tree.parents()[i] == parent) {
            let x = tree.tokens()[child] as usize;
            if rng.random::<f32>() < p[x] {
                accepted = Some(child);
                break;
            }
            reject(&mut p, x);
        }
        match accepted {
            Some(child) => {
                path.push(child);
                ctx.push(tree.tokens()[child]);
                parent = Some(child);
            }
            None => return Acceptance { path, bonus: sample_from(&p, rng.random::<f32>()) },
        }
    }
}

/// Removes token `x` from the distribution and renormalizes.
fn reject(p: &mut [f32], x: usize) {
    let rest = 1.0 - p[x];
    p[x] = 0.0;
    if rest > 0.0 {
        p.iter_mut().for_each(|v| *v /= rest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{rngs::StdRng, SeedableRng};

    #[test]
    fn single_draft_is_accepted_with_its_target_probability() {
        // p = (0.5, 0.3, 0.2); draft token 1: accepted 30% of the time; otherwise the bonus is
        // 0 or 2 in ratio 5:2, so overall P = (0.5, 0.3, 0.2).
        let logits = [0.5f32.ln(), 0.3f32.ln(), 0.2f32.ln()];
        let tree = DraftTree::chain(&[1]);
        let rows: Vec<f32> = logits.iter().chain(logits.iter()).copied().collect();
        let cfg = SamplingConfig { temperature: 1.0, ..Default::default() };
        let mut rng = StdRng::seed_from_u64(1);
        let mut counts = [0usize; 3];
        let n = 20_000;
        for _ in 0..n {
            let a = verify_sampled(&tree, &[], &rows, 3, &cfg, &mut rng);
            let first = if a.path.is_empty() { a.bonus } else { tree.tokens()[a.path[0]] };
            counts[first as usize] += 1;
        }
        for (c, want) in counts.iter().zip([0.5, 0.3, 0.2]) {
            assert!((*c as f64 / n as f64 - want).abs() < 0.015, "{counts:?}");
        }
    }
}
