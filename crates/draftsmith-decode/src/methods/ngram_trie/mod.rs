//! N-Gram-Trie drafting ("N-Gram Trie Speculative Decoding for Faster LLM In-Context
//! Inference"; no public code).
//!
//! # What the paper specifies
//! - §3.1 *N-gram sampling*: a window of length `n` slides token by token over the context
//!   tokens `T`; the window starting at `i` splits into the prefix `P_i = T[i..i+L_p]` and the
//!   suffix `S_i = T[i+L_p..i+n]` (eq. 1), for every start `i ∈ [1, l]` (eq. 2).
//! - §3.1 *Trie construction* (Algorithm 1, eq. 3): for each window, every sub-prefix
//!   `P_i[j:L_p]`, `j ∈ (0, L_p)`, followed by `S_i` is inserted into one trie; nodes are shared
//!   by token and every node on an inserted key has its frequency `f` increased (lines 11, 15).
//! - §3.2 *Draft construction*: the last `L_p` generated tokens are matched as a path from the
//!   root; if absent, one token fewer, down to 1. The subtree below the match is the suffix tree
//!   `τ_s`. Each node `v_k` of `τ_s` stands for the draft `Path(v_r, v_k)` with priority `f_k`
//!   (eq. 5) and goes into a min-heap whose length bounds the drafts kept (`num_draft`,
//!   following REST and Medusa); when `τ_s` is small nothing is pruned.
//! - §3.2 *Model verification*: `τ_s` is flattened depth-first, nodes of one level share a
//!   position id (eq. 6), and a tree attention mask lets every node see only its ancestors. This
//!   is exactly the engine's [`DraftTree`] verification, so nothing more is needed here.
//! - §4.4, Table 3: best setting `n = 13`, `L_p = 3` (the defaults here).
//!
//! # Choices where the paper is silent or ambiguous
//! - *Sub-prefix range*: `j ∈ (0, L_p)` in Algorithm 1 is read as `j = 0, …, L_p − 1` (Python's
//!   `range(0, L_p)`), i.e. sub-prefixes of length `L_p` down to 1. The full prefix must be in
//!   the trie for the first match attempt (length `L_p`, §3.2) to ever succeed.
//! - *Window frequency `f`* (eq. 2): every window occurrence adds one, so a node's frequency is
//!   the number of (window, sub-prefix) keys through it.
//! - *Windows at the end*: eq. 2 lets `i` run to `l`, so windows running past the end of `T` are
//!   kept, cut at the end (their suffix, or even prefix, is shorter).
//! - *Which tokens are context*: §3 builds the trie from the context (the prompt) only and
//!   never says it is updated with generated tokens. Here the committed output is indexed too
//!   by default ([`NgramTrieConfig::update_with_output`]), window by window, so the trie always
//!   equals the one built from prompt + output: answers repeat their own phrases (lists,
//!   names, code), and prompt lookup, which searches prompt + output, drafted from them while
//!   the paper's trie could not (60 context-task prompts × 128, `auto`, Zen 4, 2026-11-25:
//!   1.20× `ar` from the prompt alone, 1.57× with the output). Set it to `false` for the
//!   paper's own setting (the Table 3 recipe does).
//! - *Matched tokens*: the suffix of the whole committed sequence (prompt + output); at the
//!   first steps the generated tokens alone are shorter than `L_p`.
//! - *What "found" means*: a matched node without children gives no draft, so the search goes on
//!   with fewer tokens (this happens when the tokens match only at the very end of the indexed
//!   text, e.g. the output matching itself when it is indexed).
//! - *`num_draft`*: not reported; the default 64 is REST's (the paper follows REST for the heap).
//! - *Ties in frequency* (the paper's §Limitations names them as a weakness): broken by
//!   depth-first preorder with children by descending frequency, then ascending token id, so
//!   the result is deterministic and a parent (never less frequent, always earlier) is kept
//!   whenever a child is. Siblings are listed most frequent first, so the `auto` draft policy's
//!   acceptance by sibling rank means something; its draft class is the matched suffix length
//!   (a longer match is a better draft), as for prompt lookup, and each node's class says how
//!   many occurrences of its parent's text went on with it ([`confidence_class`]: a
//!   continuation that always followed is likelier than one of many).
//! - *`max_depth`*: optional cap on the draft depth; the window length already bounds it by
//!   `n − 1`.

mod trie;

#[cfg(test)]
mod tests;

use draftsmith_core::DraftTree;
use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use trie::{window_keys, NodeId, SuffixMatch, Trie};

use crate::method::Method;
use crate::spec::{agreement_class, DraftContext, Proposer};

/// Parameters of the N-Gram-Trie proposer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NgramTrieConfig {
    /// Sliding-window length `n` (§3.1; 13 is best in Table 3).
    pub n: usize,
    /// Maximum prefix length `L_p` (§3.1; 3 is best in Table 3).
    pub prefix_len: usize,
    /// Size of the bounded heap: the most draft nodes per step (§3.2).
    pub num_draft: usize,
    /// Optional cap on the draft depth below the last token.
    pub max_depth: Option<usize>,
    /// Also index the generated tokens (the default; the paper indexes the context only).
    pub update_with_output: bool,
}

impl Default for NgramTrieConfig {
    fn default() -> Self {
        Self { n: 13, prefix_len: 3, num_draft: 64, max_depth: None, update_with_output: true }
    }
}

/// An invalid [`NgramTrieConfig`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum NgramTrieError {
    #[error("prefix length L_p must be at least 1")]
    ZeroPrefixLen,
    #[error("window length n = {n} must exceed the prefix length L_p = {prefix_len} (the suffix would be empty)")]
    WindowNotLongerThanPrefix { n: usize, prefix_len: usize },
    #[error("num_draft must be at least 1")]
    ZeroNumDraft,
    #[error("max_depth must be at least 1 when set")]
    ZeroMaxDepth,
}

impl NgramTrieConfig {
    /// Checks the parameters are usable.
    pub fn validate(&self) -> Result<(), NgramTrieError> {
        if self.prefix_len == 0 {
            return Err(NgramTrieError::ZeroPrefixLen);
        }
        if self.n <= self.prefix_len {
            return Err(NgramTrieError::WindowNotLongerThanPrefix { n: self.n, prefix_len: self.prefix_len });
        }
        if self.num_draft == 0 {
            return Err(NgramTrieError::ZeroNumDraft);
        }
        if self.max_depth == Some(0) {
            return Err(NgramTrieError::ZeroMaxDepth);
        }
        Ok(())
    }
}

/// The trie of one token sequence, kept equal to a fresh build as the sequence grows.
#[derive(Debug, Clone, Default)]
pub struct NgramIndex {
    trie: Trie,
    /// The tokens the trie was built from.
    indexed: Vec<u32>,
}

impl NgramIndex {
    /// The trie of `tokens` with window `n` and prefix length `prefix_len` (§3.1).
    pub fn build(tokens: &[u32], n: usize, prefix_len: usize) -> Self {
        let mut index = Self::default();
        index.extend(tokens, n, prefix_len);
        index
    }

    /// The trie.
    pub fn trie(&self) -> &Trie {
        &self.trie
    }

    /// The indexed tokens.
    pub fn tokens(&self) -> &[u32] {
        &self.indexed
    }

    /// Makes the index describe `tokens`: appends when they extend the indexed tokens,
    /// rebuilds otherwise (a new prompt).
    pub fn sync(&mut self, tokens: &[u32], n: usize, prefix_len: usize) {
        if tokens.starts_with(&self.indexed) {
            self.extend(&tokens[self.indexed.len()..], n, prefix_len);
        } else {
            *self = Self::build(tokens, n, prefix_len);
        }
    }

    /// Appends `new` tokens: the windows that were cut at the old end are removed and inserted
    /// again over the longer sequence, together with the windows starting in `new`.
    pub fn extend(&mut self, new: &[u32], n: usize, prefix_len: usize) {
        if new.is_empty() {
            return;
        }
        let old = self.indexed.len();
        let first_cut = old.saturating_sub(n.saturating_sub(1));
        for start in first_cut..old {
            for key in window_keys(&self.indexed, start, n, prefix_len) {
                let removed = self.trie.remove(key);
                debug_assert!(removed, "an inserted key is stored");
            }
        }
        self.indexed.extend_from_slice(new);
        for start in first_cut..self.indexed.len() {
            for key in window_keys(&self.indexed, start, n, prefix_len) {
                self.trie.insert(key);
            }
        }
    }
}

/// The N-Gram-Trie proposer: drafts the pruned suffix tree of the longest matched suffix.
#[derive(Debug, Clone)]
pub struct NgramTrie {
    config: NgramTrieConfig,
    index: NgramIndex,
    /// [`confidence_class`] of every node of the last draft.
    classes: Vec<usize>,
}

/// A draft node's class from its frequency and its parent's ([`agreement_class`]: how many
/// occurrences of the parent's text went on with the node's token).
pub fn confidence_class(count: u64, parent: u64) -> usize {
    let clamp = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    agreement_class(clamp(count), clamp(parent))
}

impl NgramTrie {
    /// A proposer with a validated configuration; the trie is built on the first proposal.
    pub fn new(config: NgramTrieConfig) -> Result<Self, NgramTrieError> {
        config.validate()?;
        Ok(Self { config, index: NgramIndex::default(), classes: Vec::new() })
    }

    /// The configuration.
    pub fn config(&self) -> &NgramTrieConfig {
        &self.config
    }

    /// The current index (empty before the first proposal).
    pub fn index(&self) -> &NgramIndex {
        &self.index
    }

    /// Brings the trie up to date with the context and drafts below the last token.
    pub fn draft(&mut self, tokens: &[u32], prompt_len: usize) -> DraftTree {
        let c = self.config;
        let source = if c.update_with_output { tokens } else { &tokens[..prompt_len.min(tokens.len())] };
        self.index.sync(source, c.n, c.prefix_len);
        let trie = self.index.trie();
        let (tree, counts) = match trie.longest_suffix_match(tokens, c.prefix_len) {
            Some(m) => trie.top_subtree_with_counts(m.node, c.num_draft, c.max_depth),
            None => (DraftTree::new(), Vec::new()),
        };
        self.classes = counts.into_iter().map(|(n, parent)| confidence_class(n, parent)).collect();
        tree
    }
}

impl Proposer for NgramTrie {
    fn name(&self) -> &str {
        Method::NgramTrie.name()
    }

    fn propose(&mut self, ctx: &DraftContext<'_>) -> Result<DraftTree, crate::DecodeError> {
        Ok(self.draft(ctx.tokens, ctx.prompt_len))
    }

    /// The matched suffix length (0: no match) in the trie as of the last draft; a longer match
    /// is a better draft, so the draft policy learns each length apart.
    fn draft_class(&self, ctx: &DraftContext<'_>) -> usize {
        self.index.trie().longest_suffix_match(ctx.tokens, self.config.prefix_len).map_or(0, |m| m.len)
    }

    /// Each node's [`confidence_class`] in the last draft.
    fn node_classes(&self, tree: &DraftTree) -> Option<Vec<usize>> {
        (tree.len() == self.classes.len()).then(|| self.classes.clone())
    }
}
