//! The speculative decoding loop (greedy verification): draft, verify in one pass, commit.

use std::time::{Duration, Instant};

use burn::tensor::{backend::Backend, Tensor};
use draftsmith_core::DraftTree;
use draftsmith_model::{AttentionMask, LogitsSelect, Model};
use serde::{Deserialize, Serialize};

use super::proposer::{DraftContext, DraftCost, Proposer, Verified};
use super::verify::{verify_greedy, Acceptance};
use super::verify_sampled::verify_sampled;
use crate::ar::StopReason;
use crate::sampling::{argmax, Sampler, SamplingConfig};

/// What happened in one draft–verify–commit step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// Draft nodes proposed (the root excluded).
    pub tree_size: usize,
    /// Draft tokens accepted (the bonus token excluded).
    pub accepted: usize,
    /// Drafter forward calls this step (0 for model-free methods; absent in older records).
    #[serde(default)]
    pub draft_calls: usize,
    /// Draft tokens the drafter produced itself (cache additions at the target excluded).
    #[serde(default)]
    pub drafted: usize,
    /// Tokens this step added to the output (accepted + bonus, cut at EOS / the length limit).
    pub emitted: usize,
    pub draft_ms: f64,
    pub verify_ms: f64,
    pub commit_ms: f64,
}

/// Tokens, timings and per-step records of one speculative generation.
#[derive(Debug, Clone)]
pub struct SpecOutput {
    pub tokens: Vec<u32>,
    pub steps: Vec<StepRecord>,
    pub prefill: Duration,
    pub decode: Duration,
    pub stop: StopReason,
}

/// Per-row argmax of `[n, vocab]` logits.
fn row_argmax<B: Backend>(logits: Tensor<B, 2>) -> Vec<u32> {
    // On the host, with the plain decoder's own argmax (the first of equal maxima): a backend's
    // argmax op costs several times more per row on the CPU and need not break ties alike.
    let [_, vocab] = logits.dims();
    let data = logits.into_data().convert::<f32>();
    data.as_slice::<f32>().expect("f32 after the conversion").chunks(vocab).map(argmax).collect()
}

/// The root (pending token) followed by the draft tree, re-rooted so node 0 is the root.
fn with_root(root: u32, tree: &DraftTree) -> DraftTree {
    let mut full = DraftTree::new();
    full.push(root, None);
    for (i, &t) in tree.tokens().iter().enumerate() {
        full.push(t, Some(tree.parents()[i].map_or(0, |p| p + 1)));
    }
    full
}

/// Greedy speculative generation: output ids equal [`crate::generate`] with a greedy sampler.
pub fn generate_speculative<B: Backend>(
    model: &Model<B>,
    prompt: &[u32],
    max_new_tokens: usize,
    stop_tokens: &[u32],
    proposer: &mut dyn Proposer,
) -> Result<SpecOutput, crate::DecodeError> {
    generate_speculative_sampled(
        model,
        prompt,
        max_new_tokens,
        stop_tokens,
        proposer,
        &mut Sampler::new(SamplingConfig::default()),
    )
}

/// Speculative generation with the target's sampling settings: greedy (raw argmax, or with a
/// repetition penalty applied per node) or lossless rejection sampling ([`verify_sampled`]).
/// The output has exactly the distribution of [`crate::generate`] with the same settings.
pub fn generate_speculative_sampled<B: Backend>(
    model: &Model<B>,
    prompt: &[u32],
    max_new_tokens: usize,
    stop_tokens: &[u32],
    proposer: &mut dyn Proposer,
    sampler: &mut Sampler,
) -> Result<SpecOutput, crate::DecodeError> {
    generate_speculative_with(model, prompt, max_new_tokens, stop_tokens, proposer, sampler, &mut |_| true)
}

/// What a step observer sees after each draft–verify–commit step.
pub struct StepView<'a> {
    pub step: &'a StepRecord,
    /// Every step so far (this one last).
    pub steps: &'a [StepRecord],
    /// The generated tokens so far.
    pub output: &'a [u32],
    /// Decode time so far (prefill excluded).
    pub elapsed: Duration,
    pub proposer: &'a dyn Proposer,
}

/// [`generate_speculative_sampled`] calling `on_step` after every step (progress, periodic
/// statistics); returning `false` stops the generation ([`StopReason::Callback`]). With
/// `max_new_tokens = 0` nothing is generated, as with [`crate::generate`].
pub fn generate_speculative_with<B: Backend>(
    model: &Model<B>,
    prompt: &[u32],
    max_new_tokens: usize,
    stop_tokens: &[u32],
    proposer: &mut dyn Proposer,
    sampler: &mut Sampler,
    on_step: &mut dyn FnMut(StepView<'_>) -> bool,
) -> Result<SpecOutput, crate::DecodeError> {
    let context_len = model.config().max_position_embeddings;
    if max_new_tokens == 0 {
        crate::ar::check_fits(model, prompt)?;
        let (zero, stop) = (Duration::ZERO, StopReason::MaxTokens);
        return Ok(SpecOutput { tokens: Vec::new(), steps: Vec::new(), prefill: zero, decode: zero, stop });
    }
    let wants_hidden = proposer.wants_hidden();
    let wants_cache = proposer.wants_target_cache();
    proposer.set_sampling(sampler.config());
    let started = crate::ar::start_inner(model, prompt, max_new_tokens.saturating_add(64), wants_hidden)?;
    let (mut cache, logits, prefill_time, mut hidden) =
        (started.cache, started.logits, started.prefill, started.hidden);
    let first = sampler.sample(&logits, prompt);
    let start = Instant::now();
    let mut tokens = prompt.to_vec();
    let mut steps = Vec::new();
    let stop = match emit(&mut tokens, &[first], prompt.len(), max_new_tokens, stop_tokens, context_len) {
        Some(stop) => stop,
        None => loop {
            let t0 = Instant::now();
            let ctx = DraftContext {
                tokens: &tokens,
                prompt_len: prompt.len(),
                hidden: wants_hidden.map(|_| hidden.as_slice()),
                target_cache: None,
            };
            let mut tree = proposer
                .propose(&DraftContext { target_cache: wants_cache.then_some(&cache as &dyn std::any::Any), ..ctx })?;
            let cost = proposer.last_cost().unwrap_or(DraftCost { calls: 0, generated: tree.len() });
            let room = context_len.saturating_sub(tokens.len() + 1);
            if tree.depths().iter().any(|&d| d > room) {
                tree = DraftTree::new();
            }
            let t1 = Instant::now();
            let full = with_root(*tokens.last().expect("at least one token"), &tree);
            let cached = cache.len();
            // A chain (a plain step included) attends causally: the same rows as its visibility
            // mask, without building and scanning one per layer.
            let mask =
                if full.is_chain() { AttentionMask::Causal } else { AttentionMask::Visible(full.visibility(cached)) };
            let out =
                model.forward(full.tokens(), &full.positions(cached - 1), &mask, LogitsSelect::All, &mut cache)?;
            let states = wants_hidden.map(|kind| crate::ar::hidden_of(&out, kind));
            // (A draft the context limit dropped above leaves its distributions unmatched.)
            let drawn = proposer.draft_distributions().filter(|q| q.len() == tree.len());
            let (acceptance, next, chances) = verify(&tree, &tokens, out.logits, drawn, sampler);
            let t2 = Instant::now();
            let next_hidden = states.map(|h| crate::ar::logits_row(h, acceptance.path.last().map_or(0, |&i| i + 1)));
            let keep: Vec<usize> = (0..=cached).chain(acceptance.path.iter().map(|&i| cached + 1 + i)).collect();
            cache.keep(&keep)?;
            proposer.observe_verified(
                &ctx,
                &tree,
                &Verified {
                    accepted: &acceptance.path,
                    root_next: next[0],
                    node_next: &next[1..],
                    chances: chances.as_deref(),
                },
            );
            if let Some(h) = next_hidden {
                hidden = h;
            }
            let mut new: Vec<u32> = acceptance.path.iter().map(|&i| tree.tokens()[i]).collect();
            new.push(acceptance.bonus);
            let before = tokens.len();
            let stop = emit(&mut tokens, &new, prompt.len(), max_new_tokens, stop_tokens, context_len);
            steps.push(StepRecord {
                tree_size: tree.len(),
                accepted: acceptance.path.len(),
                draft_calls: cost.calls,
                drafted: cost.generated,
                emitted: tokens.len() - before,
                draft_ms: (t1 - t0).as_secs_f64() * 1e3,
                verify_ms: (t2 - t1).as_secs_f64() * 1e3,
                commit_ms: t2.elapsed().as_secs_f64() * 1e3,
            });
            if let Some(stop) = stop {
                break stop;
            }
            let view = StepView {
                step: steps.last().expect("pushed above"),
                steps: &steps,
                output: &tokens[prompt.len()..],
                elapsed: start.elapsed(),
                proposer: &*proposer,
            };
            if !on_step(view) {
                break StopReason::Callback;
            }
        },
    };
    Ok(SpecOutput {
        tokens: tokens[prompt.len()..].to_vec(),
        steps,
        prefill: prefill_time,
        decode: start.elapsed(),
        stop,
    })
}

/// Verifies `tree` against the target's logits (`[1 + tree.len(), vocab]`, row 0 after the
/// root; `drawn`: the nodes' draft distributions where their tokens were drawn at random);
/// returns the acceptance, each row's argmax (for proposers' feedback) and, sampled, the target's
/// distributions along the accepted path ([`Verified::chances`]).
fn verify<B: Backend>(
    tree: &DraftTree,
    context: &[u32],
    logits: Tensor<B, 2>,
    drawn: Option<&[Vec<f32>]>,
    sampler: &mut Sampler,
) -> (Acceptance, Vec<u32>, Option<Vec<Vec<f32>>>) {
    let cfg = sampler.config().clone();
    if cfg.is_greedy() && cfg.repetition_penalty == 1.0 {
        let next = row_argmax(logits);
        return (verify_greedy(tree, next[0], &next[1..]), next, None);
    }
    let [_, vocab] = logits.dims();
    let rows = draftsmith_model::host_f32(logits);
    if cfg.is_greedy() {
        // Penalized greedy: each node's choice depends on its own path.
        let next: Vec<u32> = (0..=tree.len())
            .map(|row| {
                // The penalty window ends with the node's own path.
                let path: Vec<u32> = if row > 0 {
                    tree.path_to(row - 1).iter().map(|&i| tree.tokens()[i]).collect()
                } else {
                    Vec::new()
                };
                let mut ctx = cfg.penalty_span(context).to_vec();
                ctx.extend(path);
                let mut l = rows[row * vocab..(row + 1) * vocab].to_vec();
                cfg.penalize(&mut l, &ctx);
                argmax(&l)
            })
            .collect();
        return (verify_greedy(tree, next[0], &next[1..]), next, None);
    }
    let next = rows.chunks(vocab).map(argmax).collect();
    let (acceptance, chances) = verify_sampled(tree, context, &rows, vocab, &cfg, drawn, sampler.rng());
    (acceptance, next, Some(chances))
}

/// Appends `new` to `tokens` up to the first stop token or the length limits.
fn emit(
    tokens: &mut Vec<u32>,
    new: &[u32],
    prompt_len: usize,
    max_new: usize,
    stop_tokens: &[u32],
    context_len: usize,
) -> Option<StopReason> {
    for &t in new {
        tokens.push(t);
        if stop_tokens.contains(&t) {
            return Some(StopReason::Eos);
        }
        if tokens.len() - prompt_len >= max_new {
            return Some(StopReason::MaxTokens);
        }
        if tokens.len() >= context_len {
            return Some(StopReason::Context);
        }
    }
    None
}
