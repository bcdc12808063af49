//! How long a large verify pass slows the one-token passes after it (why [`WARM_MS`]'s warm
//! steps last as long as the pass before them): loads the model, fills a cache with 64 tokens,
//! then `rounds` times runs one chain pass of `big` tokens followed by 24 one-token passes, and
//! prints the median time of the k-th one-token pass after it. `big = 1` is the baseline.
//!
//! `cargo run --release -p draftsmith-decode --example after_big -- MODEL.gguf [big] [rounds]`
//!
//! [`WARM_MS`]: draftsmith_decode::cost::WARM_MS

use std::path::PathBuf;
use std::time::Instant;

use burn::backend::Flex;
use draftsmith_decode::cost::{cached_context, DraftShape};
use draftsmith_model::{load_model, AttentionMask, LoadOptions, LogitsSelect, MatmulWeights};

/// One-token passes timed after each large pass.
const AFTER: usize = 24;
/// Cached tokens before every pass.
const CONTEXT: usize = 64;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = PathBuf::from(args.get(1).expect("usage: after_big MODEL.gguf [big] [rounds]"));
    let arg = |i: usize, default: usize| args.get(i).map_or(default, |s| s.parse().expect("a number"));
    let (big, rounds) = (arg(2, 64).max(1), arg(3, 40).max(1));
    let device = Default::default();
    let model = load_model::<Flex>(&path, LoadOptions::new(MatmulWeights::Quantized), &device).expect("model").model;
    let mut cache = cached_context(&model, CONTEXT, big).expect("context");
    let vocab = model.config().vocab_size;
    let (chain, one) = (DraftShape::Chain.tree(big, vocab, 7), DraftShape::Chain.tree(1, vocab, 3));
    let (mask, positions) = (AttentionMask::Visible(chain.visibility(CONTEXT)), chain.positions(CONTEXT - 1));
    let mut pass = |tokens: &[u32], positions: &[usize], mask: &AttentionMask| {
        let out = model.forward(tokens, positions, mask, LogitsSelect::All, &mut cache).expect("pass");
        let _ = out.logits.into_data();
        cache.truncate(CONTEXT);
    };
    let mut times: Vec<Vec<f64>> = (0..AFTER).map(|_| Vec::with_capacity(rounds)).collect();
    for _ in 0..rounds {
        if big > 1 {
            pass(chain.tokens(), &positions, &mask);
        }
        for t in times.iter_mut() {
            let start = Instant::now();
            pass(one.tokens(), &[CONTEXT], &AttentionMask::Causal);
            t.push(start.elapsed().as_secs_f64() * 1e3);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let line: Vec<String> = times.iter_mut().map(|v| format!("{:.2}", median(v))).collect();
    println!("after a {big}-token pass, one-token pass 1..{AFTER} (median ms of {rounds}): {}", line.join(" "));
}
