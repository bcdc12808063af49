//! Errors of the training stage.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Model(#[from] draftsmith_model::ModelError),
    #[error(transparent)]
    Heads(#[from] draftsmith_heads::HeadsError),
    #[error("{path}: cannot resume: {problem}; use a new run directory or delete this one")]
    ResumeMismatch { path: PathBuf, problem: String },
    #[error("{path}: corrupt checkpoint: {problem}")]
    Checkpoint { path: PathBuf, problem: String },
    #[error("no training examples: {0}")]
    NoExamples(String),
    #[error("invalid training config: {0}")]
    Config(String),
}

impl TrainError {
    pub fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Self + '_ {
        move |source| Self::Io { path: path.to_path_buf(), source }
    }
}
