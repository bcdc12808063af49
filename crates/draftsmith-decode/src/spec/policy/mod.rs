//! The draft policy: each step, keep the part of a method's draft tree that maximizes the
//! expected tokens per second, using a cost model of the target on the running machine and an
//! acceptance model learned online from the method's own verified drafts.
//!
//! * **Cost model** ([`CostModel`]): the time of a target pass over `n` tokens. It starts from a
//!   calibration measured at start-up (a few passes at sizes 1 … 64 on a small model, fewer on a
//!   slow one: well under a second either way) and fits it to the measured verify time of every
//!   step (an offset, a scale and a cost per row, by recursive least squares over all sizes at
//!   once, so it tracks the growing context and the machine's load without a noisy estimate
//!   per size).
//! * **Acceptance model** ([`AcceptanceModel`]): the chance that a node is accepted given that
//!   its parent was, by depth and by rank among its siblings (methods list better siblings
//!   first), as Beta counts, learned apart per draft class ([`Proposer::draft_class`]) and per
//!   node class ([`Proposer::node_classes`]) where the method gives them. A node's path
//!   probability is the product along its path. Greedy decoding learns from every node of
//!   the method's proposal, the pruned ones too, once the committed tokens say which the
//!   target would have accepted (`Auto::learn_in_hindsight`); sampled decoding from every node
//!   of it below the root or an accepted node, by the chance the target's distribution there
//!   gives its token (a drawn token: `min(1, p / q)`; `chances`).
//! * **Choice** ([`choose`]): nodes sorted by path probability (a parent never follows its
//!   child), and the prefix of that order with the best `(1 + Σ p) / cost(1 + size)`; the empty
//!   prefix is a plain autoregressive step.
//! * **Drafting time**: a method whose drafts are not expected to pay back their drafting time
//!   (measured per draft, or per drafter call for a method told its depth before drafting, a
//!   draft model: [`Proposer::depth_range`]) is not called; such a method gets the depth with
//!   the best expected rate. After at least `PROBE_EVERY` plain steps a probe drafts (one token
//!   for a method told its depth) and keeps its best node, so a method that went cold can prove
//!   itself again; probes are paid from a credit that each plain step adds [`PROBE_BUDGET`] of
//!   its time to (less after probes the target rejected:
//!   [`PROBE_BACKOFF`]), and a probe waits for credit for its expected cost, a draft model's
//!   catch-up on the tokens it has not seen included ([`Proposer::lag`]).
//! * **Measuring the plain step**: the first step of a generation, and a step after
//!   [`REFRESH_ONE`] without a 1-token pass, is a plain step, so the 1-token cost the choices
//!   compare against is measured at the current context.
//!
//! Pruning only removes nodes (with their subtrees) from a tree, so any choice is lossless —
//! of tokens taken as given; a proposal whose tokens were drawn at random
//! ([`Proposer::draft_distributions`]) is verified whole.

mod acceptance;
mod cost;
mod depth;

pub use acceptance::{
    agreement_class, context_class, probability_class, AcceptanceModel, CONTEXT_CAP, COPIED, NODE_CLASSES,
    PHRASE_FIRST, PHRASE_NEXT, UNCLASSED,
};
pub use cost::{CostModel, COST_FORGET};
pub use depth::{choose, subtree, DepthStop};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use draftsmith_core::DraftTree;
use serde::{Deserialize, Serialize};

use super::proposer::{DraftContext, DraftCost, HiddenState, Proposer, StepCosts, Verified};
use super::verify_sampled::acceptance_chances;

/// How a method's draft size is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DraftPolicy {
    /// Each step keeps the part of the draft with the best expected tokens per second.
    #[default]
    Auto,
    /// The method's own fixed settings (what a paper's table ran).
    Fixed,
}

draftsmith_core::value_names!(DraftPolicy, "draft policy", { Auto => "auto", Fixed => "fixed" });

/// Weight of a new measurement in a running average (drafting times, catch-ups, probes).
const EMA: f64 = 0.2;
/// A measured time counts at most this many times the estimate it updates.
const OUTLIER: f64 = 2.0;
/// A step that would otherwise draft nothing keeps the best node once in this many steps (more
/// for a slow drafter: see [`PROBE_BUDGET`]).
pub const PROBE_EVERY: usize = 16;
/// Probes of a drafter that is not paying may cost at most this share of the plain steps: each
/// plain step adds `PROBE_BUDGET · t(1)` to the probes' credit, and a probe waits
/// until the credit covers what it is expected to cost (then takes what it did cost).
pub const PROBE_BUDGET: f64 = 0.02;
/// Each probe whose node the target rejected halves the probes' share of the time (and doubles
/// `PROBE_EVERY`), at most this many times: a method that stays cold (TokenSwift's heads under
/// sampling, right 4–6 % of the time) costs 0.25 % instead of 2 %; an accepted probe, a step
/// that drafts and a new generation reset it.
pub const PROBE_BACKOFF: u32 = 3;
/// A step without a 1-token pass in this many is a plain step (when the cost model learns): the
/// 1-token cost at the current context is then measured, not predicted from the start-up
/// calibration scaled by multi-token passes, which at long context overstates it (attention
/// grows with the pass) and makes losing drafts look worth it — TokenSwift greedy after a
/// 1536-token prefix drafted 97 % of its first 1024 steps at 0.70× `ar` (session 18). The first
/// step of each generation is one too.
pub const REFRESH_ONE: usize = 64;
/// A method not told its depth whose drafts cost at most this share of a plain step is asked
/// for a draft every step, even when a draft like its last one would not pay: its node classes,
/// known only once it has drafted, decide node by node what is kept ([`choose`]), and skipping
/// it saves less than a skipped good draft loses. Prompt lookup (0.014 ms a draft against a
/// 4 ms step) had gone cold on the context tasks' summaries and stayed off through the
/// extractions that follow them, whose copies are right 99 % of the time in their surest class:
/// 1.39× `ar` in one run against 1.67–1.79× in the others (session 33). With the probes'
/// [`PROBE_BUDGET`], a useless cheap drafter costs at most about 5 % of the plain steps.
pub const CHEAP_DRAFT: f64 = 0.03;
/// A depth of a method told its depth whose drafting time was last measured this many of its
/// drafts ago is priced again as that many calls at the current time per call
/// (`Auto::depth_ms`): a depth priced out in a loud moment of the host is otherwise never
/// drafted, so never measured, again — Qwen2.5-Coder 0.5B drafting for 1.5B on a shared Zen 4
/// drafted one token a step for 15 of 20 prompts after a second in which drafts of two to four
/// calls took twice their time (1.44× `ar` against 1.68× with Pre-cut stopping the same drafter,
/// session 45). Likewise a level's acceptance counts, last added to this many drafts ago,
/// below the depth drafted ([`AcceptanceModel::fade`]).
pub const STALE_DRAFTS: usize = 32;
/// A drafter that must catch up before it drafts again ([`Proposer::lag`]: a draft model after
/// plain steps) is charged its catch-up spread over this many drafts: it resumes when drafts
/// that save that much between them pay for it. Charged nothing, a drafter that barely paid
/// resumed for a draft or two after each plain stretch and paid a pass over the stretch each
/// time (SmolLM2 drafting for itself: one-token drafts after 100–200 plain steps, each catching
/// up for 250–450 ms against 4 ms steps, session 50).
pub const RESUME_DRAFTS: usize = 16;
/// A method told its depth is not priced out before this many of its first-level draft nodes
/// (in the draft class at hand) have been verified: until then a step that would be plain is a
/// probe (`Auto::untried`). Two drafts are too few to judge a drafter by: Qwen2.5-Coder 0.5B
/// drafting for 1.5B had one of its first two first-level tokens rejected, and at the
/// acceptance of 0.5 that left (with a loud moment's verify times) it drafted nothing for 4 of
/// 20 HumanEval prompts (session 55) — its first-level tokens are right ~85 % of the time.
pub const MIN_TRIES: usize = 8;
/// The fewest tokens behind at which a draft's time teaches the policy what a catch-up costs.
const CATCH_UP_MIN: usize = 8;

/// What the policy chose over a run: for reports.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PolicyStats {
    /// Steps that verified no draft (plain `ar` steps).
    pub empty_steps: usize,
    /// Nodes kept over all steps.
    pub kept: usize,
    /// Σ predicted and Σ measured verify ms over the steps (same steps).
    pub predicted_ms: f64,
    pub measured_ms: f64,
    pub steps: usize,
}

/// Where [`Auto`] reads the time it prices drafts and verify passes with: the wall clock, or a
/// clock that only moves when told ([`Clock::manual`]), so that tests price drafter calls
/// exactly, whatever else the machine runs.
#[derive(Debug, Clone)]
pub enum Clock {
    Wall(Instant),
    Manual(Arc<AtomicU64>),
}

impl Default for Clock {
    fn default() -> Self {
        Self::Wall(Instant::now())
    }
}

impl Clock {
    /// A clock at zero that moves only by [`Clock::advance`].
    pub fn manual() -> Self {
        Self::Manual(Arc::new(AtomicU64::new(0)))
    }

    /// Moves a manual clock on by `ms` milliseconds (to the nearest nanosecond); the wall clock
    /// moves by itself, so this does nothing to it.
    pub fn advance(&self, ms: f64) {
        if let Self::Manual(ns) = self {
            ns.fetch_add((ms * 1e6).round() as u64, Ordering::Relaxed);
        }
    }

    /// Milliseconds since the clock's origin.
    pub fn now_ms(&self) -> f64 {
        match self {
            Self::Wall(origin) => origin.elapsed().as_secs_f64() * 1e3,
            Self::Manual(ns) => ns.load(Ordering::Relaxed) as f64 / 1e6,
        }
    }
}

/// A method under the `auto` draft policy: the method drafts, the policy keeps the part worth
/// verifying, and learns from the verdict.
pub struct Auto {
    inner: Box<dyn Proposer>,
    cost: CostModel,
    accept: AcceptanceModel,
    /// The last proposal's predicted verify ms, and when it ended ([`Clock::now_ms`]).
    last: Option<(f64, f64)>,
    clock: Clock,
    name: String,
    stats: PolicyStats,
    /// Whether measured verify times update the cost model (off for a fixed what-if model).
    learn_cost: bool,
    /// The method's own drafting time per proposal, ms (`None` before the first steady one).
    draft_ms: DraftTime,
    /// The method's last draft, as the shape to expect from the next one, with its node classes.
    template: DraftTree,
    template_nodes: Option<Vec<usize>>,
    /// The node classes of the tree being verified (the kept part of the last proposal).
    nodes: Option<Vec<usize>>,
    /// The nodes of the last proposal that were kept (the verified tree's node `j` is node
    /// `kept[j]` of `template`).
    kept: Vec<usize>,
    /// Whether the last step skipped the method entirely (a plain `ar` step).
    skipped: bool,
    /// Steps since the last probe.
    since_probe: usize,
    /// Whether the method drafted (not only probed) in this generation, and whether it did in
    /// the last one. A drafter told its depth that drafted in the last generation starts this
    /// one a whole prompt behind (a draft model's cache holds the last answer), and the catch-up
    /// it is priced at can keep the depth rule at zero; a probe's price then grows with every
    /// plain step (one more token to catch up on, a few % of a step, against the credit's 2 %),
    /// so it stays cold for the whole generation and starts the next one behind again —
    /// Qwen2.5-Coder 0.5B drafting for 1.5B at T = 1 went cold from the 7th of 20 HumanEval
    /// prompts to the last (1.14× against 1.69× in the run after, session 68). So its first
    /// chance in a new generation is a probe whatever the credit: the catch-up it pays is the
    /// least it will be in that generation, and afterwards the rule prices drafts at a lag of a
    /// token or two. A drafter that did not draft in the last generation waits for credit.
    drafted_now: bool,
    resume: bool,
    /// The draft class of the last proposal.
    class: usize,
    /// The drafter's time per forward call, ms, for methods that are told their depth before
    /// drafting ([`Proposer::depth_range`]); `None` before it is measured.
    call_ms: DraftTime,
    /// Their drafting time per draft, by the depth asked for (index = depth): calls need not
    /// cost the same (a ReDrafter's first call runs one beam, its later ones every beam), so a
    /// depth once drafted is priced by its own measurements ([`Auto::depth_ms`]) while they are
    /// fresh ([`DepthTime`]).
    depth_times: Vec<DepthTime>,
    /// Drafts of a method told its depth, so far.
    drafts: usize,
    /// Running average of what a probe cost, ms: its drafting, less the expected catch-up
    /// ([`Auto::catch_up_ms`]), and the longer verification of the node it keeps.
    probe_ms: Option<f64>,
    /// Running average of a drafter's catch-up, ms per unit of `lag_scale(lag) − 1`
    /// ([`Auto::catch_up_ms`]), from drafts made at least [`CATCH_UP_MIN`] tokens behind.
    catch_up: Option<f64>,
    /// The ms probes may still spend ([`PROBE_BUDGET`]): each plain step adds its share of a
    /// plain step's time, each probe takes what it cost.
    probe_credit: f64,
    /// Whether the step being verified is a probe.
    probed: bool,
    /// Probes rejected in a row ([`PROBE_BACKOFF`]).
    cold_probes: u32,
    /// Whether the method has drafted in this generation (its next drafting time is steady).
    drafted_before: bool,
    /// Whether the last proposal was a method's call-free part alone ([`Auto::propose`]).
    call_free: bool,
    /// Steps since the last 1-token pass ([`REFRESH_ONE`]).
    since_one: usize,
    /// Whether this generation decodes greedily (then proposals are learned from in hindsight).
    greedy: bool,
    /// Greedy proposals waiting for the committed tokens that tell which of their nodes the
    /// target would have accepted ([`Auto::learn_in_hindsight`]).
    pending: Vec<Pending>,
}

/// A whole proposal of the method (before pruning), to learn from in hindsight.
struct Pending {
    /// Where its first node's token goes in the sequence.
    start: usize,
    tree: DraftTree,
    class: usize,
    nodes: Option<Vec<usize>>,
}

impl Auto {
    pub fn new(inner: Box<dyn Proposer>, cost: CostModel) -> Self {
        let name = inner.name().to_string();
        Self {
            inner,
            cost,
            accept: AcceptanceModel::default(),
            last: None,
            clock: Clock::default(),
            name,
            stats: PolicyStats::default(),
            learn_cost: true,
            draft_ms: DraftTime::default(),
            template: DraftTree::new(),
            template_nodes: None,
            nodes: None,
            kept: Vec::new(),
            skipped: false,
            since_probe: 0,
            class: 0,
            call_ms: DraftTime::default(),
            depth_times: Vec::new(),
            drafts: 0,
            drafted_before: false,
            drafted_now: false,
            resume: false,
            call_free: false,
            probe_ms: None,
            probe_credit: 0.0,
            catch_up: None,
            probed: false,
            cold_probes: 0,
            since_one: REFRESH_ONE,
            greedy: true,
            pending: Vec::new(),
        }
    }

    /// With a cost model that measured times do not change (tests, what-if runs).
    pub fn with_fixed_cost(inner: Box<dyn Proposer>, cost: CostModel) -> Self {
        Self { learn_cost: false, ..Self::new(inner, cost) }
    }

    /// Reading the time from `clock` instead of the wall clock (tests: a [`Clock::manual`]
    /// that the drafters move by what their calls would take).
    pub fn with_clock(self, clock: Clock) -> Self {
        Self { clock, ..self }
    }

    /// Whether a draft shaped like the last one, pruned as [`choose`] would, is expected to
    /// beat a plain step once the drafting time is paid: `(1 + Σ p) / (draft + t(1 + k)) >
    /// 1 / t(1)`. True until the method has drafted once.
    fn worth_drafting(&self) -> bool {
        let Some(draft_ms) = self.draft_ms.get() else { return true };
        if self.template.is_empty() {
            return true;
        }
        let p = self.accept.path_probabilities_nodes(self.class, self.template_nodes.as_deref(), &self.template);
        let (keep, verify_ms) = choose(&self.template, &p, &self.cost, 0);
        let gain = 1.0 + keep.iter().map(|&i| p[i]).sum::<f64>();
        gain / (draft_ms + verify_ms) > 1.0 / self.cost.predict(1)
    }

    /// Whether a draft costs at most [`CHEAP_DRAFT`] of a plain step (measured).
    fn cheap(&self) -> bool {
        self.draft_ms.get().is_some_and(|d| d <= CHEAP_DRAFT * self.cost.predict(1))
    }

    /// The drafting time of a draft of depth `d` for a method told its depth: the steady
    /// average of drafts of that depth once there is one; before that `d` calls at the average
    /// time per call (`call_ms`), or less when a draft of that depth after plain steps took less
    /// (such a time may include a catch-up, so it only bounds the depth's time from above).
    ///
    /// The time per call alone priced a ReDrafter of beam width 16 out: its first drafts go
    /// full depth, 3.2 ms for four calls, three of them over 16 beams, so a one-token draft (one
    /// call over one beam, 0.3 ms) was priced at 0.8 ms, and 95 % of the steps of an MT-Bench
    /// answer were plain ones (session 23).
    ///
    /// A depth not measured in the last [`STALE_DRAFTS`] drafts is priced as `d` calls again,
    /// at the current time per call: drafted at that price when it pays, it is measured afresh.
    fn depth_ms(&self, d: usize, call_ms: f64) -> f64 {
        let linear = call_ms * d as f64;
        match self.depth_times.get(d).and_then(|t| t.fresh(self.drafts)) {
            Some(t) => t.get().unwrap_or_else(|| t.bound_ms().map_or(linear, |b| b.min(linear))),
            None => linear,
        }
    }

    /// The stopping rule for a draft of at most `max` levels of a method told its depth, from
    /// this draft class's acceptance and the drafting and verify times; `None` before the
    /// drafter's time per call is measured (the draft then goes to the full depth).
    ///
    /// A drafter `lag` tokens behind is charged its catch-up spread over [`RESUME_DRAFTS`].
    fn depth_stop(&self, max: usize, lag: usize) -> Option<DepthStop> {
        let call_ms = self.call_ms.get()?;
        let by_class =
            (1..=max).map(|d| std::array::from_fn(|k| self.accept.p_node(self.class, Some(k), d, 0))).collect();
        let any = (1..=max).map(|d| self.accept.p_node(self.class, None, d, 0)).collect();
        let resume = self.catch_up_ms(lag) / RESUME_DRAFTS as f64;
        let draft_ms = |d: usize| if d == 0 { 0.0 } else { self.depth_ms(d, call_ms) + resume };
        Some(DepthStop::new(by_class, any, draft_ms, |d| self.cost.predict(1 + d)))
    }

    /// The probes' share of a plain step's time: [`PROBE_BUDGET`], halved for every probe in a
    /// row the target rejected ([`PROBE_BACKOFF`]), and the fewest plain steps between probes.
    fn probe_budget(&self) -> (f64, usize) {
        let backoff = 1usize << self.cold_probes.min(PROBE_BACKOFF);
        (PROBE_BUDGET / backoff as f64, PROBE_EVERY * backoff)
    }

    /// How much dearer a pass over `lag` tokens is than one over a single token, in the
    /// target's own cost model: a drafter's catch-up is a pass of its own model over the tokens
    /// it has not seen, priced as that many of its calls at this ratio.
    fn lag_scale(&self, lag: usize) -> f64 {
        self.cost.predict(lag.max(1)) / self.cost.predict(1)
    }

    /// What catching up on `lag` tokens adds to a draft, ms: nothing for a drafter at most one
    /// token behind (a steady draft feeds the last token anyway); else the learned catch-up
    /// time (or, before one was measured, the drafter's time per call) per unit of
    /// `lag_scale(lag) − 1`.
    fn catch_up_ms(&self, lag: usize) -> f64 {
        if lag <= 1 {
            return 0.0;
        }
        self.catch_up.or(self.call_ms.get()).map_or(0.0, |unit| unit * (self.lag_scale(lag) - 1.0))
    }

    /// Whether the next step probes a method that is not paying: at least `every` plain steps
    /// since the last probe ([`Auto::probe_budget`]), and credit for what the probe is expected
    /// to cost: the measured cost of earlier probes (or, before one was measured, of a drafter
    /// call for a method told its depth, or of a draft) and the drafter's catch-up on `lag`
    /// tokens ([`Auto::catch_up_ms`]).
    ///
    /// Probes were once spaced by their last cost alone, but a draft model's probe catches up
    /// on every token since the last one, so its cost grows with the spacing and no spacing
    /// kept it within the budget: SmolLM2 drafting for itself probed about once per 256-token
    /// MT-Bench answer, each probe a pass over the prompt and the answer so far (up to 349 ms
    /// against 4 ms steps), and ran 0.91–0.95× `ar` (session 49).
    fn probe_due(&self, told_depth: bool, lag: usize) -> bool {
        let (_, every) = self.probe_budget();
        if self.since_probe < every {
            return false;
        }
        let typical = self.probe_ms.or(if told_depth { self.call_ms } else { self.draft_ms }.get());
        typical.is_none_or(|d| self.probe_credit >= d + self.catch_up_ms(lag))
    }

    /// Whether the current draft class has fewer than [`MIN_TRIES`] verified first-level nodes:
    /// too few to price a method told its depth out on (its next plain step probes instead).
    fn untried(&self) -> bool {
        self.accept.tries(self.class, 1) < MIN_TRIES as f64
    }

    /// Under greedy decoding the committed tokens are the target's own, so once they reach past
    /// a proposal they say which of its nodes would have been accepted, pruned or not: the
    /// acceptance counts learn from the whole proposal. Learning from the verified part alone,
    /// a depth or a sibling rank the policy stopped keeping was never tried again, and its
    /// counts stayed where a few unlucky tries had left them — the n-gram trie locked onto
    /// 4-node drafts for a whole run after a 3 % change in the cost curve (session 63's replay).
    /// A proposal is learned from as soon as the tokens decide it (they ran past its deepest
    /// node, or off it); one the generation ends before is dropped.
    fn learn_in_hindsight(&mut self, tokens: &[u32]) {
        let accept = &mut self.accept;
        self.pending.retain(|p| {
            let Some(truth) = tokens.get(p.start..).filter(|t| !t.is_empty()) else { return true };
            let path = super::verify::greedy_path(&p.tree, truth);
            let deepest = p.tree.depths().iter().copied().max().unwrap_or(0);
            if path.len() < truth.len() || truth.len() >= deepest {
                accept.observe_nodes(p.class, p.nodes.as_deref(), &p.tree, &path);
                false
            } else {
                true
            }
        });
    }

    /// Draft sizes chosen and predicted against measured verify time so far.
    pub fn stats(&self) -> &PolicyStats {
        &self.stats
    }
}

/// Under sampling the committed tokens were drawn, so they do not say which pruned nodes would
/// have been accepted; but the target's distribution after the root and after each accepted
/// node (`after`, [`Verified::chances`]) gives every node of the proposal `template` below them
/// — pruned or not — its chance of acceptance, and the counts learn that expectation (a
/// fraction of a success per try; `None`: not a try). Learning from the draws of the verified
/// part alone, a sampled policy that drafted less learned less: priced against an honest
/// one-token pass, prompt lookup and ReDrafter at T = 0.7 kept smaller drafts and gained 2–5 %
/// less on MT-Bench (session 72). A token taken as given has the chance its parent's
/// distribution gives it (a sibling's repeat none); drawn tokens (`drawn`: the proposal's draft
/// distributions, all of it verified) theirs given their tokens, `min(1, p(x) / q(x))` for an
/// only child ([`acceptance_chances`]) — the verdicts' expectation over the verifier's random
/// numbers, without their noise. `kept[j]`: the proposal's node verified as node `j`.
fn chances(
    template: &DraftTree,
    kept: &[usize],
    accepted: &[usize],
    after: &[Vec<f32>],
    drawn: Option<&[Vec<f32>]>,
) -> Vec<Option<f64>> {
    let t = template;
    let parents = std::iter::once(None).chain(accepted.iter().map(|&j| Some(kept[j])));
    let mut chance = vec![None; t.len()];
    for (parent, p) in parents.zip(after) {
        let children: Vec<usize> = (0..t.len()).filter(|&i| t.parents()[i] == parent).collect();
        let tried: Vec<(u32, Option<&[f32]>)> =
            children.iter().map(|&i| (t.tokens()[i], drawn.map(|q| q[i].as_slice()))).collect();
        for (&i, c) in children.iter().zip(acceptance_chances(p, &tried)) {
            chance[i] = Some(c);
        }
    }
    chance
}

/// A drafting time learned from measurements: a running average of the steady ones (each moves
/// it by [`EMA`], counting at most [`OUTLIER`] times the average), kept at or below the latest
/// other one that made at least as many drafter calls as the last steady one — a proposal after
/// plain steps or at the start of a generation may include a catch-up, which only adds time,
/// so its time bounds the steady time of as deep a draft from above. (A shallower one bounds
/// nothing: a ReDrafter call with several live beams costs more than its first, one-beam call,
/// so a one-token probe's time per call is below a deeper draft's.)
#[derive(Debug, Clone, Copy, Default)]
struct DraftTime {
    average: Option<f64>,
    /// The latest non-steady measurement and its drafter calls.
    bound: Option<(f64, usize)>,
    /// Drafter calls of the latest steady measurement.
    steady_calls: usize,
}

impl DraftTime {
    fn get(&self) -> Option<f64> {
        self.average
    }

    /// The latest measurement that was not steady, if any (an upper bound of the steady time).
    fn bound_ms(&self) -> Option<f64> {
        self.bound.map(|(ms, _)| ms)
    }

    /// A measurement `ms` of a proposal that made `calls` drafter calls.
    fn learn(&mut self, ms: f64, calls: usize, steady: bool) {
        if steady {
            let bound = self.bound.filter(|&(_, c)| c >= calls).map_or(f64::INFINITY, |(b, _)| b);
            self.average = Some(self.average.map_or(ms.min(bound), |a| a + EMA * (ms.min(OUTLIER * a) - a)));
            self.steady_calls = calls;
        } else {
            self.bound = Some((ms, calls));
            if calls >= self.steady_calls {
                self.average = self.average.map(|a| a.min(ms));
            }
        }
    }
}

/// A depth's drafting time ([`DraftTime`]) and the count of drafts up to its last measurement:
/// older than [`STALE_DRAFTS`] drafts it prices nothing, and the next measurement starts afresh,
/// as for a depth never drafted.
#[derive(Debug, Clone, Copy, Default)]
struct DepthTime {
    time: DraftTime,
    at: usize,
}

impl DepthTime {
    /// The time, unless stale after `drafts` drafts.
    fn fresh(&self, drafts: usize) -> Option<&DraftTime> {
        (drafts - self.at < STALE_DRAFTS).then_some(&self.time)
    }

    /// A measurement ([`DraftTime::learn`]) of the draft after `drafts` others.
    fn learn(&mut self, drafts: usize, ms: f64, calls: usize, steady: bool) {
        if self.fresh(drafts).is_none() {
            self.time = DraftTime::default();
        }
        self.time.learn(ms, calls, steady);
        self.at = drafts + 1;
    }
}

impl Proposer for Auto {
    fn name(&self) -> &str {
        &self.name
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

    fn drafts_without_calls(&mut self, ctx: &DraftContext<'_>) -> bool {
        self.inner.drafts_without_calls(ctx)
    }

    fn lag(&self, ctx: &DraftContext<'_>) -> usize {
        self.inner.lag(ctx)
    }

    fn extra_stats(&self) -> Vec<(&'static str, f64)> {
        let mut v = self.inner.extra_stats();
        let s = &self.stats;
        let mean = s.kept as f64 / s.steps.max(1) as f64;
        v.push(("policy_mean_draft_nodes", mean));
        v.push(("policy_predicted_verify_ms", s.predicted_ms / s.steps.max(1) as f64));
        v.push(("policy_measured_verify_ms", s.measured_ms / s.steps.max(1) as f64));
        v.push(("policy_ar_steps_pct", 100.0 * s.empty_steps as f64 / s.steps.max(1) as f64));
        v
    }

    fn set_sampling(&mut self, cfg: &crate::sampling::SamplingConfig) {
        // Called once at the start of each generation: the next drafting time may include
        // the drafter's prefill of the new prompt.
        self.drafted_before = false;
        self.resume = std::mem::take(&mut self.drafted_now);
        self.cold_probes = 0;
        self.since_one = REFRESH_ONE;
        self.greedy = cfg.temperature == 0.0;
        self.pending.clear();
        self.inner.set_sampling(cfg);
    }

    fn draft_distributions(&self) -> Option<&[Vec<f32>]> {
        // A plain step did not call the method: its distributions are a step older.
        if self.skipped {
            return None;
        }
        self.inner.draft_distributions()
    }

    fn last_cost(&self) -> Option<DraftCost> {
        // A plain step did not call the method: its own last cost is a step older.
        if self.skipped {
            return Some(DraftCost::default());
        }
        self.inner.last_cost()
    }

    fn propose(&mut self, ctx: &DraftContext<'_>) -> Result<DraftTree, crate::DecodeError> {
        // The target's cache holds every token but the last: this step's passes follow those.
        self.cost.at_context(ctx.tokens.len().saturating_sub(1));
        self.learn_in_hindsight(ctx.tokens);
        let depth_range = self.inner.depth_range();
        // The method's own signal for this draft (cheap, known before it drafts).
        self.class = self.inner.draft_class(ctx);
        // A drafter whose time is not paid back even by the best part of a draft like its last
        // one (or, for a method told its depth, by the best depth) is not called at all: the
        // step is a plain `ar` step, except for a probe once enough such steps have passed.
        // A step that only measures the 1-token cost at this context ([`REFRESH_ONE`]).
        let refresh = self.learn_cost && self.since_one >= REFRESH_ONE;
        self.since_one += 1;
        // A method told its depth drafts to the best depth before it drafts, and with the same
        // rule stops by itself where a level stops paying ([`DepthStop`]); the full depth
        // until the drafter's time per call is measured. A refresh step drafts nothing and
        // builds no rule.
        // How far behind the drafter is (a draft model after plain steps, or in a new prompt).
        let lag = self.inner.lag(ctx);
        let mut rule = depth_range.filter(|_| !refresh).and_then(|max| self.depth_stop(max, lag));
        let mut depth = match depth_range {
            _ if refresh => 0,
            Some(max) => rule.as_ref().map_or(max, |r| r.best(&[])),
            None => usize::from(self.worth_drafting()),
        };
        // The level below that depth, last tried [`STALE_DRAFTS`] drafts ago, has its counts
        // faded ([`AcceptanceModel::fade`]) and the depth is chosen again: a level the rule
        // stopped drafting is otherwise never tried again to correct them — Qwen2.5-Coder 0.5B
        // drafting for 1.5B drafted two tokens a step for five HumanEval prompts, nearly every
        // draft accepted, after its third level was right 2 times in 6 in the first answer's
        // prose (session 68). Greedy only: hindsight then learns the level from the next
        // proposal whatever the target accepted. Sampled, a level is tried only below accepted
        // nodes, so a faded estimate stays up for many drafts: ReDrafter at T = 0.7 on
        // MT-Bench had τ 1.47 / 1.51 against 1.55 / 1.53 without the fade (session 69).
        if let (true, Some(max), Some(_)) = (self.greedy, depth_range, &rule) {
            if (1..max).contains(&depth) && self.accept.stale(self.class, depth + 1) {
                self.accept.fade(self.class, depth + 1);
                rule = self.depth_stop(max, lag);
                depth = rule.as_ref().map_or(max, |r| r.best(&[]));
            }
        }
        if depth > 0 {
            self.cold_probes = 0;
            self.drafted_now = true;
        }
        self.since_probe += 1;
        let resume = !refresh && depth_range.is_some() && std::mem::take(&mut self.resume);
        let probing = !refresh
            && depth == 0
            && (resume || self.probe_due(depth_range.is_some(), lag) || (depth_range.is_some() && self.untried()));
        self.probed = probing;
        // Not worth drafting by its last draft, but asked anyway: what it drafts is pruned as
        // any draft, and a step that keeps nothing stays a plain step between probes.
        let asked = !refresh
            && depth == 0
            && !probing
            && depth_range.is_none()
            && (self.cheap() || self.inner.drafts_without_calls(ctx));
        // A method told its depth whose drafter does not pay now may still draft what costs no
        // call (the copied context beside ReDrafter's beams, [`Proposer::drafts_without_calls`]):
        // it is asked for that part alone (depth 0), priced and pruned as any draft; the
        // drafter's probes and timings go on as if the step were plain.
        let call_free =
            !refresh && depth == 0 && !probing && depth_range.is_some() && self.inner.drafts_without_calls(ctx);
        let was_call_free = std::mem::replace(&mut self.call_free, call_free);
        let was_skipped = std::mem::replace(&mut self.skipped, depth == 0 && !probing && !asked && !call_free);
        if self.skipped {
            self.last = Some((self.cost.predict(1), self.clock.now_ms()));
            self.nodes = None;
            return Ok(DraftTree::new());
        }
        if !asked && !call_free {
            self.since_probe = 0;
        }
        if let Some(max) = depth_range {
            // A probe of a method told its depth drafts one token; any other draft may go as
            // deep as the method can when it stops by itself where a level stops paying.
            let stops = !probing && !call_free && rule.is_some_and(|rule| self.inner.set_depth_stop(rule));
            let limit = if call_free {
                0
            } else if stops {
                max
            } else {
                depth.max(1)
            };
            self.inner.limit_depth(limit);
            // A controller of the method's own (Pre-cut) prices its drafts as measured here.
            if let Some(call_ms) = self.call_ms.get() {
                let step = self.cost.predict(1);
                let verify = (0..=max).map(|k| self.cost.predict(1 + k) / step).collect();
                self.inner.set_costs(&StepCosts { call: call_ms / step, verify });
            }
        }
        let started = self.clock.now_ms();
        let tree = self.inner.propose(ctx)?;
        let ms = self.clock.now_ms() - started;
        // Drafting times are learned from proposals that follow a drafted step: the first one
        // may include the drafter's own prefill of the prompt (a draft model's catch-up), and
        // one after plain steps its catch-up on the tokens they added; counted as steady-state
        // drafting time, either would keep the policy from drafting for the rest of the
        // generation.
        //
        // Any other proposal's time still bounds the steady time from above ([`DraftTime`]).
        // Without that bound, one slow call in a loud moment of the host (27 ms against ~0.3,
        // the second call of an 80-prompt ReDrafter run, session 21) priced the drafter out for
        // the whole run: plain steps are not timed as drafting, and probes follow plain steps.
        let steady = self.drafted_before && !was_skipped && !was_call_free;
        self.drafted_before |= !call_free;
        let calls = self.inner.last_cost().map_or(0, |c| c.calls);
        if depth_range.is_some() && calls > 0 {
            // What the catch-up took: the draft's time beyond its calls at the time per call
            // (a running average, each measurement counting at most twice it once it is above 0).
            let scale = self.lag_scale(lag) - 1.0;
            if let Some(call_ms) = self.call_ms.get().filter(|_| lag >= CATCH_UP_MIN && scale > 1e-3) {
                let unit = ((ms - call_ms * calls as f64) / scale).max(0.0);
                let capped = |c: f64| if c > 0.0 { unit.min(OUTLIER * c) } else { unit };
                self.catch_up = Some(self.catch_up.map_or(unit, |c| c + EMA * (capped(c) - c)));
            }
            self.call_ms.learn(ms / calls as f64, calls, steady);
            // Priced by the depth it reached (a method may stop before the limit).
            let d = tree.depths().iter().copied().max().unwrap_or(depth).max(1);
            if self.depth_times.len() <= d {
                self.depth_times.resize(d + 1, DepthTime::default());
            }
            self.depth_times[d].learn(self.drafts, ms, calls, steady);
            self.drafts += 1;
        }
        // A method told its depth is priced per call; its probes draft one token, so their
        // whole drafting time bounds nothing. Any other method drafts the same whatever came
        // before: every measurement is comparable.
        // A draft that made no call (copied text alone, [`Proposer::drafts_without_calls`]) says
        // nothing of what the method's model drafts cost.
        if (depth_range.is_none() || steady) && self.inner.last_cost().is_none_or(|c| c.calls > 0) {
            self.draft_ms.learn(ms, 0, steady);
        }
        let probe = usize::from(probing);
        self.template = tree.clone();
        // Asked before `pruned`: the method's per-node state describes the whole proposal.
        let nodes = self.inner.node_classes(&tree);
        let (keep, predicted) = if self.inner.draft_distributions().is_some() {
            // Drawn tokens are verified whatever they drew (pruning them by their values would
            // bias them: [`Proposer::draft_distributions`]); the depth was set before drafting.
            ((0..tree.len()).collect(), self.cost.predict(1 + tree.len()))
        } else {
            let p = self.accept.path_probabilities_nodes(self.class, nodes.as_deref(), &tree);
            choose(&tree, &p, &self.cost, probe)
        };
        if asked && !keep.is_empty() {
            // A step that drafts: the next probe is a full interval away, and a cold method
            // is warm again.
            self.since_probe = 0;
            self.cold_probes = 0;
        }
        if probing {
            // What a probe really costs — its drafting (a draft model's catch-up on the tokens
            // of the plain steps before it, the prompt's prefill in a new generation) and the
            // longer verification of the node it keeps — is taken from the credit; less the
            // catch-up (priced by its own lag next time), it prices the next probe.
            let cost = ms + (predicted - self.cost.predict(1)).max(0.0);
            self.probe_credit -= cost;
            let own = (cost - self.catch_up_ms(lag)).max(0.0);
            self.probe_ms = Some(self.probe_ms.map_or(own, |d| d + EMA * (own - d)));
        }
        if keep.len() < tree.len() {
            self.inner.pruned(&keep);
        }
        self.nodes = nodes.as_ref().map(|n| keep.iter().map(|&i| n[i]).collect());
        self.template_nodes = nodes;
        let tree = subtree(&tree, &keep);
        self.kept = keep;
        self.last = Some((predicted, self.clock.now_ms()));
        Ok(tree)
    }

    fn observe_verified(&mut self, ctx: &DraftContext<'_>, tree: &DraftTree, verified: &Verified<'_>) {
        let skipped = self.skipped;
        // A rejected probe backs the next ones off; an accepted one resets them. A plain step
        // earns the probes their share of its time.
        if std::mem::take(&mut self.probed) {
            self.cold_probes = if verified.accepted.is_empty() { self.cold_probes.saturating_add(1) } else { 0 };
        } else if tree.is_empty() {
            self.probe_credit += self.probe_budget().0 * self.cost.predict(1);
        }
        if let Some((predicted, at)) = self.last.take() {
            let measured = self.clock.now_ms() - at;
            if self.learn_cost {
                // At the context `propose` set: the driver passes this step's context to both.
                self.cost.observe(tree.len() + 1, measured);
            }
            if tree.is_empty() {
                self.since_one = 0;
            }
            if !self.greedy {
                // The whole proposal, as far as the target's distributions reach, when it gave
                // them and verified what was kept (a draft past the context's limit is dropped
                // by the driver).
                match verified.chances.filter(|_| !skipped && tree.len() == self.kept.len()) {
                    Some(after) => {
                        // As the driver verified them: draft distributions for the whole proposal.
                        let drawn = self.inner.draft_distributions().filter(|q| q.len() == self.template.len());
                        let chance = chances(&self.template, &self.kept, verified.accepted, after, drawn);
                        let nodes = self.template_nodes.as_deref();
                        self.accept.observe_expected(self.class, nodes, &self.template, |i| chance[i]);
                    }
                    None => self.accept.observe_nodes(self.class, self.nodes.as_deref(), tree, verified.accepted),
                }
            } else if !skipped && !self.template.is_empty() {
                // The proposal this step verified part of ([`Auto::learn_in_hindsight`]).
                self.pending.push(Pending {
                    start: ctx.tokens.len(),
                    tree: self.template.clone(),
                    class: self.class,
                    nodes: self.template_nodes.clone(),
                });
            }
            // `tree` is what was verified: the kept nodes (none on a plain step).
            let s = &mut self.stats;
            s.empty_steps += usize::from(tree.is_empty());
            s.kept += tree.len();
            s.predicted_ms += predicted;
            s.measured_ms += measured;
            s.steps += 1;
        }
        // The method sees the tree that was verified (its kept part) — unless it did not draft.
        if !skipped {
            self.inner.observe_verified(ctx, tree, verified);
        }
    }
}

/// A chain of `n` draft tokens (10, 11, …), for the tests of the policy's parts.
#[cfg(test)]
fn chain(n: usize) -> DraftTree {
    let mut t = DraftTree::new();
    for i in 0..n {
        t.push(10 + i as u32, i.checked_sub(1));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_proposals_are_learned_from_whole_once_the_tokens_decide_them() {
        let cost = CostModel::from_points(&[(1, 1.0), (8, 2.0)]);
        let mut auto = Auto::with_fixed_cost(Box::new(crate::methods::PromptLookup::default()), cost);
        // A chain 10, 11, 12 and a sibling 20 of its first token, drafted after 5 tokens.
        let mut tree = chain(3);
        tree.push(20, None);
        let pending = |tree: &DraftTree| Pending { start: 5, tree: tree.clone(), class: 0, nodes: None };
        auto.pending.push(pending(&tree));
        let prefix = [0u32, 1, 2, 3, 4];
        // Two tokens committed, both on the chain: its third node is not decided yet.
        auto.learn_in_hindsight(&[&prefix[..], &[10, 11]].concat());
        assert_eq!((auto.pending.len(), auto.accept.tries(0, 1)), (1, 0.0), "waits");
        auto.learn_in_hindsight(&[&prefix[..], &[10, 11, 12]].concat());
        assert!(auto.pending.is_empty());
        // Both first-level nodes were tries, then the chain's 2nd and 3rd: all of it learned,
        // whatever part of it was verified.
        assert_eq!([1, 2, 3, 4].map(|d| auto.accept.tries(0, d)), [2.0, 1.0, 1.0, 0.0]);
        let p3 = auto.accept.p(3, 0);
        assert!(p3 > 0.5, "{p3}");
        // A proposal the tokens leave at once is decided by its first token.
        auto.pending.push(pending(&tree));
        auto.learn_in_hindsight(&[&prefix[..], &[30]].concat());
        assert!(auto.pending.is_empty());
        assert_eq!([1, 2].map(|d| auto.accept.tries(0, d)), [4.0, 1.0]);
    }

    /// A method that drew its chain from `q` ([`Proposer::draft_distributions`]).
    struct Drawn(Vec<Vec<f32>>);

    impl Proposer for Drawn {
        fn name(&self) -> &str {
            "drawn"
        }
        fn draft_distributions(&self) -> Option<&[Vec<f32>]> {
            Some(&self.0)
        }
        fn propose(&mut self, _ctx: &DraftContext<'_>) -> Result<DraftTree, crate::DecodeError> {
            Ok(chain(self.0.len()))
        }
    }

    #[test]
    fn drawn_drafts_learn_min_p_over_q_of_their_tokens() {
        let cost = CostModel::from_points(&[(1, 1.0), (8, 2.0)]);
        // The chain 10, 11, 12 drawn with q(10) = 0.8, q(11) = 0.25, q(12) = 0.5.
        let mut q = vec![vec![0.0f32; 32]; 3];
        (q[0][10], q[1][11], q[2][12]) = (0.8, 0.25, 0.5);
        let mut auto = Auto::with_fixed_cost(Box::new(Drawn(q)), cost);
        auto.greedy = false;
        let proposal = chain(3);
        (auto.template, auto.kept, auto.last) = (proposal.clone(), vec![0, 1, 2], Some((1.0, 0.0)));
        // p(10) = 0.4 after the root, p(11) = 0.5 after 10: 10 accepted, 11 rejected.
        let (mut root, mut below) = (vec![0.0f32; 32], vec![0.0f32; 32]);
        (root[10], below[11]) = (0.4, 0.5);
        let after = [root, below];
        let tokens = [1u32, 2, 3];
        let ctx = DraftContext { tokens: &tokens, prompt_len: 1, hidden: None, target_cache: None };
        let v = Verified { accepted: &[0], root_next: 10, node_next: &[11, 0, 0], chances: Some(&after) };
        auto.observe_verified(&ctx, &proposal, &v);
        // Depth 1: min(1, 0.4 / 0.8) = half a success; depth 2: min(1, 0.5 / 0.25) = a whole one
        // (its verdict, a rejection, was the noise); depth 3: its parent was not accepted.
        assert_eq!([1, 2, 3].map(|d| auto.accept.tries(0, d)), [1.0, 1.0, 0.0]);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
        assert!(close(auto.accept.p(1, 0), 1.5 / 3.0), "{}", auto.accept.p(1, 0));
        assert!(close(auto.accept.p(2, 0), (1.0 + 2.0 * 1.5 / 3.0) / 3.0), "{}", auto.accept.p(2, 0));
    }

    #[test]
    fn sampled_proposals_learn_the_target_chances_of_their_pruned_nodes_too() {
        let cost = CostModel::from_points(&[(1, 1.0), (8, 2.0)]);
        let mut auto = Auto::with_fixed_cost(Box::new(crate::methods::PromptLookup::default()), cost);
        auto.greedy = false;
        // The proposal: a chain 10, 11, 12 and a sibling 20 of its first token; 10 and 11 kept.
        let mut proposal = chain(3);
        proposal.push(20, None);
        let (kept, verified) = (vec![0, 1], subtree(&proposal, &[0, 1]));
        (auto.template, auto.kept, auto.last) = (proposal, kept, Some((1.0, 0.0)));
        // The target: p(10) = 0.6 and p(20) = 0.3 after the root; p(11) = 0.5 after 10, which
        // was accepted; 11 was not.
        let (mut root, mut below) = (vec![0.0f32; 32], vec![0.0f32; 32]);
        (root[10], root[20], below[11]) = (0.6, 0.3, 0.5);
        let after = [root, below];
        let tokens = [1u32, 2, 3];
        let ctx = DraftContext { tokens: &tokens, prompt_len: 1, hidden: None, target_cache: None };
        let v = Verified { accepted: &[0], root_next: 10, node_next: &[11, 0], chances: Some(&after) };
        auto.observe_verified(&ctx, &verified, &v);
        // Depth 1: both tokens were tries, the pruned 20 too, as 0.6 and 0.3 of a success; depth
        // 2: 11, as half of one; depth 3: its parent was not accepted.
        assert_eq!([1, 2, 3].map(|d| auto.accept.tries(0, d)), [2.0, 1.0, 0.0]);
        // Beta counts with a prior of two tries at 0.5 (depth 1) or the level above.
        let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
        assert!(close(auto.accept.p(1, 0), 1.6 / 3.0) && close(auto.accept.p(1, 1), 1.3 / 3.0));
        assert!(close(auto.accept.p(2, 0), (0.5 + 2.0 * 1.6 / 3.0) / 3.0));
    }
}
