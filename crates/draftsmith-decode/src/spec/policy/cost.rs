//! The cost model of the draft policy: the time of a target pass over `n` tokens on this
//! machine, calibrated at start-up and fitted to every measured pass ([`CostModel`]).

use std::sync::{Mutex, OnceLock};

use burn::tensor::backend::Backend;
use draftsmith_model::Model;

use super::OUTLIER;

/// Largest pass the cost model keeps a bucket for (larger ones are extrapolated linearly).
const MAX_N: usize = 128;
/// The cost model's forgetting factor: each pass weighs this much less in its fit at every later
/// pass (half after ~700), so the fit follows the context's growth and the host's drift.
pub const COST_FORGET: f64 = 0.999;

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
    /// most `OUTLIER` times its prediction, and each coefficient's variance stays at or below
    /// its prior (`prior_variances`). (Clamping the slopes at zero after each step instead
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
    /// fit in well under a second (`Plan`), measured once per process, model shape and engine
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
/// 750 since the warm steps after a long pass last as long as it did (session 72; 600 before):
/// SmolLM2-135M keeps the full plan up to a ~4.3 ms step, as it did up to ~4.5 ms.
const CALIBRATION_MS: f64 = 750.0;

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
    /// [`WARM_MS`](crate::cost::WARM_MS) of steps (as long as the pass before, after a longer
    /// one) — when that fits [`CALIBRATION_MS`] (SmolLM2: ~0.42 s). A slower model
    /// (Qwen2.5-Coder-1.5B: ~2.9 s that way) gets 16 cached tokens, no untimed round and no warm
    /// steps, and two timed rounds of the most sizes that fit if they reach 16 tokens, else one;
    /// the policy prices the sizes left out by extending the last two points, and corrects every
    /// size it drafts from its measured passes.
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
    /// (a pass over `n` tokens priced at `t1 · (1 + ROW_SHARE · (n − 1))`; in a round each
    /// size's pass is followed once by warm steps at least as long as itself).
    fn cost(&self, t1: f64) -> f64 {
        let pass = |n: usize| t1 * (1.0 + ROW_SHARE * n.saturating_sub(1) as f64);
        let round: f64 = self.sizes.iter().map(|&n| pass(n)).sum();
        let rounds = self.rounds.runs + usize::from(self.rounds.warmup);
        let warm_round: f64 = match self.rounds.warm_ms {
            Some(ms) => self.sizes.iter().map(|&n| ms.max(pass(n))).sum(),
            None => 0.0,
        };
        pass(self.context) + round * rounds as f64 + warm_round * self.rounds.runs as f64
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

#[cfg(test)]
mod tests {
    use super::super::EMA;
    use super::*;

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
        assert!(small.cost(2.3) < 450.0, "{}", small.cost(2.3));
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
}
