//! Errors of drafter construction, export and import.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum HeadsError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: invalid drafter config: {problem}")]
    Config { path: PathBuf, problem: String },
    #[error("{path}: not a valid safetensors file: {problem}")]
    Safetensors { path: PathBuf, problem: String },
    /// A well-formed file whose weights are not all finite (a run whose training diverged).
    #[error(
        "{path}: tensor `{name}` value {index} is {value}: a drafter needs finite weights (did its training diverge?)"
    )]
    NonFinite { path: PathBuf, name: String, index: usize, value: f32 },
    #[error("{path}: tensor `{name}` is missing")]
    MissingTensor { path: PathBuf, name: String },
    #[error("{path}: tensor `{name}` has shape {found:?}, the config needs {expected:?}")]
    Shape { path: PathBuf, name: String, expected: Vec<usize>, found: Vec<usize> },
    #[error("{path}: unexpected tensor `{name}` (not part of a {kind} drafter)")]
    UnusedTensor { path: PathBuf, name: String, kind: String },
    #[error(
        "{path}: this drafter was trained for target `{trained_name}` (sha256 {trained_sha}), \
         not for `{given_name}` (sha256 {given_sha}); train one for this target"
    )]
    TargetMismatch { path: PathBuf, trained_name: String, trained_sha: String, given_name: String, given_sha: String },
    #[error("drafter does not fit the target: {0}")]
    Incompatible(String),
}

impl HeadsError {
    pub fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Self + '_ {
        move |source| Self::Io { path: path.to_path_buf(), source }
    }
}
