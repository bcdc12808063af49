//! Replays the `auto` draft policy of the copying methods (prompt lookup, the n-gram trie) over
//! the `ar` answers an `eval` recorded, with a fixed cost model and drafting time instead of the
//! machine's: the greedy output is known, so each step's accepted path follows from the draft
//! alone, and two builds' policies can be compared without the host's noise (which moves an
//! eval's speedups by ±3 % from run to run). What it prints is a model's ms per token, not a
//! measurement: a change it favours still has to win in an `eval` run side by side.
//!
//! `cargo run --release -p draftsmith-decode --example replay -- RECORDS.jsonl [COST] [DRAFT_MS]`
//!
//! `RECORDS.jsonl`: an eval's `records.jsonl` with an `ar` run per prompt. `COST`: the verify ms
//! of a pass over 1, 2, … rows, comma-separated (default: the n-gram trie's mean verify ms by
//! tree size in session 61's context-task sitting on the Intel Xeon). `DRAFT_MS`: prompt
//! lookup's and the trie's drafting ms per step (default `0.016,0.06`, the same sitting's means).

use draftsmith_core::DraftTree;
use draftsmith_decode::methods::{NgramTrie, NgramTrieConfig, PromptLookup};
use draftsmith_decode::spec::{verify_greedy, Auto, Clock, CostModel};
use draftsmith_decode::{DraftContext, Proposer, Verified};

/// Session 61's context tasks (Intel Xeon, SmolLM2-135M): the n-gram trie's mean verify ms of a
/// pass over 1–11 rows (a plain step to 10 draft nodes), from its records.
const COST: [f64; 11] = [3.32, 3.66, 4.13, 4.59, 5.11, 6.00, 6.46, 7.11, 7.87, 8.59, 9.13];

/// A proposer whose every draft takes `ms` on the policy's manual clock.
struct Timed {
    inner: Box<dyn Proposer>,
    clock: Clock,
    ms: f64,
}

impl Proposer for Timed {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn draft_len(&self) -> Option<usize> {
        self.inner.draft_len()
    }
    fn propose(&mut self, ctx: &DraftContext<'_>) -> Result<DraftTree, draftsmith_decode::DecodeError> {
        self.clock.advance(self.ms);
        self.inner.propose(ctx)
    }
    fn draft_class(&self, ctx: &DraftContext<'_>) -> usize {
        self.inner.draft_class(ctx)
    }
    fn node_classes(&self, tree: &DraftTree) -> Option<Vec<usize>> {
        self.inner.node_classes(tree)
    }
    fn pruned(&mut self, keep: &[usize]) {
        self.inner.pruned(keep);
    }
    fn observe_verified(&mut self, ctx: &DraftContext<'_>, tree: &DraftTree, verified: &Verified<'_>) {
        self.inner.observe_verified(ctx, tree, verified);
    }
}

/// The target's greedy token after each node of `tree` when the answer from here is `truth`:
/// the answer's token one level below the node's depth (off the answer's path the target's own
/// token is unknown; this stand-in never lies on an accepted path, and the copying methods do
/// not read it).
fn next_tokens(tree: &DraftTree, truth: &[u32]) -> Vec<u32> {
    tree.depths().iter().map(|&d| truth.get(d).copied().unwrap_or(u32::MAX)).collect()
}

struct Totals {
    tokens: usize,
    steps: usize,
    ms: f64,
    nodes: usize,
}

fn replay(mut auto: Auto, clock: &Clock, cost: &CostModel, prompts: &[(Vec<u32>, Vec<u32>)]) -> Totals {
    let mut t = Totals { tokens: 0, steps: 0, ms: 0.0, nodes: 0 };
    for (prompt, output) in prompts {
        // The first token comes from the prefill, as in the engine.
        let mut tokens = prompt.clone();
        tokens.push(output[0]);
        let end = prompt.len() + output.len();
        let all: Vec<u32> = prompt.iter().chain(output).copied().collect();
        while tokens.len() < end {
            let ctx = DraftContext { tokens: &tokens, prompt_len: prompt.len(), hidden: None, target_cache: None };
            let before = clock.now_ms();
            let tree = auto.propose(&ctx).expect("copying methods do not fail");
            let verify = cost.predict(1 + tree.len());
            clock.advance(verify);
            let truth = &all[tokens.len()..];
            let next = next_tokens(&tree, truth);
            let path = verify_greedy(&tree, truth[0], &next).path;
            auto.observe_verified(&ctx, &tree, &Verified { accepted: &path, root_next: truth[0], node_next: &next });
            t.ms += clock.now_ms() - before;
            t.steps += 1;
            t.nodes += tree.len();
            let emitted = (path.len() + 1).min(end - tokens.len());
            tokens.extend_from_slice(&truth[..emitted]);
            t.tokens += emitted;
        }
    }
    t
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args.first().expect("usage: replay RECORDS.jsonl [COST] [DRAFT_MS]");
    let parse = |s: &str| -> Vec<f64> { s.split(',').map(|v| v.trim().parse().expect("a number")).collect() };
    let cost_ms = args.get(1).map_or_else(|| COST.to_vec(), |s| parse(s));
    let draft_ms = args.get(2).map_or_else(|| vec![0.016, 0.06], |s| parse(s));
    let points: Vec<(usize, f64)> = cost_ms.iter().enumerate().map(|(i, &ms)| (i + 1, ms)).collect();
    let cost = CostModel::from_points(&points);
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut prompts = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let r: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{path}: {e}"));
        if r["method"] == "ar" {
            let ids = |k: &str| -> Vec<u32> {
                r[k].as_array().expect("token ids").iter().map(|v| v.as_u64().expect("a token id") as u32).collect()
            };
            let output = ids("output_ids");
            if output.len() > 1 {
                prompts.push((ids("prompt_ids"), output));
            }
        }
    }
    let ar_ms = cost.predict(1);
    println!("{} prompts; ar {:.3} ms/token (the cost model's 1-row pass)", prompts.len(), ar_ms);
    let methods: [(&str, Box<dyn Proposer>, f64); 2] = [
        ("prompt-lookup", Box::new(PromptLookup::default()), draft_ms[0]),
        ("ngram-trie", Box::new(NgramTrie::new(NgramTrieConfig::default()).expect("defaults")), draft_ms[1]),
    ];
    for (name, inner, ms) in methods {
        let clock = Clock::manual();
        let timed = Timed { inner, clock: clock.clone(), ms };
        let auto = Auto::with_fixed_cost(Box::new(timed), cost.clone()).with_clock(clock.clone());
        let t = replay(auto, &clock, &cost, &prompts);
        println!(
            "{name:14} tokens {:6} steps {:6} tau {:.3} nodes/step {:.2} ms/token {:.4} speedup {:.4}",
            t.tokens,
            t.steps,
            t.tokens as f64 / t.steps as f64,
            t.nodes as f64 / t.steps as f64,
            t.ms / t.tokens as f64,
            ar_ms * t.tokens as f64 / t.ms
        );
    }
}
