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
//!   target would have accepted ([`Auto::learn_in_hindsight`]).
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

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use burn::tensor::backend::Backend;
use draftsmith_core::DraftTree;
use draftsmith_model::Model;
use serde::{Deserialize, Serialize};

use super::proposer::{DraftContext, DraftCost, HiddenState, Proposer, StepCosts, Verified};

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

impl std::str::FromStr for DraftPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "fixed" => Ok(Self::Fixed),
            other => Err(format!("unknown draft policy `{other}` (auto, fixed)")),
        }
    }
}

impl std::fmt::Display for DraftPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::Fixed => "fixed",
        })
    }
}

/// Largest pass the cost model keeps a bucket for (larger ones are extrapolated linearly).
const MAX_N: usize = 128;
/// Weight of a new measurement in a running average (drafting times, catch-ups, probes).
const EMA: f64 = 0.2;
/// A measured time counts at most this many times the estimate it updates.
const OUTLIER: f64 = 2.0;
/// The cost model's forgetting factor: each pass weighs this much less in its fit at every later
/// pass (half after ~700), so the fit follows the context's growth and the host's drift.
pub const COST_FORGET: f64 = 0.999;
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
/// ([`Auto::depth_ms`]): a depth priced out in a loud moment of the host is otherwise never
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
/// probe ([`Auto::untried`]). Two drafts are too few to judge a drafter by: Qwen2.5-Coder 0.5B
/// drafting for 1.5B had one of its first two first-level tokens rejected, and at the
/// acceptance of 0.5 that left (with a loud moment's verify times) it drafted nothing for 4 of
/// 20 HumanEval prompts (session 55) — its first-level tokens are right ~85 % of the time.
pub const MIN_TRIES: usize = 8;
/// The fewest tokens behind at which a draft's time teaches the policy what a catch-up costs.
const CATCH_UP_MIN: usize = 8;
/// The weight, in tries, that a level's acceptance counts keep when they fade
/// ([`AcceptanceModel::fade`]): below the prior's [`PRIOR_TRIES`], so the parent's acceptance
/// leads until the level is tried again. (A level forgotten whole borrows the parent's alone,
/// and so does every level below it that was never tried: a drafter right for three tokens of
/// eight then drafted all eight every [`STALE_DRAFTS`] drafts.)
const FADED_TRIES: f64 = 0.5;
/// Deepest level and widest sibling rank with their own acceptance counts.
const DEPTHS: usize = 16;
const RANKS: usize = 4;

/// The time of a target pass over `n` tokens after `L` cached ones, in milliseconds: the
/// start-up calibration's curve `c(n)` (timed after `L₀` cached tokens) fitted to the measured
/// passes as `θ₀ + θ₁ · c(n) + θ₂ · (n − 1) + (θ₃ + θ₄ · (n − 1)) · (L − L₀) / 1000` — an offset
/// (what a decoding step adds to a calibration pass: the caches the drafter and the sampler
/// leave cold), the machine's scale, a cost per row beyond the calibration's, and what the
/// attention over a longer context adds to a pass and to each of its rows — by recursive least
/// squares with forgetting ([`COST_FORGET`]). The context terms keep the fit from lagging a
/// cost that grows with the text: without them, over TokenSwift's 4096 tokens after a
/// 1536-token prompt its predictions ran at 0.77–0.78 of the measured passes (session 63).
///
/// One fit for every size, not an average per size: a pass's time moves ±24 % from step to step
/// on the 2-core Xeon (a records file's verify ms over its size's mean), and averages per size
/// that noisy made the n-gram trie's draft choices a lottery — the policy drafts the sizes it
/// currently underrates, stops measuring the ones it overrates, and its acceptance counts for
/// the depths it stops drafting go stale with them. Replayed over session 63's context-task
/// answers with that noise (`examples/replay.rs --noise`), the trie ran 3 % slower than with
/// its cost curve known and fixed, prompt lookup 0.5 %; a per-size curve off by ±3 % at random
/// cost the trie 2–4 % even without noise.
#[derive(Debug, Clone)]
pub struct CostModel {
    /// Calibrated time per size (index `n`; interpolated between the calibrated sizes).
    prior: Vec<f64>,
    /// The cached tokens the calibration's passes followed (`L₀`).
    calibrated_at: usize,
    /// The cached tokens of the passes priced and observed now ([`CostModel::at_context`]).
    context: usize,
    /// The fit's coefficients `θ`.
    theta: [f64; FIT],
    /// Their covariance.
    cov: [[f64; FIT]; FIT],
}

/// Coefficients of the cost fit ([`CostModel`]).
const FIT: usize = 5;

/// The cached tokens the calibration's passes follow ([`Plan::for_model`]: fewer for a slow
/// model or a short window), and what a calibration from bare points is taken to have followed.
const CALIBRATED_AT: usize = 64;

/// The cost fit's prior variance of each coefficient for a calibrated one-token pass of `t1` ms:
/// the offset within half a step, the scale within half of one, the cost per row within a
/// tenth of a step, per 1000 more cached tokens half a step more per pass and a twentieth of
/// one more per row (one standard deviation each; SmolLM2-135M on the 2-core Xeon adds ~0.45
/// and ~0.1, `bench ar --contexts 64,512`, session 64). The fit starts from them and is kept at
/// or below them: without a bound, a direction the measured passes do not excite (plain steps
/// alone say nothing of the cost per row, one context nothing of the context's) would grow
/// under the forgetting until one pass swung it. The last is kept narrow: a TokenSwift run
/// starts 1.5 k tokens past the calibration, where with three times this deviation its first
/// few small drafts put most of their error on it and priced 14-token trees 12 % above what
/// they cost (one of two runs then drafted 3-token trees for its first quarter, 3.37× against
/// 3.83× beside it).
fn prior_variances(t1: f64) -> [f64; FIT] {
    let t2 = t1 * t1;
    [0.25 * t2, 0.25, 0.01 * t2, 0.25 * t2, 0.0025 * t2]
}

impl CostModel {
    /// From calibrated `(n, ms)` points (at least one, `n ≥ 1`), interpolated linearly.
    pub fn from_points(points: &[(usize, f64)]) -> Self {
        let mut pts: Vec<(usize, f64)> = points.iter().copied().filter(|&(n, ms)| n >= 1 && ms > 0.0).collect();
        pts.sort_by_key(|p| p.0);
        assert!(!pts.is_empty(), "a cost model needs at least one calibrated point");
        let prior: Vec<f64> = (0..=MAX_N)
            .map(|n| {
                let n = n.max(1);
                match pts.iter().position(|&(m, _)| m >= n) {
                    Some(0) => pts[0].1 * n as f64 / pts[0].0 as f64,
                    Some(i) => {
                        let ((a, ta), (b, tb)) = (pts[i - 1], pts[i]);
                        ta + (tb - ta) * (n - a) as f64 / (b - a) as f64
                    }
                    None => {
                        let (b, tb) = pts[pts.len() - 1];
                        let slope = if pts.len() > 1 {
                            (tb - pts[pts.len() - 2].1) / (b - pts[pts.len() - 2].0) as f64
                        } else {
                            tb / b as f64
                        };
                        tb + slope * (n - b) as f64
                    }
                }
            })
            .collect();
        let cov0 = prior_variances(prior[1]);
        let cov = std::array::from_fn(|i| std::array::from_fn(|j| if i == j { cov0[i] } else { 0.0 }));
        let mut theta = [0.0; FIT];
        theta[1] = 1.0;
        Self { prior, calibrated_at: CALIBRATED_AT, context: CALIBRATED_AT, theta, cov }
    }

    /// The same calibration, timed after `cached` tokens (`L₀`; also the context priced until
    /// [`CostModel::at_context`] says otherwise).
    pub fn calibrated_at(self, cached: usize) -> Self {
        Self { calibrated_at: cached, context: cached, ..self }
    }

    /// Prices and observes the passes that follow `cached` tokens from now on.
    pub fn at_context(&mut self, cached: usize) {
        self.context = cached;
    }

    /// Thousands of cached tokens beyond the calibration's.
    fn extra_context(&self) -> f64 {
        (self.context as f64 - self.calibrated_at as f64) / 1000.0
    }

    /// The fit's regressors for a pass over `n` tokens.
    fn features(&self, n: usize) -> [f64; FIT] {
        let (rows, l) = ((n - 1) as f64, self.extra_context());
        [1.0, self.prior[n], rows, l, rows * l]
    }

    fn fit(&self, n: usize) -> f64 {
        let x = self.features(n);
        (0..FIT).map(|i| self.theta[i] * x[i]).sum()
    }

    /// Predicted milliseconds of a pass over `n ≥ 1` tokens (never below a smaller pass).
    pub fn predict(&self, n: usize) -> f64 {
        let n = n.max(1);
        if n > MAX_N {
            return self.predict(MAX_N) * n as f64 / MAX_N as f64;
        }
        let one = self.fit(1).max(1e-3 * self.prior[1]);
        if n == 1 {
            one
        } else if self.theta[1] >= 0.0 && self.theta[2] + self.theta[4] * self.extra_context() >= 0.0 {
            // Both slopes up (the calibration's curve never falls): the fit grows with `n`.
            self.fit(n).max(one)
        } else {
            // A fit tilted by noise is never read as a larger pass costing less.
            (2..=n).map(|m| self.fit(m)).fold(one, f64::max)
        }
    }

    /// Records a measured pass: one recursive-least-squares step of the fit. A pass counts at
    /// most [`OUTLIER`] times its prediction, and each coefficient's variance stays at or below
    /// its prior ([`prior_variances`]). (Clamping the slopes at zero after each step instead
    /// collapsed 5 of 8 replayed runs to plain steps: the projection fights the update;
    /// [`CostModel::predict`] reads a tilted fit as non-decreasing instead.)
    pub fn observe(&mut self, n: usize, ms: f64) {
        if n == 0 || n > MAX_N || !ms.is_finite() || ms <= 0.0 {
            return;
        }
        let x = self.features(n);
        let predicted = self.predict(n);
        let error = ms.min(OUTLIER * predicted) - self.fit(n);
        let c = self.cov;
        let cx: [f64; FIT] = std::array::from_fn(|i| (0..FIT).map(|j| c[i][j] * x[j]).sum());
        let denom = COST_FORGET + (0..FIT).map(|i| x[i] * cx[i]).sum::<f64>();
        let gain: [f64; FIT] = std::array::from_fn(|i| cx[i] / denom);
        for (t, g) in self.theta.iter_mut().zip(gain) {
            *t += g * error;
        }
        self.cov = std::array::from_fn(|i| std::array::from_fn(|j| (c[i][j] - gain[i] * cx[j]) / COST_FORGET));
        let cov0 = prior_variances(self.prior[1]);
        for (i, &bound) in cov0.iter().enumerate() {
            if self.cov[i][i] > bound {
                let f = (bound / self.cov[i][i]).sqrt();
                for j in 0..FIT {
                    self.cov[i][j] *= f;
                    self.cov[j][i] *= f;
                }
            }
        }
    }

    /// The calibration of `model` on this machine: chains of 1, 2, 4, 8, 16, 32 and 64 draft
    /// tokens after 64 cached tokens, or fewer where a model's passes are too slow for that to
    /// fit in well under a second ([`Plan`]), measured once per process, model shape and engine
    /// path.
    pub fn calibrate<B: Backend>(model: &Model<B>) -> Self {
        /// Measured (tree size, ms) points and the cached tokens they followed, per model shape
        /// and activation mode.
        type Calibrations = Vec<(String, (Vec<(usize, f64)>, usize))>;
        static CACHE: OnceLock<Mutex<Calibrations>> = OnceLock::new();
        let key = format!("{:?} {:?}", model.config(), model.activations());
        let cache = CACHE.get_or_init(|| Mutex::new(Vec::new()));
        if let Some((_, (pts, at))) = cache.lock().expect("cost cache").iter().find(|(k, _)| *k == key) {
            return Self::from_points(pts).calibrated_at(*at);
        }
        let (pts, at) = measure(model).unwrap_or_else(|| (vec![(1, 1.0), (64, 64.0)], CALIBRATED_AT));
        cache.lock().expect("cost cache").push((key, (pts.clone(), at)));
        Self::from_points(&pts).calibrated_at(at)
    }
}

/// What the start-up calibration ([`CostModel::calibrate`]) may spend by its plan's own
/// estimate ([`Plan::cost`]), its context's prefill included (the probe step before it not).
const CALIBRATION_MS: f64 = 600.0;

/// The plan's estimate of what each token past the first adds to a pass, as a share of a
/// one-token pass: on the 2-core AMX Xeon 0.18–0.21 for SmolLM2-135M and Qwen2.5-Coder-1.5B
/// alike (`bench ar`'s curves, t(64) / t(1) 12.1–14.1; session 59).
const ROW_SHARE: f64 = 0.2;

/// How the calibration times the target: a context of `context` cached tokens, then chains of
/// `sizes` tokens in `rounds`.
#[derive(Debug, Clone, PartialEq)]
struct Plan {
    context: usize,
    sizes: Vec<usize>,
    rounds: crate::cost::Rounds,
}

impl Plan {
    /// The plan for `model`, whose one-token pass took `t1` ms here: every size from 1 to 64
    /// after 64 cached tokens, two timed rounds after an untimed one, each timed pass after
    /// [`WARM_MS`](crate::cost::WARM_MS) of steps — when that fits [`CALIBRATION_MS`] (SmolLM2:
    /// ~0.35 s). A slower model (Qwen2.5-Coder-1.5B: ~2.9 s that way) gets 16 cached tokens, no
    /// untimed round and no warm steps, and two timed rounds of the most sizes that fit if they
    /// reach 16 tokens, else one; the policy prices the sizes left out by extending the last two
    /// points, and corrects every size it drafts from its measured passes.
    fn for_model(max_positions: usize, t1: f64) -> Self {
        use crate::cost::Rounds;
        let context = CALIBRATED_AT.min(max_positions / 4).max(1);
        let sizes: Vec<usize> =
            [1, 2, 4, 8, 16, 32, 64].into_iter().filter(|&n| context + n + 1 < max_positions).collect();
        let full = Plan { context, sizes: sizes.clone(), rounds: Rounds::full(2) };
        if full.cost(t1) <= CALIBRATION_MS {
            return full;
        }
        let short = |k: usize, runs: usize| Plan {
            context: context.min(16),
            sizes: sizes[..k].to_vec(),
            rounds: Rounds::cold(runs),
        };
        // Two runs (the faster counts: one loud pass does not misprice a size) while they
        // reach 16 tokens, the size drafts seldom exceed; else one run of the most sizes.
        let fewest = sizes.len().min(2);
        let twice = (1..=sizes.len()).rev().filter(|&k| sizes[k - 1] >= 16).map(|k| short(k, 2));
        let once = (fewest..=sizes.len()).rev().map(|k| short(k, 1));
        twice.chain(once).find(|p| p.cost(t1) <= CALIBRATION_MS).unwrap_or_else(|| short(fewest, 1))
    }

    /// Estimated milliseconds of the plan for a model whose one-token pass takes `t1` ms
    /// (a pass over `n` tokens priced at `t1 · (1 + ROW_SHARE · (n − 1))`).
    fn cost(&self, t1: f64) -> f64 {
        let pass = |n: usize| t1 * (1.0 + ROW_SHARE * n.saturating_sub(1) as f64);
        let round: f64 = self.sizes.iter().map(|&n| pass(n)).sum();
        let rounds = self.rounds.runs + usize::from(self.rounds.warmup);
        let warm = self.rounds.warm_ms.map_or(0.0, |ms| ms.max(t1)) * (self.sizes.len() * self.rounds.runs) as f64;
        pass(self.context) + round * rounds as f64 + warm
    }
}

/// Times chains of the sizes of `model`'s calibration [`Plan`], the fastest run of each, and
/// the cached tokens they followed (`None` if the model cannot run them). The fastest, not the
/// median (of two runs, the slower): a price set too low is corrected by the next drafted pass
/// of that size, one set too high in a loud moment keeps the policy from drafting that size, so
/// from measuring it (the fit over the other sizes then corrects it only through the
/// coefficients they share).
fn measure<B: Backend>(model: &Model<B>) -> Option<(Vec<(usize, f64)>, usize)> {
    use crate::cost::{cached_context, probe_step, time_passes, DraftShape};
    let t1 = probe_step(model).ok()?;
    let plan = Plan::for_model(model.config().max_position_embeddings, t1);
    let mut cache = cached_context(model, plan.context, *plan.sizes.last()?).ok()?;
    let timings = time_passes(model, &mut cache, DraftShape::Chain, &plan.sizes, plan.rounds).ok()?;
    Some((timings.iter().map(|t| (t.n, t.min_ms)).collect(), plan.context))
}

/// Beta counts of "accepted given the parent was", by draft class (the method's own signal for
/// the whole draft, [`Proposer::draft_class`]), node class (its signal per node,
/// [`Proposer::node_classes`]), depth and sibling rank.
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
        self.drafts += 1;
        let ranks = sibling_ranks(tree);
        let on_path = |i: usize| accepted.contains(&i);
        for (i, &rank) in ranks.iter().enumerate() {
            let parent_ok = tree.parents()[i].is_none_or(on_path);
            if parent_ok {
                let (d, r) = (tree.depths()[i].clamp(1, DEPTHS) - 1, rank.min(RANKS - 1));
                self.last_try[class.min(CLASSES - 1)][d] = self.drafts;
                let node = node_class(nodes, i);
                for c in std::iter::once(cell(class, None)).chain(node.map(|k| cell(class, Some(k)))) {
                    let n = &mut self.counts[c][d][r];
                    n.1 += 1.0;
                    if on_path(i) {
                        n.0 += 1.0;
                    }
                }
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
    /// at most [`FADED_TRIES`] tries, keeping their ratio: the depth then borrows most of its
    /// parent's acceptance again, as one never tried does, and the next tries decide. Counts as
    /// a try for [`AcceptanceModel::stale`].
    pub fn fade(&mut self, class: usize, depth: usize) {
        let (c, d) = (class.min(CLASSES - 1), depth.clamp(1, DEPTHS) - 1);
        for cell in &mut self.counts[c * (NODE_CLASSES + 1)..(c + 1) * (NODE_CLASSES + 1)] {
            for n in &mut cell[d] {
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
/// ([`Proposer::set_depth_stop`]) after each drafter call, with the node classes of the best path
/// so far, whether a deeper draft is expected to raise the step's tokens per millisecond —
/// SpecDec++'s stopping, priced with the policy's own models. A depth chosen before drafting
/// prices every level with the acceptance of
/// a node of any class; the drafter's own certainty of the nodes it has just drafted (a
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
        let p = self.accept.path_probabilities_nodes(self.class, nodes.as_deref(), &tree);
        let (keep, predicted) = if self.inner.draft_distributions().is_some() {
            // Drawn tokens are verified whatever they drew (pruning them by their values would
            // bias them: [`Proposer::draft_distributions`]); the depth was set before drafting.
            ((0..tree.len()).collect(), self.cost.predict(1 + tree.len()))
        } else {
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
        self.last = Some((predicted, self.clock.now_ms()));
        Ok(subtree(&tree, &keep))
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
                self.accept.observe_nodes(self.class, self.nodes.as_deref(), tree, verified.accepted);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(n: usize) -> DraftTree {
        let mut t = DraftTree::new();
        for i in 0..n {
            t.push(10 + i as u32, i.checked_sub(1));
        }
        t
    }

    #[test]
    fn cost_model_interpolates_and_follows_measurements() {
        let mut c = CostModel::from_points(&[(1, 2.0), (8, 5.5), (64, 40.0)]);
        assert!((c.predict(1) - 2.0).abs() < 1e-9 && (c.predict(8) - 5.5).abs() < 1e-9);
        assert!((c.predict(4) - 3.5).abs() < 1e-9, "linear between calibrated sizes");
        assert!(c.predict(128) > c.predict(64));
        for _ in 0..50 {
            c.observe(8, 11.0);
        }
        assert!((c.predict(8) - 11.0).abs() < 0.1, "a measured size follows its measurements: {}", c.predict(8));
        assert!(c.predict(16) > 2.0 * 5.5 * 0.9, "unseen sizes scale with the machine: {}", c.predict(16));
        for n in 1..64 {
            assert!(c.predict(n) <= c.predict(n + 1) + 1e-9, "a larger pass never costs less");
        }
    }

    #[test]
    fn the_calibration_plan_fits_its_budget_and_shrinks_for_slow_models() {
        use crate::cost::Rounds;
        // SmolLM2-135M on the AMX Xeon (a 2.3 ms step): every size, as `bench ar` times.
        let small = Plan::for_model(8192, 2.3);
        assert_eq!(small, Plan { context: 64, sizes: vec![1, 2, 4, 8, 16, 32, 64], rounds: Rounds::full(2) });
        assert!(small.cost(2.3) < 400.0, "{}", small.cost(2.3));
        // Qwen2.5-Coder-1.5B there (a 37 ms step): a short context, no warm steps, sizes to 16.
        let slow = Plan::for_model(32768, 37.0);
        assert_eq!((slow.context, slow.rounds.warmup, slow.rounds.warm_ms), (16, false, None));
        assert_eq!(slow.sizes, vec![1, 2, 4, 8, 16]);
        assert!(slow.cost(37.0) <= CALIBRATION_MS);
        // Qwen2.5-Coder-0.5B there (a 14.5 ms step): two runs to 32 rather than one to 64.
        let mid = Plan::for_model(32768, 14.5);
        assert_eq!((mid.sizes.last(), mid.rounds.runs), (Some(&32), 2));
        // A model too slow for any plan to fit still gets two sizes, once.
        let huge = Plan::for_model(32768, 900.0);
        assert_eq!((huge.sizes.clone(), huge.rounds.runs), (vec![1, 2], 1));
        // A tiny model's context leaves room for its sizes.
        let tiny = Plan::for_model(64, 0.1);
        assert!(tiny.context + tiny.sizes.last().unwrap() < 64, "{tiny:?}");
    }

    #[test]
    fn one_fit_prices_every_size_from_the_others() {
        // The host runs at twice the calibration's times, measured at sizes 1 and 3 only.
        let mut c = CostModel::from_points(&[(1, 4.0), (2, 4.4), (4, 5.2), (8, 7.0)]);
        for _ in 0..40 {
            c.observe(1, 8.0);
            c.observe(3, 9.6);
        }
        for (n, want) in [(1, 8.0), (2, 8.8), (3, 9.6), (4, 10.4)] {
            assert!((c.predict(n) - want).abs() < 0.3, "t({n}) = {} against {want}", c.predict(n));
        }
        // Then each extra row costs a step more than the calibration said (a longer context).
        for _ in 0..200 {
            c.observe(1, 8.0);
            c.observe(5, 8.0 + 4.0 * 2.0);
        }
        let per_row = (c.predict(7) - c.predict(5)) / 2.0;
        assert!(per_row > 1.5, "the cost per row follows: {per_row}");
    }

    #[test]
    fn the_fit_keeps_up_with_a_growing_context() {
        // SmolLM2-like: a 2.3 ms step calibrated after 64 tokens; a pass costs 1 ms more per 1000
        // cached tokens and each row 0.25 ms more, as the context grows from 1600 to 5600 tokens
        // over 1000 passes of 1 to 8 tokens (TokenSwift's runs).
        let calib = [(1, 2.3), (2, 2.5), (4, 3.0), (8, 4.5), (16, 7.5)];
        let mut c = CostModel::from_points(&calib).calibrated_at(64);
        let true_ms = |n: usize, cached: usize| {
            let base = CostModel::from_points(&calib).predict(n);
            let l = (cached as f64 - 64.0) / 1000.0;
            base + l * (1.0 + 0.25 * (n - 1) as f64)
        };
        let mut worst: f64 = 0.0;
        for step in 0..1000 {
            let cached = 1600 + 4 * step;
            c.at_context(cached);
            let n = 1 + step % 8;
            if step >= 500 {
                worst = worst.max((c.predict(n) / true_ms(n, cached) - 1.0).abs());
            }
            c.observe(n, true_ms(n, cached));
        }
        assert!(worst < 0.05, "predictions within 5 % once the fit has seen the growth: {worst}");
        // A pass at the calibration's context still costs about what the calibration said.
        c.at_context(64);
        assert!((c.predict(1) - 2.3).abs() < 0.3, "{}", c.predict(1));
    }

    #[test]
    fn a_loud_moment_passes() {
        let mut c = CostModel::from_points(&[(1, 4.0), (2, 4.2), (4, 4.8), (8, 7.0)]);
        c.observe(1, 4.0);
        // Three 2-token passes while the host's neighbours load it: t(2) looks dear.
        for _ in 0..3 {
            c.observe(2, 7.0);
        }
        let loud = c.predict(2);
        assert!(loud > 5.0, "{loud}");
        // Then only quiet plain steps and 3-token passes (the policy no longer picks 2).
        for _ in 0..30 {
            c.observe(1, 4.0);
            c.observe(3, 4.4);
        }
        assert!(c.predict(2) < 4.4, "t(2) follows the others back down: {}", c.predict(2));
        assert!(c.predict(2) <= c.predict(3) + 1e-9 && c.predict(3) <= c.predict(4) + 1e-9);
        // One pass ten times too slow moves the fit as a pass at twice its prediction would.
        let before = c.predict(3);
        c.observe(3, 44.0);
        assert!(c.predict(3) <= before * (1.0 + EMA), "{}", c.predict(3));
    }

    #[test]
    fn a_stale_one_token_estimate_does_not_floor_the_drafts() {
        // One slow plain step, then only 2-token passes (a policy that drafts every step).
        let mut c = CostModel::from_points(&[(1, 4.0), (2, 4.4)]);
        c.observe(1, 6.0);
        assert!(c.predict(2) > 5.0, "{}", c.predict(2));
        for _ in 0..30 {
            c.observe(2, 4.2);
        }
        assert!((c.predict(2) - 4.2).abs() < 0.1, "{}", c.predict(2));
        assert!(c.predict(1) <= c.predict(2), "a 1-token pass is never predicted dearer than a 2-token one");
    }

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
