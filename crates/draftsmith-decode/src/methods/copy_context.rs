//! The context's continuation drafted beside a drafter's own tokens: [`WithCopy`] wraps any
//! proposer and hangs prompt lookup's continuation of the context (the text that followed the
//! earlier occurrence of the context's last n-gram whose context agrees longest with the end of
//! the text) from the root of each of its trees, sharing the drafter's nodes where the two
//! agree.
//!
//! A drafter and the copy fail in different places: a trained drafter guesses the next words
//! of an answer, the copy repeats names, code and phrases the prompt or the answer already
//! holds. The copy costs no drafter call, and its nodes are in the [`COPIED`] node classes
//! (by how many earlier occurrences agree with each token), so the `auto` draft policy learns
//! how often they pay and prunes them apart from the drafter's own. The target verifies every
//! node, so the output is the target's whatever the copy proposes.

use draftsmith_core::DraftTree;

use super::prompt_lookup::PromptLookup;
use super::token_cache::{insert_branch, observe_inner, prune_inner};
use crate::spec::policy::{COPIED, UNCLASSED};
use crate::spec::{DepthStop, DraftContext, DraftCost, HiddenState, Proposer, StepCosts, Verified};

/// How the context's continuation is copied: prompt lookup's longest matching suffix of at
/// most `max_ngram` tokens, and the `len` tokens after its best-matched earlier occurrence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyContext {
    pub max_ngram: usize,
    pub len: usize,
}

/// What the copied continuation added over a generation: verified steps, accepted draft
/// tokens, and of those the ones only the copy drafted (its own nodes), and the steps whose
/// accepted path ran through such a node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CopyStats {
    pub steps: usize,
    pub accepted: usize,
    pub copied_accepted: usize,
    pub copy_steps: usize,
}

impl CopyStats {
    /// `("copy_accepted_pct", …)`: the share of accepted draft tokens only the copy drafted, and
    /// `("copy_steps_pct", …)`: the share of steps that accepted one.
    fn extra_stats(&self) -> Vec<(&'static str, f64)> {
        let pct = |a: usize, b: usize| if b == 0 { 0.0 } else { 100.0 * a as f64 / b as f64 };
        vec![
            ("copy_accepted_pct", pct(self.copied_accepted, self.accepted)),
            ("copy_steps_pct", pct(self.copy_steps, self.steps)),
        ]
    }
}

/// A proposer with the context's continuation drafted beside its trees (see the module).
pub struct WithCopy {
    inner: Box<dyn Proposer>,
    lookup: PromptLookup,
    /// The inner proposer's part of the last tree (its nodes come first in the tree).
    inner_tree: DraftTree,
    /// The node class of every node of the last tree: the inner proposer's for its nodes
    /// ([`UNCLASSED`] where it gives none), [`COPIED`] + agreement for the copy's.
    classes: Vec<usize>,
    /// The next proposal is the copy alone (`limit_depth(0)`, a draft policy's call-free step).
    copy_only: bool,
    /// What the last proposal cost the inner proposer (nothing for the copy alone).
    last_cost: Option<DraftCost>,
    stats: CopyStats,
}

impl WithCopy {
    pub fn new(inner: Box<dyn Proposer>, copy: CopyContext) -> Self {
        Self {
            inner,
            lookup: PromptLookup::new(copy.max_ngram, 1, copy.len),
            inner_tree: DraftTree::new(),
            classes: Vec::new(),
            copy_only: false,
            last_cost: None,
            stats: CopyStats::default(),
        }
    }

    pub fn inner(&self) -> &dyn Proposer {
        self.inner.as_ref()
    }

    /// What the copy added so far.
    pub fn stats(&self) -> CopyStats {
        self.stats
    }
}

impl Proposer for WithCopy {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn draft_len(&self) -> Option<usize> {
        self.inner.draft_len()
    }

    fn wants_hidden(&self) -> Option<HiddenState> {
        self.inner.wants_hidden()
    }

    fn wants_target_cache(&self) -> bool {
        self.inner.wants_target_cache()
    }

    fn depth_range(&self) -> Option<usize> {
        self.inner.depth_range()
    }

    /// `0`: the next proposal is the copy alone, without the inner proposer's calls.
    fn limit_depth(&mut self, depth: usize) {
        self.copy_only = depth == 0 && self.inner.depth_range().is_some();
        if !self.copy_only {
            self.inner.limit_depth(depth);
        }
    }

    fn set_depth_stop(&mut self, rule: DepthStop) -> bool {
        self.inner.set_depth_stop(rule)
    }

    fn set_costs(&mut self, costs: &StepCosts) {
        self.inner.set_costs(costs);
    }

    /// The inner proposer's, and the copy's share of the accepted tokens ([`CopyStats`]).
    fn extra_stats(&self) -> Vec<(&'static str, f64)> {
        let mut v = self.inner.extra_stats();
        v.extend(self.stats.extra_stats());
        v
    }

    fn set_sampling(&mut self, cfg: &crate::sampling::SamplingConfig) {
        self.inner.set_sampling(cfg);
    }

    /// The inner proposer's calls; the copy is not drafted by a model (like a token cache's
    /// phrases, its tokens are not counted as generated).
    fn last_cost(&self) -> Option<DraftCost> {
        self.last_cost
    }

    fn propose(&mut self, ctx: &DraftContext<'_>) -> Result<DraftTree, crate::DecodeError> {
        if std::mem::take(&mut self.copy_only) {
            self.inner_tree = DraftTree::new();
            self.last_cost = Some(DraftCost::default());
        } else {
            self.inner_tree = self.inner.propose(ctx)?;
            let inner = self.inner.last_cost();
            self.last_cost = Some(inner.unwrap_or(DraftCost { calls: 0, generated: self.inner_tree.len() }));
        }
        let n = self.inner_tree.len();
        self.classes = self.inner.node_classes(&self.inner_tree).unwrap_or_else(|| vec![UNCLASSED; n]);
        let chain = self.lookup.propose(ctx)?;
        let agreement = self.lookup.node_classes(&chain).unwrap_or_else(|| vec![0; chain.len()]);
        let mut tree = self.inner_tree.clone();
        let created = insert_branch(&mut tree, None, chain.tokens());
        // The created nodes are the chain's last ones (its first may be the inner tree's).
        let shared = chain.len() - created.len();
        self.classes.extend(agreement[shared..].iter().map(|&k| COPIED + k));
        Ok(tree)
    }

    /// The inner proposer's answer, or for one told its depth, whether the copy alone (its
    /// draft at depth 0) has anything to draft.
    fn drafts_without_calls(&mut self, ctx: &DraftContext<'_>) -> bool {
        let copy = self.inner.depth_range().is_some() && !self.lookup.lookup(ctx.tokens).is_empty();
        copy || self.inner.drafts_without_calls(ctx)
    }

    fn draft_class(&self, ctx: &DraftContext<'_>) -> usize {
        self.inner.draft_class(ctx)
    }

    fn lag(&self, ctx: &DraftContext<'_>) -> usize {
        self.inner.lag(ctx)
    }

    fn node_classes(&self, tree: &DraftTree) -> Option<Vec<usize>> {
        (tree.len() == self.classes.len()).then(|| self.classes.clone())
    }

    fn pruned(&mut self, keep: &[usize]) {
        // The inner proposal's nodes come first, then the copy's (see `propose`).
        self.inner_tree = prune_inner(self.inner.as_mut(), &self.inner_tree, keep);
        self.classes = keep.iter().map(|&i| self.classes[i]).collect();
    }

    fn observe_verified(&mut self, ctx: &DraftContext<'_>, tree: &DraftTree, verified: &Verified<'_>) {
        let inner = observe_inner(self.inner.as_mut(), &self.inner_tree, ctx, (tree, verified));
        // Nothing counted when the driver dropped the draft or nothing was drafted.
        let Some(inner_accepted) = inner.filter(|_| !tree.is_empty()) else { return };
        let copied = verified.accepted.len() - inner_accepted;
        let s = &mut self.stats;
        s.steps += 1;
        s.accepted += verified.accepted.len();
        s.copied_accepted += copied;
        s.copy_steps += usize::from(copied > 0);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::spec::policy::subtree;

    /// What the inner proposer was told: prunes, then verified trees and accepted nodes.
    #[derive(Default)]
    struct Seen {
        pruned: Vec<Vec<usize>>,
        verified: Vec<(Vec<u32>, Vec<usize>)>,
    }

    /// Drafts a fixed chain and records what it is told.
    struct Fixed(Vec<u32>, Arc<Mutex<Seen>>);

    impl Proposer for Fixed {
        fn name(&self) -> &str {
            "fixed"
        }

        fn propose(&mut self, _ctx: &DraftContext<'_>) -> Result<DraftTree, crate::DecodeError> {
            Ok(DraftTree::chain(&self.0))
        }

        fn pruned(&mut self, keep: &[usize]) {
            self.1.lock().unwrap().pruned.push(keep.to_vec());
        }

        fn observe_verified(&mut self, _ctx: &DraftContext<'_>, tree: &DraftTree, verified: &Verified<'_>) {
            self.1.lock().unwrap().verified.push((tree.tokens().to_vec(), verified.accepted.to_vec()));
        }
    }

    #[test]
    fn the_copy_hangs_beside_the_inner_tree_and_the_inner_proposer_sees_only_its_part() {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let mut p = WithCopy::new(Box::new(Fixed(vec![3, 5], seen.clone())), CopyContext { max_ngram: 3, len: 3 });
        // `1 2` occurred before, followed by `3 9 1`: the copy shares the inner chain's `3`.
        let tokens = [1, 2, 3, 9, 1, 2];
        let ctx = DraftContext { tokens: &tokens, prompt_len: 1, hidden: None, target_cache: None };
        let tree = p.propose(&ctx).unwrap();
        assert_eq!(tree.tokens(), &[3, 5, 9, 1]);
        assert_eq!(tree.parents(), &[None, Some(0), Some(0), Some(2)]);
        let classes = p.node_classes(&tree).unwrap();
        assert_eq!(&classes[..2], &[UNCLASSED, UNCLASSED]);
        assert!(classes[2..].iter().all(|&c| c >= COPIED));
        // The policy keeps the shared node and the copy's first: the inner one keeps its first.
        p.pruned(&[0, 2]);
        let kept = subtree(&tree, &[0, 2]);
        assert_eq!(p.node_classes(&kept).unwrap()[0], UNCLASSED);
        // The target takes `3 9`: the inner proposer sees `3` accepted in its own tree.
        let verified = Verified { accepted: &[0, 1], root_next: 3, node_next: &[9, 4], chances: None };
        p.observe_verified(&ctx, &kept, &verified);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.pruned, vec![vec![0]]);
        assert_eq!(seen.verified, vec![(vec![3], vec![0])]);
        assert_eq!(p.stats(), CopyStats { steps: 1, accepted: 2, copied_accepted: 1, copy_steps: 1 });
        let stats = p.extra_stats();
        assert_eq!(stats, vec![("copy_accepted_pct", 50.0), ("copy_steps_pct", 100.0)]);
    }

    #[test]
    fn a_dropped_draft_reaches_the_inner_proposer_as_it_is() {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let mut p = WithCopy::new(Box::new(Fixed(vec![7], seen.clone())), CopyContext { max_ngram: 3, len: 4 });
        let tokens = [1, 2, 1];
        let ctx = DraftContext { tokens: &tokens, prompt_len: 1, hidden: None, target_cache: None };
        assert!(!p.propose(&ctx).unwrap().is_empty());
        // The driver verified an empty tree (the context's length limit).
        p.observe_verified(
            &ctx,
            &DraftTree::new(),
            &Verified { accepted: &[], root_next: 4, node_next: &[], chances: None },
        );
        assert_eq!(seen.lock().unwrap().verified, vec![(vec![], vec![])]);
        assert_eq!(p.stats(), CopyStats::default());
    }
}
