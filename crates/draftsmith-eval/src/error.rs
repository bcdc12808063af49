//! Errors of the evaluation harness. Messages name the file, the line or the prompt id.

use std::path::PathBuf;

use draftsmith_decode::DecodeError;
use draftsmith_model::ModelError;

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Locked(#[from] draftsmith_core::fsio::LockError),
    #[error("{path}:{line}: {problem}")]
    PromptLine { path: PathBuf, line: usize, problem: String },
    #[error("{path}: no prompts")]
    NoPrompts { path: PathBuf },
    #[error("{path}: the model has no chat template; pass --no-chat-template")]
    NoChatTemplate { path: PathBuf },
    #[error("prompt `{id}`: {source}")]
    Prompt { id: String, source: Box<ModelError> },
    #[error("prompt `{id}`: {len} tokens do not fit the model's context of {context} tokens (at most {} prompt tokens)", context - 1)]
    PromptTooLong { id: String, len: usize, context: usize },
    #[error("prompt `{id}` is empty: it has no tokens to decode from")]
    EmptyPrompt { id: String },
    #[error("prompt `{id}`, method `{method}`: {source}")]
    Decode { id: String, method: String, source: Box<DecodeError> },
    #[error(transparent)]
    Method(Box<DecodeError>),
    #[error("{path}:{line}: not a record: {problem}")]
    RecordLine { path: PathBuf, line: usize, problem: String },
    #[error("{path}: {problem}")]
    Records { path: PathBuf, problem: String },
    #[error("{path}: invalid manifest: {problem}")]
    Manifest { path: PathBuf, problem: String },
    #[error("{path} was written by a different eval ({}); choose another --out or remove the directory", differences.join("; "))]
    ManifestMismatch { path: PathBuf, differences: Vec<String> },
    #[error("{path}: its ar records decoded otherwise than this eval ({}); run without --reuse-ar-from", differences.join("; "))]
    ArSourceMismatch { path: PathBuf, differences: Vec<String> },
    #[error("{dir}: has {file} but no manifest.json, so it is not an eval to resume; refusing to write over it (choose another --out)")]
    NoManifest { dir: PathBuf, file: PathBuf },
    #[error("{path}: recipe: {problem}")]
    Recipe { path: std::path::PathBuf, problem: String },
    #[error(
        "drafter `{drafter}`: {} was made with other recipe settings ({}); {fix}, or give the drafter another name",
        dir.display(), differences.join("; ")
    )]
    MadeOtherwise { drafter: String, dir: PathBuf, differences: Vec<String>, fix: String },
    #[error("{}: not a summary: {problem}", path.display())]
    Summary { path: PathBuf, problem: String },
    #[error("plot: {problem}")]
    Plot { problem: String },
}

impl From<DecodeError> for EvalError {
    fn from(e: DecodeError) -> Self {
        Self::Method(Box::new(e))
    }
}

impl EvalError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { path, source }
    }
}
