//! The interface every drafting method implements.

use draftsmith_core::DraftTree;

use super::policy::DepthStop;

/// What a proposer sees before drafting.
#[derive(Debug, Clone, Copy)]
pub struct DraftContext<'a> {
    /// Prompt followed by every generated token; the last one is the root of the next tree.
    pub tokens: &'a [u32],
    /// How many of `tokens` are the prompt.
    pub prompt_len: usize,
    /// The target's hidden state at the position before the last token, i.e. the state whose
    /// logits produced it, of the kind the proposer [wants](Proposer::wants_hidden); `None` for
    /// proposers that want none.
    pub hidden: Option<&'a [f32]>,
    /// The target's own KV cache (a `draftsmith_model::KvCache<B>` of the verifying backend)
    /// holding every token of `tokens` but the last, read-only; only for proposers that
    /// [want it](Proposer::wants_target_cache) and only during [`Proposer::propose`].
    pub target_cache: Option<&'a dyn std::any::Any>,
}

/// Which of the target's hidden states a proposer drafts from ([`DraftContext::hidden`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HiddenState {
    /// After the final norm (the LM head's input): ReDrafter.
    Final,
    /// The last decoder layer's output before the final norm: TokenSwift's heads.
    PreNorm,
}

/// What one [`Proposer::propose`] cost the drafter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DraftCost {
    /// Drafter forward calls (catch-up included); 0 for methods without a model.
    pub calls: usize,
    /// Draft tokens the drafter itself produced (Post-use "generated" tokens, the denominator
    /// of token utilization); phrases a cache adds at the target are not counted.
    pub generated: usize,
}

/// The running machine's costs in 1-token target steps, as the draft policy measures them
/// ([`Proposer::set_costs`]).
#[derive(Debug, Clone, PartialEq)]
pub struct StepCosts {
    /// One of the method's drafter calls.
    pub call: f64,
    /// `verify[k]`: a target pass over `k` draft tokens (and the token before them), for `k` up
    /// to the method's depth; `verify[0]` = 1.
    pub verify: Vec<f64>,
}

/// A drafting method: proposes a tree of candidate continuations of `ctx.tokens`.
pub trait Proposer: Send {
    /// Name used in records and reports.
    fn name(&self) -> &str;

    /// The most draft tokens on one path, where the method has such a bound (the denominator
    /// of acceptance %); `None` for methods whose tree depth varies without a fixed bound.
    fn draft_len(&self) -> Option<usize> {
        None
    }

    /// Which hidden state [`DraftContext::hidden`] must hold, if any (costs a device → host
    /// copy of one row per step).
    fn wants_hidden(&self) -> Option<HiddenState> {
        None
    }

    /// Whether [`DraftContext::target_cache`] must be filled (methods that draft with a
    /// partial copy of the target's KV cache).
    fn wants_target_cache(&self) -> bool {
        false
    }

    /// The deepest draft the method can make, when its drafting time grows with the depth
    /// (a draft model: one forward per drafted token) and it can be told the depth before it
    /// drafts ([`Proposer::limit_depth`]); `None` for methods whose drafts cost about the same
    /// whatever is kept of them (those a policy prunes after drafting).
    fn depth_range(&self) -> Option<usize> {
        None
    }

    /// Limits the next [`Proposer::propose`] to paths of at most `depth` tokens (`1 ..=`
    /// [`Proposer::depth_range`]); later proposals draft their full depth again unless limited.
    /// `0` asks for the part that costs no drafter call alone, of a method that has one
    /// ([`Proposer::drafts_without_calls`]); the others take it as 1.
    fn limit_depth(&mut self, _depth: usize) {}

    /// Lets the next [`Proposer::propose`] of a method told its depth stop drafting after any
    /// level where `rule` says one more is not worth its drafter call ([`DepthStop::more`], asked
    /// with the node classes of the method's best path so far). Returns whether the method
    /// applies it; the default does not (the draft then goes as deep as
    /// [`Proposer::limit_depth`] said). A method that applies it must give its nodes' classes
    /// ([`Proposer::node_classes`]): the rule prices each drafted node by its class's acceptance,
    /// which the policy learns only from methods that give them.
    fn set_depth_stop(&mut self, _rule: DepthStop) -> bool {
        false
    }

    /// The measured time of one of this method's drafter calls and of a verification pass over
    /// each draft size, in 1-token target steps on the running machine, which the draft policy
    /// passes before each proposal of a method told its depth once it has measured a call: a
    /// method whose own controller prices its drafts in target steps (Pre-cut's `draft_cost`)
    /// uses them instead of its configured guesses. The default ignores them.
    fn set_costs(&mut self, _costs: &StepCosts) {}

    /// Method-specific statistics of the generation so far, by name (TokenSwift: `beta`).
    fn extra_stats(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }

    /// The target's logits processing for this generation (called once, before drafting), for
    /// proposers whose drafts should follow it (TokenSwift's contextual penalty).
    fn set_sampling(&mut self, _cfg: &crate::sampling::SamplingConfig) {}

    /// Where the tokens of the last [`Proposer::propose`] were drawn at random (a draft model
    /// sampling its drafts when the generation samples), each node's draft distribution over
    /// token ids, in node order (ids past a distribution's end have probability 0): the sampled
    /// verifier then accepts a node's token `x` with probability `min(1, p(x) / q(x))` instead
    /// of `p(x)` ([`crate::spec::verify_sampled()`]). That keeps the target's distribution only if
    /// every drawn node is verified whatever it drew, so a draft policy verifies such a proposal
    /// whole, unpruned; a method's own rule that stops drafting after a node (by that node's
    /// value or any before it) is fine, as the node itself is kept. `None` (the default): the
    /// tokens are taken as given.
    fn draft_distributions(&self) -> Option<&[Vec<f32>]> {
        None
    }

    /// What the last [`Proposer::propose`] cost; `None` for methods without a drafter model
    /// (the driver then counts no calls and every node as generated).
    fn last_cost(&self) -> Option<DraftCost> {
        None
    }

    /// Drafts a tree hanging below the last token of `ctx.tokens` (may be empty: the step then
    /// degenerates to one autoregressive step). A drafter that fails (a forward error, a target
    /// cache it cannot use) returns the error, which ends the generation: it never degrades
    /// silently to `ar`.
    fn propose(&mut self, ctx: &DraftContext<'_>) -> Result<DraftTree, crate::DecodeError>;

    /// Whether the draft for `ctx` would make no drafter call: a method with a model that in
    /// some steps drafts copied text alone (TokenSwift in verify-pass, when the last token's
    /// counted continuations agree) says so before drafting, and a draft policy then asks for
    /// that draft as it would a cheap method's, whatever the model's drafts cost. A method told
    /// its depth ([`Proposer::depth_range`]) answers for its draft at depth 0 (the copied
    /// context beside its drafter's tokens, [`crate::methods::WithCopy`]), which the policy
    /// asks for with `limit_depth(0)` where the drafter does not pay.
    fn drafts_without_calls(&mut self, _ctx: &DraftContext<'_>) -> bool {
        false
    }

    /// How many tokens of `ctx` the method's drafter has not seen: a drafter with a cache of
    /// its own (a draft model) feeds them all before the first call of its next draft — the
    /// prompt in a new generation, the tokens of the plain steps since it last drafted — so
    /// its next draft costs that catch-up too. A draft policy prices a probe of a method that
    /// went cold by it. `0` (the default) for methods whose drafts cost the same whatever came
    /// before.
    fn lag(&self, _ctx: &DraftContext<'_>) -> usize {
        0
    }

    /// A small number the method gives its draft for `ctx` (prompt lookup: the length of the
    /// matched n-gram), which a draft policy learns acceptance for separately; 0 when the
    /// method has no such signal.
    fn draft_class(&self, _ctx: &DraftContext<'_>) -> usize {
        0
    }

    /// A small number per node of the last proposal (`tree`, as [`Proposer::propose`] returned
    /// it) saying how sure the method is of that node, `0` = surest (the n-gram trie: how often
    /// the node's text followed its parent's in the index); a draft policy learns acceptance
    /// for each apart. `None` (the default) when the method has no per-node signal.
    fn node_classes(&self, _tree: &DraftTree) -> Option<Vec<usize>> {
        None
    }

    /// Called between [`Proposer::propose`] and the verification when a draft policy verifies
    /// only the nodes `keep` of the last proposal (increasing, closed under parents): the tree
    /// the observe methods then see is that subtree, re-indexed in that order. Methods that keep
    /// per-node state of their proposal re-index it here; the default does nothing.
    fn pruned(&mut self, _keep: &[usize]) {}

    /// Called after verification with the accepted node indices (root child first).
    fn observe(&mut self, _ctx: &DraftContext<'_>, _tree: &DraftTree, _accepted: &[usize]) {}

    /// Called after verification with everything the target said about the tree. The default
    /// forwards to [`Proposer::observe`]; methods that learn from rejected branches too (the
    /// Post-use token cache, the Pre-cut controller) override this one.
    fn observe_verified(&mut self, ctx: &DraftContext<'_>, tree: &DraftTree, verified: &Verified<'_>) {
        self.observe(ctx, tree, verified.accepted);
    }
}

/// The target's verdict on one draft tree.
#[derive(Debug, Clone, Copy)]
pub struct Verified<'a> {
    /// Accepted node indices, root child first.
    pub accepted: &'a [usize],
    /// The target's greedy token after the root.
    pub root_next: u32,
    /// The target's greedy token after each node (`node_next[i]` follows node `i`).
    pub node_next: &'a [u32],
    /// Under sampling: the target's processed distributions after the root and after each
    /// accepted node, in path order ([`verify_sampled`]). A node below any of them — verified
    /// or not — is accepted with a chance they give exactly: its parent's distribution's
    /// probability of its token (taken as given), or `min(1, p / q)` of it (drawn from `q`,
    /// [`acceptance_chances`](crate::spec::acceptance_chances)), which says more than the
    /// draw's verdict. `None` greedy.
    ///
    /// [`verify_sampled`]: crate::spec::verify_sampled()
    pub chances: Option<&'a [Vec<f32>]>,
}

impl Verified<'_> {
    /// The target's greedy token after `parent` (`None` = the root).
    pub fn next_after(&self, parent: Option<usize>) -> u32 {
        parent.map_or(self.root_next, |p| self.node_next[p])
    }

    /// Whether node `i` carries the token the target itself predicts after its parent
    /// (the paper's USEFUL tokens, Post-use Eq. 7), whether or not it was accepted.
    pub fn is_useful(&self, tree: &DraftTree, i: usize) -> bool {
        tree.tokens()[i] == self.next_after(tree.parents()[i])
    }
}
