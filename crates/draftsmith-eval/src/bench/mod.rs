//! The target engine's benchmark (`draftsmith bench ar`): decode and prefill throughput and
//! tree-verification cost on a fixed prompt set, the verify cost curve with the machine's
//! roofline, optionally side by side with llama.cpp. Timings are measured, never asserted.
//! The library prints nothing: what the CLI shows while it runs comes through [`BenchEvent`].

pub mod curve;
pub mod error;
pub mod llamacpp;
pub mod machine;

use std::time::{Duration, Instant};

use burn::tensor::backend::Backend;
use draftsmith_decode::cost::{cached_context, time_passes, DraftShape, Rounds};
use draftsmith_decode::{Generation, Sampler, SamplingConfig};
use draftsmith_model::{AttentionMask, ChatMessage, LogitsSelect, MatmulWeights, Model, TextTokenizer};
use serde::Serialize;

pub use curve::{verify_curve, CurvePoint, RooflinePoint, Split};
pub use error::BenchError;
pub use llamacpp::{LlamaCpp, LlamaCppRun, LlamaCppSummary, RatioSpread};
pub use machine::{host_drift_message, Machine, Roofline, STEADY_HOST};

/// The fixed prompt set (user messages; the chat template is applied).
pub const PROMPTS: &[&str] = &[
    "Write a short story about a robot learning to paint.",
    "Explain the difference between a list and a tuple in Python.",
    "What are the main causes of the French Revolution?",
    "Give me three tips for improving my sleep.",
    "Write a Python function that checks whether a string is a palindrome.",
    "Summarize the plot of Romeo and Juliet in a few sentences.",
    "How does photosynthesis work?",
    "Compose a polite email declining a meeting invitation.",
];

/// What to measure.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchConfig {
    /// New tokens per prompt (EOS is ignored so every prompt decodes the same count).
    pub max_new_tokens: usize,
    /// How many of [`PROMPTS`] to use.
    pub prompts: usize,
    /// Nodes in the random draft tree whose verification cost is compared with a 1-token step.
    pub tree_size: usize,
    /// Draft sizes of the verify cost curve.
    pub curve_sizes: Vec<usize>,
    /// Cached context lengths the curve is measured at.
    pub contexts: Vec<usize>,
    /// Timed passes per curve point (the median is reported).
    pub curve_runs: usize,
    /// Also time llama.cpp on the same GGUF and prompt ids, alternating prompt by prompt.
    pub vs_llamacpp: bool,
    /// Passes over the prompts (default: 3 with llama.cpp, else 1).
    pub repeats: Option<usize>,
}

impl BenchConfig {
    /// Refuses settings that cannot run, before a model is loaded.
    pub fn validate(&self) -> Result<(), BenchError> {
        if self.prompts == 0 || self.prompts > PROMPTS.len() {
            return Err(BenchError::Prompts { max: PROMPTS.len() });
        }
        if self.contexts.contains(&0) {
            return Err(BenchError::EmptyContext);
        }
        if self.max_new_tokens < 2 {
            return Err(BenchError::TooFewTokens);
        }
        let setting = |flag, problem: &str| Err(BenchError::Setting { flag, problem: problem.into() });
        if self.tree_size == 0 {
            return setting("--tree-size", "must be at least 1");
        }
        if self.curve_sizes.contains(&0) {
            return setting("--curve-sizes", "must each be at least 1");
        }
        for (flag, values) in [("--curve-sizes", &self.curve_sizes), ("--contexts", &self.contexts)] {
            if let Some(v) = values.iter().enumerate().find(|(i, v)| values[..*i].contains(v)).map(|(_, v)| v) {
                return setting(flag, &format!("{v} is given twice (each value is measured once)"));
            }
        }
        if self.curve_runs == 0 {
            return setting("--curve-runs", "must be at least 1");
        }
        if self.repeats == Some(0) {
            return setting("--repeats", "must be at least 1");
        }
        Ok(())
    }

    /// Refuses sizes the model's context of `context` tokens cannot hold: the random tree after
    /// its cached prefix, and a curve none of whose contexts fits its largest draft (contexts
    /// that do not fit are otherwise skipped, [`BenchEvent::CurveSkipped`]).
    pub fn validate_for(&self, context: usize) -> Result<(), BenchError> {
        if self.tree_size + tree_prefix(context) >= context {
            let problem = format!(
                "{}: a tree after {} cached tokens does not fit the model's context of {context}",
                self.tree_size,
                tree_prefix(context)
            );
            return Err(BenchError::Setting { flag: "--tree-size", problem });
        }
        let largest = self.curve_sizes.iter().copied().max().unwrap_or(1);
        if largest >= context {
            let problem = format!("{largest}: a draft this long does not fit the model's context of {context}");
            return Err(BenchError::Setting { flag: "--curve-sizes", problem });
        }
        if !self.contexts.iter().any(|&c| c + largest < context) {
            let problem = format!(
                "{:?}: with drafts of up to {largest} tokens (--curve-sizes) none fits the model's context of {context}",
                self.contexts
            );
            return Err(BenchError::Setting { flag: "--contexts", problem });
        }
        Ok(())
    }

    /// Passes over the prompts.
    pub fn repeats(&self) -> usize {
        self.repeats.unwrap_or(if self.vs_llamacpp { 3 } else { 1 }).max(1)
    }
}

/// The engine under test.
#[derive(Debug, Clone, Copy)]
pub struct BenchTarget<'a, B: Backend> {
    pub model: &'a Model<B>,
    /// The model file or directory (llama.cpp needs a GGUF file).
    pub path: &'a std::path::Path,
    /// The device, as recorded (`cpu`, `cuda`, `wgpu`).
    pub device: &'a str,
    pub weights: MatmulWeights,
}

/// What the benchmark reports while it runs.
#[derive(Debug, Clone, Copy)]
pub enum BenchEvent<'a> {
    /// llama.cpp started; its first line (engine, threads, system info).
    LlamaCpp(&'a serde_json::Value),
    /// The machine was probed.
    Machine(&'a Machine),
    /// The verify curve starts (`runs` timed passes per point).
    CurveStart { runs: usize },
    /// A context whose cache plus the largest draft does not fit the model.
    CurveSkipped { context: usize, largest: usize, max_context: usize },
    /// A point of the curve was measured.
    CurvePoint(&'a CurvePoint),
}

/// The benchmark's result: the JSON object `draftsmith bench ar` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchResult {
    pub machine: Machine,
    pub verify_curve: Vec<CurvePoint>,
    pub model: String,
    pub device: String,
    pub weights: String,
    pub activations: String,
    /// The attention keys' cache format: `float`, `q8_0` (`--kv-keys`), or `dense` (burn's path).
    pub kv_keys: String,
    pub prompts: usize,
    pub new_tokens_per_prompt: usize,
    pub decode_tokens_per_s: f64,
    pub ms_per_token: f64,
    pub prefill_tokens_per_s: f64,
    pub prefill_len: usize,
    pub prefill512_ms: f64,
    pub step1_ms: f64,
    pub tree_size: usize,
    pub tree_ms: f64,
    pub tree64_over_step1_cost: f64,
    pub repeats: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llamacpp: Option<LlamaCppSummary>,
    /// The median of the per-prompt decode speed ratios (ours ÷ llama.cpp's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decode_ratio_vs_llamacpp: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decode_ratio_spread: Option<RatioSpread>,
}

/// Token ids of the first `n` of [`PROMPTS`], through the chat template when the model has one.
pub fn encode_prompts(tokenizer: &TextTokenizer, n: usize) -> Result<Vec<Vec<u32>>, BenchError> {
    PROMPTS[..n.min(PROMPTS.len())]
        .iter()
        .map(|p| {
            let text = match tokenizer.chat_template() {
                Some(t) => t.render(&[ChatMessage::new("user", p)], true)?,
                None => p.to_string(),
            };
            Ok(tokenizer.encode(&text)?)
        })
        .collect()
}

/// Decode/prefill throughput over `prompts`, the prefill and tree-verify costs, the machine and
/// the verify curve (and llama.cpp's timings on the same file when `cfg.vs_llamacpp`).
pub fn bench_ar<B: Backend>(
    target: BenchTarget<'_, B>,
    prompts: &[Vec<u32>],
    cfg: &BenchConfig,
    on_event: &mut dyn FnMut(BenchEvent<'_>),
) -> Result<BenchResult, BenchError> {
    cfg.validate()?;
    let model = target.model;
    cfg.validate_for(model.config().max_position_embeddings)?;
    // Warm-up: one short generation so first-call allocations are not timed.
    decode_run(model, &prompts[0], 8)?;
    let mut reference = if cfg.vs_llamacpp { Some(LlamaCpp::start(target.path)?) } else { None };
    if let Some(r) = reference.as_mut() {
        on_event(BenchEvent::LlamaCpp(&r.info));
        r.run(&prompts[0], 8)?;
    }
    let repeats = cfg.repeats();
    let (mut decode_time, mut decode_tokens, mut prefill_time, mut prefill_tokens) =
        (Duration::ZERO, 0usize, Duration::ZERO, 0usize);
    let (mut lc_decode, mut lc_prefill, mut lc_tokens, mut ratios) = (0.0f64, 0.0f64, 0usize, Vec::new());
    for _ in 0..repeats {
        for prompt in prompts {
            let g = decode_run(model, prompt, cfg.max_new_tokens)?;
            decode_time += g.decode;
            decode_tokens += g.tokens.len() - 1;
            prefill_time += g.prefill;
            prefill_tokens += prompt.len();
            if let Some(r) = reference.as_mut() {
                let t = r.run(prompt, cfg.max_new_tokens)?;
                lc_decode += t.decode_s;
                lc_prefill += t.prefill_s;
                lc_tokens += t.decoded;
                let ours = (g.tokens.len() - 1) as f64 / g.decode.as_secs_f64();
                ratios.push(ours / (t.decoded as f64 / t.decode_s));
            }
        }
    }
    // llama.cpp's part is done: its process ends here, so nothing of it (threads, memory) sits
    // beside the timings below, which are the engine's alone.
    let llamacpp = reference.map(|r| LlamaCppSummary {
        engine: r.info["engine"].clone(),
        threads: r.info["threads"].clone(),
        system_info: r.info["system_info"].clone(),
        decode_tokens_per_s: lc_tokens as f64 / lc_decode,
        ms_per_token: 1e3 * lc_decode / lc_tokens as f64,
        prefill_tokens_per_s: prefill_tokens as f64 / lc_prefill,
    });
    let context = model.config().max_position_embeddings;
    let prefill_len = 512.min(context - 1);
    let prefill512 = time_prefill(model, prefill_len)?;
    let (step1, tree) = time_tree_verify(model, cfg.tree_size, tree_prefix(context))?;
    let decode_tps = decode_tokens as f64 / decode_time.as_secs_f64();
    let mut machine = Machine::probe(model);
    on_event(BenchEvent::Machine(&machine));
    let verify_curve = verify_curve(model, &machine, &cfg.curve_sizes, &cfg.contexts, cfg.curve_runs, on_event)?;
    machine.reprobe_peak(model);
    // The engines alternate prompt by prompt: the median of the per-prompt ratios, with the
    // quartiles and the extremes as its spread.
    let (ratio, spread) = RatioSpread::of(ratios).unzip();
    Ok(BenchResult {
        machine,
        verify_curve,
        model: target.path.display().to_string(),
        device: target.device.to_string(),
        weights: format!("{:?}", target.weights).to_lowercase(),
        // The dense path (any backend) multiplies f32 activations.
        activations: model.activations().map_or("f32".into(), |a| format!("{a:?}").to_lowercase()),
        kv_keys: model.kv_keys().map_or("dense".into(), |k| format!("{k:?}").to_lowercase()),
        prompts: prompts.len(),
        new_tokens_per_prompt: cfg.max_new_tokens,
        decode_tokens_per_s: decode_tps,
        ms_per_token: 1e3 / decode_tps,
        prefill_tokens_per_s: prefill_tokens as f64 / prefill_time.as_secs_f64(),
        prefill_len,
        prefill512_ms: prefill512.as_secs_f64() * 1e3,
        step1_ms: step1,
        tree_size: cfg.tree_size,
        tree_ms: tree,
        tree64_over_step1_cost: tree / step1,
        repeats,
        llamacpp,
        decode_ratio_vs_llamacpp: ratio,
        decode_ratio_spread: spread,
    })
}

/// Greedy decoding of `n` tokens after `prompt`, EOS ignored.
fn decode_run<B: Backend>(model: &Model<B>, prompt: &[u32], n: usize) -> Result<Generation, BenchError> {
    let mut sampler = Sampler::new(SamplingConfig::default());
    Ok(draftsmith_decode::generate(model, prompt, n, &[], &mut sampler, &mut |_| true)?)
}

/// Median of `runs` timings of `f`.
fn median_time(runs: usize, mut f: impl FnMut() -> Result<(), BenchError>) -> Result<Duration, BenchError> {
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        f()?;
        times.push(start.elapsed());
    }
    times.sort();
    Ok(times[runs / 2])
}

/// Time to prefill `n` tokens into an empty cache (logits of the last position).
fn time_prefill<B: Backend>(model: &Model<B>, n: usize) -> Result<Duration, BenchError> {
    let tokens = DraftShape::Chain.tree(n, model.config().vocab_size, 1).tokens().to_vec();
    let positions: Vec<usize> = (0..n).collect();
    median_time(3, || {
        let mut cache = model.new_cache(n);
        let out = model.forward(&tokens, &positions, &AttentionMask::Causal, LogitsSelect::Last, &mut cache)?;
        let _ = out.logits.into_data();
        Ok(())
    })
}

/// Cached tokens before the random tree of `tree_size` nodes, for a model context of `context`.
fn tree_prefix(context: usize) -> usize {
    256.min(context / 2)
}

/// Milliseconds of a 1-token step and of a `tree_size`-node random tree verify (all logits),
/// after a `context`-token prefix (medians of 9 alternating passes each).
fn time_tree_verify<B: Backend>(model: &Model<B>, tree_size: usize, context: usize) -> Result<(f64, f64), BenchError> {
    let mut cache = cached_context(model, context, tree_size)?;
    let t = time_passes(model, &mut cache, DraftShape::Tree, &[1, tree_size], Rounds::full(9))?;
    Ok((t[0].ms, t[1].ms))
}

#[cfg(test)]
mod tests;
