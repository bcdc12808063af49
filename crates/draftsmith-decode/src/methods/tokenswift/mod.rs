//! TokenSwift (Wu et al., 2025, "From Hours to Minutes: Lossless Acceleration of Ultra Long
//! Sequence Generation up to 100K Tokens"): multi-token self-drafting with trained heads,
//! token reutilization, a dynamic partial KV cache for drafting and a contextual penalty.
//!
//! One step (reference `SpecLong`, tree branch): the target runs on the last committed token
//! alone, attending to a [draft KV cache](kv) instead of its full cache; its own next-token
//! distribution p0 and the [heads](draftsmith_heads::tokenswift) (pre-norm hidden state → head
//! i → the target's LM head) give γ + 1 distributions, whose top candidates form a
//! [cartesian tree](tree) (`[1, 3, 3, 3]`: 40 nodes); the most frequent [n-gram](ngram)
//! continuations of p0's top token hang below it as extra branches. The driver verifies the
//! whole tree in one pass of the target with its full cache.
//!
//! With [`KvMode::VerifyPass`] there is no draft forward: the heads read the verification
//! pass's own state at the last accepted token, whose next token (p0's) that pass already
//! committed; the tree is the heads' levels below it and the n-gram continuations of the last
//! token. A step then costs one pass of the target instead of two, for a tree one level
//! shallower.
//!
//! Differences from the reference, all for losslessness or clarity:
//! - Verification is the engine's (greedy: exact match; sampling: recursive rejection
//!   sampling over the tree), so the output has exactly the target's distribution; the
//!   reference samples every (row, position) of the tree independently, which is biased
//!   toward the draft. Siblings are distinct tokens after the n-gram chains are merged into
//!   the tree, so there is no tie between equally long candidates to break.
//! - The contextual penalty is applied to every drafted distribution and, in verification, to
//!   every node with the window ending at that node (the reference penalizes row 0 only).
//! - The draft forward's fed token's keys and values are dropped after drafting; committed
//!   tokens are copied from the full cache, as the reference's `update_retri_cache` does.

pub mod kv;
pub mod ngram;
pub mod tree;

use std::path::Path;

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use draftsmith_core::DraftTree;
use draftsmith_heads::tokenswift::{load_tokenswift, TokenSwiftFile, TokenSwiftHeads};
use draftsmith_heads::TargetIdentity;
use draftsmith_model::{AttentionMask, KvCache, Model, ModelError};

use kv::DraftKv;
pub use kv::KvMode;
use ngram::NgramTable;

use super::token_cache::insert_branch;
use crate::error::DecodeError;
use crate::method::Method;
use crate::sampling::apply_repetition_penalty;
use crate::spec::policy::COPIED;
use crate::spec::{agreement_class, probability_class, DraftContext, DraftCost, HiddenState, Proposer, Verified};

/// Exported TokenSwift heads, loaded for a target.
#[derive(Debug)]
pub struct LoadedTokenSwift<B: Backend> {
    pub heads: TokenSwiftHeads<B>,
    pub file: TokenSwiftFile,
}

impl<B: Backend> LoadedTokenSwift<B> {
    /// Loads `dir` (`drafter.safetensors` + `config.json`), refusing heads trained for another target.
    pub fn load(dir: &Path, target: &TargetIdentity, device: &B::Device) -> Result<Self, DecodeError> {
        let (heads, file) = load_tokenswift::<B>(dir, Some(target), device)?;
        Ok(Self { heads, file })
    }
}

/// The `tokenswift` method's settings; each mechanism can be switched off for ablations.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenSwiftSettings {
    /// Candidates per depth: `tree[0]` from p0, `tree[i]` from head i (paper: `[1, 3, 3, 3]`).
    pub tree: Vec<usize>,
    /// n-gram continuations added per step (paper: k = 20; 0 = no token reutilization).
    pub ngram_topk: usize,
    /// n of the n-gram table (paper: 4 = γ + 1; at least the tree's depth).
    pub ngram_n: usize,
    /// Tokens of text the n-gram continuations are looked up after, `1 ..= n − 1` (paper: 1,
    /// p0's top token; with verify-pass the last tokens of the text): a continuation is the
    /// `n − ngram_key` tokens that followed them.
    pub ngram_key: usize,
    /// The table counts n-grams only this many tokens behind the end of the text (set to the
    /// penalty window W when a penalty is on, as the reference does; 0 otherwise).
    pub ngram_lag: usize,
    pub kv_mode: KvMode,
    /// B: draft-cache budget in tokens (partial modes).
    pub kv_budget: usize,
    /// S: sink tokens always kept (reference: 16).
    pub kv_sinks: usize,
    /// Contextual penalty θ on drafted distributions (1 = off) over the last `penalty_window`
    /// tokens (0 = all); the driver sets them from the target's sampler.
    pub penalty: f32,
    pub penalty_window: usize,
    /// Verify-pass only: when every counted continuation of the lookup key agrees (at least
    /// two, [`agreement_class`] 0), draft that continuation alone without running the heads.
    pub skip_heads_on_agreement: bool,
}

impl Default for TokenSwiftSettings {
    fn default() -> Self {
        Self {
            tree: vec![1, 3, 3, 3],
            ngram_topk: 20,
            ngram_n: 4,
            ngram_key: 1,
            ngram_lag: 0,
            kv_mode: KvMode::Dynamic,
            kv_budget: 1024,
            kv_sinks: 16,
            penalty: 1.0,
            penalty_window: 0,
            skip_heads_on_agreement: false,
        }
    }
}

/// n of the n-gram table of verify-pass under the `auto` draft policy: continuations of up to
/// 13 tokens, which the policy prunes node by node to what their measured acceptance pays for.
/// From a 1536-token book prefix to 4096 greedy tokens (SmolLM2-135M, whose greedy text there
/// repeats itself), n = 4 / 8 looked up after one token ran 1.40 / 1.60× `ar`, n = 12 / 16 after
/// three tokens 2.42 / 2.69× (session 35).
pub const AUTO_NGRAM_N: usize = 16;
/// The lookup key of verify-pass under `auto`, in tokens: continuations of the last three tokens
/// agree far more often than those of the last one, so more steps draft copies alone (first
/// 1024 tokens of the run above: τ 2.5 with n = 4 after one token, 5.2 / 7.4 with n = 8 / 12
/// after three, session 35).
pub const AUTO_NGRAM_KEY: usize = 3;

/// Counters over a generation (reset with the proposer's state on a new prompt).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenSwiftStats {
    pub steps: usize,
    /// Accepted draft tokens (bonus excluded).
    pub accepted: usize,
    /// Accepted tokens of steps whose accepted path ran through an n-gram branch.
    pub ngram_accepted: usize,
    pub ngram_steps: usize,
    /// Partial-cache selections made.
    pub reselections: usize,
}

impl TokenSwiftStats {
    /// The paper's α (Eq. 4): accepted ÷ ((γ + 1) · steps), `depth` = γ + 1.
    pub fn alpha(&self, depth: usize) -> f64 {
        self.accepted as f64 / (depth * self.steps).max(1) as f64
    }

    /// The paper's n-gram acceptance rate β, on the same denominator.
    pub fn beta(&self, depth: usize) -> f64 {
        self.ngram_accepted as f64 / (depth * self.steps).max(1) as f64
    }
}

/// The `tokenswift` proposer.
pub struct TokenSwiftProposer<B: Backend> {
    target: Model<B>,
    heads: TokenSwiftHeads<B>,
    settings: TokenSwiftSettings,
    /// The draft forward's cache (`None` with [`KvMode::VerifyPass`]: no draft forward).
    kv: Option<DraftKv<B>>,
    ngrams: NgramTable,
    /// The prompt of the generation in progress (a different one resets the state).
    prompt: Vec<u32>,
    /// Each node of the last tree's class for the draft policy: a level's candidate by its
    /// probability there ([`probability_class`]), an n-gram continuation's tokens by how many
    /// of the key's counted continuations it is ([`COPIED`] + [`agreement_class`]).
    classes: Vec<usize>,
    stats: TokenSwiftStats,
    cost: DraftCost,
}

impl<B: Backend> TokenSwiftProposer<B> {
    pub fn new(
        target: &Model<B>,
        loaded: &LoadedTokenSwift<B>,
        settings: TokenSwiftSettings,
    ) -> Result<Self, DecodeError> {
        let bad = |param: &'static str, value: String, problem: &str| DecodeError::InvalidParam {
            method: Method::TokenSwift.to_string(),
            param,
            value,
            problem: problem.into(),
        };
        let heads = loaded.heads.heads.len();
        if settings.tree.len() != heads + 1 || settings.tree.contains(&0) {
            return Err(bad(
                "tree",
                format!("{:?}", settings.tree),
                &format!("needs {} positive entries: p0 and each of the {heads} heads", heads + 1),
            ));
        }
        if settings.ngram_n < settings.tree.len() {
            return Err(bad(
                "ngram_n",
                settings.ngram_n.to_string(),
                "n-gram chains must span the tree depth (n = number of heads + 1)",
            ));
        }
        if settings.ngram_key == 0 || settings.ngram_key >= settings.ngram_n {
            return Err(bad("ngram_key", settings.ngram_key.to_string(), "the lookup key needs 1 ..= n − 1 tokens"));
        }
        if settings.kv_budget <= settings.kv_sinks {
            return Err(bad("kv_budget", settings.kv_budget.to_string(), "must exceed the sink tokens"));
        }
        let c = target.config();
        if loaded.file.vocab_size != c.vocab_size || loaded.file.hidden_size != c.hidden_size {
            return Err(DecodeError::Drafter(format!(
                "TokenSwift heads for vocab {} / hidden {} do not fit the target (vocab {} / hidden {})",
                loaded.file.vocab_size, loaded.file.hidden_size, c.vocab_size, c.hidden_size
            )));
        }
        let kv = (settings.kv_mode != KvMode::VerifyPass)
            .then(|| DraftKv::new(target, settings.kv_mode, settings.kv_budget, settings.kv_sinks));
        Ok(Self {
            target: target.clone(),
            heads: loaded.heads.clone(),
            ngrams: NgramTable::new(settings.ngram_n),
            settings,
            kv,
            prompt: Vec::new(),
            classes: Vec::new(),
            stats: TokenSwiftStats::default(),
            cost: DraftCost::default(),
        })
    }

    pub fn stats(&self) -> TokenSwiftStats {
        TokenSwiftStats { reselections: self.kv.as_ref().map_or(0, |kv| kv.reselections), ..self.stats }
    }

    pub fn settings(&self) -> &TokenSwiftSettings {
        &self.settings
    }

    /// The text the n-gram continuations are looked up after: the last `ngram_key` tokens of
    /// `tokens` followed by `next` when there is one (p0's top candidate), as many as there are.
    fn key(&self, tokens: &[u32], next: Option<u32>) -> Vec<u32> {
        let m = self.settings.ngram_key - usize::from(next.is_some());
        let mut key = tokens[tokens.len().saturating_sub(m)..].to_vec();
        key.extend(next);
        key
    }

    /// A new prompt (a different one than the generation in progress) resets the state.
    fn follow_prompt(&mut self, ctx: &DraftContext<'_>) {
        if ctx.tokens[..ctx.prompt_len] != self.prompt[..] {
            self.prompt = ctx.tokens[..ctx.prompt_len].to_vec();
            if let Some(kv) = self.kv.as_mut() {
                kv.reset();
            }
            self.ngrams.clear();
            self.stats = TokenSwiftStats::default();
        }
    }

    /// Draft tokens on the tree's deepest path: γ + 1 (p0 and the heads), γ with
    /// [`KvMode::VerifyPass`] (the heads alone).
    fn depth(&self) -> usize {
        self.settings.tree.len() - usize::from(self.kv.is_none())
    }

    /// p0 and every head's logits after the last committed token, from a forward on the draft
    /// cache (the target's final-normed state and every head's state, [projected](Self::project)
    /// together).
    fn distributions(&mut self, tokens: &[u32], full: &KvCache<B>) -> Result<Vec<Vec<f32>>, ModelError> {
        let kv = self.kv.as_mut().expect("a draft forward has a draft cache");
        kv.prepare(full);
        let before = kv.cache_mut().len();
        let root = *tokens.last().expect("a context has at least one token");
        let out = self.target.forward_hidden(&[root], &[tokens.len() - 1], &AttentionMask::Causal, kv.cache_mut());
        kv.after_draft(before, full, self.target.config().num_heads);
        let out = out?;
        let mut states = vec![out.hidden_final];
        states.extend(self.heads.states(out.hidden_prenorm));
        Ok(self.project(states))
    }

    /// Every head's logits from the verification pass's pre-norm state `hidden` at the token
    /// before the last ([`KvMode::VerifyPass`]): head i's row is the distribution i tokens
    /// after the last one.
    fn head_distributions(&self, hidden: &[f32]) -> Vec<Vec<f32>> {
        let device = self.target.device().clone();
        let h0 = Tensor::<B, 1>::from_floats(hidden, &device).reshape([1, hidden.len()]);
        self.project(self.heads.states(h0))
    }

    /// `states` (`[1, hidden]` each) through the target's LM head as one product: on the
    /// quantized path its weights stream once for all of them (a row's logits do not depend on
    /// the rows beside it).
    fn project(&self, states: Vec<Tensor<B, 2>>) -> Vec<Vec<f32>> {
        let rows = states.len();
        let states = Tensor::cat(states, 0);
        let vocab = self.target.config().vocab_size;
        let logits = match self.target.project_to_vocab_host(&draftsmith_model::host_f32(states.clone()), rows) {
            Some(logits) => logits,
            None => draftsmith_model::host_f32(self.target.project_to_vocab(states)),
        };
        logits.chunks(vocab).map(<[f32]>::to_vec).collect()
    }

    /// The tree of the levels' candidates ([`tree::cartesian`]) with each level's candidates,
    /// the nodes' classes set by their probabilities.
    fn head_tree(&mut self, ctx: &DraftContext<'_>) -> Result<(DraftTree, Vec<Vec<u32>>), DecodeError> {
        let (mut rows, branching) = self.draft_rows(ctx)?;
        let branching = branching.to_vec();
        if self.settings.penalty != 1.0 {
            let w = self.settings.penalty_window;
            let span = if w == 0 { ctx.tokens } else { &ctx.tokens[ctx.tokens.len().saturating_sub(w)..] };
            rows.iter_mut().for_each(|r| apply_repetition_penalty(r, span, self.settings.penalty));
        }
        let candidates: Vec<Vec<u32>> = rows.iter().zip(&branching).map(|(r, &k)| top_k(r, k)).collect();
        let tree = tree::cartesian(&candidates, &branching);
        // Each candidate's probability in its level's distribution (softmax of the row).
        let probs: Vec<Vec<f64>> = rows
            .iter_mut()
            .zip(&candidates)
            .map(|(row, cands)| {
                let sum = draftsmith_kernels::rowops::softmax_numerators(row);
                cands.iter().map(|&t| f64::from(row[t as usize] / sum)).collect()
            })
            .collect();
        self.classes = (0..tree.len())
            .map(|i| {
                let level = tree.depths()[i] - 1;
                let rank = candidates[level].iter().position(|&t| t == tree.tokens()[i]).expect("a level's candidate");
                probability_class(probs[level][rank])
            })
            .collect();
        Ok((tree, candidates))
    }

    /// The distributions of the tree's levels with their candidate counts: the draft forward's
    /// p0 and heads, or with [`KvMode::VerifyPass`] the heads alone on the verification pass's
    /// state.
    fn draft_rows(&mut self, ctx: &DraftContext<'_>) -> Result<(Vec<Vec<f32>>, &[usize]), DecodeError> {
        if self.kv.is_none() {
            let Some(hidden) = ctx.hidden else {
                return Err(DecodeError::Drafter("TokenSwift (verify-pass) was given no target hidden state".into()));
            };
            return Ok((self.head_distributions(hidden), &self.settings.tree[1..]));
        }
        let Some(full) = ctx.target_cache.and_then(|c| c.downcast_ref::<KvCache<B>>()) else {
            return Err(DecodeError::Drafter("TokenSwift needs the target's KV cache on the same backend".into()));
        };
        match self.distributions(ctx.tokens, full) {
            Ok(rows) => Ok((rows, &self.settings.tree)),
            Err(e) => {
                if let Some(kv) = self.kv.as_mut() {
                    kv.reset();
                }
                Err(e.into())
            }
        }
    }
}

/// Indices of the `k` largest values, best first (the earlier index on ties). A few go
/// through one pass with a short sorted list (a vocabulary-sized row, three times a step: a
/// selection over an index vector took ~0.15 ms a row); more through a selection.
fn top_k(values: &[f32], k: usize) -> Vec<u32> {
    if k <= SCAN_TOP_K {
        let mut best: Vec<(f32, u32)> = Vec::with_capacity(k + 1);
        for (i, &v) in values.iter().enumerate() {
            if best.len() == k && best.last().is_none_or(|&(w, _)| v.total_cmp(&w).is_le()) {
                continue;
            }
            // After every kept value at least as large: earlier indices stay first on ties.
            let at = best.iter().position(|&(w, _)| v.total_cmp(&w).is_gt()).unwrap_or(best.len());
            best.insert(at, (v, i as u32));
            best.truncate(k);
        }
        return best.into_iter().map(|(_, i)| i).collect();
    }
    let mut idx: Vec<usize> = (0..values.len()).collect();
    let k = k.min(values.len());
    if k == 0 {
        return Vec::new();
    }
    let cmp = |a: &usize, b: &usize| values[*b].total_cmp(&values[*a]).then(a.cmp(b));
    idx.select_nth_unstable_by(k - 1, cmp);
    idx.truncate(k);
    idx.sort_by(cmp);
    idx.into_iter().map(|i| i as u32).collect()
}

/// The most candidates [`top_k`] finds in one pass.
const SCAN_TOP_K: usize = 16;

impl<B: Backend> Proposer for TokenSwiftProposer<B> {
    fn name(&self) -> &str {
        Method::TokenSwift.name()
    }

    /// The tree depth (α's denominator per step): γ + 1, or γ with [`KvMode::VerifyPass`].
    fn draft_len(&self) -> Option<usize> {
        Some(self.depth())
    }

    fn wants_target_cache(&self) -> bool {
        self.kv.is_some()
    }

    fn wants_hidden(&self) -> Option<HiddenState> {
        self.kv.is_none().then_some(HiddenState::PreNorm)
    }

    fn extra_stats(&self) -> Vec<(&'static str, f64)> {
        let s = self.stats();
        let depth = self.depth();
        vec![
            ("alpha", s.alpha(depth)),
            ("beta", s.beta(depth)),
            ("ngram_steps", s.ngram_steps as f64),
            ("kv_reselections", s.reselections as f64),
        ]
    }

    /// Drafts use the target's contextual penalty (θ, W); with a penalty on, the n-gram table
    /// lags the window as the reference's does (n-grams inside it are the ones the penalty
    /// discourages repeating).
    fn set_sampling(&mut self, cfg: &crate::sampling::SamplingConfig) {
        self.settings.penalty = cfg.repetition_penalty;
        self.settings.penalty_window = cfg.penalty_window;
        self.settings.ngram_lag = if cfg.repetition_penalty != 1.0 { cfg.penalty_window } else { 0 };
    }

    fn last_cost(&self) -> Option<DraftCost> {
        Some(self.cost)
    }

    /// Verify-pass: the continuations of the text's last `ngram_key` tokens are known before
    /// the heads run; when they all agree ([`TokenSwiftSettings::skip_heads_on_agreement`]) the
    /// heads are not asked (their LM-head product, ~1 ms for SmolLM2's 28 MB head, is most of a
    /// draft's time).
    fn drafts_without_calls(&mut self, ctx: &DraftContext<'_>) -> bool {
        if self.settings.ngram_topk == 0 {
            return false;
        }
        self.follow_prompt(ctx);
        self.ngrams.follow(ctx.tokens, self.settings.ngram_lag);
        if self.kv.is_some() || !self.settings.skip_heads_on_agreement {
            return false;
        }
        let key = self.key(ctx.tokens, None);
        self.ngrams
            .top_k_after(&key, 1)
            .first()
            .is_some_and(|&(_, count)| agreement_class(count as usize, self.ngrams.total_after(&key) as usize) == 0)
    }

    fn propose(&mut self, ctx: &DraftContext<'_>) -> Result<DraftTree, DecodeError> {
        self.cost = DraftCost::default();
        self.classes.clear();
        self.follow_prompt(ctx);
        let copies_agree = self.drafts_without_calls(ctx);
        let (mut tree, candidates) = if copies_agree { (DraftTree::new(), Vec::new()) } else { self.head_tree(ctx)? };
        if self.settings.ngram_topk > 0 {
            // The key ends with p0's top candidate (node 0), or with verify-pass with the last
            // token (the root): the chains continue below it.
            let (key, anchor) = match self.kv {
                Some(_) => (self.key(ctx.tokens, Some(candidates[0][0])), Some(0)),
                None => (self.key(ctx.tokens, None), None),
            };
            let total = self.ngrams.total_after(&key) as usize;
            let chains: Vec<(Vec<u32>, u32)> = self
                .ngrams
                .top_k_after(&key, self.settings.ngram_topk)
                .into_iter()
                .map(|(chain, count)| (chain.to_vec(), count))
                .collect();
            for (chain, count) in chains {
                let class = COPIED + agreement_class(count as usize, total);
                let created = insert_branch(&mut tree, anchor, &chain);
                self.classes.extend(created.iter().map(|_| class));
            }
        }
        self.cost = DraftCost { calls: usize::from(!copies_agree), generated: tree.len() };
        Ok(tree)
    }

    fn node_classes(&self, tree: &DraftTree) -> Option<Vec<usize>> {
        (tree.len() == self.classes.len()).then(|| self.classes.clone())
    }

    fn pruned(&mut self, keep: &[usize]) {
        self.classes = keep.iter().map(|&i| self.classes[i]).collect();
    }

    fn observe_verified(&mut self, _ctx: &DraftContext<'_>, tree: &DraftTree, verified: &Verified<'_>) {
        if tree.is_empty() {
            return;
        }
        self.stats.steps += 1;
        self.stats.accepted += verified.accepted.len();
        if verified.accepted.iter().any(|&i| self.classes.get(i).is_some_and(|&c| c >= COPIED)) {
            self.stats.ngram_accepted += verified.accepted.len();
            self.stats.ngram_steps += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_is_ordered_with_stable_ties() {
        assert_eq!(top_k(&[0.1, 3.0, 2.0, 3.0, -1.0], 3), vec![1, 3, 2]);
        assert_eq!(top_k(&[1.0, 2.0], 5), vec![1, 0]);
        assert!(top_k(&[1.0], 0).is_empty());
        // The one-pass scan and the selection agree, ties included.
        let row: Vec<f32> = (0..500u32).map(|i| ((i * 7919) % 61) as f32).collect();
        let mut by_sort: Vec<u32> = (0..500).collect();
        by_sort.sort_by(|&a, &b| row[b as usize].total_cmp(&row[a as usize]).then(a.cmp(&b)));
        for k in [1, 3, SCAN_TOP_K, SCAN_TOP_K + 1, 40] {
            assert_eq!(top_k(&row, k), by_sort[..k], "k = {k}");
        }
    }
}
