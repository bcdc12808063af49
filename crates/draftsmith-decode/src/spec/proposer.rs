//! The interface every drafting method implements.

use draftsmith_core::DraftTree;

/// What a proposer sees before drafting.
#[derive(Debug, Clone, Copy)]
pub struct DraftContext<'a> {
    /// Prompt followed by every generated token; the last one is the root of the next tree.
    pub tokens: &'a [u32],
    /// How many of `tokens` are the prompt.
    pub prompt_len: usize,
}

/// A drafting method: proposes a tree of candidate continuations of `ctx.tokens`.
pub trait Proposer {
    /// Name used in records and reports.
    fn name(&self) -> &str;

    /// The most draft tokens on one path, where the method has such a bound (the denominator
    /// of acceptance %); `None` for methods whose tree depth varies without a fixed bound.
    fn draft_len(&self) -> Option<usize> {
        None
    }

    /// Drafts a tree hanging below the last token of `ctx.tokens` (may be empty: the step then
    /// degenerates to one autoregressive step).
    fn propose(&mut self, ctx: &DraftContext<'_>) -> DraftTree;

    /// Called after verification with the accepted node indices (root child first).
    fn observe(&mut self, _ctx: &DraftContext<'_>, _tree: &DraftTree, _accepted: &[usize]) {}
}
