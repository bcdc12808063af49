//! The evaluation harness: a matrix of decoding methods over a prompt set, run greedy on one
//! loaded engine with the autoregressive baseline first, checked token for token against it.
//!
//! An eval directory holds `manifest.json` (what was run), `records.jsonl` (one raw record per
//! (prompt, method), with per-step data; appended as pairs finish, so a rerun resumes), and
//! the summaries computed from the records alone: `summary.json`, `report.md`, `plot.svg`.
//! The library prints nothing; progress goes to a callback.

pub mod bench;
pub mod error;
pub mod evaluate;
pub mod lossless;
pub mod manifest;
pub mod plot;
pub mod prompts;
pub mod recipe;
pub mod records;
pub mod report;
pub mod reproduce;
pub mod runner;
pub mod stats;
pub mod summary;

pub use error::EvalError;
pub use evaluate::{evaluate, write_outputs, EvalInput, EvalOutcome, REPORT_FILE, SUMMARY_FILE};
pub use lossless::{LosslessCheck, NearTieBound};
pub use manifest::{drafter_sha256, names as method_names, resolve_methods, Manifest, MANIFEST_FILE, SCHEMA_VERSION};
pub use plot::PLOT_FILE;
pub use prompts::{encode_prompts, read_prompts, EncodedPrompt, Prompt, PromptSet};
pub use recipe::{DrafterRecipe, GridPoint, Recipe};
pub use records::{read_records, Record, RECORDS_FILE};
pub use reproduce::{combined_table, run_recipe, RecipeEvent, RecipeSettings, RecipeStages};
pub use runner::{Progress, RunSpec};
pub use stats::{peak_rss_mb, StatsLog};
pub use summary::{alpha, distinct_n, interval_text, summarize, tokens_per_step, MethodSummary, Mismatch, Summary};
