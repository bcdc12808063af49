//! Worker-pool benchmark (no harness): what starting and joining one [`Pool::run`] costs, with
//! an empty job and with a job that writes one cache line of its own per thread (as any job
//! writes its share of an output), in nanoseconds per run.
//!
//! `cargo bench -p draftsmith-kernels --bench pool -- --runs 200000`

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use draftsmith_kernels::Pool;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runs: usize = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1))
        .map_or(200_000, |v| v.parse().expect("--runs N"));
    let pool = Pool::global();
    println!("pool: {} threads; {runs} runs per figure", pool.threads());
    let counters: Vec<AtomicUsize> = (0..64).map(|_| AtomicUsize::new(0)).collect();
    let per_run = |job: &(dyn Fn(usize, usize) + Sync)| {
        let t = Instant::now();
        for _ in 0..runs {
            pool.run(job);
        }
        t.elapsed().as_nanos() as f64 / runs as f64
    };
    for round in 0..3 {
        let empty = per_run(&|_, _| {});
        let touch = per_run(&|thread, _| {
            counters[thread * 16].fetch_add(1, Ordering::Relaxed);
        });
        println!("round {round}: empty job {empty:8.0} ns/run; one line per thread {touch:8.0} ns/run");
    }
}
