//! A loop of verify passes of one size after a fixed context, for profilers (`perf record`,
//! `valgrind --tool=callgrind`): loads the model, prefills `context` tokens, then runs `reps`
//! chain passes of `n` tokens (each rolled back) and prints their median milliseconds and the
//! matrices / attention split.
//!
//! `cargo run --release -p draftsmith-decode --example passes -- MODEL.gguf [n] [reps] [context]`

use std::path::PathBuf;
use std::time::Instant;

use burn::backend::Flex;
use draftsmith_decode::cost::DraftShape;
use draftsmith_kernels::probe::CpuInfo;
use draftsmith_model::{
    load_model, set_profiling, take_profile, AttentionMask, LoadOptions, LogitsSelect, MatmulWeights,
};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = PathBuf::from(args.get(1).expect("usage: passes MODEL.gguf [n] [reps] [context]"));
    let arg = |i: usize, default: usize| args.get(i).map_or(default, |s| s.parse().expect("a number"));
    let (n, reps, context) = (arg(2, 8), arg(3, 400), arg(4, 64));
    let info = CpuInfo::detect();
    println!("{} ({})", info.model, info.flags.join(" "));
    let device = Default::default();
    let loaded = load_model::<Flex>(&path, LoadOptions::new(MatmulWeights::Quantized), &device).expect("model");
    let model = loaded.model;
    let vocab = model.config().vocab_size;
    let mut cache = model.new_cache(context + n + 8);
    let prompt: Vec<u32> = (0..context as u32).map(|i| 100 + (i * 7919) % (vocab as u32 - 100)).collect();
    let positions: Vec<usize> = (0..context).collect();
    model.forward(&prompt, &positions, &AttentionMask::Causal, LogitsSelect::Last, &mut cache).expect("prefill");
    let tree = DraftShape::Chain.tree(n, vocab, 4 + n as u64);
    let (mask, positions) = if n == 1 {
        (AttentionMask::Causal, vec![context])
    } else {
        (AttentionMask::Visible(tree.visibility(context)), tree.positions(context - 1))
    };
    set_profiling(true);
    let mut times = Vec::with_capacity(reps);
    let (mut matrices, mut attention) = (0.0, 0.0);
    for _ in 0..reps {
        take_profile();
        let start = Instant::now();
        let out = model.forward(tree.tokens(), &positions, &mask, LogitsSelect::All, &mut cache).expect("pass");
        let _ = out.logits.into_data();
        cache.truncate(context);
        times.push(start.elapsed().as_secs_f64() * 1e3);
        let parts = take_profile();
        matrices += parts.matrices_s * 1e3;
        attention += parts.attention_s * 1e3;
    }
    times.sort_by(f64::total_cmp);
    let r = reps as f64;
    println!(
        "n={n} context={context}: median {:.3} ms, min {:.3} ms; matrices {:.3}, attention {:.3} ms (means)",
        times[reps / 2],
        times[0],
        matrices / r,
        attention / r
    );
}
