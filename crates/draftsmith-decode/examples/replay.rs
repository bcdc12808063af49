//! Replays the `auto` draft policy of the copying methods (prompt lookup, the n-gram trie) over
//! the `ar` answers an `eval` recorded, with a modelled cost and drafting time instead of the
//! machine's: the greedy output is known, so each step's accepted path follows from the draft
//! alone, and two builds' policies can be compared without the host's noise (which moves an
//! eval's speedups by ±3 % from run to run). What it prints is a model's ms per token, not a
//! measurement: a change it favours still has to win in an `eval` run side by side.
//!
//! `cargo run --release -p draftsmith-decode --example replay -- RECORDS.jsonl [COST] [DRAFT_MS]
//! [--noise STEPS.jsonl] [--seeds N] [--prior n:ms,…] [--fixed] [--trie n:lp[:num_draft]]… [--sizes]`
//!
//! `RECORDS.jsonl`: an eval's `records.jsonl` with an `ar` run per prompt. `COST`: the verify ms
//! of a pass over 1, 2, … rows, comma-separated (default: the n-gram trie's mean verify ms by
//! tree size in session 61's context-task sitting on the Intel Xeon). `DRAFT_MS`: prompt
//! lookup's and the trie's drafting ms per step (default `0.016,0.06`, the same sitting's means).
//!
//! Without `--noise` every pass costs exactly `COST` and the policy is given that curve, fixed.
//! With `--noise`, each pass costs `COST` times the host's noise as an eval measured it
//! (`STEPS.jsonl`: a records file with per-step timings): the sequence of its passes' verify ms
//! over their size's mean, walked in the recorded order (its short-term correlation kept) from
//! an offset per seed, times the measured after-effect of the previous pass's size (a pass after
//! 8 or more draft nodes runs slower). The policy then learns its costs as in decoding, from a
//! start-up calibration of `COST` at 1, 2, 4, 8, … rows (`--prior`: other points, e.g. a real
//! calibration's), unless `--fixed` keeps `COST` (or the `--prior` curve) fixed; each line is the mean over `--seeds`
//! offsets (default 8), with its spread. `--trie` adds trie configurations; `--sizes` prints
//! the steps by tree size.

use std::collections::BTreeMap;

use draftsmith_core::DraftTree;
use draftsmith_decode::methods::{NgramTrie, NgramTrieConfig, PromptLookup};
use draftsmith_decode::sampling::SamplingConfig;
use draftsmith_decode::spec::{known_next, verify_greedy, Auto, Clock, CostModel};
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

/// The bucket of a pass's draft size for its after-effect on the next pass: 0–3, 4–7, 8+ nodes.
fn bucket(nodes: usize) -> usize {
    match nodes {
        0..=3 => 0,
        4..=7 => 1,
        _ => 2,
    }
}

/// The host's noise on a pass's time, as an eval measured it ([`Noise::from_records`]).
#[derive(Clone)]
struct Noise {
    /// Each measured pass's verify ms over its size's mean and its after-effect, in order.
    ratios: Vec<f64>,
    /// The mean of those ratios after a pass of each [`bucket`].
    after: [f64; 3],
    at: usize,
    prev: usize,
}

impl Noise {
    /// From the per-step timings of every run in an eval's records (sizes seen at least 50 times).
    fn from_records(path: &str) -> Self {
        let mut runs: Vec<Vec<(usize, usize, f64)>> = Vec::new();
        let mut by_size: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
        for r in read_records(path) {
            let mut prev = 0;
            let mut run = Vec::new();
            for s in r["steps"].as_array().into_iter().flatten() {
                let (Some(n), Some(ms)) = (s["tree_size"].as_u64(), s["verify_ms"].as_f64()) else { continue };
                let n = n as usize;
                by_size.entry(n).or_default().push(ms);
                run.push((n, prev, ms));
                prev = n;
            }
            runs.push(run);
        }
        let mean: BTreeMap<usize, f64> = by_size
            .iter()
            .filter(|(_, v)| v.len() >= 50)
            .map(|(&n, v)| (n, v.iter().sum::<f64>() / v.len() as f64))
            .collect();
        let mut sums = [(0.0, 0usize); 3];
        for &(n, prev, ms) in runs.iter().flatten() {
            if let Some(m) = mean.get(&n) {
                sums[bucket(prev)].0 += ms / m;
                sums[bucket(prev)].1 += 1;
            }
        }
        let after = sums.map(|(s, c)| if c == 0 { 1.0 } else { s / c as f64 });
        let ratios: Vec<f64> = runs
            .iter()
            .flatten()
            .filter_map(|&(n, prev, ms)| mean.get(&n).map(|m| ms / m / after[bucket(prev)]))
            .collect();
        assert!(!ratios.is_empty(), "{path}: no per-step timings of sizes seen 50 times");
        Self { ratios, after, at: 0, prev: 0 }
    }

    /// The noise sequence from an offset of its own for `seed`.
    fn seeded(&self, seed: usize) -> Self {
        Self { at: seed.wrapping_mul(7919) % self.ratios.len(), prev: 0, ..self.clone() }
    }

    /// The factor on the next pass, over `nodes` draft nodes.
    fn next(&mut self, nodes: usize) -> f64 {
        let r = self.ratios[self.at % self.ratios.len()] * self.after[bucket(self.prev)];
        self.at += 1;
        self.prev = nodes;
        r
    }
}

#[derive(Default)]
struct Totals {
    tokens: usize,
    steps: usize,
    ms: f64,
    nodes: usize,
    /// Steps and accepted draft tokens by tree size.
    by_size: BTreeMap<usize, (usize, usize)>,
}

fn replay(
    mut auto: Auto,
    clock: &Clock,
    cost: &CostModel,
    prompts: &[(Vec<u32>, Vec<u32>)],
    mut noise: Option<Noise>,
) -> Totals {
    let mut t = Totals::default();
    for (prompt, output) in prompts {
        // A new generation, as the engine's driver starts one.
        auto.set_sampling(&SamplingConfig::default());
        // The first token comes from the prefill, as in the engine.
        let mut tokens = prompt.clone();
        tokens.push(output[0]);
        let end = prompt.len() + output.len();
        let all: Vec<u32> = prompt.iter().chain(output).copied().collect();
        while tokens.len() < end {
            let ctx = DraftContext { tokens: &tokens, prompt_len: prompt.len(), hidden: None, target_cache: None };
            let before = clock.now_ms();
            let tree = auto.propose(&ctx).expect("copying methods do not fail");
            let factor = noise.as_mut().map_or(1.0, |z| z.next(tree.len()));
            clock.advance(cost.predict(1 + tree.len()) * factor);
            let truth = &all[tokens.len()..];
            let next = known_next(&tree, truth);
            let path = verify_greedy(&tree, truth[0], &next).path;
            auto.observe_verified(
                &ctx,
                &tree,
                &Verified { accepted: &path, root_next: truth[0], node_next: &next, chances: None },
            );
            t.ms += clock.now_ms() - before;
            t.steps += 1;
            t.nodes += tree.len();
            let e = t.by_size.entry(tree.len()).or_default();
            e.0 += 1;
            e.1 += path.len();
            let emitted = (path.len() + 1).min(end - tokens.len());
            tokens.extend_from_slice(&truth[..emitted]);
            t.tokens += emitted;
        }
    }
    t
}

/// Builds a fresh proposer for each seed's run.
type MakeProposer = Box<dyn Fn() -> Box<dyn Proposer>>;

fn read_records(path: &str) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{path}: {e}")))
        .collect()
}

struct Args {
    records: String,
    cost_ms: Vec<f64>,
    draft_ms: Vec<f64>,
    noise: Option<String>,
    seeds: usize,
    prior: Option<Vec<(usize, f64)>>,
    fixed: bool,
    tries: Vec<String>,
    sizes: bool,
}

fn parse_args() -> Args {
    const USAGE: &str = "usage: replay RECORDS.jsonl [COST] [DRAFT_MS] [--noise STEPS.jsonl] [--seeds N] \
                         [--prior n:ms,…] [--fixed] [--trie n:lp[:num_draft]]… [--sizes]";
    let numbers = |s: &str| -> Vec<f64> { s.split(',').map(|v| v.trim().parse().expect(USAGE)).collect() };
    let mut positional = Vec::new();
    let mut a = Args {
        records: String::new(),
        cost_ms: COST.to_vec(),
        draft_ms: vec![0.016, 0.06],
        noise: None,
        seeds: 8,
        prior: None,
        fixed: false,
        tries: Vec::new(),
        sizes: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().expect(USAGE);
        match arg.as_str() {
            "--noise" => a.noise = Some(value()),
            "--seeds" => a.seeds = value().parse().expect(USAGE),
            "--prior" => {
                let points = value()
                    .split(',')
                    .map(|p| {
                        let (n, ms) = p.split_once(':').expect(USAGE);
                        (n.trim().parse().expect(USAGE), ms.trim().parse().expect(USAGE))
                    })
                    .collect();
                a.prior = Some(points);
            }
            "--fixed" => a.fixed = true,
            "--trie" => a.tries.push(value()),
            "--sizes" => a.sizes = true,
            _ if arg.starts_with("--") => panic!("unknown option {arg}; {USAGE}"),
            _ => positional.push(arg),
        }
    }
    a.records = positional.first().expect(USAGE).clone();
    if let Some(c) = positional.get(1) {
        a.cost_ms = numbers(c);
    }
    if let Some(d) = positional.get(2) {
        a.draft_ms = numbers(d);
    }
    a
}

/// A trie configuration from `n:lp[:num_draft]`.
fn trie_config(spec: &str) -> NgramTrieConfig {
    let p: Vec<usize> = spec.split(':').map(|x| x.parse().expect("--trie n:lp[:num_draft]")).collect();
    let mut c = NgramTrieConfig { n: p[0], prefix_len: p[1], ..NgramTrieConfig::default() };
    if let Some(&num_draft) = p.get(2) {
        c.num_draft = num_draft;
    }
    c
}

fn main() {
    let args = parse_args();
    let points: Vec<(usize, f64)> = args.cost_ms.iter().enumerate().map(|(i, &ms)| (i + 1, ms)).collect();
    let cost = CostModel::from_points(&points);
    let mut prompts = Vec::new();
    for r in read_records(&args.records).iter().filter(|r| r["method"] == "ar") {
        let ids = |k: &str| -> Vec<u32> {
            r[k].as_array().expect("token ids").iter().map(|v| v.as_u64().expect("a token id") as u32).collect()
        };
        let output = ids("output_ids");
        if output.len() > 1 {
            prompts.push((ids("prompt_ids"), output));
        }
    }
    let ar_ms = cost.predict(1);
    println!("{} prompts; ar {:.3} ms/token (the cost model's 1-row pass)", prompts.len(), ar_ms);
    let noise = args.noise.as_deref().map(Noise::from_records);
    if let Some(z) = &noise {
        let [a, b, c] = z.after;
        println!(
            "noise: {} passes, sd {:.3}; after 0-3 / 4-7 / 8+ nodes x{a:.3} / x{b:.3} / x{c:.3}; {} seeds, cost {}",
            z.ratios.len(),
            (z.ratios.iter().map(|r| (r - 1.0) * (r - 1.0)).sum::<f64>() / z.ratios.len() as f64).sqrt(),
            args.seeds,
            if args.fixed { "fixed" } else { "learned" },
        );
    }
    // The learning policy's start-up calibration: the curve at 1, 2, 4, 8, … rows.
    let prior =
        args.prior.clone().unwrap_or_else(|| points.iter().copied().filter(|p| p.0.is_power_of_two()).collect());
    let mut methods: Vec<(String, MakeProposer, f64)> = vec![
        ("prompt-lookup".into(), Box::new(|| Box::new(PromptLookup::default())), args.draft_ms[0]),
        (
            "ngram-trie".into(),
            Box::new(|| Box::new(NgramTrie::new(NgramTrieConfig::default()).expect("defaults"))),
            args.draft_ms[1],
        ),
    ];
    for spec in &args.tries {
        let config = trie_config(spec);
        config.validate().unwrap_or_else(|e| panic!("--trie {spec}: {e}"));
        methods.push((
            format!("trie {spec}"),
            Box::new(move || Box::new(NgramTrie::new(config).expect("valid"))),
            args.draft_ms[1],
        ));
    }
    for (name, make, ms) in &methods {
        let runs = if noise.is_some() { args.seeds.max(1) } else { 1 };
        let mut speedups = Vec::new();
        let mut last = Totals::default();
        for seed in 0..runs {
            let clock = Clock::manual();
            let timed = Timed { inner: make(), clock: clock.clone(), ms: *ms };
            let auto = if noise.is_some() && !args.fixed {
                Auto::new(Box::new(timed), CostModel::from_points(&prior))
            } else {
                let given = args.prior.as_deref().map_or_else(|| cost.clone(), CostModel::from_points);
                Auto::with_fixed_cost(Box::new(timed), given)
            };
            let seeded = noise.as_ref().map(|z| z.seeded(seed));
            last = replay(auto.with_clock(clock.clone()), &clock, &cost, &prompts, seeded);
            speedups.push(ar_ms * last.tokens as f64 / last.ms);
        }
        let mean = speedups.iter().sum::<f64>() / runs as f64;
        let sd = (speedups.iter().map(|s| (s - mean) * (s - mean)).sum::<f64>() / runs as f64).sqrt();
        println!(
            "{name:14} tokens {:6} steps {:6} tau {:.3} nodes/step {:.2} ms/token {:.4} speedup {mean:.4}{}",
            last.tokens,
            last.steps,
            last.tokens as f64 / last.steps as f64,
            last.nodes as f64 / last.steps as f64,
            last.ms / last.tokens as f64,
            if runs > 1 {
                let each: Vec<String> = speedups.iter().map(|s| format!("{s:.3}")).collect();
                format!(" (sd {sd:.4} over {runs} seeds: {}; the rest: the last seed)", each.join(" "))
            } else {
                String::new()
            },
        );
        if args.sizes {
            for (n, (steps, accepted)) in &last.by_size {
                println!("  size {n:3} steps {steps:5} accepted/step {:.2}", *accepted as f64 / *steps as f64);
            }
        }
    }
}
