//! What the draft policy keeps of a draft: the best prefix of its nodes by path probability
//! ([`choose`]), and for a method told its depth how deep to draft ([`DepthStop`]).

use draftsmith_core::DraftTree;

use super::{CostModel, NODE_CLASSES};

/// The nodes of `tree` worth verifying: the prefix of the nodes sorted by path probability
/// `p` with the best `(1 + Σ p) / cost.predict(1 + size)`; at least `min_keep` nodes when the
/// tree has them. Returned in tree order, with the predicted ms of the pass.
pub fn choose(tree: &DraftTree, p: &[f64], cost: &CostModel, min_keep: usize) -> (Vec<usize>, f64) {
    let mut order: Vec<usize> = (0..tree.len()).collect();
    // Stable: on equal probabilities tree order (parents first) decides.
    order.sort_by(|&a, &b| p[b].total_cmp(&p[a]));
    let (mut best_k, mut best_rate, mut gain) = (0usize, f64::NEG_INFINITY, 1.0);
    for k in 0..=order.len() {
        if k > 0 {
            gain += p[order[k - 1]];
        }
        let rate = gain / cost.predict(1 + k);
        if k >= min_keep.min(order.len()) && rate > best_rate {
            (best_k, best_rate) = (k, rate);
        }
    }
    let mut keep: Vec<usize> = order[..best_k].to_vec();
    keep.sort_unstable();
    (keep, cost.predict(1 + best_k))
}

/// `tree` restricted to `keep` (closed under parents, increasing), re-indexed.
pub fn subtree(tree: &DraftTree, keep: &[usize]) -> DraftTree {
    let mut index = vec![usize::MAX; tree.len()];
    let mut out = DraftTree::new();
    for (j, &i) in keep.iter().enumerate() {
        index[i] = j;
        let parent = tree.parents()[i].map(|q| index[q]);
        debug_assert!(parent.is_none_or(|q| q != usize::MAX), "kept nodes are closed under parents");
        out.push(tree.tokens()[i], parent);
    }
    out
}

/// How deep a method told its depth drafts: before drafting, the depth with the best expected
/// tokens per millisecond (0: a plain step), and for a method that applies it
/// ([`Proposer::set_depth_stop`](crate::spec::Proposer::set_depth_stop)) after each drafter
/// call, with the node classes of the best path so far, whether a deeper draft is expected to
/// raise the step's tokens per millisecond — SpecDec++'s stopping, priced with the policy's own
/// models. A depth chosen before drafting prices every level with the acceptance of a node of
/// any class; the drafter's own certainty of the nodes it has just drafted (a
/// ReDrafter's probability of its token) is known only as it drafts, so a sure path goes deeper
/// than that depth and an unsure one stops before paying for calls whose nodes would be
/// pruned anyway.
#[derive(Debug, Clone, PartialEq)]
pub struct DepthStop {
    /// Chance that a node at depth `j + 1` of node class `k` is accepted when its parent is:
    /// `[j][k]`.
    by_class: Vec<[f64; NODE_CLASSES]>,
    /// The same for a node not drafted yet (any class).
    any: Vec<f64>,
    /// Drafting ms of a draft of depth `d` (index `d`, `0 ..= max`).
    draft_ms: Vec<f64>,
    /// Verify ms of a pass over `1 + d` tokens (index `d`).
    verify_ms: Vec<f64>,
}

impl DepthStop {
    /// A rule for drafts of at most `max ≥ 1` levels: `by_class[j][k]` and `any[j]` the
    /// acceptance at depth `j + 1` given the parent's, `draft_ms(d)` and `verify_ms(d)` the
    /// drafting time of a draft of depth `d` and the pass over its `1 + d` tokens. Both are
    /// taken as never falling with the depth (a deeper draft makes the shallower one's calls
    /// and more): per-depth measurements can say otherwise in a noisy moment, and a rule that
    /// believed them would draft past a node it expects rejected because going on looked
    /// cheaper than stopping.
    pub fn new(
        by_class: Vec<[f64; NODE_CLASSES]>,
        any: Vec<f64>,
        draft_ms: impl Fn(usize) -> f64,
        verify_ms: impl Fn(usize) -> f64,
    ) -> Self {
        let max = any.len();
        assert!(max >= 1 && by_class.len() == max, "a depth stop covers the same depths in both tables");
        let rising = |f: &dyn Fn(usize) -> f64| {
            (0..=max)
                .scan(f64::NEG_INFINITY, |top, d| {
                    *top = top.max(f(d));
                    Some(*top)
                })
                .collect()
        };
        Self { by_class, any, draft_ms: rising(&draft_ms), verify_ms: rising(&verify_ms) }
    }

    /// The depth to draft to below a path whose nodes (depth 1 first) have node classes
    /// `classes`: of that path's own depth and every deeper one (its further nodes priced at the
    /// any-class acceptance), the one with the best `(1 + Σ path probability) / (drafting +
    /// verify ms)`, the shallowest on ties (the time already spent drafting counts in each).
    /// With no classes it is the depth to draft before drafting, 0 for a plain step.
    pub fn best(&self, classes: &[usize]) -> usize {
        let (d, max) = (classes.len(), self.any.len());
        if d >= max {
            return d;
        }
        let (mut gain, mut path) = (1.0, 1.0);
        for (j, &k) in classes.iter().enumerate() {
            path *= self.by_class[j][k.min(NODE_CLASSES - 1)];
            gain += path;
        }
        let (mut best, mut best_rate) = (d, gain / (self.draft_ms[d] + self.verify_ms[d]));
        for e in d + 1..=max {
            path *= self.any[e - 1];
            gain += path;
            let rate = gain / (self.draft_ms[e] + self.verify_ms[e]);
            if rate > best_rate {
                (best, best_rate) = (e, rate);
            }
        }
        best
    }

    /// Whether to draft one more level below a path whose nodes have node classes `classes`:
    /// some deeper draft beats stopping here ([`DepthStop::best`]).
    pub fn more(&self, classes: &[usize]) -> bool {
        self.best(classes) > classes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::{chain, AcceptanceModel, PHRASE_FIRST, PHRASE_NEXT, UNCLASSED};
    use super::*;

    #[test]
    fn choice_keeps_nothing_for_hopeless_drafts_and_everything_for_sure_ones() {
        let cost = CostModel::from_points(&[(1, 2.0), (2, 2.4), (4, 3.2), (8, 5.0)]);
        let t = chain(7);
        let (keep, _) = choose(&t, &[0.01; 7], &cost, 0);
        assert!(keep.is_empty());
        let (keep, _) = choose(&t, &[1.0; 7], &cost, 0);
        assert_eq!(keep, (0..7).collect::<Vec<_>>());
        // A probe keeps the best node even when nothing pays.
        let (keep, _) = choose(&t, &[0.01; 7], &cost, 1);
        assert_eq!(keep, vec![0]);
    }

    #[test]
    fn chosen_nodes_are_closed_under_parents() {
        let mut t = DraftTree::new();
        for (tok, parent) in [(1, None), (2, Some(0)), (3, None), (4, Some(1)), (5, Some(2))] {
            t.push(tok, parent);
        }
        let acc = AcceptanceModel::default();
        let p = acc.path_probabilities(&t);
        let cost = CostModel::from_points(&[(1, 1.0), (6, 1.1)]);
        let (keep, _) = choose(&t, &p, &cost, 0);
        for &i in &keep {
            assert!(t.parents()[i].is_none_or(|q| keep.contains(&q)), "{keep:?}");
        }
        assert_eq!(subtree(&t, &keep).len(), keep.len());
    }

    #[test]
    fn a_depth_measured_cheaper_than_a_shallower_one_does_not_draw_the_draft_past_a_bad_node() {
        // Depth 3's drafting time measured in a loud moment (10 ms), depth 4's in a quiet one
        // (2 ms): below a node expected rejected, going on is never worth it.
        let mut by_class = vec![[0.9; NODE_CLASSES]; 6];
        by_class.iter_mut().for_each(|row| row[3] = 0.0);
        let draft = |d: usize| [0.0, 1.0, 2.0, 10.0, 2.0, 2.5, 3.0][d];
        let rule = DepthStop::new(by_class, vec![0.9; 6], draft, |d| 5.0 + 0.25 * d as f64);
        assert_eq!(rule.best(&[0, 0, 3]), 3);
        assert!(!rule.more(&[0, 0, 3]));
    }

    #[test]
    fn cached_phrases_are_priced_apart_from_the_draft_at_the_same_place() {
        // Post-use: a drafter's 4-token chains, always right, and in other steps its 2-token
        // chains with a 2-token cached phrase below the last, never right. The phrase's nodes
        // sit where the longer chains' third and fourth nodes do (same depth, rank 0).
        let long = chain(4);
        let mut short = chain(2);
        short.push(50, Some(1));
        short.push(51, Some(2));
        let (long_classes, short_classes) = ([0; 4], [0, 0, PHRASE_FIRST, PHRASE_NEXT]);
        let cost = CostModel::from_points(&[(1, 1.0), (8, 1.4), (64, 8.0)]);
        let (mut classed, mut unclassed) = (AcceptanceModel::default(), AcceptanceModel::default());
        for _ in 0..40 {
            classed.observe_nodes(0, Some(&long_classes), &long, &[0, 1, 2, 3]);
            classed.observe_nodes(0, Some(&short_classes), &short, &[0, 1]);
            unclassed.observe_nodes(0, Some(&[UNCLASSED; 4]), &long, &[0, 1, 2, 3]);
            unclassed.observe(&short, &[0, 1]);
        }
        let p = classed.path_probabilities_nodes(0, Some(&short_classes), &short);
        assert!(p[1] > 0.9 && p[2] < 0.05, "{p:?}");
        assert_eq!(choose(&short, &p, &cost, 0).0, vec![0, 1], "the phrase is pruned, the draft kept");
        let p = classed.path_probabilities_nodes(0, Some(&long_classes), &long);
        assert!(p[3] > 0.9, "the drafter's deep nodes keep their own record: {p:?}");
        // Without the classes (or with every node unclassed) the two are one record, half right.
        let p = unclassed.path_probabilities_nodes(0, Some(&[UNCLASSED; 4]), &short);
        assert!((0.3..0.7).contains(&p[2]), "{p:?}");
        assert_eq!(p, unclassed.path_probabilities(&short));
    }
}
