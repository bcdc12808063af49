//! Errors of the benchmark. Messages name the flag or the file they are about.

use std::path::PathBuf;

use draftsmith_decode::DecodeError;
use draftsmith_model::ModelError;

/// Everything that can stop a benchmark run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The prompt count is outside the built-in set.
    #[error("--prompts must be between 1 and {max}")]
    Prompts { max: usize },
    /// A verify-curve context of zero cached tokens.
    #[error("--contexts: a context must hold at least one cached token")]
    EmptyContext,
    /// Too few new tokens to time decoding (the first comes from the prefill).
    #[error("--max-new-tokens must be at least 2 (decode speed is timed over the tokens after the prefill's)")]
    TooFewTokens,
    /// A size or count out of range.
    #[error("{flag} {problem}")]
    Setting { flag: &'static str, problem: String },
    #[error(transparent)]
    Model(Box<ModelError>),
    #[error(transparent)]
    Decode(Box<DecodeError>),
    /// llama.cpp reads GGUF files only.
    #[error("--vs-llamacpp needs a GGUF model file, got {}", path.display())]
    NotGguf { path: PathBuf },
    /// The llama.cpp script (built into the binary, run with `python3 -c`) could not be started.
    #[error(
        "cannot run scripts/bench_llamacpp.py (built in, run with `python3 -c`): --vs-llamacpp needs `python3` on \
         PATH with llama-cpp-python (`just install-llamacpp`)"
    )]
    Spawn { source: std::io::Error },
    /// The llama.cpp script started but did not report its engine.
    #[error("scripts/bench_llamacpp.py (built in, run with `python3 -c`) did not start (install llama-cpp-python with `just install-llamacpp`)")]
    NotStarted { source: Box<BenchError> },
    /// A pipe to the llama.cpp script is missing.
    #[error("llama.cpp benchmark {pipe}")]
    Pipe { pipe: &'static str },
    #[error("the llama.cpp benchmark exited early")]
    EarlyExit,
    /// A reply line of the llama.cpp script lacks a timing.
    #[error("llama.cpp benchmark: no `{key}` in {line}")]
    MissingKey { key: &'static str, line: serde_json::Value },
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

impl From<ModelError> for BenchError {
    fn from(e: ModelError) -> Self {
        Self::Model(Box::new(e))
    }
}

impl From<DecodeError> for BenchError {
    fn from(e: DecodeError) -> Self {
        Self::Decode(Box::new(e))
    }
}
