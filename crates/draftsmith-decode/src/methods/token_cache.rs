//! Post-use: a cache of verified phrases, reused as extra branches of the draft tree
//! ("Holistic token efficient speculative decoding: Post-use & Pre-cut").
//!
//! What the paper specifies, and is followed here:
//! - §5.1, Eq. 7: USEFUL tokens are draft tokens equal to the target's own greedy token at
//!   their position, `d̃_i = d_i`, whether or not they end up in the output (tokens after a
//!   rejection can still be useful: they are "recycled").
//! - §5.1: the cache `K` holds phrases of at most `β` tokens (β = 5), indexed by their first
//!   (key) token `c̃_0`, each key holding a last-in-first-out stack of phrases. The stack size is
//!   capped at `κ_phase` (20) and the number of keys at `κ_pool` (1000); over the caps the least
//!   used key is evicted from the pool and the earliest inserted phrase from a stack.
//! - §5.1 / Alg. 3: at verification the last `m` (= `K` = 3) draft tokens are anchors; up to `W`
//!   cached phrases keyed by each anchor's token are inserted after that anchor, so the target
//!   verifies them in the same pass (the tree mask plays the role of Fig. 6b); when the draft is
//!   accepted up to an anchor, the matching phrase extends the output.
//! - Alg. 1 line 32 / Alg. 3 line 20: the cache is updated with the verified sequences after
//!   every verification.
//!
//! Where the paper is silent, the choices made here:
//! - What is inserted: for the root and every non-useful node, the walk that greedy
//!   verification would make from it (useful children followed while the target agrees),
//!   closed by the target's own next token. Each such verified sequence is inserted as sliding
//!   windows `(s[i] | s[i+1..i+1+β])` of at least 2 tokens (one-token phrases add nothing over
//!   the bonus token). Only target-verified tokens are ever cached.
//! - "Used": a key's use count grows by one when a phrase is inserted or refreshed under it and
//!   when one of its phrases is accepted by the target; ties are broken by least recent use.
//! - Refresh: inserting a phrase that is already cached, or that extends a cached one, removes
//!   the old copy and pushes the new one on top; inserting a prefix of a cached phrase moves
//!   that phrase to the top instead.
//! - `W` (phrases per anchor) is not given a value; the default is 2. When the inner draft has
//!   fewer than `m` tokens the root (the last committed token) also serves as an anchor, so an
//!   empty draft can still be extended by the cache.
//! - Phrases are inserted as a trie below the anchor: a phrase that starts like the draft
//!   shares the draft's nodes and branches off where it differs.

use std::collections::{HashMap, VecDeque};

use draftsmith_core::DraftTree;

use crate::error::DecodeError;
use crate::spec::policy::{PHRASE_FIRST, PHRASE_NEXT, UNCLASSED};
use crate::spec::{DepthStop, DraftContext, DraftCost, HiddenState, Proposer, StepCosts, Verified};

/// Sizes of the phrase cache and of its use at the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenCacheConfig {
    /// β: longest cached phrase (tokens after the key).
    pub beta: usize,
    /// κ_phase: phrases kept per key.
    pub kappa_phrase: usize,
    /// κ_pool: keys kept in the pool.
    pub kappa_pool: usize,
    /// m: how many of the last draft tokens act as anchors at the target.
    pub anchors: usize,
    /// W: phrases retrieved per anchor.
    pub per_anchor: usize,
}

impl Default for TokenCacheConfig {
    fn default() -> Self {
        Self { beta: 5, kappa_phrase: 20, kappa_pool: 1000, anchors: 3, per_anchor: 2 }
    }
}

impl TokenCacheConfig {
    /// Checks that every size is at least 1.
    pub fn validate(&self) -> Result<(), DecodeError> {
        let sizes = [
            ("beta", self.beta),
            ("kappa_phrase", self.kappa_phrase),
            ("kappa_pool", self.kappa_pool),
            ("anchors", self.anchors),
            ("per_anchor", self.per_anchor),
        ];
        for (name, value) in sizes {
            if value == 0 {
                return Err(DecodeError::Parameter {
                    method: "token-cache",
                    name,
                    value: value.to_string(),
                    bound: "must be at least 1",
                });
            }
        }
        Ok(())
    }
}

/// The phrases stored under one key token (top of the stack = back).
#[derive(Debug, Clone, Default)]
struct Stack {
    phrases: VecDeque<Vec<u32>>,
    uses: u64,
    touched: u64,
}

/// The pool `K`: per-key stacks of verified phrases.
#[derive(Debug, Clone)]
pub struct PhraseCache {
    config: TokenCacheConfig,
    keys: HashMap<u32, Stack>,
    clock: u64,
}

impl PhraseCache {
    pub fn new(config: TokenCacheConfig) -> Self {
        Self { config, keys: HashMap::new(), clock: 0 }
    }

    pub fn config(&self) -> &TokenCacheConfig {
        &self.config
    }

    /// Number of keys in the pool.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Up to `w` phrases stored under `key`, most recent first.
    pub fn lookup(&self, key: u32, w: usize) -> Vec<&[u32]> {
        self.keys.get(&key).map_or_else(Vec::new, |s| s.phrases.iter().rev().take(w).map(Vec::as_slice).collect())
    }

    /// Pushes `phrase` (cut to β tokens) on `key`'s stack, evicting over the caps.
    pub fn insert(&mut self, key: u32, phrase: &[u32]) {
        let phrase = &phrase[..phrase.len().min(self.config.beta)];
        if phrase.is_empty() {
            return;
        }
        if !self.keys.contains_key(&key) && self.keys.len() >= self.config.kappa_pool {
            self.evict_key();
        }
        self.clock += 1;
        let stack = self.keys.entry(key).or_default();
        stack.uses += 1;
        stack.touched = self.clock;
        if let Some(i) = stack.phrases.iter().position(|p| p.starts_with(phrase)) {
            // Already cached (maybe longer): refresh it.
            let kept = stack.phrases.remove(i).expect("index from position");
            stack.phrases.push_back(kept);
            return;
        }
        stack.phrases.retain(|p| !phrase.starts_with(p));
        stack.phrases.push_back(phrase.to_vec());
        if stack.phrases.len() > self.config.kappa_phrase {
            stack.phrases.pop_front();
        }
    }

    /// Counts an accepted phrase as a use of `key`.
    pub fn credit(&mut self, key: u32) {
        self.clock += 1;
        if let Some(stack) = self.keys.get_mut(&key) {
            stack.uses += 1;
            stack.touched = self.clock;
        }
    }

    /// Removes the least used key (the least recently touched among equals).
    fn evict_key(&mut self) {
        if let Some(&key) = self.keys.iter().min_by_key(|(_, s)| (s.uses, s.touched)).map(|(k, _)| k) {
            self.keys.remove(&key);
        }
    }

    /// Inserts the sliding windows of a verified sequence `s` (key first): `(s[i] | s[i+1..])`
    /// cut to β, for every window of at least 2 tokens.
    pub fn insert_sequence(&mut self, s: &[u32]) {
        for i in 0..s.len().saturating_sub(2) {
            let end = (i + 1 + self.config.beta).min(s.len());
            self.insert(s[i], &s[i + 1..end]);
        }
    }

    /// Inserts every verified sequence of a verified tree (see [`verified_sequences`]).
    pub fn record(&mut self, root: u32, tree: &DraftTree, verified: &Verified<'_>) {
        for s in verified_sequences(root, tree, verified) {
            self.insert_sequence(&s);
        }
    }
}

/// The target-verified sequences of a tree: from the root and from every node that is not
/// useful, the key token followed by the useful chain the target agrees with and the target's
/// own next token. The sequence from the root is the committed output of the step.
pub fn verified_sequences(root: u32, tree: &DraftTree, verified: &Verified<'_>) -> Vec<Vec<u32>> {
    let starts = std::iter::once(None).chain((0..tree.len()).filter(|&i| !verified.is_useful(tree, i)).map(Some));
    starts
        .map(|start| {
            let mut seq = vec![start.map_or(root, |s| tree.tokens()[s])];
            let mut cur = start;
            loop {
                let want = verified.next_after(cur);
                seq.push(want);
                match (0..tree.len()).find(|&c| tree.parents()[c] == cur && tree.tokens()[c] == want) {
                    Some(c) => cur = Some(c),
                    None => break seq,
                }
            }
        })
        .collect()
}

/// For a proposer whose trees hold an inner proposer's tree `inner` first and its own branches
/// after it (Post-use's token cache, the copied context): tells `proposer` that the draft
/// policy kept `keep` of the whole tree, and returns the part of `inner` kept (still first).
pub(crate) fn prune_inner(proposer: &mut dyn Proposer, inner: &DraftTree, keep: &[usize]) -> DraftTree {
    let inner_keep: Vec<usize> = keep.iter().copied().filter(|&i| i < inner.len()).collect();
    if inner_keep.len() < inner.len() {
        proposer.pruned(&inner_keep);
    }
    crate::spec::policy::subtree(inner, &inner_keep)
}

/// As [`prune_inner`], for the target's verdict on the verified `tree`: tells `proposer` the
/// verdict on its part `inner` (an accepted path runs through the inner nodes first, as a
/// branch's nodes hang below them) and returns how many accepted nodes are inner ones; `None`
/// when the driver dropped the draft (the context's length limit), which `proposer` is told
/// as it is.
pub(crate) fn observe_inner(
    proposer: &mut dyn Proposer,
    inner: &DraftTree,
    ctx: &DraftContext<'_>,
    (tree, verified): (&DraftTree, &Verified<'_>),
) -> Option<usize> {
    let n = inner.len();
    if tree.len() < n {
        proposer.observe_verified(ctx, tree, verified);
        return None;
    }
    let accepted: Vec<usize> = verified.accepted.iter().copied().take_while(|&i| i < n).collect();
    // The distributions after the root and after each accepted inner node.
    let chances = verified.chances.map(|after| &after[..after.len().min(accepted.len() + 1)]);
    let verdict =
        Verified { accepted: &accepted, root_next: verified.root_next, node_next: &verified.node_next[..n], chances };
    proposer.observe_verified(ctx, inner, &verdict);
    Some(accepted.len())
}

/// Inserts `phrase` below `anchor` as a trie path, reusing existing children with the same
/// token. Returns the indices of the nodes created.
pub(crate) fn insert_branch(tree: &mut DraftTree, anchor: Option<usize>, phrase: &[u32]) -> Vec<usize> {
    let mut created = Vec::new();
    let mut cur = anchor;
    for &token in phrase {
        let existing = (0..tree.len()).find(|&c| tree.parents()[c] == cur && tree.tokens()[c] == token);
        cur = Some(match existing {
            Some(c) => c,
            None => {
                let c = tree.push(token, cur);
                created.push(c);
                c
            }
        });
    }
    created
}

/// Counters of what the cache contributed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenCacheStats {
    /// Verification steps in which at least one cached token was accepted.
    pub hit_steps: usize,
    /// Cached tokens accepted in total.
    pub hit_tokens: usize,
    /// Cached tokens added to draft trees in total.
    pub offered_tokens: usize,
}

/// Wraps any proposer: appends cached verified phrases below the last draft tokens.
pub struct TokenCache<P: Proposer> {
    inner: P,
    cache: PhraseCache,
    name: String,
    /// The inner proposer's last tree (its nodes are the first nodes of the extended tree).
    inner_tree: DraftTree,
    /// For each node added by the cache (index − inner length), the anchor key it hangs from.
    added_keys: Vec<u32>,
    stats: TokenCacheStats,
}

impl<P: Proposer> TokenCache<P> {
    pub fn new(inner: P, config: TokenCacheConfig) -> Result<Self, DecodeError> {
        config.validate()?;
        let name = format!("token-cache+{}", inner.name());
        Ok(Self {
            inner,
            cache: PhraseCache::new(config),
            name,
            inner_tree: DraftTree::new(),
            added_keys: Vec::new(),
            stats: TokenCacheStats::default(),
        })
    }

    pub fn inner(&self) -> &P {
        &self.inner
    }

    pub fn cache(&self) -> &PhraseCache {
        &self.cache
    }

    pub fn stats(&self) -> TokenCacheStats {
        self.stats
    }

    /// Anchor nodes: the last `m` of the root followed by the inner tree's deepest path.
    fn anchors(&self) -> Vec<Option<usize>> {
        let tree = &self.inner_tree;
        let deepest = (0..tree.len()).max_by_key(|&i| (tree.depths()[i], std::cmp::Reverse(i)));
        let path = deepest.map_or_else(Vec::new, |d| tree.path_to(d));
        let all: Vec<Option<usize>> = std::iter::once(None).chain(path.into_iter().map(Some)).collect();
        all[all.len().saturating_sub(self.cache.config().anchors)..].to_vec()
    }
}

impl<P: Proposer> Proposer for TokenCache<P> {
    fn name(&self) -> &str {
        &self.name
    }

    fn wants_hidden(&self) -> Option<HiddenState> {
        self.inner.wants_hidden()
    }

    fn wants_target_cache(&self) -> bool {
        self.inner.wants_target_cache()
    }

    fn set_sampling(&mut self, cfg: &crate::sampling::SamplingConfig) {
        self.inner.set_sampling(cfg);
    }

    fn depth_range(&self) -> Option<usize> {
        self.inner.depth_range()
    }

    fn limit_depth(&mut self, depth: usize) {
        self.inner.limit_depth(depth);
    }

    /// The inner drafter's own stopping (its nodes keep their classes here: see
    /// [`Proposer::node_classes`]).
    fn set_depth_stop(&mut self, rule: DepthStop) -> bool {
        self.inner.set_depth_stop(rule)
    }

    fn draft_class(&self, ctx: &DraftContext<'_>) -> usize {
        self.inner.draft_class(ctx)
    }

    fn lag(&self, ctx: &DraftContext<'_>) -> usize {
        self.inner.lag(ctx)
    }

    fn set_costs(&mut self, costs: &StepCosts) {
        self.inner.set_costs(costs);
    }

    /// The inner drafter's classes for its own nodes ([`UNCLASSED`] where it gives none), and
    /// for the cached phrases' nodes [`PHRASE_FIRST`] (a phrase's first token below a drafted
    /// node, where it competes with the drafter's own next token) or [`PHRASE_NEXT`]: the draft
    /// policy learns how often each pays and prunes the phrases apart from the draft.
    fn node_classes(&self, tree: &DraftTree) -> Option<Vec<usize>> {
        let n = self.inner_tree.len();
        if tree.len() != n + self.added_keys.len() || tree.tokens()[..n] != *self.inner_tree.tokens() {
            return None;
        }
        let mut classes = self.inner.node_classes(&self.inner_tree).unwrap_or_else(|| vec![UNCLASSED; n]);
        classes.extend((n..tree.len()).map(|i| {
            if tree.parents()[i].is_none_or(|p| p < n) {
                PHRASE_FIRST
            } else {
                PHRASE_NEXT
            }
        }));
        Some(classes)
    }

    fn extra_stats(&self) -> Vec<(&'static str, f64)> {
        let mut v = self.inner.extra_stats();
        // A ratio over the cache's lifetime (a proposer may serve many prompts).
        let s = self.stats();
        if s.offered_tokens > 0 {
            v.push(("cache_tokens_accepted_pct", 100.0 * s.hit_tokens as f64 / s.offered_tokens as f64));
        }
        v
    }

    fn last_cost(&self) -> Option<DraftCost> {
        Some(self.inner.last_cost().unwrap_or(DraftCost { calls: 0, generated: self.inner_tree.len() }))
    }

    fn propose(&mut self, ctx: &DraftContext<'_>) -> Result<DraftTree, crate::DecodeError> {
        self.inner_tree = self.inner.propose(ctx)?;
        let root = *ctx.tokens.last().expect("a context has at least one token");
        let mut tree = self.inner_tree.clone();
        self.added_keys.clear();
        for anchor in self.anchors() {
            let key = anchor.map_or(root, |a| tree.tokens()[a]);
            for phrase in self.cache.lookup(key, self.cache.config().per_anchor) {
                let created = insert_branch(&mut tree, anchor, phrase);
                self.added_keys.extend(created.iter().map(|_| key));
            }
        }
        self.stats.offered_tokens += self.added_keys.len();
        Ok(tree)
    }

    fn pruned(&mut self, keep: &[usize]) {
        // The inner proposal's nodes come first, then the cached phrases' (see `propose`).
        let n = self.inner_tree.len();
        self.inner_tree = prune_inner(&mut self.inner, &self.inner_tree, keep);
        self.added_keys = keep.iter().filter(|&&i| i >= n).map(|&i| self.added_keys[i - n]).collect();
    }

    fn observe_verified(&mut self, ctx: &DraftContext<'_>, tree: &DraftTree, verified: &Verified<'_>) {
        let n = self.inner_tree.len();
        if observe_inner(&mut self.inner, &self.inner_tree, ctx, (tree, verified)).is_none() {
            return;
        }
        let hits: Vec<u32> = verified.accepted.iter().filter(|&&i| i >= n).map(|&i| self.added_keys[i - n]).collect();
        if let Some(&key) = hits.first() {
            self.cache.credit(key);
            self.stats.hit_steps += 1;
            self.stats.hit_tokens += hits.len();
        }
        let root = *ctx.tokens.last().expect("a context has at least one token");
        self.cache.record(root, tree, verified);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> PhraseCache {
        PhraseCache::new(TokenCacheConfig { beta: 3, kappa_phrase: 2, kappa_pool: 2, anchors: 3, per_anchor: 4 })
    }

    #[test]
    fn stacks_are_lifo_capped_and_refreshed() {
        let mut c = small();
        c.insert(1, &[2, 3, 4, 5]);
        assert_eq!(c.lookup(1, 4), vec![&[2, 3, 4][..]], "cut to beta = 3");
        c.insert(1, &[6, 7]);
        assert_eq!(c.lookup(1, 4), vec![&[6, 7][..], &[2, 3, 4]], "most recent first");
        assert_eq!(c.lookup(1, 1), vec![&[6, 7][..]], "at most w phrases");
        c.insert(1, &[8]);
        assert_eq!(c.lookup(1, 4), vec![&[8][..], &[6, 7]], "kappa_phrase = 2 drops the oldest, [2,3,4]");
        c.insert(1, &[6, 7, 9]);
        assert_eq!(c.lookup(1, 4), vec![&[6, 7, 9][..], &[8]], "an extension replaces its prefix");
        c.insert(1, &[8]);
        assert_eq!(c.lookup(1, 4), vec![&[8][..], &[6, 7, 9]], "re-inserting refreshes");
        c.insert(1, &[6]);
        assert_eq!(c.lookup(1, 4), vec![&[6, 7, 9][..], &[8]], "a prefix refreshes the longer phrase");
        assert!(c.lookup(5, 4).is_empty());
    }

    #[test]
    fn pool_evicts_the_least_used_key() {
        let mut c = small();
        c.insert(1, &[2]);
        c.insert(1, &[3]); // key 1: 2 uses
        c.insert(4, &[5]); // key 4: 1 use
        c.insert(6, &[7]); // pool full (2 keys): evicts key 4
        assert_eq!(c.len(), 2);
        assert!(c.lookup(4, 4).is_empty());
        assert_eq!(c.lookup(1, 4).len(), 2);
        // Keys 1 (2 uses) and 6 (1 use); crediting 6 twice makes 1 the least used.
        c.credit(6);
        c.credit(6);
        c.insert(8, &[9]);
        assert!(c.lookup(1, 4).is_empty(), "key 1 evicted");
        assert_eq!(c.lookup(6, 4), vec![&[7][..]]);
        // Equal uses (6: 3, 8: 1 → credit 8 twice): the least recently touched goes.
        c.credit(8);
        c.credit(8);
        c.insert(10, &[11]);
        assert!(c.lookup(6, 4).is_empty(), "6 and 8 both have 3 uses; 6 was touched earlier");
    }

    #[test]
    fn sliding_windows_of_at_least_two_tokens() {
        let mut c = PhraseCache::new(TokenCacheConfig { beta: 2, ..TokenCacheConfig::default() });
        c.insert_sequence(&[1, 2, 3, 4]);
        assert_eq!(c.lookup(1, 4), vec![&[2, 3][..]]);
        assert_eq!(c.lookup(2, 4), vec![&[3, 4][..]]);
        assert!(c.lookup(3, 4).is_empty(), "[4] alone is a single token");
    }

    #[test]
    fn verified_sequences_follow_the_target_from_root_and_rejections() {
        // Chain 5 → 6 → 7 → 8 below root 4. Target: after 4 → 5, after 5 → 9 (rejects 6),
        // after 6 → 7 (useful, recycled), after 7 → 8 (useful), after 8 → 2.
        let tree = DraftTree::chain(&[5, 6, 7, 8]);
        let v = Verified { accepted: &[0], root_next: 5, node_next: &[9, 7, 8, 2], chances: None };
        let seqs = verified_sequences(4, &tree, &v);
        assert_eq!(seqs, vec![vec![4, 5, 9], vec![6, 7, 8, 2]]);
        let mut c = PhraseCache::new(TokenCacheConfig::default());
        c.record(4, &tree, &v);
        assert_eq!(c.lookup(4, 4), vec![&[5, 9][..]]);
        assert_eq!(c.lookup(6, 4), vec![&[7, 8, 2][..]]);
        assert_eq!(c.lookup(7, 4), vec![&[8, 2][..]]);
    }

    /// Drafts a fixed chain.
    struct Fixed(Vec<u32>);
    impl Proposer for Fixed {
        fn name(&self) -> &str {
            "fixed"
        }
        fn propose(&mut self, _ctx: &DraftContext<'_>) -> Result<DraftTree, crate::DecodeError> {
            Ok(DraftTree::chain(&self.0))
        }
    }

    #[test]
    fn phrases_hang_below_the_last_anchors_and_hits_are_counted() {
        let mut tc = TokenCache::new(Fixed(vec![1, 2, 3, 4]), TokenCacheConfig::default()).unwrap();
        tc.cache.insert(4, &[7, 8]);
        tc.cache.insert(2, &[3, 9]); // shares node "3" with the draft, branches to 9
        tc.cache.insert(1, &[5]); // anchor 1 is not among the last 3 draft tokens
        let tokens = [0u32];
        let ctx = DraftContext { tokens: &tokens, prompt_len: 1, hidden: None, target_cache: None };
        let tree = tc.propose(&ctx).unwrap();
        assert_eq!(tree.tokens(), &[1, 2, 3, 4, 9, 7, 8]);
        assert_eq!(tree.parents(), &[None, Some(0), Some(1), Some(2), Some(2), Some(3), Some(5)]);
        // Target accepts the draft and the cached [7, 8]: path 0,1,2,3,5,6.
        let v =
            Verified { accepted: &[0, 1, 2, 3, 5, 6], root_next: 1, node_next: &[2, 3, 4, 7, 0, 8, 6], chances: None };
        tc.observe_verified(&ctx, &tree, &v);
        let (u, first, next) = (UNCLASSED, PHRASE_FIRST, PHRASE_NEXT);
        assert_eq!(tc.node_classes(&tree), Some(vec![u, u, u, u, first, first, next]), "the phrases get classes");
        assert_eq!(tc.node_classes(&DraftTree::chain(&[1])), None, "another tree has none");
        assert_eq!(tc.stats(), TokenCacheStats { hit_steps: 1, hit_tokens: 2, offered_tokens: 3 });
        assert_eq!(tc.extra_stats(), vec![("cache_tokens_accepted_pct", 200.0 / 3.0)]);
        assert_eq!(tc.cache.lookup(0, 4), vec![&[1, 2, 3, 4, 7][..]], "the committed output, cut to beta");
    }
}
