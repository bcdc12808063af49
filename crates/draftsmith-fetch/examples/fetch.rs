//! Fetches artifacts by name (all of them without arguments) into the data
//! dir (`$DRAFTSMITH_HOME` or `~/.cache/draftsmith`), printing progress and
//! the time each took.
//!
//! `cargo run -p draftsmith-fetch --example fetch -- mt-bench humaneval`

use std::time::Instant;

use draftsmith_fetch::{catalog, data_dir, fetch, find, Artifact};

fn main() {
    let names: Vec<String> = std::env::args().skip(1).collect();
    let artifacts: Vec<&Artifact> = if names.is_empty() {
        catalog().iter().collect()
    } else {
        names.iter().map(|n| find(n).unwrap_or_else(|e| panic!("{e}"))).collect()
    };
    let data = data_dir();
    let mut failed = false;
    for a in artifacts {
        let start = Instant::now();
        match fetch(a, &data, &mut |event| eprintln!("  {event:?}")) {
            Ok(path) => println!("{} {} {:.1}s", a.name, path.display(), start.elapsed().as_secs_f64()),
            Err(e) => {
                println!("{} FAILED after {:.1}s: {e}", a.name, start.elapsed().as_secs_f64());
                failed = true;
            }
        }
    }
    std::process::exit(i32::from(failed));
}
