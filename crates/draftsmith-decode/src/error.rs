//! Errors of the decoding crate.

use draftsmith_model::ModelError;

/// What can go wrong when building a method or decoding with it.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("unknown method `{name}` (known methods: {})", known.join(", "))]
    UnknownMethod { name: String, known: Vec<&'static str> },
    #[error("method `{method}`: parameter `{param}` = {value}: {problem}")]
    InvalidParam { method: String, param: &'static str, value: String, problem: &'static str },
    #[error(transparent)]
    Model(#[from] ModelError),
}
