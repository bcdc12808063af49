//! Attention benchmark (no harness): the host attention of a SmolLM2-135M-shaped stack (30
//! layers, 9 query heads over 3 kv heads of 64, f16 cache) after `--contexts` cached tokens, for
//! `--rows` query rows in a causal chain; median and minimum milliseconds of the 30 layers, and
//! GMAC/s (scores plus weighted sums: 2 · rows · heads · visible keys · head_dim). Prints the
//! CPU's kernel path; compare figures only within one run. `--distinct 0` runs every layer on one
//! cache (cache-resident: the arithmetic without the memory stream).
//!
//! `cargo bench -p draftsmith-model --bench attention -- --contexts 64,512,2048 --rows 1,2,3,4,8
//! --reps 41 --shape 9,3,64,30`

use std::time::Instant;

use draftsmith_model::host::{attend_into, KeysIn, Visibility};
use half::f16;

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned()).unwrap_or_else(|| default.to_string())
}

fn list(name: &str, default: &str) -> Vec<usize> {
    arg(name, default).split(',').map(|s| s.trim().parse().expect("a list of integers")).collect()
}

fn main() {
    let contexts = list("--contexts", "64,512,2048");
    let rows_list = list("--rows", "1,2,3,4,8");
    let reps: usize = arg("--reps", "41").parse().expect("--reps N");
    let shape = list("--shape", "9,3,64,30");
    assert!(
        shape.len() == 4 && shape[1] > 0 && shape[0].is_multiple_of(shape[1]),
        "--shape heads,kv_heads,head_dim,layers (heads a multiple of kv_heads)"
    );
    let (heads, kv_heads, hd, layers) = (shape[0], shape[1], shape[2], shape[3]);
    println!(
        "attention: {heads} heads over {kv_heads} kv heads of {hd}, {layers} layers, f16 cache; kernel path {:?}; {} threads",
        draftsmith_kernels::KernelPath::detect(),
        draftsmith_kernels::Pool::global().threads()
    );
    println!("{:>8} {:>5} {:>9} {:>9} {:>8}", "context", "rows", "median ms", "min ms", "GMAC/s");
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    };
    let distinct = arg("--distinct", "1") != "0";
    for &context in &contexts {
        let capacity = context + rows_list.iter().max().copied().unwrap_or(1);
        let cache: Vec<(Vec<f16>, Vec<f16>)> = (0..if distinct { layers } else { 1 })
            .map(|_| {
                let k = (0..kv_heads * capacity * hd).map(|_| f16::from_f32(rnd())).collect();
                let v = (0..kv_heads * capacity * hd).map(|_| f16::from_f32(rnd())).collect();
                (k, v)
            })
            .collect();
        for &rows in &rows_list {
            let q: Vec<f32> = (0..rows * heads * hd).map(|_| rnd() * 2.0).collect();
            let visibility = Visibility::Causal { cached: context };
            let mut out = Vec::new();
            let mut times = Vec::with_capacity(reps);
            for _ in 0..reps {
                let t = Instant::now();
                for l in 0..layers {
                    let (k, v) = &cache[l % cache.len()];
                    attend_into(&q, KeysIn::Plain(k), v, capacity, (heads, kv_heads, hd), &visibility, &mut out);
                }
                times.push(t.elapsed().as_secs_f64() * 1e3);
            }
            times.sort_by(f64::total_cmp);
            let med = times[reps / 2];
            let keys: usize = (0..rows).map(|i| context + i + 1).sum();
            let macs = 2.0 * (heads * hd * keys * layers) as f64;
            println!("{context:>8} {rows:>5} {med:>9.3} {:>9.3} {:>8.1}", times[0], macs / med / 1e6);
        }
    }
}
