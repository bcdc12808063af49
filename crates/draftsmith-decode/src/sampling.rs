//! Logits processing shared by every decoding method: temperature, top-k, top-p, min-p and
//! repetition penalty, then greedy choice or seeded sampling. Works on host `f32` slices.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

/// Sampling parameters. `temperature == 0` means greedy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplingConfig {
    pub temperature: f32,
    /// Keep the `k` most likely tokens (0 = off).
    pub top_k: usize,
    /// Keep the smallest set whose probability reaches `p` (1.0 = off).
    pub top_p: f32,
    /// Drop tokens less likely than `min_p` × the top probability (0 = off).
    pub min_p: f32,
    /// CTRL-style penalty on tokens already in the context (1.0 = off); TokenSwift's
    /// contextual penalty θ when `penalty_window` is set.
    pub repetition_penalty: f32,
    /// Only the last `penalty_window` context tokens are penalized (0 = the whole context;
    /// TokenSwift's W).
    pub penalty_window: usize,
    /// η-sampling (Hewitt et al., 2022): drop tokens below `min(η, √η·exp(−H))`, H the
    /// entropy of the distribution (0 = off).
    pub eta: f32,
    pub seed: u64,
}

impl Default for SamplingConfig {
    fn default() -> Self {
        Self {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repetition_penalty: 1.0,
            penalty_window: 0,
            eta: 0.0,
            seed: 0,
        }
    }
}

impl SamplingConfig {
    /// Every value in its range: temperature ≥ 0, top-p in (0, 1], min-p in [0, 1], penalty > 0,
    /// η in [0, 1), all finite.
    pub fn validate(&self) -> Result<(), crate::DecodeError> {
        let checks: [(&'static str, f32, bool, &'static str); 5] = [
            ("temperature", self.temperature, self.temperature >= 0.0, "must be ≥ 0 (0 = greedy)"),
            ("top_p", self.top_p, self.top_p > 0.0 && self.top_p <= 1.0, "must be in (0, 1] (1 = off)"),
            ("min_p", self.min_p, (0.0..=1.0).contains(&self.min_p), "must be in [0, 1] (0 = off)"),
            (
                "repetition_penalty",
                self.repetition_penalty,
                self.repetition_penalty > 0.0,
                "must be > 0 (1 = off; --repetition-penalty, or --penalty)",
            ),
            ("eta", self.eta, (0.0..1.0).contains(&self.eta), "must be in [0, 1) (0 = off)"),
        ];
        match checks.into_iter().find(|(_, value, ok, _)| !ok || !value.is_finite()) {
            Some((name, value, _, bound)) => {
                Err(crate::DecodeError::Parameter { method: "sampling", name, value: value.to_string(), bound })
            }
            None => Ok(()),
        }
    }

    pub fn is_greedy(&self) -> bool {
        self.temperature <= 0.0
    }

    /// The context tokens the penalty looks at: the last `penalty_window` (all when 0).
    pub fn penalty_span<'a>(&self, context: &'a [u32]) -> &'a [u32] {
        if self.penalty_window == 0 {
            context
        } else {
            &context[context.len().saturating_sub(self.penalty_window)..]
        }
    }

    /// Applies the (windowed) repetition / contextual penalty to `logits` for `context`.
    pub fn penalize(&self, logits: &mut [f32], context: &[u32]) {
        apply_repetition_penalty(logits, self.penalty_span(context), self.repetition_penalty);
    }
}

/// Index of the largest value (first one on ties; NaNs are never larger, and a NaN at index 0
/// is kept, as a scan that moves only to a strictly larger value would).
pub fn argmax(values: &[f32]) -> u32 {
    const LANES: usize = 16;
    if values.first().is_none_or(|v| v.is_nan()) {
        return 0;
    }
    // Two passes the compiler vectorizes, the largest value and then its first position, instead
    // of one branchy scan: a 49152-token row of logits takes a few microseconds instead of ~35.
    let mut lanes = [f32::NEG_INFINITY; LANES];
    let chunks = values.chunks_exact(LANES);
    let tail = chunks.remainder();
    for c in chunks {
        for (m, &v) in lanes.iter_mut().zip(c) {
            *m = if v > *m { v } else { *m };
        }
    }
    let max = tail.iter().chain(&lanes).fold(f32::NEG_INFINITY, |m, &v| if v > m { v } else { m });
    let block = values.chunks(LANES * 4).position(|c| c.iter().fold(false, |hit, &v| hit | (v == max)));
    block.map_or(0, |b| b * LANES * 4 + values[b * LANES * 4..].iter().position(|&v| v == max).unwrap_or(0)) as u32
}

/// Turns logits into the distribution the target samples from, given the context tokens.
pub fn probabilities(logits: &[f32], context: &[u32], cfg: &SamplingConfig) -> Vec<f32> {
    let mut probs = logits.to_vec();
    cfg.penalize(&mut probs, context);
    if cfg.temperature > 0.0 && cfg.temperature != 1.0 {
        // Shifted before scaling, so a low temperature does not magnify the logits' rounding.
        // The inverse is capped: at a temperature below ~3e-39 it overflows to infinity, and the
        // top logit's `0 · ∞` would be NaN (such a temperature is greedy in effect).
        let (max, inverse) = (draftsmith_kernels::rowops::row_max(&probs), (1.0 / cfg.temperature).min(f32::MAX));
        probs.iter_mut().for_each(|l| *l = (*l - max) * inverse);
    }
    // The kernels' vectorized `exp` (libm's scalar `expf` over a 49152-token row took ~0.1 ms of
    // every sampled token and of every node of a sampled verification).
    let sum = draftsmith_kernels::rowops::softmax_numerators(&mut probs);
    if sum > 0.0 {
        let inverse = 1.0 / sum;
        probs.iter_mut().for_each(|p| *p *= inverse);
    }
    truncate(&mut probs, cfg);
    probs
}

/// Divides positive logits and multiplies negative ones of tokens seen in `context`.
pub fn apply_repetition_penalty(logits: &mut [f32], context: &[u32], penalty: f32) {
    if penalty == 1.0 {
        return;
    }
    let mut seen = vec![false; logits.len()];
    for &t in context {
        if let Some(s) = seen.get_mut(t as usize) {
            *s = true;
        }
    }
    for (l, _) in logits.iter_mut().zip(&seen).filter(|(_, &s)| s) {
        *l = if *l > 0.0 { *l / penalty } else { *l * penalty };
    }
}

fn normalize(probs: &mut [f32]) {
    let sum: f32 = probs.iter().sum();
    if sum > 0.0 {
        probs.iter_mut().for_each(|p| *p /= sum);
    }
}

/// Zeroes tokens removed by top-k, top-p, min-p and η, then renormalizes.
fn truncate(probs: &mut [f32], cfg: &SamplingConfig) {
    let eta_floor = eta_floor(probs, cfg);
    let top_k = cfg.top_k > 0 && cfg.top_k < probs.len();
    if !top_k && cfg.top_p >= 1.0 && cfg.min_p <= 0.0 && eta_floor.is_none() {
        // No limit: every token stays (plain temperature sampling sorted the whole vocabulary
        // at every step for nothing: ~2 ms of a 5.8 ms SmolLM2 step at T = 0.7).
        normalize(probs);
        return;
    }
    let order = candidates_in_order(probs, cfg, eta_floor);
    let keep = kept(probs, &order, cfg, eta_floor);
    let mut mask = vec![false; probs.len()];
    order[..keep].iter().for_each(|&i| mask[i] = true);
    probs.iter_mut().zip(&mask).filter(|(_, &k)| !k).for_each(|(p, _)| *p = 0.0);
    normalize(probs);
}

/// The η-sampling floor `min(η, √η · e^{−H})` of `probs`, when η is set.
fn eta_floor(probs: &[f32], cfg: &SamplingConfig) -> Option<f32> {
    (cfg.eta > 0.0).then(|| {
        let entropy: f32 = probs.iter().filter(|&&p| p > 0.0).map(|&p| -p * p.ln()).sum();
        cfg.eta.min(cfg.eta.sqrt() * (-entropy).exp())
    })
}

/// How many of `order` (candidate tokens, most probable first; the whole vocabulary when
/// top-p limits the set) top-k, top-p, min-p and η keep — at least one.
fn kept(probs: &[f32], order: &[usize], cfg: &SamplingConfig, eta_floor: Option<f32>) -> usize {
    let top = probs[order[0]];
    let mut keep = order.len();
    if cfg.top_k > 0 {
        keep = keep.min(cfg.top_k);
    }
    if cfg.top_p < 1.0 {
        let mut acc = 0.0;
        let n = order.iter().position(|&i| {
            acc += probs[i];
            acc >= cfg.top_p
        });
        keep = keep.min(n.map_or(probs.len(), |n| n + 1));
    }
    if cfg.min_p > 0.0 {
        let n = order.iter().take_while(|&&i| probs[i] >= cfg.min_p * top).count();
        keep = keep.min(n.max(1));
    }
    if let Some(floor) = eta_floor {
        let n = order.iter().take_while(|&&i| probs[i] >= floor).count();
        keep = keep.min(n.max(1));
    }
    keep
}

/// The tokens [`truncate`] may keep, most probable first (ties by id): every token, sorted,
/// when top-p alone limits the set; otherwise only those above the min-p and η floors (which
/// drop everything below them whatever the other limits keep) and, with top-k, the k best of
/// those (`select_nth` in the same order), so a 49K vocabulary is not sorted at every step.
fn candidates_in_order(probs: &[f32], cfg: &SamplingConfig, eta_floor: Option<f32>) -> Vec<usize> {
    let top = probs.iter().copied().fold(0.0f32, f32::max);
    let floor = [(cfg.min_p > 0.0).then_some(cfg.min_p * top), eta_floor].into_iter().flatten().fold(0.0f32, f32::max);
    // The most probable token always stays (`keep` is at least 1), whatever the floor.
    let floor = floor.min(top);
    let before = |a: &usize, b: &usize| probs[*b].total_cmp(&probs[*a]).then(a.cmp(b));
    if floor == 0.0 && cfg.top_k == 0 {
        if let Some(order) = top_p_candidates(probs, cfg.top_p, before) {
            return order;
        }
    }
    let mut order: Vec<usize> = if floor > 0.0 {
        (0..probs.len()).filter(|&i| probs[i] >= floor).collect()
    } else {
        (0..probs.len()).collect()
    };
    if cfg.top_k > 0 && cfg.top_k < order.len() {
        order.select_nth_unstable_by(cfg.top_k - 1, before);
        order.truncate(cfg.top_k);
    }
    order.sort_unstable_by(before);
    order
}

/// With top-p the only limit: the tokens at or above a probability `t`, sorted, when their
/// running sum (in `kept`'s order and arithmetic) reaches `top_p` — then the kept prefix is the
/// same as in the whole vocabulary sorted, since every token below `t` sorts after them. Tries
/// `t = (1 − p) / 256`, then `(1 − p) / n` (the tokens below it hold at most `1 − p` of the
/// mass); `None` when neither reaches `top_p` in f32 (the caller sorts everything).
fn top_p_candidates(
    probs: &[f32],
    top_p: f32,
    before: impl Fn(&usize, &usize) -> std::cmp::Ordering + Copy,
) -> Option<Vec<usize>> {
    for t in [(1.0 - top_p) / 256.0, (1.0 - top_p) / probs.len() as f32] {
        let mut order: Vec<usize> = (0..probs.len()).filter(|&i| probs[i] >= t).collect();
        order.sort_unstable_by(before);
        let mut acc = 0.0;
        if order.iter().any(|&i| {
            acc += probs[i];
            acc >= top_p
        }) {
            return Some(order);
        }
    }
    None
}

/// Chooses next tokens: greedy, or sampling with a seeded generator.
pub struct Sampler {
    cfg: SamplingConfig,
    rng: StdRng,
}

impl Sampler {
    pub fn new(cfg: SamplingConfig) -> Self {
        let rng = StdRng::seed_from_u64(cfg.seed);
        Self { cfg, rng }
    }

    pub fn config(&self) -> &SamplingConfig {
        &self.cfg
    }

    /// Next token given the logits of the last position and the context so far.
    pub fn sample(&mut self, logits: &[f32], context: &[u32]) -> u32 {
        if self.cfg.is_greedy() {
            let mut logits = logits.to_vec();
            self.cfg.penalize(&mut logits, context);
            return argmax(&logits);
        }
        let probs = probabilities(logits, context, &self.cfg);
        sample_from(&probs, self.rng.random::<f32>())
    }

    /// The generator, for methods that draw their own uniforms (speculative verification).
    pub fn rng(&mut self) -> &mut StdRng {
        &mut self.rng
    }
}

/// Inverse-CDF draw from `probs` with a uniform `u ∈ [0, 1)`.
pub fn sample_from(probs: &[f32], u: f32) -> u32 {
    let mut acc = 0.0;
    let mut last_nonzero = 0;
    for (i, &p) in probs.iter().enumerate() {
        if p > 0.0 {
            last_nonzero = i;
            acc += p;
            if u < acc {
                return i as u32;
            }
        }
    }
    last_nonzero as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_is_the_first_of_equal_maxima_as_a_scan_finds_it() {
        let scan = |values: &[f32]| {
            let mut best = 0;
            for (i, &v) in values.iter().enumerate() {
                if v > values[best] {
                    best = i;
                }
            }
            best as u32
        };
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for len in [0, 1, 5, 16, 63, 64, 65, 1000, 49152] {
            for case in 0..6 {
                // Few distinct values, so the maximum repeats; NaNs and infinities mixed in.
                let mut v: Vec<f32> = (0..len).map(|_| (next() % 7) as f32 - 3.0).collect();
                for _ in 0..len / 50 {
                    let i = next() as usize % len;
                    v[i] = [f32::NAN, f32::NEG_INFINITY, f32::INFINITY][case % 3];
                }
                if case == 5 && len > 0 {
                    v[0] = f32::NAN;
                }
                if case == 4 {
                    v.iter_mut().for_each(|x| *x = f32::NEG_INFINITY);
                }
                assert_eq!(argmax(&v), scan(&v), "length {len}, case {case}");
            }
        }
    }

    #[test]
    fn out_of_range_sampling_values_are_refused_by_name() {
        assert!(SamplingConfig::default().validate().is_ok());
        assert!(SamplingConfig {
            temperature: 0.7,
            top_p: 0.9,
            min_p: 0.1,
            repetition_penalty: 1.2,
            eta: 3e-4,
            ..Default::default()
        }
        .validate()
        .is_ok());
        for (bad, name) in [
            (SamplingConfig { top_p: 2.0, ..Default::default() }, "top_p"),
            (SamplingConfig { top_p: 0.0, ..Default::default() }, "top_p"),
            (SamplingConfig { temperature: -1.0, ..Default::default() }, "temperature"),
            (SamplingConfig { temperature: f32::NAN, ..Default::default() }, "temperature"),
            (SamplingConfig { min_p: 1.5, ..Default::default() }, "min_p"),
            (SamplingConfig { repetition_penalty: 0.0, ..Default::default() }, "repetition_penalty"),
            (SamplingConfig { eta: 1.0, ..Default::default() }, "eta"),
        ] {
            let e = bad.validate().unwrap_err().to_string();
            assert!(e.contains(name), "{e}");
        }
    }

    #[test]
    fn top_k_top_p_and_min_p_truncate_as_defined() {
        let logits = [(0.5f32).ln(), (0.3f32).ln(), (0.15f32).ln(), (0.05f32).ln()];
        let base = SamplingConfig { temperature: 1.0, ..Default::default() };
        let p = probabilities(&logits, &[], &SamplingConfig { top_k: 2, ..base.clone() });
        assert!((p[0] - 0.625).abs() < 1e-6 && (p[1] - 0.375).abs() < 1e-6 && p[2] == 0.0);
        let p = probabilities(&logits, &[], &SamplingConfig { top_p: 0.8, ..base.clone() });
        assert!(p[2] == 0.0 && p[1] > 0.0, "0.5+0.3 reaches 0.8: two tokens kept, {p:?}");
        let p = probabilities(&logits, &[], &SamplingConfig { min_p: 0.4, ..base.clone() });
        assert!(p[1] > 0.0 && p[2] == 0.0, "0.15 < 0.4·0.5 is dropped, {p:?}");
        // η = 0.3: H = 1.1422 nats, floor = min(0.3, √0.3·e^−1.1422 = 0.1748): 0.15 and 0.05 go.
        let p = probabilities(&logits, &[], &SamplingConfig { eta: 0.3, ..base.clone() });
        assert!((p[0] - 0.625).abs() < 1e-6 && p[1] > 0.0 && p[2] == 0.0 && p[3] == 0.0, "{p:?}");
        let p = probabilities(&logits, &[], &SamplingConfig { eta: 0.1, ..base });
        assert!(p[2] > 0.0 && p[3] == 0.0, "floor min(0.1, 0.1010) = 0.1 keeps 0.15, drops 0.05: {p:?}");
    }

    /// The full-sort truncation the candidate pre-selection replaced: the same limits applied
    /// to the whole vocabulary sorted.
    fn truncate_by_full_sort(probs: &mut [f32], cfg: &SamplingConfig) {
        let mut order: Vec<usize> = (0..probs.len()).collect();
        order.sort_unstable_by(|&a, &b| probs[b].total_cmp(&probs[a]).then(a.cmp(&b)));
        let keep = kept(probs, &order, cfg, eta_floor(probs, cfg));
        for &i in &order[keep..] {
            probs[i] = 0.0;
        }
        normalize(probs);
    }

    #[test]
    fn candidate_preselection_truncates_exactly_as_a_full_sort() {
        let mut rng = StdRng::seed_from_u64(7);
        for trial in 0..400 {
            let n = 1 + trial % 97;
            // Coarse values make ties common.
            let mut probs: Vec<f32> = (0..n).map(|_| (rng.random_range(0..8u32) as f32).exp()).collect();
            normalize(&mut probs);
            let cfg = SamplingConfig {
                temperature: 1.0,
                top_k: [0, 1, 3, 10][trial % 4],
                top_p: [1.0, 0.9, 0.5][trial % 3],
                min_p: [0.0, 0.05, 0.3, 1.0][(trial / 4) % 4],
                eta: [0.0, 0.02][(trial / 16) % 2],
                ..Default::default()
            };
            let (mut fast, mut slow) = (probs.clone(), probs.clone());
            truncate(&mut fast, &cfg);
            truncate_by_full_sort(&mut slow, &cfg);
            assert_eq!(fast, slow, "trial {trial}: {cfg:?}");
        }
    }

    #[test]
    fn a_vanishing_temperature_samples_the_top_token() {
        let logits = [0.5f32, 3.0, -1.0, 2.9];
        for t in [1e-45f32, 1e-38, 1e-30] {
            let p = probabilities(&logits, &[], &SamplingConfig { temperature: t, ..Default::default() });
            // The vectorized `exp` bottoms out at the smallest normal float, not 0.
            assert!(p[1] == 1.0 && [p[0], p[2], p[3]].iter().all(|&q| q < 1e-30), "temperature {t}: {p:?}");
        }
    }

    #[test]
    fn probabilities_follow_the_softmax_at_any_temperature() {
        // A vocabulary-sized row (the vector `exp` and its tail), logits spread over ±20.
        let mut rng = StdRng::seed_from_u64(5);
        let logits: Vec<f32> = (0..49_155).map(|_| rng.random_range(-20.0..20.0f32)).collect();
        for t in [0.3f32, 0.7, 1.0, 1.5] {
            let p = probabilities(&logits, &[], &SamplingConfig { temperature: t, ..Default::default() });
            let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
            let e: Vec<f64> = logits.iter().map(|&l| ((l as f64 - max) / t as f64).exp()).collect();
            let sum: f64 = e.iter().sum();
            for (i, (&got, want)) in p.iter().zip(e.iter().map(|x| x / sum)).enumerate() {
                // f32: the exponent carries ~|x|·6e-8 of rounding (up to ~8e-6 here at T = 0.3),
                // and the f32 sum over 49155 values a common factor of a few 1e-5.
                assert!((got as f64 - want).abs() <= 1e-4 * want + 1e-30, "T = {t}, token {i}: {got} vs {want}");
            }
        }
    }

    #[test]
    fn top_p_over_a_long_flat_tail_truncates_exactly_as_a_full_sort() {
        // A few likely tokens and 20000 unlikely ones holding 30 % of the mass: p = 0.9 has to
        // reach into the tail, below the first threshold tried.
        let mut rng = StdRng::seed_from_u64(11);
        for (trial, top_p) in [0.5f32, 0.75, 0.9, 0.99, 0.999].into_iter().enumerate() {
            let mut probs: Vec<f32> = (0..20_000).map(|_| rng.random_range(1..4u32) as f32).collect();
            let tail: f32 = probs.iter().sum();
            probs.iter_mut().for_each(|p| *p *= 0.3 / tail);
            for (i, head) in [0.4f32, 0.2, 0.1].into_iter().enumerate() {
                probs[(trial * 997 + i * 31) % 20_000] = head;
            }
            let cfg = SamplingConfig { temperature: 1.0, top_p, ..Default::default() };
            let (mut fast, mut slow) = (probs.clone(), probs.clone());
            truncate(&mut fast, &cfg);
            truncate_by_full_sort(&mut slow, &cfg);
            assert_eq!(fast, slow, "top-p {top_p}");
        }
        let cfg = SamplingConfig { temperature: 1.0, ..Default::default() };
        let probs: Vec<f32> = (1..=100).map(|i| i as f32 / 5050.0).collect();
        let (mut fast, mut slow) = (probs.clone(), probs);
        truncate(&mut fast, &cfg);
        truncate_by_full_sort(&mut slow, &cfg);
        assert_eq!(fast, slow, "no limit: every token kept, renormalized the same way");
    }

    #[test]
    fn the_contextual_penalty_looks_at_the_last_w_tokens_only() {
        // θ = 2, W = 2, context [0, 1, 1, 2]: only tokens 1 and 2 are in the window.
        let cfg = SamplingConfig { repetition_penalty: 2.0, penalty_window: 2, ..Default::default() };
        let mut l = [2.0f32, 2.0, -1.0, 1.0];
        cfg.penalize(&mut l, &[0, 1, 1, 2]);
        assert_eq!(l, [2.0, 1.0, -2.0, 1.0]);
        let whole = SamplingConfig { penalty_window: 0, ..cfg };
        let mut l = [2.0f32, 2.0, -1.0, 1.0];
        whole.penalize(&mut l, &[0, 1, 1, 2]);
        assert_eq!(l, [1.0, 1.0, -2.0, 1.0], "W = 0: the whole context");
    }

    #[test]
    fn repetition_penalty_matches_hand_computed_values() {
        let mut l = [2.0, -2.0, 1.0];
        apply_repetition_penalty(&mut l, &[0, 1, 1], 2.0);
        assert_eq!(l, [1.0, -4.0, 1.0]);
    }

    #[test]
    fn seeded_sampling_is_reproducible_and_follows_the_distribution() {
        let logits = [0.0f32, (3.0f32).ln()];
        let cfg = SamplingConfig { temperature: 1.0, seed: 7, ..Default::default() };
        let draw = |cfg: &SamplingConfig| {
            let mut s = Sampler::new(cfg.clone());
            (0..4000).map(|_| s.sample(&logits, &[])).collect::<Vec<_>>()
        };
        let a = draw(&cfg);
        assert_eq!(a, draw(&cfg));
        let ones = a.iter().filter(|&&t| t == 1).count() as f64 / a.len() as f64;
        assert!((ones - 0.75).abs() < 0.03, "P(1) = 0.75, observed {ones}");
    }
}
