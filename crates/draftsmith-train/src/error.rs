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
    /// Export options that do not go together (or with this kind of drafter).
    #[error("{0}")]
    ExportOptions(String),
    /// A run, source or output directory that cannot be used as asked.
    #[error("{}: {problem}", path.display())]
    Dir { path: PathBuf, problem: String },
    #[error(transparent)]
    Data(#[from] draftsmith_data::DataError),
    #[error(transparent)]
    Locked(#[from] draftsmith_core::fsio::LockError),
    /// The distilled dataset was made with another target than the one being trained for.
    #[error("{}: this dataset was distilled from `{name}` (sha256 {sha256}), not from the target being trained for (sha256 {target_sha}); distill it again with this --model", dir.display())]
    WrongTarget { dir: PathBuf, name: String, sha256: String, target_sha: String },
    /// A hidden-state cache made for another target or another dataset.
    #[error("{}: {problem}", path.display())]
    HiddenMismatch { path: PathBuf, problem: String },
    /// No held-out book is long enough for one eval prompt.
    #[error("no held-out book has {tokens} tokens, so no eval prompt can be cut from one: lower --prompt-tokens, hold out a longer book (--eval-books), or write none (--prompts-per-book 0)")]
    NoEvalPrompts { tokens: usize },
    /// Teacher labels asked for, but the dataset has no teacher continuations.
    #[error(
        "{}: --labels teacher needs teacher continuations and this dataset has none: distill it with --teacher-len \
         at least --horizon + 1 (`distill.teacher_len` in a recipe)",
        dir.display()
    )]
    NoTeacher { dir: PathBuf },
}

impl TrainError {
    pub fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Self + '_ {
        move |source| Self::Io { path: path.to_path_buf(), source }
    }
}
