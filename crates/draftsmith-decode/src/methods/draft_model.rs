//! Classic speculative decoding with a draft model: a smaller model of the target's family,
//! sharing its tokenizer, drafts a chain of λ tokens greedily, one forward per token.
//!
//! The drafter keeps its own KV cache in step with the committed context: before drafting it
//! truncates the cache to the longest common prefix of what it holds and the new context
//! (verification keeps only the accepted prefix of the last draft) and feeds the rest in one
//! forward. It records each drafted token's confidence (its softmax probability) for the
//! Pre-cut controller ([`super::precut`]), which, when enabled, decides after each draft call
//! whether to stop early (λ then becomes a maximum).
//!
//! With `reuse` on, the Post-use cache is also checked at the draft model (Post-use & Pre-cut paper, Alg. 2):
//! each draft call feeds the last draft token together with up to W cached phrases keyed by it
//! (a tree mask keeps the phrases apart), and the longest phrase prefix the drafter itself
//! agrees with is appended, followed by the drafter's next token, all from that one call. The
//! draft is therefore exactly the drafter's greedy chain, only produced in fewer calls. Choices
//! where Alg. 2 is silent or differs: a one-token match is also taken (it equals the drafter's
//! own next token and saves nothing, but costs nothing either); the drafter's own verdicts on
//! phrases are not written back to the cache, which holds target-verified phrases only, filled
//! from the target's verdicts as in [`super::token_cache`]. Under the `auto` draft policy the
//! phrase rows are priced like every other part of a draft (`PhraseGate`): a phrase token at
//! depth d rides along only while the drafter's measured agreement at that depth times the time
//! of a call it saves exceeds the measured time of an extra row (on a 2-core CPU an extra row of
//! Qwen2.5-Coder-0.5B costs ~0.65 ms against a ~8.5 ms call and the drafter agreed with 14–17 %
//! of them, so they paid, session 34); gated off, a call still takes them along now and then to
//! keep both measurements fresh.
//!
//! With a draft vocabulary (`vocab: Some(n)`), the drafter's LM head keeps only the rows of
//! token ids `0..n` (re-quantized to the head's own format where it has a quantizer — Q8_0, Q4_1,
//! Q4_0 —, else to Q8_0; exact for a Q8_0 head), so
//! each draft call multiplies `n` output rows instead of the whole vocabulary: the frequency-
//! ranked subset of FR-Spec (Zhao et al., 2025), with the tokenizer's own id order as the rank
//! (byte-pair vocabularies list tokens in merge order, which follows corpus frequency). A token
//! outside the subset is never drafted; the target still decides every token, so the output is
//! unchanged.
//!
//! When the generation samples and `sample` is on, each draft token is drawn from the
//! drafter's distribution, processed as the target's is (temperature, top-k / top-p / min-p, the
//! penalties over the context and the draft so far), instead of taken as its argmax; the
//! distributions go to the verifier ([`Proposer::draft_distributions`]), which accepts a token
//! `x` with probability `min(1, p(x) / q(x))` — on average `Σ min(p, q)` instead of
//! `p(argmax q)` (speculative sampling, Leviathan et al. 2023). Measured on Qwen2.5-Coder
//! 0.5B → 1.5B along sampled HumanEval answers (session 68, llama.cpp's logits): 0.903 against
//! 0.882 per token at T = 0.7, 0.880 against 0.829 at T = 1. Not with phrase reuse, whose
//! phrases are matched against the drafter's greedy chain.
//!
//! If a drafter forward fails, the drafter's cache is reset and `propose` returns the error,
//! which ends the generation (it never degrades silently to autoregressive decoding).

use std::time::Instant;

use burn::tensor::backend::Backend;
use draftsmith_core::{common_prefix, DraftTree};
use draftsmith_model::layers::Linear;
use draftsmith_model::{AttentionMask, KvCache, LogitsSelect, Model, ModelError, QFormat, TextTokenizer};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::precut::{Action, DraftStep, Gain, PreCut, PreCutConfig};
use super::token_cache::{insert_branch, PhraseCache, TokenCacheConfig};
use crate::error::DecodeError;
use crate::method::Method;
use crate::sampling::{probabilities, sample_from, SamplingConfig};
use crate::spec::{
    probability_class, verify_greedy, DepthStop, DraftContext, DraftCost, Proposer, StepCosts, Verified,
};

/// Phrase tokens kept with their confidences, and the drafter's logits after the last one.
type Extension = (Vec<(u32, f32)>, Vec<f32>);

/// Draft-model parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DraftModelConfig {
    /// λ: tokens drafted per step (the maximum when Pre-cut is on).
    pub lambda: usize,
    /// Pre-cut controller; `None` always drafts λ tokens.
    pub precut: Option<PreCutConfig>,
    /// Post-use reuse at the draft model; `None` drafts one token per call.
    pub reuse: Option<TokenCacheConfig>,
    /// Draft vocabulary: the drafter computes logits for token ids `0..n` only (`None`: all).
    pub vocab: Option<usize>,
    /// When the generation samples, draw each draft token from the drafter's processed
    /// distribution (verified by speculative sampling) instead of taking its argmax. Not with
    /// `reuse`.
    pub sample: bool,
}

impl Default for DraftModelConfig {
    fn default() -> Self {
        Self { lambda: 4, precut: None, reuse: None, vocab: None, sample: false }
    }
}

/// Mixed into the generation's seed for the drafter's own draws, which must not be the
/// verifier's (speculative sampling needs the draft independent of the target's coins).
const DRAW_SEED: u64 = 0x9E37_79B9_7F4A_7C15;

/// Counters over the drafter's lifetime.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DraftModelStats {
    /// Drafting rounds (proposals).
    pub rounds: usize,
    /// Drafter forward calls, catch-up included.
    pub calls: usize,
    /// Tokens drafted.
    pub drafted: usize,
    /// Tokens drafted from cached phrases (reuse at the draft model).
    pub reused: usize,
    /// Cached phrase tokens fed to the drafter beside a draft token (reuse at the draft model):
    /// extra rows of its forward calls.
    pub phrase_rows: usize,
    /// Drafter calls with cached phrases to offer that the `auto` policy's price of a phrase
    /// row left without them (`PhraseGate`).
    pub gated: usize,
    /// Drafted tokens the target accepted.
    pub accepted: usize,
    /// Rounds Pre-cut ended (STOP before λ).
    pub precut_stops: usize,
    /// Rounds the draft policy's rule ended before λ.
    pub rule_stops: usize,
}

/// A draft-model proposer.
pub struct DraftModel<B: Backend> {
    model: Model<B>,
    /// The LM head over the draft vocabulary (`config.vocab`), when it is smaller than the model's.
    head: Option<Linear<B>>,
    cache: KvCache<B>,
    /// The tokens whose keys and values `cache` holds.
    cached: Vec<u32>,
    config: DraftModelConfig,
    precut: Option<PreCut>,
    phrases: Option<PhraseCache>,
    /// How deep cached phrases go in a drafter call under the `auto` policy.
    gate: PhraseGate,
    /// The last draft, its per-token confidences and the situation after each call.
    draft: Vec<u32>,
    confidences: Vec<f32>,
    /// The distribution each token of the last draft was drawn from, when drafts are drawn.
    distributions: Vec<Vec<f32>>,
    /// The generation's logits processing and the drafter's own random stream, while drafts
    /// are drawn (`sample` on and the generation sampling).
    draws: Option<(SamplingConfig, StdRng)>,
    steps: Vec<DraftStep>,
    round_lambda: usize,
    /// A draft policy's limit on the next round's λ ([`Proposer::limit_depth`]).
    depth_limit: Option<usize>,
    /// A draft policy's rule for stopping the next round early ([`Proposer::set_depth_stop`]).
    depth_stop: Option<DepthStop>,
    stats: DraftModelStats,
    last_cost: DraftCost,
}

impl<B: Backend> DraftModel<B> {
    /// A drafter; check its tokenizer against the target's with [`check_tokenizers`] first.
    pub fn new(model: Model<B>, config: DraftModelConfig) -> Result<Self, DecodeError> {
        if config.lambda == 0 {
            return Err(DecodeError::Parameter {
                method: "draft-model",
                name: "lambda",
                value: "0".into(),
                bound: "must be at least 1",
            });
        }
        let precut = config.precut.map(PreCut::new).transpose()?;
        if let Some(reuse) = &config.reuse {
            reuse.validate()?;
            if config.sample {
                return Err(DecodeError::Parameter {
                    method: "draft-model",
                    name: "draft_tokens",
                    value: "sample".into(),
                    bound: "not with phrase reuse (its phrases are matched against the drafter's greedy chain)",
                });
            }
        }
        let vocab = model.config().vocab_size;
        let head = match config.vocab {
            Some(0) => {
                return Err(DecodeError::Parameter {
                    method: "draft-model",
                    name: "draft_vocab",
                    value: "0".into(),
                    bound: "must be at least 1",
                })
            }
            Some(n) if n < vocab => {
                // The head's own format where rows can be re-quantized to it (a drafter loaded
                // with re-quantized weights keeps their size), else Q8_0.
                let format = model.lm_head_format().filter(|f| f.has_quantizer()).unwrap_or(QFormat::Q8_0);
                Some(model.lm_head_rows(&(0..n as u32).collect::<Vec<_>>(), format)?)
            }
            _ => None,
        };
        let cache = model.new_cache(256);
        Ok(Self {
            model,
            head,
            cache,
            cached: Vec::new(),
            precut,
            phrases: config.reuse.map(PhraseCache::new),
            gate: PhraseGate::default(),
            config,
            draft: Vec::new(),
            confidences: Vec::new(),
            distributions: Vec::new(),
            draws: None,
            steps: Vec::new(),
            round_lambda: 0,
            depth_limit: None,
            depth_stop: None,
            stats: DraftModelStats::default(),
            last_cost: DraftCost::default(),
        })
    }

    /// Like [`DraftModel::new`], also checking that drafted ids are within the target's vocabulary.
    pub fn for_target(target: &Model<B>, model: Model<B>, config: DraftModelConfig) -> Result<Self, DecodeError> {
        let (t, d) = (target.config().vocab_size, model.config().vocab_size);
        if d > t {
            return Err(DecodeError::VocabSize { target: t, draft: d });
        }
        Self::new(model, config)
    }

    pub fn config(&self) -> &DraftModelConfig {
        &self.config
    }

    pub fn stats(&self) -> DraftModelStats {
        self.stats
    }

    /// Confidence (softmax probability) of each token of the last draft.
    pub fn confidences(&self) -> &[f32] {
        &self.confidences
    }

    pub fn precut(&self) -> Option<&PreCut> {
        self.precut.as_ref()
    }

    /// One drafter forward over `tokens`, appended to its cache: the selected rows' logits over
    /// the draft vocabulary (row-major), and the row width.
    fn logits(
        &mut self,
        tokens: &[u32],
        positions: &[usize],
        mask: &AttentionMask,
        select: LogitsSelect,
    ) -> Result<(Vec<f32>, usize), ModelError> {
        let Some(head) = &self.head else {
            let logits = self.model.forward(tokens, positions, mask, select, &mut self.cache)?.logits;
            let width = logits.dims()[1];
            return Ok((draftsmith_model::host_f32(logits), width));
        };
        let hidden = self.model.forward_hidden(tokens, positions, mask, &mut self.cache)?.hidden_final;
        let n = tokens.len();
        let hidden = match select {
            LogitsSelect::All => hidden,
            LogitsSelect::Last => hidden.narrow(0, n - 1, 1),
        };
        let width = head.out_features;
        let logits = match self.model.activations() {
            Some(mode) => {
                let rows = hidden.dims()[0];
                head.forward_host(mode, &draftsmith_model::host_f32(hidden), rows).expect("a quantized draft head")
            }
            None => draftsmith_model::host_f32(head.forward(hidden)),
        };
        Ok((logits, width))
    }

    /// Brings the cache to `tokens` and returns the drafter's logits after the last one.
    fn catch_up(&mut self, tokens: &[u32]) -> Result<Vec<f32>, ModelError> {
        let keep = common_prefix(&self.cached, tokens).min(tokens.len() - 1);
        self.cache.truncate(keep);
        self.cached.truncate(keep);
        let feed = &tokens[keep..];
        let positions: Vec<usize> = (keep..tokens.len()).collect();
        let (row, _) = self.logits(feed, &positions, &AttentionMask::Causal, LogitsSelect::Last)?;
        self.cached.extend_from_slice(feed);
        self.stats.calls += 1;
        Ok(row)
    }

    /// One draft call: feeds `token` (and cached phrases keyed by it, cut to `max_extra`
    /// tokens). Returns the phrase tokens the drafter agrees with, their confidences, and the
    /// drafter's logits after the last token kept.
    ///
    /// With `priced` (the `auto` policy), phrase tokens deeper than [`PhraseGate::depth`] are
    /// left out and the call's time and the drafter's verdicts feed the gate.
    fn extend(&mut self, token: u32, max_extra: usize, priced: bool) -> Result<Extension, ModelError> {
        let mut phrases = DraftTree::new();
        if let Some(cache) = self.phrases.as_ref().filter(|_| max_extra > 0) {
            let offered = cache.lookup(token, cache.config().per_anchor);
            let deepest = if priced && !offered.is_empty() { self.gate.depth() } else { usize::MAX };
            if deepest == 0 {
                self.stats.gated += 1;
            }
            for p in offered {
                insert_branch(&mut phrases, None, &p[..p.len().min(max_extra).min(deepest)]);
            }
        }
        let base = self.cached.len();
        self.stats.calls += 1;
        self.cached.push(token);
        let start = Instant::now();
        if phrases.is_empty() {
            let (row, _) = self.logits(&[token], &[base], &AttentionMask::Causal, LogitsSelect::Last)?;
            if priced && self.phrases.is_some() {
                self.gate.timed(0, start.elapsed().as_secs_f64() * 1e3);
            }
            return Ok((Vec::new(), row));
        }
        self.stats.phrase_rows += phrases.len();
        let mut full = DraftTree::new();
        full.push(token, None);
        for (i, &t) in phrases.tokens().iter().enumerate() {
            full.push(t, Some(phrases.parents()[i].map_or(0, |p| p + 1)));
        }
        let mask = AttentionMask::Visible(full.visibility(base));
        let (all, vocab) = self.logits(full.tokens(), &full.positions(base - 1), &mask, LogitsSelect::All)?;
        let rows: Vec<&[f32]> = all.chunks_exact(vocab).collect();
        let best: Vec<(u32, f32)> = rows.iter().map(|r| argmax_confidence(r)).collect();
        if priced {
            // A row's price includes reading its logits; the one-row call's own row is read by
            // its caller, outside its timing, so that read is charged to the phrase rows too.
            self.gate.timed(phrases.len(), start.elapsed().as_secs_f64() * 1e3);
        }
        let next: Vec<u32> = best.iter().map(|b| b.0).collect();
        let path = verify_greedy(&phrases, next[0], &next[1..]).path;
        if priced {
            self.gate.verdicts(phrases.depths(), path.len());
        }
        let keep: Vec<usize> = (0..=base).chain(path.iter().map(|&i| base + 1 + i)).collect();
        self.cache.keep(&keep)?;
        let mut parent_row = 0;
        let mut matched = Vec::with_capacity(path.len());
        for &i in &path {
            matched.push((phrases.tokens()[i], best[parent_row].1));
            parent_row = i + 1;
        }
        self.cached.extend(matched.iter().map(|m| m.0));
        self.stats.reused += matched.len();
        Ok((matched, rows[parent_row].to_vec()))
    }

    /// Drafts a chain after `tokens` (λ tokens, fewer when Pre-cut stops or context runs out).
    fn draft(&mut self, tokens: &[u32]) -> Result<Vec<u32>, ModelError> {
        self.draft.clear();
        self.confidences.clear();
        self.distributions.clear();
        self.steps.clear();
        let room = self.model.config().max_position_embeddings.saturating_sub(tokens.len() + 1);
        let limit = self.depth_limit.take().unwrap_or(usize::MAX);
        let stop = self.depth_stop.take();
        self.round_lambda = self.config.lambda.min(room).min(limit);
        if self.round_lambda == 0 {
            return Ok(Vec::new());
        }
        let mut row = self.catch_up(tokens)?;
        let (mut calls, mut product) = (1, 1.0f32);
        // What drawn drafts are penalized over: the context and the draft so far.
        let mut context = self.draws.is_some().then(|| tokens.to_vec());
        loop {
            let (token, confidence) = match (&mut self.draws, &mut context) {
                (Some((cfg, rng)), Some(context)) => {
                    let q = probabilities(&row, context, cfg);
                    let token = sample_from(&q, rng.random::<f32>());
                    let confidence = q[token as usize];
                    self.distributions.push(q);
                    context.push(token);
                    (token, confidence)
                }
                _ => argmax_confidence(&row),
            };
            self.draft.push(token);
            self.confidences.push(confidence);
            product *= confidence;
            self.steps.push(DraftStep { tokens: self.draft.len(), confidence: product });
            if self.draft.len() >= self.round_lambda {
                break;
            }
            if let Some(pc) = &mut self.precut {
                if pc.decide(calls, product) == Action::Stop {
                    self.stats.precut_stops += 1;
                    break;
                }
            }
            if stop.as_ref().is_some_and(|rule| !rule.more(&confidence_classes(&self.confidences))) {
                self.stats.rule_stops += 1;
                break;
            }
            let (matched, next) = self.extend(token, self.round_lambda - self.draft.len() - 1, stop.is_some())?;
            calls += 1;
            for (t, c) in matched {
                self.draft.push(t);
                self.confidences.push(c);
                product *= c;
            }
            row = next;
        }
        Ok(self.draft.clone())
    }
}

/// Deepest phrase depth the gate prices on its own; deeper tokens share its last depth's counts.
const GATE_DEPTHS: usize = 6;
/// Gated off, every this many drafter calls with phrases to offer take them along anyway.
const GATE_PROBE: usize = 16;
/// Weight of a new call time in the gate's running means.
const GATE_EMA: f64 = 0.05;

/// Prices the cached phrases fed to the drafter (Post-use at the draft model) under the `auto`
/// policy: a phrase token at depth d (1 = right after the drafted token) saves one drafter call
/// when the drafter agrees with it and every phrase token above it, and costs one more row in
/// the call whether or not it does. So phrase tokens go as deep as the measured agreement at
/// each depth, times a one-row call's measured time, exceeds the measured time of an extra row.
/// Until both times are measured phrases go in whole; gated off entirely, one call in
/// [`GATE_PROBE`] with phrases to offer takes their first tokens along, so the measurements
/// follow the text.
#[derive(Debug, Clone, Default)]
struct PhraseGate {
    /// Running mean of a one-row call's ms.
    one_row_ms: Option<f64>,
    /// Running mean of the ms one phrase row adds to a call.
    row_ms: Option<f64>,
    /// Phrase tokens fed and agreed with, per depth (halved when the counts grow large).
    fed: [f64; GATE_DEPTHS],
    agreed: [f64; GATE_DEPTHS],
    /// Calls gated off since the last probe.
    skipped: usize,
}

impl PhraseGate {
    /// How deep phrase tokens go in the next call (0: none; `usize::MAX`: whole phrases).
    fn depth(&mut self) -> usize {
        let (Some(one), Some(row)) = (self.one_row_ms, self.row_ms) else {
            return usize::MAX;
        };
        // Agreement with a Beta(1, 1) prior: an unmeasured depth is given a coin's chance.
        let pays = |d: usize| (self.agreed[d] + 1.0) / (self.fed[d] + 2.0) * one > row;
        let deepest = (0..GATE_DEPTHS).take_while(|&d| pays(d)).count();
        if deepest > 0 {
            self.skipped = 0;
            return if deepest == GATE_DEPTHS { usize::MAX } else { deepest };
        }
        self.skipped += 1;
        if self.skipped >= GATE_PROBE {
            self.skipped = 0;
            return 1;
        }
        0
    }

    /// A call with `rows` phrase rows took `ms`.
    fn timed(&mut self, rows: usize, ms: f64) {
        let mean = |m: &mut Option<f64>, v: f64| *m = Some(m.map_or(v, |m| m + GATE_EMA * (v - m)));
        match (rows, self.one_row_ms) {
            (0, _) => mean(&mut self.one_row_ms, ms),
            (k, Some(one)) => mean(&mut self.row_ms, ((ms - one) / k as f64).max(0.0)),
            (_, None) => {}
        }
    }

    /// The drafter's verdicts on the phrase tokens it was fed (their `depths`): it agreed with
    /// the first `agreed` depths of one branch.
    fn verdicts(&mut self, depths: &[usize], agreed: usize) {
        for &d in depths {
            self.fed[(d - 1).min(GATE_DEPTHS - 1)] += 1.0;
        }
        for d in 0..agreed {
            self.agreed[d.min(GATE_DEPTHS - 1)] += 1.0;
        }
        if self.fed[0] > 512.0 {
            self.fed.iter_mut().chain(self.agreed.iter_mut()).for_each(|c| *c /= 2.0);
        }
    }
}

/// The node class of each drafted token from the drafter's confidence in it.
fn confidence_classes(confidences: &[f32]) -> Vec<usize> {
    confidences.iter().map(|&c| probability_class(f64::from(c))).collect()
}

/// The highest logit's id (the first on ties) and its softmax probability, `1 / Σ exp(v − max)`
/// with the vectorized f32 `exp` of the kernels' row operations (a drafter row has 65536–151936
/// logits: libm's f64 `exp` took ~0.4 ms of a ~9 ms Qwen2.5-Coder-0.5B call).
fn argmax_confidence(row: &[f32]) -> (u32, f32) {
    thread_local! {
        static NUMERATORS: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let (best, _) =
        row.iter().enumerate().fold((0, f32::NEG_INFINITY), |(bi, bv), (i, &v)| if v > bv { (i, v) } else { (bi, bv) });
    let sum = NUMERATORS.with_borrow_mut(|x| {
        x.clear();
        x.extend_from_slice(row);
        draftsmith_kernels::rowops::softmax_numerators(x)
    });
    (best as u32, 1.0 / sum)
}

impl<B: Backend> Proposer for DraftModel<B> {
    fn name(&self) -> &str {
        Method::DraftModel.name()
    }

    fn draft_len(&self) -> Option<usize> {
        Some(self.config.lambda)
    }

    fn depth_range(&self) -> Option<usize> {
        Some(self.config.lambda)
    }

    fn limit_depth(&mut self, depth: usize) {
        self.depth_limit = Some(depth.max(1));
    }

    /// The policy's rule bounds how deep a draft goes; Pre-cut, the method's own controller
    /// (what the paper compares), may stop it earlier.
    fn set_depth_stop(&mut self, rule: DepthStop) -> bool {
        self.depth_stop = Some(rule);
        true
    }

    /// Pre-cut's prices of a draft call and of verification, measured (see [`PreCut::set_costs`]).
    fn set_costs(&mut self, costs: &StepCosts) {
        if let Some(pc) = &mut self.precut {
            pc.set_costs(costs);
        }
    }

    /// The drafter's confidence in each token of the chain, as a class.
    fn node_classes(&self, tree: &DraftTree) -> Option<Vec<usize>> {
        (tree.tokens() == self.draft.as_slice()).then(|| confidence_classes(&self.confidences))
    }

    fn last_cost(&self) -> Option<DraftCost> {
        Some(self.last_cost)
    }

    fn set_sampling(&mut self, cfg: &SamplingConfig) {
        let draw = self.config.sample && !cfg.is_greedy();
        self.draws = draw.then(|| (cfg.clone(), StdRng::seed_from_u64(cfg.seed ^ DRAW_SEED)));
    }

    fn draft_distributions(&self) -> Option<&[Vec<f32>]> {
        self.draws.as_ref().map(|_| self.distributions.as_slice())
    }

    /// The tokens past the longest prefix of `ctx` the drafter's cache holds (at least the
    /// last token, which a draft always feeds).
    fn lag(&self, ctx: &DraftContext<'_>) -> usize {
        ctx.tokens.len() - common_prefix(&self.cached, ctx.tokens).min(ctx.tokens.len().saturating_sub(1))
    }

    fn extra_stats(&self) -> Vec<(&'static str, f64)> {
        // Ratios over the drafter's lifetime (a proposer may serve many prompts).
        let s = self.stats;
        let mut stats = Vec::new();
        if s.rounds > 0 {
            let pct = |n: usize| 100.0 * n as f64 / s.rounds as f64;
            stats.push(("drafter_rounds_rule_stopped_pct", pct(s.rule_stops)));
            if let Some(pc) = &self.precut {
                stats.extend([
                    ("precut_rounds_stopped_pct", pct(s.precut_stops)),
                    ("precut_draft_cost", pc.draft_cost() as f64),
                ]);
            }
        }
        if self.phrases.is_none() || s.calls == 0 {
            return stats;
        }
        stats.extend([
            ("drafter_phrase_rows_per_call", s.phrase_rows as f64 / s.calls as f64),
            ("drafter_phrase_rows_matched_pct", 100.0 * s.reused as f64 / s.phrase_rows.max(1) as f64),
            ("drafter_calls_gated_pct", 100.0 * s.gated as f64 / s.calls as f64),
        ]);
        if let (Some(call), Some(row)) = (self.gate.one_row_ms, self.gate.row_ms) {
            stats.extend([("drafter_call_ms", call), ("drafter_phrase_row_ms", row)]);
        }
        stats
    }

    fn propose(&mut self, ctx: &DraftContext<'_>) -> Result<DraftTree, crate::DecodeError> {
        self.stats.rounds += 1;
        let calls_before = self.stats.calls;
        let drafted = self.draft(ctx.tokens);
        self.last_cost =
            DraftCost { calls: self.stats.calls - calls_before, generated: drafted.as_ref().map_or(0, Vec::len) };
        match drafted {
            Ok(draft) => {
                self.stats.drafted += draft.len();
                Ok(DraftTree::chain(&draft))
            }
            Err(e) => {
                self.cache.truncate(0);
                self.cached.clear();
                self.draft.clear();
                self.distributions.clear();
                Err(e.into())
            }
        }
    }

    fn pruned(&mut self, keep: &[usize]) {
        // A chain is pruned to a prefix: learn from the calls that produced it.
        if keep.iter().enumerate().all(|(j, &i)| i == j) {
            self.draft.truncate(keep.len());
            self.distributions.truncate(keep.len());
            self.steps.retain(|s| s.tokens <= keep.len());
        } else {
            self.draft.clear();
            self.distributions.clear();
        }
    }

    fn observe_verified(&mut self, ctx: &DraftContext<'_>, tree: &DraftTree, verified: &Verified<'_>) {
        self.stats.accepted += verified.accepted.len();
        if tree.tokens() != self.draft.as_slice() || tree.is_empty() {
            return; // The driver dropped the draft (context limit): nothing to learn.
        }
        if let Some(pc) = &mut self.precut {
            let gain = pc.gain();
            let gained: Vec<bool> = (0..tree.len())
                .map(|i| match gain {
                    Gain::Useful => verified.is_useful(tree, i),
                    Gain::Accepted => i < verified.accepted.len(),
                })
                .collect();
            pc.learn(&self.steps, &gained, self.round_lambda);
        }
        if let Some(cache) = &mut self.phrases {
            cache.record(*ctx.tokens.last().expect("a context has at least one token"), tree, verified);
        }
    }
}

/// Checks that a drafter can share the target's token ids: same tokens at every id (added
/// tokens included), same special-token flags, same BOS and EOS ids.
pub fn check_tokenizers(target: &TextTokenizer, draft: &TextTokenizer) -> Result<(), DecodeError> {
    let (t, d) = (target.inner(), draft.inner());
    let show = |token: Option<String>| token.map_or_else(|| "absent".to_string(), |s| format!("{s:?}"));
    let size = t.get_vocab_size(true).max(d.get_vocab_size(true));
    let paths = || (target.source().to_path_buf(), draft.source().to_path_buf());
    for id in 0..size as u32 {
        let (tt, dt) = (t.id_to_token(id), d.id_to_token(id));
        if tt != dt {
            let (target, draft) = paths();
            return Err(DecodeError::VocabularyMismatch {
                target,
                draft,
                id,
                target_token: show(tt),
                draft_token: show(dt),
            });
        }
    }
    let special = |tok: &TextTokenizer| {
        let mut ids: Vec<u32> =
            tok.inner().get_added_tokens_decoder().iter().filter(|(_, a)| a.special).map(|(&id, _)| id).collect();
        ids.sort_unstable();
        ids
    };
    let checks = [
        ("special token ids", format!("{:?}", special(target)), format!("{:?}", special(draft))),
        ("BOS ids", format!("{:?}", target.bos_id()), format!("{:?}", draft.bos_id())),
        ("EOS ids", format!("{:?}", target.eos_ids()), format!("{:?}", draft.eos_ids())),
    ];
    for (what, target_value, draft_value) in checks {
        if target_value != draft_value {
            let (target, draft) = paths();
            return Err(DecodeError::SpecialTokenMismatch {
                target,
                draft,
                what: what.to_string(),
                target_value,
                draft_value,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn tokenizer(path: &str, words: &[&str], eos: u32) -> TextTokenizer {
        let vocab: Vec<String> = words.iter().enumerate().map(|(i, w)| format!("{w:?}: {i}")).collect();
        let json = format!(
            r#"{{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [], "normalizer": null, "pre_tokenizer": null,
                "post_processor": null, "decoder": null, "model": {{"type": "WordLevel", "vocab": {{{}}}, "unk_token": "a"}}}}"#,
            vocab.join(", ")
        );
        let inner = tokenizers::Tokenizer::from_bytes(json.as_bytes()).unwrap();
        TextTokenizer::new(inner, Path::new(path), None, vec![eos], false, None)
    }

    #[test]
    fn tokenizer_mismatch_names_both_models_and_the_first_differing_id() {
        let target = tokenizer("/m/target.gguf", &["a", "b", "c", "d"], 3);
        assert!(check_tokenizers(&target, &tokenizer("/m/draft.gguf", &["a", "b", "c", "d"], 3)).is_ok());
        let err = check_tokenizers(&target, &tokenizer("/m/draft.gguf", &["a", "b", "x", "y"], 3)).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"drafter /m/draft.gguf and target /m/target.gguf have different vocabularies: token id 2 is "x" in the drafter but "c" in the target"#
        );
        let err = check_tokenizers(&target, &tokenizer("/m/draft.gguf", &["a", "b", "c"], 2)).unwrap_err();
        assert!(err.to_string().contains(r#"token id 3 is absent in the drafter but "d" in the target"#), "{err}");
        let err = check_tokenizers(&target, &tokenizer("/m/draft.gguf", &["a", "b", "c", "d"], 1)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "drafter /m/draft.gguf and target /m/target.gguf have different special tokens: EOS ids differ: [1] in the drafter, [3] in the target"
        );
    }

    #[test]
    fn phrase_rows_go_only_as_deep_as_the_drafters_agreement_pays_for_them() {
        let mut gate = PhraseGate::default();
        assert_eq!(gate.depth(), usize::MAX, "whole phrases until both call times are measured");
        gate.timed(2, 12.0);
        assert_eq!(gate.depth(), usize::MAX, "an extra row is priced against a one-row call");
        gate.timed(0, 10.0);
        // 2 ms a phrase row: 20 % of a call.
        gate.timed(2, 14.0);
        // The drafter agrees with 10 % of the first phrase tokens: 1 ms saved per 2 ms row.
        for call in 0..100 {
            gate.verdicts(&[1, 2, 1], usize::from(call % 5 == 0));
        }
        let depths: Vec<usize> = (0..2 * GATE_PROBE).map(|_| gate.depth()).collect();
        assert_eq!(depths.iter().filter(|&&d| d == 0).count(), 2 * GATE_PROBE - 2, "{depths:?}");
        assert_eq!(depths.iter().filter(|&&d| d == 1).count(), 2, "one probe in {GATE_PROBE} calls");
        // Now it agrees with every first token and no second one (the old counts fade).
        for _ in 0..2000 {
            gate.verdicts(&[1, 2], 1);
        }
        assert_eq!(gate.depth(), 1);
        // Second tokens agreed with half the time: depths never fed get a coin's chance too.
        for _ in 0..2000 {
            gate.verdicts(&[1, 2], 1);
            gate.verdicts(&[1, 2], 2);
        }
        assert_eq!(gate.depth(), usize::MAX);
    }

    #[test]
    fn confidence_is_the_softmax_of_the_argmax() {
        let (id, p) = argmax_confidence(&[0.0, 2.0f32.ln(), 0.0, 2.0f32.ln()]);
        assert_eq!(id, 1, "first of equal maxima");
        assert!((p - 1.0 / 3.0).abs() < 1e-6);
    }
}
