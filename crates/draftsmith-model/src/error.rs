//! Errors of the target engine. Every variant names the file it is about.

use std::path::{Path, PathBuf};

/// Everything that can go wrong while loading or running a target model.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Gguf(#[from] draftsmith_gguf::GgufError),
    #[error("{path}: invalid model configuration: {problem}")]
    Config { path: PathBuf, problem: String },
    #[error("{path}: unknown architecture `{name}` (supported: {})", crate::config::Architecture::SUPPORTED)]
    UnknownArchitecture { path: PathBuf, name: String },
    #[error("{path}: expected tensor(s) not found: {names}")]
    MissingTensors { path: PathBuf, names: String },
    #[error("{path}: tensor(s) found but not used by the {arch} architecture: {names}")]
    UnusedTensors { path: PathBuf, arch: String, names: String },
    #[error("{path}: tensor `{name}` has shape {found:?}, expected {expected:?}")]
    TensorShape { path: PathBuf, name: String, found: Vec<usize>, expected: Vec<usize> },
    #[error("{path}: tensor `{name}`: {problem}")]
    Tensor { path: PathBuf, name: String, problem: String },
    #[error("{path}: safetensors: {problem}")]
    Safetensors { path: PathBuf, problem: String },
    #[error("{path}: tokenizer: {problem}")]
    Tokenizer { path: PathBuf, problem: String },
    #[error("{path}: tokenizer has {tokenizer} tokens but the model's vocabulary has {model} rows")]
    VocabMismatch { path: PathBuf, tokenizer: usize, model: usize },
    #[error("{path}: chat template: {problem}")]
    ChatTemplate { path: PathBuf, problem: String },
    #[error("{path}: not a model: expected a .gguf file or a directory with config.json")]
    NotAModel { path: PathBuf },
    #[error("sequence of {needed} positions exceeds the model's context of {context} tokens")]
    ContextOverflow { needed: usize, context: usize },
    #[error("invalid forward input: {0}")]
    Input(String),
    #[error("the prompt is empty: there is no token to decode from")]
    EmptyPrompt,
    #[error(
        "the model's logits are not finite (token {token}: {value}): its weights are probably damaged (a NaN or infinity in a tensor)"
    )]
    NonFiniteLogits { token: usize, value: f32 },
}

impl ModelError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io { path: path.to_path_buf(), source }
    }
}
