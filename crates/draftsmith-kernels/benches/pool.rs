//! Worker-pool benchmark (no harness): what starting and joining one [`Pool::run`] costs, with
//! an empty job and with a job that touches a few cache lines per thread (as a one-token
//! attention or small product does), against the same work run inline.
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
    for round in 0..3 {
        let t = Instant::now();
        for _ in 0..runs {
            pool.run(&|_, _| {});
        }
        let empty = t.elapsed().as_nanos() as f64 / runs as f64;
        let t = Instant::now();
        for _ in 0..runs {
            pool.run(&|thread, _| {
                counters[thread * 16].fetch_add(1, Ordering::Relaxed);
            });
        }
        let touch = t.elapsed().as_nanos() as f64 / runs as f64;
        println!("round {round}: empty job {empty:8.0} ns/run; one line per thread {touch:8.0} ns/run");
    }
}
