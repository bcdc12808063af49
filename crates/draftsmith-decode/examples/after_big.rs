//! How long a large verify pass — or any time away from the model — slows the one-token passes
//! after it (why [`WARM_MS`]'s warm steps last as long as the pass before them): loads the
//! model, fills a cache with 64 tokens, then `rounds` times runs one chain pass of `big` tokens
//! (or spends `MS` milliseconds elsewhere: `sleep:MS`, `spin:MS`, `stream:MS` reading a 512 MiB
//! buffer) followed by 24 one-token passes, and prints the median time of the k-th one-token
//! pass after it. `big = 1` is the baseline.
//!
//! `cargo run --release -p draftsmith-decode --example after_big -- MODEL.gguf [big|sleep:MS|spin:MS|stream:MS] [rounds]`
//!
//! [`WARM_MS`]: draftsmith_decode::cost::WARM_MS

use std::path::PathBuf;
use std::time::{Duration, Instant};

use burn::backend::Flex;
use draftsmith_decode::cost::{cached_context, DraftShape};
use draftsmith_model::{load_model, AttentionMask, LoadOptions, LogitsSelect, MatmulWeights};

/// One-token passes timed after each large pass.
const AFTER: usize = 24;
/// Cached tokens before every pass.
const CONTEXT: usize = 64;

/// What runs before each series of one-token passes.
enum Before {
    Pass(usize),
    Sleep(Duration),
    Spin(Duration),
    Stream(Duration),
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: after_big MODEL.gguf [big|sleep:MS|spin:MS|stream:MS] [rounds]";
    let path = PathBuf::from(args.get(1).expect(usage));
    let before = match args.get(2).map(|s| s.split_once(':').unwrap_or(("", s))) {
        None => Before::Pass(64),
        Some(("", n)) => Before::Pass(n.parse::<usize>().expect(usage).max(1)),
        Some((kind, ms)) => {
            let d = Duration::from_millis(ms.parse().expect(usage));
            match kind {
                "sleep" => Before::Sleep(d),
                "spin" => Before::Spin(d),
                "stream" => Before::Stream(d),
                _ => panic!("{usage}"),
            }
        }
    };
    let rounds = args.get(3).map_or(40, |s| s.parse::<usize>().expect(usage).max(1));
    let device = Default::default();
    let model = load_model::<Flex>(&path, LoadOptions::new(MatmulWeights::Quantized), &device).expect("model").model;
    let big = if let Before::Pass(n) = before { n } else { 1 };
    let mut cache = cached_context(&model, CONTEXT, big).expect("context");
    let vocab = model.config().vocab_size;
    let (chain, one) = (DraftShape::Chain.tree(big, vocab, 7), DraftShape::Chain.tree(1, vocab, 3));
    let (mask, positions) = (AttentionMask::Visible(chain.visibility(CONTEXT)), chain.positions(CONTEXT - 1));
    let mut pass = |tokens: &[u32], positions: &[usize], mask: &AttentionMask| {
        let out = model.forward(tokens, positions, mask, LogitsSelect::All, &mut cache).expect("pass");
        let _ = out.logits.into_data();
        cache.truncate(CONTEXT);
    };
    let buffer = match before {
        Before::Stream(_) => vec![1u8; 512 << 20],
        _ => Vec::new(),
    };
    let mut sink = 0u64;
    let mut times: Vec<Vec<f64>> = (0..AFTER).map(|_| Vec::with_capacity(rounds)).collect();
    for _ in 0..rounds {
        let start = Instant::now();
        match before {
            Before::Pass(1) => {}
            Before::Pass(_) => pass(chain.tokens(), &positions, &mask),
            Before::Sleep(d) => std::thread::sleep(d),
            Before::Spin(d) => {
                while start.elapsed() < d {
                    std::hint::spin_loop();
                }
            }
            Before::Stream(d) => {
                // One byte per cache line, a MiB at a time, round the buffer.
                let mut at = 0;
                while start.elapsed() < d {
                    sink =
                        buffer[at..at + (1 << 20)].iter().step_by(64).fold(sink, |s, &b| s.wrapping_add(u64::from(b)));
                    at = (at + (1 << 20)) % buffer.len();
                }
            }
        }
        for t in times.iter_mut() {
            let start = Instant::now();
            pass(one.tokens(), &[CONTEXT], &AttentionMask::Causal);
            t.push(start.elapsed().as_secs_f64() * 1e3);
        }
    }
    std::hint::black_box(sink);
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let line: Vec<String> = times.iter_mut().map(|v| format!("{:.2}", median(v))).collect();
    let what = args.get(2).map_or("64", String::as_str);
    println!("after {what}: one-token pass 1..{AFTER} (median ms of {rounds}): {}", line.join(" "));
}
