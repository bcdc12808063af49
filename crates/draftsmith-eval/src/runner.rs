//! Runs (prompt, method) pairs on one loaded engine, greedy, and appends a record per pair.
//!
//! Each method's proposer lives for the whole run, prompt after prompt, as it would in a
//! server: methods that learn online (the Pre-cut Q-table, the Post-use phrase cache, a
//! drafter's KV cache) carry what they learned to the next prompt. A resumed run starts them
//! afresh; outputs do not depend on it (verification is lossless), timings may.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

use burn::tensor::backend::Backend;
use draftsmith_decode::{
    build_proposer_with, generate, generate_speculative_sampled, DecodeError, Drafters, Method, MethodParams, Proposer,
    Sampler,
};
use draftsmith_model::Model;

use crate::error::EvalError;
use crate::prompts::EncodedPrompt;
use crate::records::{pending_pairs, Record, RecordLog};

/// What the runner reports while it works.
#[derive(Debug, Clone, Copy)]
pub enum Progress<'a> {
    /// `done` of `total` pairs were already in the records (resumed).
    Start { total: usize, done: usize },
    /// A pair is about to run.
    Running { prompt_id: &'a str, method: Method },
    /// A pair finished and its record was written.
    Finished { prompt_id: &'a str, method: Method, tokens: usize },
}

/// The decoding side of an eval: methods in run order (`ar` first), their parameters, the
/// length limit and the tokens that end a generation.
#[derive(Debug, Clone, Copy)]
pub struct RunSpec<'a> {
    pub methods: &'a [Method],
    pub params: &'a MethodParams,
    pub max_new_tokens: usize,
    pub stop_tokens: &'a [u32],
}

/// Greedy generation of one prompt with one method, with a fresh proposer.
pub fn run_pair<B: Backend>(
    model: &Model<B>,
    drafters: Drafters<'_, B>,
    prompt: &EncodedPrompt,
    method: Method,
    spec: &RunSpec<'_>,
) -> Result<Record, EvalError> {
    let fail = |source: DecodeError| EvalError::Decode {
        id: prompt.id.clone(),
        method: method.to_string(),
        source: Box::new(source),
    };
    let mut proposer = build_proposer_with(method, spec.params, model, drafters).map_err(fail)?;
    run_with(model, prompt, method, proposer.as_mut(), spec)
}

/// Greedy generation of one prompt with `method`'s proposer (`None` = `ar`).
fn run_with<B: Backend>(
    model: &Model<B>,
    prompt: &EncodedPrompt,
    method: Method,
    proposer: Option<&mut Box<dyn Proposer>>,
    spec: &RunSpec<'_>,
) -> Result<Record, EvalError> {
    let fail = |source: DecodeError| EvalError::Decode {
        id: prompt.id.clone(),
        method: method.to_string(),
        source: Box::new(source),
    };
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let record = |output_ids, stop, draft_len, prefill, decode, target_calls, steps, extra| Record {
        prompt_id: prompt.id.clone(),
        method,
        prompt_ids: prompt.ids.clone(),
        output_ids,
        stop,
        draft_len,
        prefill_ms: ms(prefill),
        decode_ms: ms(decode),
        target_calls,
        steps,
        extra,
    };
    Ok(match proposer {
        None => {
            let mut sampler = Sampler::new(spec.params.sampling());
            let g = generate(model, &prompt.ids, spec.max_new_tokens, spec.stop_tokens, &mut sampler, &mut |_| true)
                .map_err(|e| fail(e.into()))?;
            let calls = g.tokens.len();
            record(g.tokens, g.stop, None, g.prefill, g.decode, calls, Vec::new(), Default::default())
        }
        Some(proposer) => {
            let draft_len = proposer.draft_len();
            let out = generate_speculative_sampled(
                model,
                &prompt.ids,
                spec.max_new_tokens,
                spec.stop_tokens,
                proposer.as_mut(),
                &mut Sampler::new(spec.params.sampling()),
            )
            .map_err(fail)?;
            let calls = out.steps.len() + 1;
            let extra = proposer.extra_stats().into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            record(out.tokens, out.stop, draft_len, out.prefill, out.decode, calls, out.steps, extra)
        }
    })
}

/// Runs every pair of `prompts` × `spec.methods` not in `done`, prompt by prompt (`ar` first),
/// appending each record to `log`. Returns how many pairs ran.
pub fn run_pending<B: Backend>(
    model: &Model<B>,
    drafters: Drafters<'_, B>,
    prompts: &[EncodedPrompt],
    spec: &RunSpec<'_>,
    log: &mut RecordLog,
    done: &HashSet<(String, Method)>,
    on_progress: &mut dyn FnMut(Progress<'_>),
) -> Result<usize, EvalError> {
    let ids: Vec<&str> = prompts.iter().map(|p| p.id.as_str()).collect();
    let pending = pending_pairs(&ids, spec.methods, done);
    let total = prompts.len() * spec.methods.len();
    on_progress(Progress::Start { total, done: total - pending.len() });
    if let Some(&(first, _)) = pending.first() {
        // Warm-up (untimed, unrecorded): first-call allocations would otherwise land on `ar`.
        let prompt = prompts.iter().find(|p| p.id == first).expect("pending ids come from prompts");
        run_pair(model, drafters, prompt, Method::Ar, &RunSpec { max_new_tokens: 4, ..*spec })?;
    }
    let mut proposers: HashMap<Method, Option<Box<dyn Proposer>>> = HashMap::new();
    for &(prompt_id, method) in &pending {
        let prompt = prompts.iter().find(|p| p.id == prompt_id).expect("pending ids come from prompts");
        on_progress(Progress::Running { prompt_id, method });
        let proposer = match proposers.entry(method) {
            Entry::Occupied(built) => built.into_mut(),
            Entry::Vacant(slot) => {
                slot.insert(build_proposer_with(method, spec.params, model, drafters).map_err(|source| {
                    EvalError::Decode { id: prompt.id.clone(), method: method.to_string(), source: Box::new(source) }
                })?)
            }
        };
        let record = run_with(model, prompt, method, proposer.as_mut(), spec)?;
        log.append(&record)?;
        on_progress(Progress::Finished { prompt_id, method, tokens: record.output_ids.len() });
    }
    Ok(pending.len())
}
