//! A loop of verify passes of one size after a fixed context, for profilers (`perf record`,
//! `valgrind --tool=callgrind`): loads the model, fills a cache with `context` tokens, then times
//! `reps` chain passes of `n` tokens back to back ([`time_passes`] with no warm steps between
//! them, unlike `bench ar`'s curve) and prints their median and fastest milliseconds and the
//! matrices / attention split.
//!
//! `cargo run --release -p draftsmith-decode --example passes -- MODEL.gguf [n] [reps] [context]`

use std::path::PathBuf;

use burn::backend::Flex;
use draftsmith_decode::cost::{cached_context, time_passes, DraftShape, Rounds};
use draftsmith_kernels::probe::CpuInfo;
use draftsmith_model::{load_model, LoadOptions, MatmulWeights};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = PathBuf::from(args.get(1).expect("usage: passes MODEL.gguf [n] [reps] [context]"));
    let arg = |i: usize, default: usize| args.get(i).map_or(default, |s| s.parse().expect("a number"));
    let (n, reps, context) = (arg(2, 8), arg(3, 400), arg(4, 64));
    let info = CpuInfo::detect();
    println!("{} ({})", info.model, info.flags.join(" "));
    let device = Default::default();
    let model = load_model::<Flex>(&path, LoadOptions::new(MatmulWeights::Quantized), &device).expect("model").model;
    let mut cache = cached_context(&model, context, n).expect("context");
    let t = time_passes(&model, &mut cache, DraftShape::Chain, &[n], Rounds::cold(reps)).expect("passes")[0];
    println!(
        "n={n} context={context}: median {:.3} ms, min {:.3} ms; matrices {:.3}, attention {:.3} ms (means)",
        t.ms, t.min_ms, t.matrices_ms, t.attention_ms
    );
}
