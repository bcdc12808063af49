//! The autoregressive baseline: prefill, then one token per target forward.

use std::time::{Duration, Instant};

use burn::tensor::{backend::Backend, Tensor};
use draftsmith_model::{AttentionMask, ForwardOutput, KvCache, LogitsSelect, Model, ModelError};

use crate::sampling::Sampler;
use crate::spec::HiddenState;

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    Eos,
    MaxTokens,
    Callback,
    Context,
}

/// Tokens and timings of one generation.
#[derive(Debug, Clone)]
pub struct Generation {
    pub tokens: Vec<u32>,
    pub prefill: Duration,
    pub decode: Duration,
    pub stop: StopReason,
}

impl Generation {
    /// The generation of zero tokens.
    pub(crate) fn nothing() -> Self {
        Self { tokens: Vec::new(), prefill: Duration::ZERO, decode: Duration::ZERO, stop: StopReason::MaxTokens }
    }

    /// Decode throughput over the generated tokens after the first (the first comes from prefill).
    pub fn decode_tokens_per_s(&self) -> f64 {
        let n = self.tokens.len().saturating_sub(1);
        if n == 0 {
            0.0
        } else {
            n as f64 / self.decode.as_secs_f64()
        }
    }
}

/// Copies a `[1, vocab]` or `[vocab]`-like logits row to the host.
pub fn logits_row<B: Backend>(logits: Tensor<B, 2>, row: usize) -> Vec<f32> {
    let [_, v] = logits.dims();
    draftsmith_model::host_f32(logits.slice([row..row + 1, 0..v]))
}

/// Prefills `prompt` into a fresh cache and returns the last position's logits.
pub fn prefill<B: Backend>(model: &Model<B>, prompt: &[u32], cache: &mut KvCache<B>) -> Result<Vec<f32>, ModelError> {
    finite(logits_row(prefill_forward(model, prompt, cache)?.logits, 0))
}

/// The prompt's logits, refused when one is NaN or infinite: damaged weights (a NaN in a
/// tensor) would otherwise decode as a run of token 0 and exit cleanly. Checked once per prompt,
/// on the prefill's last row.
fn finite(logits: Vec<f32>) -> Result<Vec<f32>, ModelError> {
    match logits.iter().position(|l| !l.is_finite()) {
        Some(token) => Err(ModelError::NonFiniteLogits { token, value: logits[token] }),
        None => Ok(logits),
    }
}

/// [`prefill`], also returning the last position's hidden state of the kind asked for.
pub fn prefill_with_hidden<B: Backend>(
    model: &Model<B>,
    prompt: &[u32],
    cache: &mut KvCache<B>,
    kind: HiddenState,
) -> Result<(Vec<f32>, Vec<f32>), ModelError> {
    let out = prefill_forward(model, prompt, cache)?;
    let hidden = logits_row(hidden_of(&out, kind), prompt.len() - 1);
    Ok((finite(logits_row(out.logits, 0))?, hidden))
}

/// The hidden state of `kind` of a forward's output, `[n, hidden]`.
pub(crate) fn hidden_of<B: Backend>(out: &ForwardOutput<B>, kind: HiddenState) -> Tensor<B, 2> {
    match kind {
        HiddenState::Final => out.hidden_final.clone(),
        HiddenState::PreNorm => out.hidden_prenorm.clone(),
    }
}

fn prefill_forward<B: Backend>(
    model: &Model<B>,
    prompt: &[u32],
    cache: &mut KvCache<B>,
) -> Result<ForwardOutput<B>, ModelError> {
    let positions: Vec<usize> = (cache.len()..cache.len() + prompt.len()).collect();
    model.forward(prompt, &positions, &AttentionMask::Causal, LogitsSelect::Last, cache)
}

/// A prefilled prompt.
pub struct Started<B: Backend> {
    pub cache: KvCache<B>,
    /// Logits after the last prompt token.
    pub logits: Vec<f32>,
    /// Hidden state at the last prompt token (the final one for [`start_with_hidden`]; empty
    /// when none was asked for).
    pub hidden: Vec<f32>,
    pub prefill: Duration,
}

/// Checks the prompt fits the context, then prefills it into a fresh cache with room for
/// `extra` more positions. Returns the cache, the last position's logits and the prefill time.
pub fn start<B: Backend>(
    model: &Model<B>,
    prompt: &[u32],
    extra: usize,
) -> Result<(KvCache<B>, Vec<f32>, Duration), ModelError> {
    let s = start_inner(model, prompt, extra, None)?;
    Ok((s.cache, s.logits, s.prefill))
}

/// [`start`], keeping the last prompt position's final hidden state.
pub fn start_with_hidden<B: Backend>(model: &Model<B>, prompt: &[u32], extra: usize) -> Result<Started<B>, ModelError> {
    start_inner(model, prompt, extra, Some(HiddenState::Final))
}

/// Checks that `prompt` leaves room in the context for at least one new token.
pub(crate) fn check_fits<B: Backend>(model: &Model<B>, prompt: &[u32]) -> Result<(), ModelError> {
    if prompt.is_empty() {
        return Err(ModelError::EmptyPrompt);
    }
    let context_len = model.config().max_position_embeddings;
    if prompt.len() >= context_len {
        return Err(ModelError::ContextOverflow { needed: prompt.len() + 1, context: context_len });
    }
    Ok(())
}

/// The autoregressive baseline copies no hidden state to the host (`hidden` stays empty).
pub(crate) fn start_inner<B: Backend>(
    model: &Model<B>,
    prompt: &[u32],
    extra: usize,
    with_hidden: Option<HiddenState>,
) -> Result<Started<B>, ModelError> {
    check_fits(model, prompt)?;
    // Room for what can fit the context at most (a cache grows if a pass needs more), so a huge
    // `max_new_tokens` reserves no more than a full context.
    let room = prompt.len().saturating_add(extra).min(model.config().max_position_embeddings);
    let mut cache = model.new_cache(room);
    let begin = Instant::now();
    let (logits, hidden) = match with_hidden {
        Some(kind) => prefill_with_hidden(model, prompt, &mut cache, kind)?,
        None => (prefill(model, prompt, &mut cache)?, Vec::new()),
    };
    Ok(Started { cache, logits, hidden, prefill: begin.elapsed() })
}

/// Greedy or sampled autoregressive generation. `on_token` sees each new token and may stop
/// generation by returning `false`. With `max_new_tokens = 0` nothing is generated (and
/// nothing runs: the prompt is only checked against the context).
pub fn generate<B: Backend>(
    model: &Model<B>,
    prompt: &[u32],
    max_new_tokens: usize,
    stop_tokens: &[u32],
    sampler: &mut Sampler,
    on_token: &mut dyn FnMut(u32) -> bool,
) -> Result<Generation, ModelError> {
    let context_len = model.config().max_position_embeddings;
    if max_new_tokens == 0 {
        check_fits(model, prompt)?;
        return Ok(Generation::nothing());
    }
    let (mut cache, mut logits, prefill) = start(model, prompt, max_new_tokens.saturating_add(1))?;
    let start = Instant::now();
    let mut context = prompt.to_vec();
    let mut tokens = Vec::new();
    let stop = loop {
        let next = sampler.sample(&logits, &context);
        tokens.push(next);
        context.push(next);
        if stop_tokens.contains(&next) {
            break StopReason::Eos;
        }
        if !on_token(next) {
            break StopReason::Callback;
        }
        if tokens.len() >= max_new_tokens {
            break StopReason::MaxTokens;
        }
        if context.len() >= context_len {
            break StopReason::Context;
        }
        let out =
            model.forward(&[next], &[context.len() - 1], &AttentionMask::Causal, LogitsSelect::Last, &mut cache)?;
        logits = logits_row(out.logits, 0);
    };
    Ok(Generation { tokens, prefill, decode: start.elapsed(), stop })
}
