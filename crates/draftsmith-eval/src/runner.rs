//! Runs (prompt, method) pairs on one loaded engine, greedy or sampled, and appends a record per
//! pair.
//!
//! Each method's proposer lives for the whole run, prompt after prompt, as it would in a
//! server: methods that learn online (the Pre-cut Q-table, the Post-use phrase cache, a
//! drafter's KV cache) carry what they learned to the next prompt. A resumed run starts them
//! afresh; outputs do not depend on it (verification is lossless), timings may.
//!
//! By default the methods of a prompt run one after another. With [`RunSpec::turn_tokens`] they
//! run side by side instead, taking turns on the machine every so many new tokens
//! ([`Turns`]): on a shared host whose speed drifts over seconds, `ar` and each method then see
//! the same stretches of it, which one long generation per method (TokenSwift's thousands of
//! tokens) cannot get from prompt-by-prompt order. Only one generation computes at a time, and
//! each record's decode time counts only its own turns.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use burn::tensor::backend::Backend;
use draftsmith_decode::{
    build_proposer_with, generate, generate_speculative_with, DecodeError, Drafters, Method, MethodParams, Proposer,
    Sampler, SamplingConfig,
};
use draftsmith_model::Model;

use crate::error::EvalError;
use crate::prompts::EncodedPrompt;
use crate::records::{Record, RecordLog};

/// What the runner reports while it works.
#[derive(Debug, Clone, Copy)]
pub enum Progress<'a> {
    /// `done` of `total` pairs were already in the records (resumed).
    Start { total: usize, done: usize },
    /// A pair is about to run, or with turns a prompt's methods side by side.
    Running { prompt_id: &'a str, methods: &'a [Method] },
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
    /// `Some(k)`: the methods of each prompt run side by side, taking turns every `k` new
    /// tokens; `None`: one after another.
    pub turn_tokens: Option<usize>,
    /// Sampling for every generation (each starts from its seed); `None`: greedy, with the
    /// penalty of `params`.
    pub sampling: Option<&'a SamplingConfig>,
}

/// Generation of one prompt with one method, with a fresh proposer.
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
    run_with(model, prompt, method, proposer.as_mut(), spec, None)
}

/// The turn order of one prompt's methods: whose turn it is, and who has finished.
pub struct Turns {
    state: Mutex<(usize, Vec<bool>)>,
    changed: Condvar,
}

impl Turns {
    /// `n` players; player 0 starts.
    pub fn new(n: usize) -> Self {
        Self { state: Mutex::new((0, vec![false; n])), changed: Condvar::new() }
    }

    /// Blocks until it is player `i`'s turn.
    pub fn wait(&self, i: usize) {
        let mut s = self.state.lock().expect("no player panicked holding the turn lock");
        while s.0 != i {
            s = self.changed.wait(s).expect("no player panicked holding the turn lock");
        }
    }

    /// Player `i` ends its turn (`finished`: for good): the next player after `i` that has not
    /// finished goes on, `i` itself if it is the only one left.
    pub fn pass(&self, i: usize, finished: bool) {
        let mut s = self.state.lock().expect("no player panicked holding the turn lock");
        s.1[i] = finished;
        let n = s.1.len();
        if let Some(next) = (1..=n).map(|d| (i + d) % n).find(|&j| !s.1[j]) {
            s.0 = next;
        }
        self.changed.notify_all();
    }
}

/// Player `i`'s turns inside a generation: after every `every` new tokens it passes and waits
/// for its next turn, and counts the time it waited.
struct Player<'t> {
    turns: &'t Turns,
    i: usize,
    every: usize,
    next: usize,
    waited: Duration,
}

impl Player<'_> {
    /// Called with the number of tokens generated so far.
    fn at(&mut self, generated: usize) {
        if generated >= self.next {
            let t = Instant::now();
            self.turns.pass(self.i, false);
            self.turns.wait(self.i);
            self.waited += t.elapsed();
            self.next = generated + self.every;
        }
    }
}

/// Ends player `i`'s last turn when its generation returns (or fails, or panics), so the
/// others never wait for it.
struct Finish<'t>(&'t Turns, usize);

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        self.0.pass(self.1, true);
    }
}

/// Generation of one prompt with `method`'s proposer (`None` = `ar`).
fn run_with<B: Backend>(
    model: &Model<B>,
    prompt: &EncodedPrompt,
    method: Method,
    proposer: Option<&mut Box<dyn Proposer>>,
    spec: &RunSpec<'_>,
    mut turn: Option<Player<'_>>,
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
    let mut sampler = Sampler::new(spec.sampling.cloned().unwrap_or_else(|| spec.params.sampling()));
    let (max, stops) = (spec.max_new_tokens, spec.stop_tokens);
    let record = match proposer {
        None => {
            let mut generated = 0;
            let mut on_token = |_| {
                generated += 1;
                if let Some(t) = turn.as_mut() {
                    t.at(generated);
                }
                true
            };
            let g =
                generate(model, &prompt.ids, max, stops, &mut sampler, &mut on_token).map_err(|e| fail(e.into()))?;
            let calls = g.tokens.len();
            record(g.tokens, g.stop, None, g.prefill, g.decode, calls, Vec::new(), Default::default())
        }
        Some(proposer) => {
            let draft_len = proposer.draft_len();
            let mut on_step = |view: draftsmith_decode::StepView<'_>| {
                if let Some(t) = turn.as_mut() {
                    t.at(view.output.len());
                }
                true
            };
            let out = generate_speculative_with(
                model,
                &prompt.ids,
                max,
                stops,
                proposer.as_mut(),
                &mut sampler,
                &mut on_step,
            )
            .map_err(fail)?;
            let calls = out.steps.len() + 1;
            let extra = proposer.extra_stats().into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            record(out.tokens, out.stop, draft_len, out.prefill, out.decode, calls, out.steps, extra)
        }
    };
    // The decode time counts this generation's turns only.
    let waited = turn.map_or(0.0, |t| ms(t.waited));
    Ok(Record { decode_ms: record.decode_ms - waited, ..record })
}

/// Runs the `pending` pairs of `prompts` × `spec.methods` ([`pending_pairs`](crate::records::pending_pairs):
/// prompt by prompt, `ar` first), appending each record to `log`.
pub fn run_pending<B: Backend>(
    model: &Model<B>,
    drafters: Drafters<'_, B>,
    prompts: &[EncodedPrompt],
    spec: &RunSpec<'_>,
    log: &mut RecordLog,
    pending: &[(&str, Method)],
    on_progress: &mut dyn FnMut(Progress<'_>),
) -> Result<(), EvalError> {
    let total = prompts.len() * spec.methods.len();
    on_progress(Progress::Start { total, done: total - pending.len() });
    if let Some(&(first, _)) = pending.first() {
        // Warm-up (untimed, unrecorded): first-call allocations would otherwise land on `ar`.
        let prompt = prompts.iter().find(|p| p.id == first).expect("pending ids come from prompts");
        run_pair(model, drafters, prompt, Method::Ar, &RunSpec { max_new_tokens: 4, ..*spec })?;
    }
    let mut proposers: HashMap<Method, Option<Box<dyn Proposer>>> = HashMap::new();
    let mut at = 0;
    while at < pending.len() {
        // One pair, or with turns every pending method of this prompt.
        let prompt_id = pending[at].0;
        let len = match spec.turn_tokens {
            Some(_) => pending[at..].iter().take_while(|p| p.0 == prompt_id).count(),
            None => 1,
        };
        let group: Vec<Method> = pending[at..at + len].iter().map(|p| p.1).collect();
        at += len;
        let prompt = prompts.iter().find(|p| p.id == prompt_id).expect("pending ids come from prompts");
        for &method in &group {
            if let Entry::Vacant(slot) = proposers.entry(method) {
                slot.insert(build_proposer_with(method, spec.params, model, drafters).map_err(|source| {
                    EvalError::Decode { id: prompt.id.clone(), method: method.to_string(), source: Box::new(source) }
                })?);
            }
        }
        on_progress(Progress::Running { prompt_id, methods: &group });
        let results = match spec.turn_tokens {
            Some(every) => run_in_turns(model, prompt, &group, &mut proposers, spec, every),
            None => {
                let proposer = proposers.get_mut(&group[0]).expect("built above");
                vec![run_with(model, prompt, group[0], proposer.as_mut(), spec, None)]
            }
        };
        // A turn group's finished generations are kept even when another of them failed: a
        // rerun then redoes only the failed one.
        let mut failure = None;
        for result in results {
            match result {
                Ok(record) => {
                    log.append(&record)?;
                    on_progress(Progress::Finished {
                        prompt_id,
                        method: record.method,
                        tokens: record.output_ids.len(),
                    });
                }
                Err(e) => failure = failure.or(Some(e)),
            }
        }
        if let Some(e) = failure {
            return Err(e);
        }
    }
    Ok(())
}

/// The `methods` of one prompt side by side, in scoped threads that take turns every `every`
/// new tokens ([`Turns`]: one computes while the others wait); each method's record or error,
/// in `methods`' order.
fn run_in_turns<B: Backend>(
    model: &Model<B>,
    prompt: &EncodedPrompt,
    methods: &[Method],
    proposers: &mut HashMap<Method, Option<Box<dyn Proposer>>>,
    spec: &RunSpec<'_>,
    every: usize,
) -> Vec<Result<Record, EvalError>> {
    let turns = Turns::new(methods.len());
    // Each method's proposer (`None`: `ar`), in `methods`' order.
    let mut players: Vec<_> = proposers
        .iter_mut()
        .filter_map(|(m, p)| methods.iter().position(|x| x == m).map(|i| (i, *m, p.as_mut())))
        .collect();
    players.sort_by_key(|p| p.0);
    std::thread::scope(|scope| {
        let turns = &turns;
        let handles: Vec<_> = players
            .into_iter()
            .map(|(i, method, proposer)| {
                scope.spawn(move || {
                    let _finish = Finish(turns, i);
                    turns.wait(i);
                    let player = Player { turns, i, every, next: every, waited: Duration::ZERO };
                    run_with(model, prompt, method, proposer, spec, Some(player))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn players_take_turns_in_order_and_a_finished_one_is_skipped() {
        // Three players: 0 and 1 make four moves each, 2 one; a turn is one move.
        let turns = Turns::new(3);
        let log = Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for (i, moves) in [(0, 4), (1, 4), (2, 1)] {
                let (turns, log) = (&turns, &log);
                scope.spawn(move || {
                    let _finish = Finish(turns, i);
                    turns.wait(i);
                    let mut player = Player { turns, i, every: 1, next: 1, waited: Duration::ZERO };
                    for m in 1..=moves {
                        log.lock().unwrap().push(i);
                        player.at(m);
                    }
                });
            }
        });
        assert_eq!(log.into_inner().unwrap(), [0, 1, 2, 0, 1, 0, 1, 0, 1]);
    }
}
