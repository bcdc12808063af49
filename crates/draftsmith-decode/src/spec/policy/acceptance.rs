//! The acceptance model of the draft policy: the chance that a draft node is accepted when its
//! parent is, by draft class, node class, depth and sibling rank, learned online
//! ([`AcceptanceModel`]), and the classes methods give their drafts and nodes.

use draftsmith_core::DraftTree;

use super::STALE_DRAFTS;

/// The weight, in tries, that a level's acceptance counts keep when they fade
/// ([`AcceptanceModel::fade`]): below the prior's [`PRIOR_TRIES`], so the parent's acceptance
/// leads until the level is tried again. (A level forgotten whole borrows the parent's alone,
/// and so does every level below it that was never tried: a drafter right for three tokens of
/// eight then drafted all eight every [`STALE_DRAFTS`] drafts.)
const FADED_TRIES: f64 = 0.5;
/// Deepest level and widest sibling rank with their own acceptance counts.
const DEPTHS: usize = 16;
const RANKS: usize = 4;

/// Beta counts of "accepted given the parent was", by draft class (the method's own signal for
/// the whole draft, [`Proposer::draft_class`](crate::spec::Proposer::draft_class)), node class
/// (its signal per node, [`Proposer::node_classes`](crate::spec::Proposer::node_classes)), depth
/// and sibling rank.
#[derive(Debug, Clone)]
pub struct AcceptanceModel {
    /// `(accepted, tried)` per `[cell(class, node class)][depth][rank]`; every observation also
    /// counts in its class's "any node class" cell.
    counts: Vec<Vec<[(f64, f64); RANKS]>>,
    /// Drafts observed so far.
    drafts: usize,
    /// Per `[class][depth]`: the drafts observed when a node at that depth was last tried (or
    /// its counts faded, [`AcceptanceModel::fade`]); 0 for never.
    last_try: Vec<[usize; DEPTHS]>,
}

/// Draft classes with their own counts (larger ones share the last).
const CLASSES: usize = 8;
/// Node classes with their own counts (larger ones share the last): a drafter's own four
/// (0 = surest … 3: [`probability_class`], [`agreement_class`]), the Post-use token cache's
/// two for the cached phrases it hangs on a draft ([`PHRASE_FIRST`], [`PHRASE_NEXT`]), and four
/// for text a model drafter's method copies beside its own candidates ([`COPIED`]).
pub const NODE_CLASSES: usize = 10;
/// The node class of a cached phrase's first token below a drafted node (or the root): a
/// phrase competes with the drafter there.
pub const PHRASE_FIRST: usize = 4;
/// The node class of a cached phrase's later tokens (below its first).
pub const PHRASE_NEXT: usize = 5;
/// The first of four node classes, `COPIED + agreement_class(..)`, for tokens a method with a
/// model drafter also copies from earlier text (TokenSwift's n-gram continuations beside its
/// heads' candidates): learned apart from the model's own classes, which say something else.
pub const COPIED: usize = 6;
/// A node a method that classes some of its nodes has no class for: priced and learned as a
/// node of any class.
pub const UNCLASSED: usize = usize::MAX;

/// The node class of a drafted token the drafter gave probability `p` (after its parent):
/// 0 from 0.8 on, 1 from 0.5, 2 from 0.25, 3 below.
pub fn probability_class(p: f64) -> usize {
    [0.8, 0.5, 0.25].iter().position(|&t| p >= t).unwrap_or(3)
}

/// The node class of a token copied from earlier text, from how many of the `seen` earlier
/// continuations of its context it `agrees` with: 0 when all of several agree, 1 when there
/// was only one, 2 when at least half agree, 3 below. (On the context tasks the first token
/// after a 3-token match was right 99 / 89 / 79 / 31 % of the time in these classes.)
pub fn agreement_class(agrees: usize, seen: usize) -> usize {
    match (agrees, seen) {
        (a, s) if s >= 2 && a >= s => 0,
        (_, s) if s <= 1 => 1,
        (a, s) if 2 * a >= s => 2,
        _ => 3,
    }
}

/// How many tokens of agreeing context [`context_class`] tells apart (longer ones share its last
/// class).
pub const CONTEXT_CAP: usize = 16;

/// The draft class of text copied after an earlier occurrence whose preceding `len` tokens
/// agree with the end of the text (0: no occurrence): 0–3 as they are, then 4–5, 6–9, 10–15 and
/// 16 on. On the context tasks (60 prompts, their `ar` answers) the first copied token was
/// accepted 22 / 45 / 70 % of the time after 1 / 2 / 3 agreeing tokens, 84–96 % after 4–15 and
/// 98 % after 16 or more, while the matched n-gram (at most 3 tokens) alone could not tell them
/// apart beyond 3.
pub fn context_class(len: usize) -> usize {
    match len {
        0..=3 => len,
        4..=5 => 4,
        6..=9 => 5,
        10..=15 => 6,
        _ => 7,
    }
}

/// Weight (in tries) of the prior each `(depth, rank)` borrows from the level above it (depth 1
/// borrows 0.5 from nowhere): a level never tried yet is expected to behave like its parent's,
/// so drafts that keep being accepted grow one level at a time.
const PRIOR_TRIES: f64 = 2.0;

impl Default for AcceptanceModel {
    fn default() -> Self {
        Self {
            counts: vec![vec![[(0.0, 0.0); RANKS]; DEPTHS]; CLASSES * (NODE_CLASSES + 1)],
            drafts: 0,
            last_try: vec![[0; DEPTHS]; CLASSES],
        }
    }
}

impl AcceptanceModel {
    /// The chance that a node at `depth` (1 = child of the root) and sibling `rank` is accepted
    /// when its parent is.
    pub fn p(&self, depth: usize, rank: usize) -> f64 {
        self.p_class(0, depth, rank)
    }

    /// [`AcceptanceModel::p`] for drafts of `class`, whatever the node's class.
    pub fn p_class(&self, class: usize, depth: usize, rank: usize) -> f64 {
        self.p_node(class, None, depth, rank)
    }

    /// [`AcceptanceModel::p_class`] for a node of node class `node` (`None`: any; a method
    /// told its depth before drafting does not know its nodes' classes yet).
    pub fn p_node(&self, class: usize, node: Option<usize>, depth: usize, rank: usize) -> f64 {
        let (d, r) = (depth.clamp(1, DEPTHS), rank.min(RANKS - 1));
        let prior = if d == 1 { 0.5 } else { self.p_node(class, node, d - 1, r) };
        let (a, t) = self.counts[cell(class, node)][d - 1][r];
        (a + PRIOR_TRIES * prior) / (t + PRIOR_TRIES)
    }

    /// Learns from one verified tree: every node whose parent was accepted (or is the root)
    /// was a try; the accepted ones succeeded.
    pub fn observe(&mut self, tree: &DraftTree, accepted: &[usize]) {
        self.observe_class(0, tree, accepted);
    }

    /// [`AcceptanceModel::observe`] for a draft of `class`.
    pub fn observe_class(&mut self, class: usize, tree: &DraftTree, accepted: &[usize]) {
        self.observe_nodes(class, None, tree, accepted);
    }

    /// [`AcceptanceModel::observe_class`] with the node class of every node of `tree` (`None`:
    /// the method gives none).
    pub fn observe_nodes(&mut self, class: usize, nodes: Option<&[usize]>, tree: &DraftTree, accepted: &[usize]) {
        let on_path = |i: usize| accepted.contains(&i);
        let outcome = |i: usize| tree.parents()[i].is_none_or(on_path).then(|| f64::from(u8::from(on_path(i))));
        self.observe_expected(class, nodes, tree, outcome);
    }

    /// Learns from one draft whose nodes' outcomes are known as chances: `outcome(i)` is `None`
    /// for a node that was not a try (its parent was not accepted, or it is not known), else
    /// the chance that it was accepted (1 or 0 for a verdict; under sampling, the probability
    /// the target gave its token, which counts as that fraction of a success — the same
    /// expectation as the draw, without its noise).
    pub fn observe_expected(
        &mut self,
        class: usize,
        nodes: Option<&[usize]>,
        tree: &DraftTree,
        outcome: impl Fn(usize) -> Option<f64>,
    ) {
        self.drafts += 1;
        let ranks = sibling_ranks(tree);
        for (i, &rank) in ranks.iter().enumerate() {
            let Some(success) = outcome(i) else { continue };
            let (d, r) = (tree.depths()[i].clamp(1, DEPTHS) - 1, rank.min(RANKS - 1));
            self.last_try[class.min(CLASSES - 1)][d] = self.drafts;
            let node = node_class(nodes, i);
            for c in std::iter::once(cell(class, None)).chain(node.map(|k| cell(class, Some(k)))) {
                let n = &mut self.counts[c][d][r];
                n.1 += 1.0;
                n.0 += success;
            }
        }
    }

    /// Whether nodes of drafts of `class` at `depth` were tried once, but not in the last
    /// [`STALE_DRAFTS`] drafts (nor faded since, [`AcceptanceModel::fade`]).
    pub fn stale(&self, class: usize, depth: usize) -> bool {
        let at = self.last_try[class.min(CLASSES - 1)][depth.clamp(1, DEPTHS) - 1];
        at > 0 && self.drafts - at >= STALE_DRAFTS
    }

    /// Scales the counts of drafts of `class` at `depth` (every node class and rank) down to
    /// at most `FADED_TRIES` tries, keeping their ratio: the depth then borrows most of its
    /// parent's acceptance again, as one never tried does, and the next tries decide. Counts as
    /// a try for [`AcceptanceModel::stale`].
    pub fn fade(&mut self, class: usize, depth: usize) {
        let (c, d) = (class.min(CLASSES - 1), depth.clamp(1, DEPTHS) - 1);
        // The class's cells: every node class's, then its "any node class" cell.
        for counts in &mut self.counts[cell(class, Some(0))..=cell(class, None)] {
            for n in &mut counts[d] {
                let f = (FADED_TRIES / n.1.max(FADED_TRIES)).min(1.0);
                (n.0, n.1) = (n.0 * f, n.1 * f);
            }
        }
        self.last_try[c][d] = self.drafts;
    }

    /// How many nodes of drafts of `class` at `depth` (any node class, any rank) were verified
    /// with their parent accepted.
    pub fn tries(&self, class: usize, depth: usize) -> f64 {
        self.counts[cell(class, None)][depth.clamp(1, DEPTHS) - 1].iter().map(|c| c.1).sum()
    }

    /// Path probability of every node of `tree`.
    pub fn path_probabilities(&self, tree: &DraftTree) -> Vec<f64> {
        self.path_probabilities_class(0, tree)
    }

    /// [`AcceptanceModel::path_probabilities`] for a draft of `class`.
    pub fn path_probabilities_class(&self, class: usize, tree: &DraftTree) -> Vec<f64> {
        self.path_probabilities_nodes(class, None, tree)
    }

    /// [`AcceptanceModel::path_probabilities_class`] with the node class of every node of
    /// `tree` (`None`: any).
    pub fn path_probabilities_nodes(&self, class: usize, nodes: Option<&[usize]>, tree: &DraftTree) -> Vec<f64> {
        let ranks = sibling_ranks(tree);
        let mut p = vec![0.0; tree.len()];
        for i in 0..tree.len() {
            let up = tree.parents()[i].map_or(1.0, |q| p[q]);
            p[i] = up * self.p_node(class, node_class(nodes, i), tree.depths()[i], ranks[i]);
        }
        p
    }
}

/// The counts cell of draft class `class` and node class `node` (each capped at its last;
/// `None`: any node class).
fn cell(class: usize, node: Option<usize>) -> usize {
    class.min(CLASSES - 1) * (NODE_CLASSES + 1) + node.map_or(NODE_CLASSES, |k| k.min(NODE_CLASSES - 1))
}

/// Node `i`'s class in `nodes` (`None` when there are none, or it is [`UNCLASSED`]).
fn node_class(nodes: Option<&[usize]>, i: usize) -> Option<usize> {
    nodes.and_then(|n| n.get(i).copied()).filter(|&k| k != UNCLASSED)
}

/// Each node's index among the children of its parent, in tree order.
fn sibling_ranks(tree: &DraftTree) -> Vec<usize> {
    let mut seen: std::collections::HashMap<Option<usize>, usize> = std::collections::HashMap::new();
    tree.parents()
        .iter()
        .map(|&p| {
            let r = seen.entry(p).or_insert(0);
            *r += 1;
            *r - 1
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::chain;
    use super::*;

    #[test]
    fn acceptance_model_learns_per_depth() {
        let mut acc = AcceptanceModel::default();
        let t = chain(3);
        for _ in 0..40 {
            acc.observe(&t, &[0]);
        }
        assert!(acc.p(1, 0) > 0.9);
        assert!(acc.p(2, 0) < 0.1);
        // Depth 3 was never tried (its parent was always rejected): it borrows depth 2's estimate.
        assert!((acc.p(3, 0) - acc.p(2, 0)).abs() < 1e-9);
        // Classes are learned apart.
        for _ in 0..40 {
            acc.observe_class(3, &t, &[0, 1, 2]);
            acc.observe_class(1, &t, &[]);
        }
        assert!(acc.p_class(3, 2, 0) > 0.9 && acc.p_class(1, 1, 0) < 0.1);
    }

    #[test]
    fn a_stale_level_fades_toward_its_parent() {
        let mut acc = AcceptanceModel::default();
        // Depth 2 rejected in six tries, depth 1 always accepted.
        for _ in 0..6 {
            acc.observe(&chain(2), &[0]);
        }
        assert!(!acc.stale(0, 2) && !acc.stale(0, 3), "tried just now, or never");
        // Then only one-token drafts, all accepted: depth 2 is not tried again.
        for _ in 1..STALE_DRAFTS {
            acc.observe(&chain(1), &[0]);
        }
        assert!(!acc.stale(0, 2));
        acc.observe(&chain(1), &[0]);
        assert!(acc.stale(0, 2) && !acc.stale(0, 1));
        let before = acc.p(2, 0);
        acc.fade(0, 2);
        // Its six rejections now weigh half a try against the prior's two (depth 1's ~0.95).
        let (p1, p2) = (acc.p(1, 0), acc.p(2, 0));
        assert!(before < 0.3 && (p2 - 2.0 * p1 / 2.5).abs() < 1e-9, "{before} → {p2} (depth 1 {p1})");
        assert!(!acc.stale(0, 2), "a fade counts as a try");
        // Fading again changes nothing: the counts are already at half a try.
        acc.fade(0, 2);
        assert!((acc.p(2, 0) - p2).abs() < 1e-12);
    }

    #[test]
    fn probability_classes() {
        assert_eq!([1.0, 0.8, 0.6, 0.3, 0.1, f64::NAN].map(probability_class), [0, 0, 1, 2, 3, 3]);
    }

    #[test]
    fn agreement_classes() {
        assert_eq!(
            [(3, 3), (1, 1), (0, 0), (2, 3), (1, 2), (1, 3)].map(|(a, s)| agreement_class(a, s)),
            [0, 1, 1, 2, 2, 3]
        );
    }

    #[test]
    fn acceptance_model_learns_per_node_class() {
        // Two siblings of equal rank shape: the node of class 0 is always accepted, class 2 never.
        let mut t = DraftTree::new();
        t.push(1, None);
        t.push(2, Some(0));
        t.push(3, None);
        let mut acc = AcceptanceModel::default();
        for _ in 0..40 {
            acc.observe_nodes(0, Some(&[0, 2, 2]), &t, &[0]);
        }
        assert!(acc.p_node(0, Some(0), 1, 0) > 0.9);
        assert!(acc.p_node(0, Some(2), 2, 0) < 0.1 && acc.p_node(0, Some(2), 1, 1) < 0.1);
        let p = acc.path_probabilities_nodes(0, Some(&[0, 2, 2]), &t);
        assert!(p[0] > 0.9 && p[1] < 0.1 && p[2] < 0.1, "{p:?}");
        // Class 0 at depth 2 was never tried: it borrows depth 1's estimate.
        assert!(acc.path_probabilities_nodes(0, Some(&[0, 0, 2]), &t)[1] > 0.8);
        // Whatever the node class: every observation counts (depth 1, rank 0 always accepted).
        assert!(acc.p(1, 0) > 0.9 && acc.p(2, 0) < 0.1 && acc.p(1, 1) < 0.1);
    }
}
