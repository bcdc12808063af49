//! Lossless verification under sampling, for chains and trees of drafts: recursive rejection
//! sampling over the siblings of each node, as in SpecInfer's multi-draft verification. A
//! node whose token `x` was given (prompt lookup, n-gram trie, greedy draft models: a one-hot
//! draft distribution) is accepted with probability `p(x)`, and on rejection `p(x)` is set to 0
//! and `p` renormalized before the next sibling is tried. A node whose token was drawn from a
//! known distribution `q` (a draft model sampling its drafts, [`Proposer::draft_distributions`])
//! is accepted with probability `min(1, p(x) / q(x))`, and on rejection `p` becomes
//! `max(p − q, 0)` renormalized (speculative sampling, Leviathan et al. 2023; Chen et al. 2023):
//! on average it is accepted with probability `Σ min(p, q)` instead of `p(argmax q)`. When every
//! sibling is rejected the bonus token is drawn from what is left. Each emitted token therefore
//! has exactly the target's (processed) distribution, whatever the drafts were — provided a
//! drawn node is verified whatever it drew (a policy that kept or dropped it by its value
//! would bias it: [`Proposer::draft_distributions`]).
//!
//! The reference implementations of ReDrafter and TokenSwift are not exactly lossless at
//! temperature > 0 (ReDrafter's beam drafts are deterministic but its acceptance ratio uses the
//! drafter's probabilities; TokenSwift samples every tree node independently); this one is.
//!
//! [`Proposer::draft_distributions`]: super::Proposer::draft_distributions

use draftsmith_core::DraftTree;
use rand::Rng;

use super::verify::Acceptance;
use crate::sampling::{probabilities, sample_from, SamplingConfig};

/// Verifies `tree` by rejection sampling. `rows` holds the target's logits, row 0 after the
/// root and row `i + 1` after node `i` (`vocab` values each); `context` is every token up to and
/// including the root (for repetition/contextual penalties); `drawn`, where the tree's tokens
/// were drawn at random, each node's draft distribution (ids past its end: probability 0).
/// Returns the verdict and the target's processed distributions after the root and after each
/// accepted node, in path order: given them (and the draft distributions of drawn nodes), a
/// node below any of them was accepted with a chance known exactly — for a token taken as given
/// the one its parent's distribution gives it (a repeat of an earlier sibling's token: none),
/// whatever its siblings were — which says more than the draw
/// ([`Verified::chances`](super::Verified::chances), [`acceptance_chances`]).
pub fn verify_sampled(
    tree: &DraftTree,
    context: &[u32],
    rows: &[f32],
    vocab: usize,
    cfg: &SamplingConfig,
    drawn: Option<&[Vec<f32>]>,
    rng: &mut impl Rng,
) -> (Acceptance, Vec<Vec<f32>>) {
    assert!(drawn.is_none_or(|q| q.len() == tree.len()), "one draft distribution per node");
    let mut ctx = context.to_vec();
    let mut path = Vec::new();
    let mut parent: Option<usize> = None;
    let mut after = Vec::new();
    loop {
        let row = parent.map_or(0, |p| p + 1);
        let mut p = probabilities(&rows[row * vocab..(row + 1) * vocab], &ctx, cfg);
        // The distribution as it was, for `after`, once a rejection changes `p`.
        let mut before: Option<Vec<f32>> = None;
        let mut accepted = None;
        for child in (0..tree.len()).filter(|&i| tree.parents()[i] == parent) {
            let x = tree.tokens()[child] as usize;
            // (A token its distribution gives no chance cannot have been drawn from it.)
            let q = drawn.map(|d| d[child].as_slice()).filter(|q| q.get(x).is_some_and(|&v| v > 0.0));
            let q_x = q.map_or(1.0, |q| q[x]);
            // u < p(x) / q(x), without the division (q(x) > 0 for a drawn token).
            if rng.random::<f32>() * q_x < p[x] {
                accepted = Some(child);
                break;
            }
            if before.is_none() {
                before = Some(p.clone());
            }
            match q {
                Some(q) => subtract(&mut p, q),
                None => reject(&mut p, x),
            }
        }
        let Some(child) = accepted else {
            let bonus = sample_from(&p, rng.random::<f32>());
            after.push(before.unwrap_or(p));
            return (Acceptance { path, bonus }, after);
        };
        after.push(before.unwrap_or(p));
        path.push(child);
        ctx.push(tree.tokens()[child]);
        parent = Some(child);
    }
}

/// The chance that each child of one node was accepted, given that the node was (its target
/// distribution `p`) and given the children's tokens — what [`verify_sampled`] does with them,
/// in expectation over its random numbers alone. `children` are the node's children in the
/// order they are tried, each with its token and, if it was drawn, its draft distribution.
/// A child is tried with the chance that every earlier one was rejected, and then accepted with
/// probability `p'(x)` (taken as given) or `min(1, p'(x) / q(x))` (drawn from `q`), where `p'`
/// is `p` after the earlier ones' rejections. For tokens all taken as given this is `p(x)`
/// (none for a repeat): rejections renormalize what they leave — computed so, without a pass
/// over the vocabulary per sibling.
pub fn acceptance_chances(p: &[f32], children: &[(u32, Option<&[f32]>)]) -> Vec<f64> {
    if children.iter().all(|(_, q)| q.is_none()) {
        return (0..children.len())
            .map(|k| {
                let x = children[k].0;
                let repeated = children[..k].iter().any(|&(s, _)| s == x);
                if repeated {
                    0.0
                } else {
                    f64::from(p.get(x as usize).copied().unwrap_or(0.0))
                }
            })
            .collect();
    }
    let mut p = std::borrow::Cow::Borrowed(p);
    let mut reach = 1.0f64;
    let mut out = Vec::with_capacity(children.len());
    for (i, &(x, q)) in children.iter().enumerate() {
        let x = x as usize;
        let q = q.filter(|q| q.get(x).is_some_and(|&v| v > 0.0));
        let px = f64::from(p.get(x).copied().unwrap_or(0.0));
        let accept = match q {
            Some(q) => (px / f64::from(q[x])).min(1.0),
            None => px,
        };
        out.push(reach * accept);
        reach *= 1.0 - accept;
        if i + 1 < children.len() && x < p.len() {
            match q {
                Some(q) => subtract(p.to_mut(), q),
                None => reject(p.to_mut(), x),
            }
        }
    }
    out
}

/// Removes token `x` from the distribution and renormalizes.
fn reject(p: &mut [f32], x: usize) {
    let rest = 1.0 - p[x];
    p[x] = 0.0;
    if rest > 0.0 {
        p.iter_mut().for_each(|v| *v /= rest);
    }
}

/// What is left of `p` after a rejected draft drawn from `q`: `max(p − q, 0)`, renormalized. Left
/// as it is when nothing would be left (`q ≥ p` everywhere, so `q = p`: a rejection then has
/// probability 0).
fn subtract(p: &mut [f32], q: &[f32]) {
    let rest: f32 = p.iter().zip(q.iter().chain(std::iter::repeat(&0.0))).map(|(&a, &b)| (a - b).max(0.0)).sum();
    if rest <= 0.0 {
        return;
    }
    for (i, v) in p.iter_mut().enumerate() {
        *v = (*v - q.get(i).copied().unwrap_or(0.0)).max(0.0) / rest;
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
            let (a, _) = verify_sampled(&tree, &[], &rows, 3, &cfg, None, &mut rng);
            let first = if a.path.is_empty() { a.bonus } else { tree.tokens()[a.path[0]] };
            counts[first as usize] += 1;
        }
        for (c, want) in counts.iter().zip([0.5, 0.3, 0.2]) {
            assert!((*c as f64 / n as f64 - want).abs() < 0.015, "{counts:?}");
        }
    }

    #[test]
    fn given_tokens_come_back_with_the_distributions_along_the_path() {
        // p after the root = (0.5, 0.3, 0.2), after node 0 (token 1) = (0.1, 0.6, 0.3).
        let (p0, p1) = ([0.5f32, 0.3, 0.2], [0.1f32, 0.6, 0.3]);
        let rows: Vec<f32> = [p0, p1, p0].iter().flat_map(|p| p.map(f32::ln)).collect();
        let tree = DraftTree::chain(&[1, 0]);
        let cfg = SamplingConfig { temperature: 1.0, ..Default::default() };
        let mut rng = StdRng::seed_from_u64(3);
        let close = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6);
        for _ in 0..200 {
            let (a, after) = verify_sampled(&tree, &[], &rows, 3, &cfg, None, &mut rng);
            assert_eq!(after.len(), a.path.len() + 1, "{a:?}");
            assert!(close(&after[0], &p0) && after.get(1).is_none_or(|p| close(p, &p1)));
        }
        // Drawn tokens too: the distributions before any rejection changed them.
        let q = vec![vec![0.2f32, 0.5, 0.3]; 2];
        for _ in 0..200 {
            let (a, after) = verify_sampled(&tree, &[], &rows, 3, &cfg, Some(&q), &mut rng);
            assert_eq!(after.len(), a.path.len() + 1, "{a:?}");
            assert!(close(&after[0], &p0) && after.get(1).is_none_or(|p| close(p, &p1)));
        }
    }

    #[test]
    fn acceptance_chances_are_the_frequencies_of_the_verdicts() {
        // p = (0.5, 0.3, 0.2) after the root; two children: a drawn one from q, then a given 0.
        let (p, q) = ([0.5f32, 0.3, 0.2], vec![0.2f32, 0.5, 0.3]);
        let logits: Vec<f32> = p.iter().map(|v| v.ln()).collect();
        let rows: Vec<f32> = (0..3).flat_map(|_| logits.iter().copied()).collect();
        let cfg = SamplingConfig { temperature: 1.0, ..Default::default() };
        let close = |a: f64, b: f64| (a - b).abs() < 0.01;
        // Given tokens alone: each child's own probability, a repeat none.
        let given = acceptance_chances(&p, &[(1, None), (0, None), (1, None)]);
        assert!(close(given[0], 0.3) && close(given[1], 0.5) && given[2].abs() < 1e-9, "{given:?}");
        let mut rng = StdRng::seed_from_u64(5);
        for x in 0..3u32 {
            let mut tree = DraftTree::new();
            tree.push(x, None);
            tree.push(0, None);
            let drawn = vec![q.clone(), Vec::new()];
            let want = acceptance_chances(&p, &[(x, Some(&q)), (0, None)]);
            let n = 20_000;
            let mut hits = [0usize; 2];
            for _ in 0..n {
                let (a, _) = verify_sampled(&tree, &[], &rows, 3, &cfg, Some(&drawn), &mut rng);
                if let Some(&first) = a.path.first() {
                    hits[first] += 1;
                }
            }
            for (h, w) in hits.iter().zip(&want) {
                assert!(close(*h as f64 / n as f64, *w), "token {x}: {hits:?} of {n} against {want:?}");
            }
        }
        // Drawn 1 from q: min(1, 0.3 / 0.5) = 0.6; then p − q = (0.3, 0, 0), renormalized: 0 is
        // accepted whenever it is tried.
        let mixed = acceptance_chances(&p, &[(1, Some(&q)), (0, None)]);
        assert!(close(mixed[0], 0.6) && close(mixed[1], 0.4), "{mixed:?}");
    }

    #[test]
    fn a_drawn_draft_is_accepted_with_min_p_q_and_the_output_keeps_p() {
        // p = (0.5, 0.3, 0.2), q = (0.2, 0.5, 0.3): a draft drawn from q is accepted with
        // probability Σ min(p, q) = 0.2 + 0.3 + 0.2 = 0.7 (a given token 1 would be: 0.3), and
        // the first token still has distribution p.
        let (p, q) = ([0.5f32, 0.3, 0.2], vec![0.2f32, 0.5, 0.3]);
        let logits: Vec<f32> = p.iter().map(|v| v.ln()).collect();
        let rows: Vec<f32> = logits.iter().chain(logits.iter()).copied().collect();
        let cfg = SamplingConfig { temperature: 1.0, ..Default::default() };
        let mut rng = StdRng::seed_from_u64(2);
        let (mut counts, mut accepted) = ([0usize; 3], 0);
        let n = 40_000;
        for _ in 0..n {
            let x = crate::sampling::sample_from(&q, rng.random::<f32>());
            let tree = DraftTree::chain(&[x]);
            let (a, _) = verify_sampled(&tree, &[], &rows, 3, &cfg, Some(std::slice::from_ref(&q)), &mut rng);
            accepted += a.path.len();
            let first = if a.path.is_empty() { a.bonus } else { tree.tokens()[a.path[0]] };
            counts[first as usize] += 1;
        }
        for (c, want) in counts.iter().zip(p) {
            assert!((*c as f64 / n as f64 - f64::from(want)).abs() < 0.012, "{counts:?}");
        }
        assert!((accepted as f64 / n as f64 - 0.7).abs() < 0.012, "accepted {accepted} of {n}");
    }
}
