//! Many independent generations through one KV cache (continuous batching), for work bound by
//! throughput rather than latency: distillation.
//!
//! Every live sequence owns a set of cache slots; one forward pass feeds one token of each, with
//! an [`AttentionMask::Visible`] row that shows a token its own sequence's slots and nothing
//! else, and each sequence's own positions. When a sequence ends its slots are dropped
//! ([`KvCache::keep`]) and the next prompt is prefilled in its place. The engine's kernels give a
//! token the same bits whatever else is in the pass (see `draftsmith-kernels` and the host
//! attention), so every sequence comes out exactly as [`generate`](crate::generate) would make
//! it alone — tested — only several times faster on a CPU, where one token per pass leaves the
//! matrix kernels starved.

use burn::tensor::backend::Backend;
use draftsmith_model::{AttentionMask, KvCache, LogitsSelect, Model, ModelError};

use crate::ar::{logits_row, StopReason};
use crate::sampling::Sampler;

/// One finished sequence of [`generate_batch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchGeneration {
    pub tokens: Vec<u32>,
    pub stop: StopReason,
}

/// A sequence being generated.
struct Live {
    input: usize,
    /// Its cache slots, in position order.
    slots: Vec<usize>,
    /// Prompt and generated tokens.
    context: Vec<u32>,
    prompt_len: usize,
}

impl Live {
    /// Takes the token sampled after `context`; returns why the sequence ends, if it does.
    fn push(
        &mut self,
        token: u32,
        max_new_tokens: usize,
        stop_tokens: &[u32],
        context_len: usize,
    ) -> Option<StopReason> {
        self.context.push(token);
        if stop_tokens.contains(&token) {
            Some(StopReason::Eos)
        } else if self.context.len() - self.prompt_len >= max_new_tokens {
            Some(StopReason::MaxTokens)
        } else if self.context.len() >= context_len {
            Some(StopReason::Context)
        } else {
            None
        }
    }

    fn finish(self, stop: StopReason) -> (usize, BatchGeneration) {
        (self.input, BatchGeneration { tokens: self.context[self.prompt_len..].to_vec(), stop })
    }
}

/// Generates a continuation of every prompt, at most `width` at a time, prompt `i` sampled by
/// `samplers[i]`; each result is what [`generate`](crate::generate) returns for that prompt and
/// sampler (same stopping rules, no callback). `on_done(i, &generation)` is called as prompt `i`
/// finishes (in finishing order); the results are returned in prompt order.
pub fn generate_batch<B: Backend>(
    model: &Model<B>,
    prompts: &[Vec<u32>],
    samplers: &mut [Sampler],
    max_new_tokens: usize,
    stop_tokens: &[u32],
    width: usize,
    on_done: &mut dyn FnMut(usize, &BatchGeneration),
) -> Result<Vec<BatchGeneration>, ModelError> {
    assert_eq!(prompts.len(), samplers.len(), "one sampler per prompt");
    let context_len = model.config().max_position_embeddings;
    for p in prompts {
        if p.is_empty() {
            return Err(ModelError::EmptyPrompt);
        }
        crate::ar::check_fits(model, p)?;
    }
    if max_new_tokens == 0 {
        // Nothing to generate: every prompt finishes at once, as `generate` would.
        let nothing = BatchGeneration { tokens: Vec::new(), stop: StopReason::MaxTokens };
        (0..prompts.len()).for_each(|i| on_done(i, &nothing));
        return Ok(vec![nothing; prompts.len()]);
    }
    let width = width.max(1);
    let longest = prompts.iter().map(Vec::len).max().unwrap_or(0);
    // Each sequence needs at most a full context (the cache grows if a pass needs more).
    let each = longest.saturating_add(max_new_tokens).min(model.config().max_position_embeddings);
    let mut cache = model.new_cache(width.min(prompts.len().max(1)) * each);
    let mut results: Vec<Option<BatchGeneration>> = vec![None; prompts.len()];
    let mut done = |(input, generation): (usize, BatchGeneration)| {
        on_done(input, &generation);
        results[input] = Some(generation);
    };
    let mut live: Vec<Live> = Vec::with_capacity(width);
    let mut queue = 0..prompts.len();
    loop {
        // Admit new prompts while there is room: prefill each into fresh slots. Slots of ended
        // sequences stay visible to no one until the compaction at the end of the round.
        let mut ended = false;
        while live.len() < width {
            let Some(input) = queue.next() else { break };
            let prompt = &prompts[input];
            let base = cache.len();
            let n = prompt.len();
            let mut mask = vec![false; n * (base + n)];
            for r in 0..n {
                mask[r * (base + n) + base..][..=r].fill(true);
            }
            let positions: Vec<usize> = (0..n).collect();
            let out =
                model.forward(prompt, &positions, &AttentionMask::Visible(mask), LogitsSelect::Last, &mut cache)?;
            let logits = logits_row(out.logits, 0);
            let mut seq = Live { input, slots: (base..base + n).collect(), context: prompt.clone(), prompt_len: n };
            let token = samplers[input].sample(&logits, &seq.context);
            match seq.push(token, max_new_tokens, stop_tokens, context_len) {
                Some(stop) => {
                    done(seq.finish(stop));
                    ended = true;
                }
                None => live.push(seq),
            }
        }
        if live.is_empty() {
            break;
        }
        // One token of every live sequence.
        let base = cache.len();
        let n = live.len();
        let tokens: Vec<u32> = live.iter().map(|s| *s.context.last().expect("a sampled token")).collect();
        let positions: Vec<usize> = live.iter().map(|s| s.context.len() - 1).collect();
        let mut mask = vec![false; n * (base + n)];
        for (r, seq) in live.iter().enumerate() {
            let row = &mut mask[r * (base + n)..][..base + n];
            for &slot in &seq.slots {
                row[slot] = true;
            }
            row[base + r] = true;
        }
        let out = model.forward(&tokens, &positions, &AttentionMask::Visible(mask), LogitsSelect::All, &mut cache)?;
        let logits = draftsmith_model::host_f32(out.logits);
        let vocab = logits.len() / n;
        let mut still = Vec::with_capacity(n);
        for (r, mut seq) in live.drain(..).enumerate() {
            seq.slots.push(base + r);
            let token = samplers[seq.input].sample(&logits[r * vocab..][..vocab], &seq.context);
            match seq.push(token, max_new_tokens, stop_tokens, context_len) {
                Some(stop) => done(seq.finish(stop)),
                None => still.push(seq),
            }
        }
        ended |= still.len() < n;
        live = still;
        if ended {
            compact(&mut cache, &mut live)?;
        }
    }
    Ok(results.into_iter().map(|r| r.expect("every prompt finishes")).collect())
}

/// Keeps only the live sequences' slots, renumbering them.
fn compact<B: Backend>(cache: &mut KvCache<B>, live: &mut [Live]) -> Result<(), ModelError> {
    let mut keep: Vec<usize> = live.iter().flat_map(|s| s.slots.iter().copied()).collect();
    keep.sort_unstable();
    let mut new_index = vec![usize::MAX; cache.len()];
    for (i, &slot) in keep.iter().enumerate() {
        new_index[slot] = i;
    }
    cache.keep(&keep)?;
    for seq in live {
        for slot in &mut seq.slots {
            *slot = new_index[*slot];
        }
    }
    Ok(())
}
