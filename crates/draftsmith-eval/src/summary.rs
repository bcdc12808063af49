//! Summaries computed from records only (DESIGN.md metric conventions):
//!
//! - tokens/step τ = output tokens ÷ target calls (prefill included; the bonus token counts;
//!   AR = 1);
//! - acceptance % = 100·(τ−1)/draft_len, α = Σ accepted ÷ (draft_len · steps), where a draft
//!   length applies;
//! - mean accepted = Σ accepted ÷ steps (bonus excluded; Post-use's MAT);
//! - token utilization = Σ accepted ÷ Σ draft tokens the drafter produced itself (Post-use
//!   Table 4's "accepted/generated"; cached phrases added at the target are not generated,
//!   which is how reuse raises it); draft calls per token = drafter forward calls ÷ output
//!   tokens (the inverse of Post-use Eq. 3's L ÷ #M_d calls);
//! - ms/token: decode ms ÷ (tokens − 1) without prefill (the first token comes from prefill),
//!   (prefill + decode) ms ÷ tokens with it — totals over prompts, not means of ratios;
//! - speedup = AR ms/token ÷ method ms/token over the prompts both have a record for; its 95 %
//!   interval is a percentile bootstrap over those prompts ([`speedup_interval`]): the
//!   spread that comes from which prompts were drawn (and from the host's moods, prompt by
//!   prompt), for two or more prompts;
//! - lossless = every output equals AR's, token for token, on every prompt (greedy runs; a
//!   sampled run draws other tokens than AR by design and is not compared, [`Summary::sampled`]);
//! - Distinct-n (Li et al., 2016; TokenSwift's diversity measure) = distinct n-grams ÷ n-grams
//!   of an output's token ids, n = 1..4, averaged over prompts.

use std::collections::{BTreeMap, HashMap};

use draftsmith_decode::Method;
use serde::{Deserialize, Serialize};

use crate::records::Record;

/// The first difference between a method's output and AR's on one prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mismatch {
    pub prompt_id: String,
    pub method: Method,
    /// Index into the output ids.
    pub position: usize,
    /// AR's token there (`None`: AR's output ended).
    pub ar_token: Option<u32>,
    /// The method's token there (`None`: the method's output ended).
    pub method_token: Option<u32>,
    /// `ar`'s top-2 logit margin there (measured by the near-tie check only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ar_margin: Option<f32>,
    /// Below the backend's near-tie bound: counted, not failed (never on the exact CPU check).
    #[serde(default)]
    pub near_tie: bool,
}

/// One method's metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MethodSummary {
    pub prompts: usize,
    pub output_tokens: usize,
    pub target_calls: usize,
    /// Draft–verify–commit steps (0 for AR).
    pub steps: usize,
    pub tokens_per_step: f64,
    pub draft_len: Option<usize>,
    pub acceptance_pct: Option<f64>,
    pub alpha: Option<f64>,
    pub mean_accepted: Option<f64>,
    pub mean_tree_size: Option<f64>,
    /// Σ accepted ÷ Σ drafter-generated tokens (`None` when nothing was drafted).
    #[serde(default)]
    pub utilization: Option<f64>,
    /// Drafter forward calls over every prompt.
    #[serde(default)]
    pub draft_calls: usize,
    #[serde(default)]
    pub draft_calls_per_token: Option<f64>,
    pub decode_ms_per_token: Option<f64>,
    pub ms_per_token_with_prefill: Option<f64>,
    /// Without prefill.
    pub speedup: Option<f64>,
    /// 95 % interval of `speedup`: a percentile bootstrap over the compared prompts
    /// ([`speedup_interval`]; `None` below two prompts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speedup_interval: Option<[f64; 2]>,
    pub speedup_with_prefill: Option<f64>,
    pub mean_draft_ms: Option<f64>,
    pub mean_verify_ms: Option<f64>,
    pub mean_commit_ms: Option<f64>,
    /// Share of steps (%) whose verified tree had a size in each of [`TREE_SIZE_BUCKETS`] (empty
    /// without steps): the draft sizes chosen over the run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tree_size_pct: Vec<f64>,
    /// Mean verified tree size of the steps starting in each quarter of their answer (by output
    /// position; `None`: no step there; empty without steps): how the sizes moved along the answers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tree_size_by_quarter: Vec<Option<f64>>,
    /// Distinct-1..4 of the outputs (mean over prompts).
    #[serde(default)]
    pub distinct_n: Vec<f64>,
    /// The method's own per-prompt statistics (`Record::extra`), averaged over prompts weighted
    /// by their steps (for TokenSwift's β, whose per-prompt denominator is (γ + 1) · steps, that
    /// is the pooled rate).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, f64>,
    /// Prompts compared with AR.
    pub compared_prompts: usize,
    pub lossless: bool,
    /// Mismatches at `ar`'s near-ties (backends that are not batch-invariant; see `lossless`).
    #[serde(default)]
    pub near_ties: usize,
}

/// The draft-size buckets of [`MethodSummary::tree_size_pct`]: verified tree sizes up to each bound,
/// above the previous one (0: a plain step), and above the last.
pub const TREE_SIZE_BUCKETS: [usize; 7] = [0, 1, 2, 4, 8, 16, 32];

/// The bucket labels of [`TREE_SIZE_BUCKETS`]: "0", "1", "2", "3–4", …, "33+".
pub fn tree_size_labels() -> Vec<String> {
    let mut lo = 0;
    let mut labels: Vec<String> = TREE_SIZE_BUCKETS
        .iter()
        .map(|&hi| {
            let label = if hi <= lo { hi.to_string() } else { format!("{lo}–{hi}") };
            lo = hi + 1;
            label
        })
        .collect();
    labels.push(format!("{lo}+"));
    labels
}

/// Every method's metrics and the lossless check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub baseline: Method,
    /// Methods in run order (the keys of `methods`).
    pub method_order: Vec<Method>,
    pub methods: BTreeMap<Method, MethodSummary>,
    pub lossless: bool,
    pub mismatches: Vec<Mismatch>,
    /// The near-tie check's measured drift and bound (`None`: the exact check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub near_tie_bound: Option<crate::lossless::NearTieBound>,
    /// The run sampled: outputs were not compared with AR's (`lossless` then only says that
    /// every method's prompts have an AR record to time it against).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sampled: bool,
    /// Each method against each earlier one in run order (`ar` aside): which of two methods
    /// decoded faster on the prompts both ran, and how sure that is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub relative: Vec<RelativeSpeed>,
    /// The vector instructions' peak in GMAC/s probed before and after the run that wrote this
    /// summary (the quantized CPU path only): apart, the host's speed changed during the run
    /// ([`host_drift_message`](crate::bench::host_drift_message)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_peaks_gmac_s: Option<[f64; 2]>,
}

/// One method's decode speed over another's on the prompts both ran: `over` ms/token ÷
/// `method` ms/token (above 1: `method` was faster), with the same bootstrap over prompts as
/// the speedups ([`speedup_interval`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelativeSpeed {
    pub method: Method,
    pub over: Method,
    pub prompts: usize,
    pub ratio: Option<f64>,
    pub interval: Option<[f64; 2]>,
}

impl Summary {
    /// Marks a sampled run: each method keeps the target's distribution but draws other tokens
    /// than AR, so differences from AR's outputs are not mismatches.
    pub fn mark_sampled(&mut self) {
        self.sampled = true;
        self.mismatches.clear();
        for s in self.methods.values_mut() {
            s.lossless = s.compared_prompts == s.prompts;
        }
        self.lossless = self.methods.values().all(|s| s.lossless);
    }

    /// Methods in run order with their summaries.
    pub fn iter(&self) -> impl Iterator<Item = (Method, &MethodSummary)> {
        self.method_order.iter().filter_map(|&m| self.methods.get(&m).map(|s| (m, s)))
    }
}

/// First position where `method` differs from `ar`, if any.
pub fn first_mismatch(ar: &[u32], method: &[u32]) -> Option<(usize, Option<u32>, Option<u32>)> {
    let n = ar.len().max(method.len());
    (0..n).find(|&i| ar.get(i) != method.get(i)).map(|i| (i, ar.get(i).copied(), method.get(i).copied()))
}

/// Distinct n-grams ÷ n-grams of `tokens` (0 when it has fewer than `n` tokens).
pub fn distinct_n(tokens: &[u32], n: usize) -> f64 {
    if n == 0 || tokens.len() < n {
        return 0.0;
    }
    let grams: std::collections::HashSet<&[u32]> = tokens.windows(n).collect();
    grams.len() as f64 / (tokens.len() - n + 1) as f64
}

fn ratio(num: f64, den: f64) -> Option<f64> {
    (den > 0.0).then(|| num / den)
}

/// τ: output tokens ÷ target calls (prefill included; `ar` = 1).
pub fn tokens_per_step(tokens: usize, target_calls: usize) -> f64 {
    ratio(tokens as f64, target_calls as f64).unwrap_or(0.0)
}

/// α: draft tokens accepted ÷ (draft length × steps); `None` before any step.
pub fn alpha(accepted: usize, draft_len: usize, steps: usize) -> Option<f64> {
    ratio(accepted as f64, (draft_len * steps) as f64)
}

/// (decode ms/token, with-prefill ms/token) over `records`.
fn ms_per_token<'a>(records: impl Iterator<Item = &'a Record> + Clone) -> (Option<f64>, Option<f64>) {
    let decode: f64 = records.clone().map(|r| r.decode_ms).sum();
    let prefill: f64 = records.clone().map(|r| r.prefill_ms).sum();
    let tokens: usize = records.clone().map(|r| r.output_ids.len()).sum();
    let later: usize = records.map(|r| r.output_ids.len().saturating_sub(1)).sum();
    (ratio(decode, later as f64), ratio(prefill + decode, tokens as f64))
}

/// Summarises `records` for `methods` (run order, `ar` first).
pub fn summarize(records: &[Record], methods: &[Method]) -> Summary {
    let ar: HashMap<&str, &Record> =
        records.iter().filter(|r| r.method.is_ar()).map(|r| (r.prompt_id.as_str(), r)).collect();
    let mut summaries = BTreeMap::new();
    let mut mismatches = Vec::new();
    for &method in methods {
        let own: Vec<&Record> = records.iter().filter(|r| r.method == method).collect();
        let paired: Vec<(&Record, &Record)> =
            own.iter().filter_map(|r| ar.get(r.prompt_id.as_str()).map(|a| (*a, *r))).collect();
        for (a, r) in &paired {
            if let Some((position, ar_token, method_token)) = first_mismatch(&a.output_ids, &r.output_ids) {
                mismatches.push(Mismatch {
                    prompt_id: r.prompt_id.clone(),
                    method,
                    position,
                    ar_token,
                    method_token,
                    ar_margin: None,
                    near_tie: false,
                });
            }
        }
        let lossless = !mismatches.iter().any(|m| m.method == method) && paired.len() == own.len();
        summaries.insert(method, method_summary(method, &own, &paired, lossless));
    }
    let lossless = summaries.values().all(|s| s.lossless);
    Summary {
        baseline: Method::Ar,
        method_order: methods.to_vec(),
        methods: summaries,
        lossless,
        mismatches,
        near_tie_bound: None,
        sampled: false,
        relative: relative_speeds(records, methods),
        host_peaks_gmac_s: None,
    }
}

/// [`RelativeSpeed`] of every method against every earlier one in `methods` (`ar` aside).
fn relative_speeds(records: &[Record], methods: &[Method]) -> Vec<RelativeSpeed> {
    let by_prompt = |m: Method| -> HashMap<&str, &Record> {
        records.iter().filter(|r| r.method == m).map(|r| (r.prompt_id.as_str(), r)).collect()
    };
    let drafted: Vec<Method> = methods.iter().copied().filter(|m| !m.is_ar()).collect();
    let mut out = Vec::new();
    for (j, &method) in drafted.iter().enumerate() {
        let own = by_prompt(method);
        for &over in &drafted[..j] {
            let base = by_prompt(over);
            let mut paired: Vec<(&Record, &Record)> =
                base.iter().filter_map(|(id, b)| own.get(id).map(|r| (*b, *r))).collect();
            // The bootstrap draws by index: a fixed order keeps it reproducible.
            paired.sort_by(|x, y| x.0.prompt_id.cmp(&y.0.prompt_id));
            out.push(RelativeSpeed {
                method,
                over,
                prompts: paired.len(),
                ratio: paired_speedups(&paired).0,
                interval: speedup_interval(&paired),
            });
        }
    }
    out
}

/// The second of each pair's speed over the first's, on the pairs' prompts: (decode only, with
/// prefill), each a ratio of ms per token totalled over the prompts.
fn paired_speedups(paired: &[(&Record, &Record)]) -> (Option<f64>, Option<f64>) {
    let (base_decode, base_with) = ms_per_token(paired.iter().map(|(b, _)| *b));
    let (own_decode, own_with) = ms_per_token(paired.iter().map(|(_, r)| *r));
    let speedup = |b: Option<f64>, m: Option<f64>| b.zip(m).and_then(|(b, m)| ratio(b, m));
    (speedup(base_decode, own_decode), speedup(base_with, own_with))
}

/// `method`'s summary from its records `own` and the `paired` (AR's, its own) records of the
/// prompts both ran.
fn method_summary(method: Method, own: &[&Record], paired: &[(&Record, &Record)], lossless: bool) -> MethodSummary {
    let output_tokens: usize = own.iter().map(|r| r.output_ids.len()).sum();
    let target_calls: usize = own.iter().map(|r| r.target_calls).sum();
    let steps: Vec<_> = own.iter().flat_map(|r| r.steps.iter()).collect();
    let n = steps.len() as f64;
    let per_step = |f: &dyn Fn(&draftsmith_decode::StepRecord) -> f64| ratio(steps.iter().map(|s| f(s)).sum(), n);
    let accepted: usize = steps.iter().map(|s| s.accepted).sum();
    let drafted: usize = steps.iter().map(|s| s.drafted).sum();
    let draft_calls: usize = steps.iter().map(|s| s.draft_calls).sum();
    let tau = tokens_per_step(output_tokens, target_calls);
    let draft_len = own.iter().find_map(|r| r.draft_len).filter(|&d| d > 0);
    let (decode, with_prefill) = ms_per_token(own.iter().copied());
    let (speedup, speedup_with_prefill) = paired_speedups(paired);
    MethodSummary {
        prompts: own.len(),
        output_tokens,
        target_calls,
        steps: steps.len(),
        tokens_per_step: tau,
        draft_len,
        acceptance_pct: draft_len.map(|d| 100.0 * (tau - 1.0) / d as f64),
        alpha: draft_len.and_then(|d| alpha(accepted, d, steps.len())),
        mean_accepted: ratio(accepted as f64, n),
        mean_tree_size: per_step(&|s| s.tree_size as f64),
        utilization: ratio(accepted as f64, drafted as f64),
        draft_calls,
        draft_calls_per_token: ratio(draft_calls as f64, output_tokens as f64),
        decode_ms_per_token: decode,
        ms_per_token_with_prefill: with_prefill,
        speedup,
        // The baseline against itself is 1× on every resample: no interval to draw.
        speedup_interval: if method.is_ar() { None } else { speedup_interval(paired) },
        speedup_with_prefill,
        mean_draft_ms: per_step(&|s| s.draft_ms),
        mean_verify_ms: per_step(&|s| s.verify_ms),
        mean_commit_ms: per_step(&|s| s.commit_ms),
        tree_size_pct: tree_size_shares(steps.iter().map(|s| s.tree_size)),
        tree_size_by_quarter: tree_size_by_quarter(own),
        distinct_n: (1..=4)
            .map(|n| own.iter().map(|r| distinct_n(&r.output_ids, n)).sum::<f64>() / own.len().max(1) as f64)
            .collect(),
        extra: step_weighted_extras(own),
        compared_prompts: paired.len(),
        lossless,
        near_ties: 0,
    }
}

/// An interval as text, "1.47–1.58" with `digits` decimals: one spelling for reports, tables and
/// the CLI.
pub fn interval_text([lo, hi]: [f64; 2], digits: usize) -> String {
    format!("{lo:.digits$}–{hi:.digits$}")
}

/// Resamples of [`speedup_interval`]'s bootstrap.
pub const BOOTSTRAP_RESAMPLES: usize = 2000;

/// A 95 % interval of the decode speedup over `paired` (AR's record, the method's) prompts: the
/// 2.5th and 97.5th percentiles of the speedup recomputed, as the point estimate is (totals over
/// prompts), on [`BOOTSTRAP_RESAMPLES`] samples of the prompts drawn with replacement. The
/// generator is seeded, so a summary re-rendered from the same records shows the same
/// interval. `None` below two prompts (nothing to resample) or when a sample has no decode
/// time. Prompts are the unit: the interval covers which prompts were drawn and whatever moved
/// a prompt's times as a whole (the host's load), not what a larger sample of tokens of the same
/// prompts would change.
pub fn speedup_interval(paired: &[(&Record, &Record)]) -> Option<[f64; 2]> {
    if paired.len() < 2 {
        return None;
    }
    // Per prompt: AR decode ms, AR later tokens, method decode ms, method later tokens.
    let later = |r: &Record| r.output_ids.len().saturating_sub(1) as f64;
    let rows: Vec<[f64; 4]> = paired.iter().map(|(a, m)| [a.decode_ms, later(a), m.decode_ms, later(m)]).collect();
    let mut state = 0x005E_ED0F_B007_u64;
    let mut draw = || {
        // splitmix64
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) % rows.len() as u64) as usize
    };
    let mut samples = Vec::with_capacity(BOOTSTRAP_RESAMPLES);
    for _ in 0..BOOTSTRAP_RESAMPLES {
        let mut sum = [0.0f64; 4];
        for _ in 0..rows.len() {
            let row = rows[draw()];
            for (s, v) in sum.iter_mut().zip(row) {
                *s += v;
            }
        }
        let ar = ratio(sum[0], sum[1])?;
        let method = ratio(sum[2], sum[3])?;
        samples.push(ratio(ar, method)?);
    }
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((q * samples.len() as f64) as usize).min(samples.len() - 1)];
    Some([at(0.025), at(0.975)])
}

/// The share of `sizes` (%) in each of [`TREE_SIZE_BUCKETS`] (empty when there are none).
fn tree_size_shares(sizes: impl Iterator<Item = usize>) -> Vec<f64> {
    let mut counts = vec![0usize; TREE_SIZE_BUCKETS.len() + 1];
    for size in sizes {
        counts[TREE_SIZE_BUCKETS.iter().position(|&hi| size <= hi).unwrap_or(TREE_SIZE_BUCKETS.len())] += 1;
    }
    let total: usize = counts.iter().sum();
    if total == 0 {
        return Vec::new();
    }
    counts.iter().map(|&c| 100.0 * c as f64 / total as f64).collect()
}

/// The mean tree size of the steps starting in each quarter of their record's output (a step
/// starts where the tokens emitted before it end; empty when no record has steps).
fn tree_size_by_quarter(own: &[&Record]) -> Vec<Option<f64>> {
    let mut sums = [(0.0f64, 0usize); 4];
    for r in own {
        let len = r.output_ids.len().max(1);
        let mut at = r.output_ids.len().saturating_sub(r.steps.iter().map(|s| s.emitted).sum());
        for s in &r.steps {
            let q = &mut sums[(4 * at / len).min(3)];
            q.0 += s.tree_size as f64;
            q.1 += 1;
            at += s.emitted;
        }
    }
    if sums.iter().all(|q| q.1 == 0) {
        return Vec::new();
    }
    sums.iter().map(|&(sum, n)| ratio(sum, n as f64)).collect()
}

/// Each `Record::extra` key averaged over the records that have it, weighted by their steps.
fn step_weighted_extras(own: &[&Record]) -> BTreeMap<String, f64> {
    let mut sums: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for r in own {
        let w = r.steps.len() as f64;
        for (k, v) in &r.extra {
            let e = sums.entry(k.clone()).or_default();
            e.0 += w * v;
            e.1 += w;
        }
    }
    sums.into_iter().filter_map(|(k, (s, w))| ratio(s, w).map(|m| (k, m))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::tests::record;

    fn close(a: Option<f64>, b: f64) {
        let a = a.expect("a value");
        assert!((a - b).abs() < 1e-9, "{a} vs {b}");
    }

    #[test]
    fn method_extras_are_step_weighted_means() {
        let mut a = record("p1", "tokenswift", &[1, 2, 3], &[(1, 2), (0, 1)]);
        a.extra.insert("beta".into(), 0.5);
        let mut b = record("p2", "tokenswift", &[1, 2, 3, 4, 5, 6, 7], &[(1, 2); 6]);
        b.extra.insert("beta".into(), 1.0);
        b.extra.insert("only_b".into(), 3.0);
        let s = summarize(&[a, b], &[Method::TokenSwift]);
        let extra = &s.methods[&Method::TokenSwift].extra;
        assert!((extra["beta"] - (2.0 * 0.5 + 6.0 * 1.0) / 8.0).abs() < 1e-12);
        assert_eq!(extra["only_b"], 3.0);
        // Records without extras (older files, AR) summarise to none.
        let plain = summarize(&[record("p1", "ar", &[1, 2], &[])], &[Method::Ar]);
        assert!(plain.methods[&Method::Ar].extra.is_empty());
    }

    #[test]
    fn the_speedup_interval_is_a_seeded_bootstrap_over_prompts() {
        let pair = |id: &str, ar_ms: f64, m_ms: f64| {
            let mut a = record(id, "ar", &[1, 2, 3, 4, 5], &[]);
            let mut m = record(id, "prompt-lookup", &[1, 2, 3, 4, 5], &[(1, 2), (2, 2)]);
            (a.decode_ms, m.decode_ms) = (ar_ms, m_ms);
            (a, m)
        };
        let (a1, m1) = pair("p1", 40.0, 20.0);
        let (a2, m2) = pair("p2", 40.0, 40.0);
        let (a3, m3) = pair("p3", 40.0, 25.0);
        // One prompt: nothing to resample.
        assert_eq!(speedup_interval(&[(&a1, &m1)]), None);
        // Prompts that agree: an interval of width zero at the point estimate.
        let same = speedup_interval(&[(&a1, &m1), (&a1, &m1)]).unwrap();
        assert!((same[0] - 2.0).abs() < 1e-12 && (same[1] - 2.0).abs() < 1e-12, "{same:?}");
        // Prompts that differ: inside the prompts' own extremes (1× and 2×), around the point
        // estimate, and the same on every call (re-rendered reports do not move).
        let paired = [(&a1, &m1), (&a2, &m2), (&a3, &m3)];
        let [lo, hi] = speedup_interval(&paired).unwrap();
        let point = 120.0 / 85.0;
        assert!(1.0 <= lo && lo < point && point < hi && hi <= 2.0, "{lo} {point} {hi}");
        assert_eq!(speedup_interval(&paired), Some([lo, hi]));
        let records = [a1, m1, a2, m2, a3, m3];
        let s = summarize(&records, &[Method::Ar, Method::PromptLookup]);
        assert_eq!(s.methods[&Method::PromptLookup].speedup_interval, Some([lo, hi]));
        assert_eq!(s.methods[&Method::Ar].speedup_interval, None, "the baseline has no interval");
        close(s.methods[&Method::PromptLookup].speedup, point);
    }

    #[test]
    fn methods_are_compared_with_each_other_on_the_prompts_both_ran() {
        let rec = |id: &str, m: &str, ms: f64| {
            let mut r = record(id, m, &[1, 2, 3, 4, 5], if m == "ar" { &[] } else { &[(1, 2), (2, 2)] });
            r.decode_ms = ms;
            r
        };
        let records = [
            rec("p1", "ar", 40.0),
            rec("p2", "ar", 40.0),
            rec("p1", "draft-model", 20.0),
            rec("p2", "draft-model", 30.0),
            rec("p1", "post-use-precut", 25.0),
            rec("p2", "post-use-precut", 25.0),
            rec("p3", "post-use-precut", 1.0), // no draft-model record: left out of the pair
        ];
        let methods = [Method::Ar, Method::DraftModel, Method::PostUsePreCut];
        let s = summarize(&records, &methods);
        assert_eq!(s.relative.len(), 1, "one pair without ar: {:?}", s.relative);
        let r = &s.relative[0];
        assert_eq!((r.method, r.over, r.prompts), (Method::PostUsePreCut, Method::DraftModel, 2));
        close(r.ratio, 50.0 / 50.0);
        let [lo, hi] = r.interval.unwrap();
        assert!(lo <= 1.0 && 1.0 <= hi && lo >= 20.0 / 25.0 && hi <= 30.0 / 25.0, "{lo} {hi}");
        // One method besides ar: nothing to compare.
        assert!(summarize(&records, &methods[..2]).relative.is_empty());
    }

    #[test]
    fn hand_made_records_give_the_defined_metrics() {
        // AR: 2 prompts × 4 tokens, 4 calls each; 30 ms decode for 3 later tokens → 10 ms/token.
        let mut ar1 = record("p1", "ar", &[1, 2, 3, 4], &[]);
        let mut ar2 = record("p2", "ar", &[5, 6, 7, 8], &[]);
        ar1.decode_ms = 30.0;
        ar2.decode_ms = 30.0;
        // Prompt lookup (draft_len 4): p1 in 2 steps (accepted 2 then 0 → emitted 3 + …).
        let mut pl1 = record("p1", "prompt-lookup", &[1, 2, 3, 4], &[(2, 3)]); // prefill token + 3 = 4 tokens, 2 calls
        let mut pl2 = record("p2", "prompt-lookup", &[5, 6, 7, 8], &[(0, 1), (1, 2)]); // 1 + 1 + 2 = 4 tokens, 3 calls
        pl1.decode_ms = 15.0;
        pl2.decode_ms = 15.0;
        let s = summarize(&[ar1, ar2, pl1, pl2], &[Method::Ar, Method::PromptLookup]);
        assert!(s.lossless && s.mismatches.is_empty());
        let ar = &s.methods[&Method::Ar];
        assert_eq!((ar.tokens_per_step, ar.steps, ar.acceptance_pct), (1.0, 0, None));
        close(ar.decode_ms_per_token, 10.0);
        close(ar.ms_per_token_with_prefill, (20.0 + 60.0) / 8.0);
        close(ar.speedup, 1.0);
        let pl = &s.methods[&Method::PromptLookup];
        assert_eq!((pl.output_tokens, pl.target_calls, pl.steps), (8, 5, 3));
        assert!((pl.tokens_per_step - 8.0 / 5.0).abs() < 1e-12, "τ includes the bonus and the prefill call");
        close(pl.acceptance_pct, 100.0 * 0.6 / 4.0);
        close(pl.alpha, 3.0 / 12.0);
        close(pl.mean_accepted, 1.0);
        close(pl.mean_tree_size, 4.0);
        close(pl.utilization, 3.0 / 12.0);
        assert_eq!(pl.draft_calls, 6, "2 drafter calls in each of 3 steps");
        close(pl.draft_calls_per_token, 6.0 / 8.0);
        assert_eq!((ar.utilization, ar.draft_calls), (None, 0));
        close(pl.decode_ms_per_token, 5.0);
        close(pl.speedup, 2.0);
        close(pl.speedup_with_prefill, 10.0 / ((20.0 + 30.0) / 8.0));
        close(pl.mean_verify_ms, 20.0);
        close(pl.mean_draft_ms, 0.5);
        close(pl.mean_commit_ms, 1.0);
    }

    #[test]
    fn draft_sizes_are_bucketed_and_followed_along_the_answers() {
        assert_eq!(tree_size_labels(), ["0", "1", "2", "3–4", "5–8", "9–16", "17–32", "33+"]);
        // 9 tokens: the prefill's, then steps emitting 1, 1, 2, 2, 2 from output positions
        // 1, 2, 3, 5, 7 (quarters 0, 0, 1, 2, 3 of 9 tokens) with trees of 0, 3, 2, 40, 8 nodes.
        let mut r = record("p1", "prompt-lookup", &[1; 9], &[(0, 1), (0, 1), (1, 2), (1, 2), (1, 2)]);
        for (step, size) in r.steps.iter_mut().zip([0, 3, 2, 40, 8]) {
            step.tree_size = size;
        }
        let ar = record("p1", "ar", &[1; 9], &[]);
        let s = summarize(&[ar, r], &[Method::Ar, Method::PromptLookup]);
        let pl = &s.methods[&Method::PromptLookup];
        assert_eq!(pl.tree_size_pct, [20.0, 0.0, 20.0, 20.0, 20.0, 0.0, 0.0, 20.0]);
        assert_eq!(pl.tree_size_by_quarter, [Some(1.5), Some(2.0), Some(40.0), Some(8.0)]);
        let ar = &s.methods[&Method::Ar];
        assert!(ar.tree_size_pct.is_empty() && ar.tree_size_by_quarter.is_empty(), "no steps, no sizes");
        // A quarter without steps has no mean.
        let short = record("p2", "prompt-lookup", &[1; 8], &[(3, 7)]);
        let q =
            summarize(&[short], &[Method::PromptLookup]).methods[&Method::PromptLookup].tree_size_by_quarter.clone();
        assert_eq!(q, [Some(4.0), None, None, None]);
    }

    #[test]
    fn distinct_n_by_hand() {
        let t = [1, 2, 1, 2, 3];
        assert_eq!(distinct_n(&t, 1), 3.0 / 5.0);
        assert_eq!(distinct_n(&t, 2), 3.0 / 4.0, "(1,2) twice, (2,1), (2,3)");
        assert_eq!(distinct_n(&t, 3), 1.0);
        assert_eq!(distinct_n(&t, 6), 0.0);
        let s =
            summarize(&[record("p1", "ar", &[4, 4, 4, 4], &[]), record("p2", "ar", &[1, 2, 3, 4], &[])], &[Method::Ar]);
        assert_eq!(s.methods[&Method::Ar].distinct_n[0], (0.25 + 1.0) / 2.0, "mean over prompts");
    }

    #[test]
    fn mismatches_name_prompt_position_and_both_tokens() {
        let s = summarize(
            &[
                record("p1", "ar", &[1, 2, 3], &[]),
                record("p1", "prompt-lookup", &[1, 9, 3], &[(0, 1)]),
                record("p2", "ar", &[4], &[]),
                record("p2", "prompt-lookup", &[4, 5], &[]),
            ],
            &[Method::Ar, Method::PromptLookup],
        );
        assert!(!s.lossless && !s.methods[&Method::PromptLookup].lossless && s.methods[&Method::Ar].lossless);
        assert_eq!(
            s.mismatches[0],
            Mismatch {
                prompt_id: "p1".into(),
                method: Method::PromptLookup,
                position: 1,
                ar_token: Some(2),
                method_token: Some(9),
                ar_margin: None,
                near_tie: false
            }
        );
        assert_eq!(
            (s.mismatches[1].position, s.mismatches[1].ar_token, s.mismatches[1].method_token),
            (1, None, Some(5))
        );
        assert_eq!(first_mismatch(&[1, 2], &[1, 2]), None);
    }

    #[test]
    fn a_sampled_run_compares_no_tokens_but_still_needs_ar_records() {
        let mut s = summarize(
            &[
                record("p1", "ar", &[1, 2, 3], &[]),
                record("p1", "prompt-lookup", &[1, 5, 3], &[(2, 1)]),
                record("p2", "ngram-trie", &[4], &[]),
            ],
            &[Method::Ar, Method::PromptLookup, Method::NgramTrie],
        );
        assert!(!s.lossless && s.mismatches.len() == 1);
        s.mark_sampled();
        assert!(s.sampled && s.mismatches.is_empty());
        assert!(s.methods[&Method::PromptLookup].lossless && s.methods[&Method::PromptLookup].compared_prompts == 1);
        assert!(!s.methods[&Method::NgramTrie].lossless && !s.lossless, "no ar record to time it against");
    }

    #[test]
    fn a_method_without_an_ar_record_is_not_called_lossless() {
        let s = summarize(&[record("p1", "prompt-lookup", &[1], &[])], &[Method::Ar, Method::PromptLookup]);
        assert!(!s.methods[&Method::PromptLookup].lossless && s.methods[&Method::PromptLookup].speedup.is_none());
    }
}
