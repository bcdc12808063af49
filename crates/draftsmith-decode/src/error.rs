//! Errors of the decoding crate. Every variant names the files or the parameter it is about.

use std::path::PathBuf;

use draftsmith_model::ModelError;

/// Everything that can go wrong while setting up or running a decoding method.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The drafter's tokenizer does not map ids to the same token strings as the target's.
    #[error(
        "drafter {draft} and target {target} have different vocabularies: token id {id} is {draft_token} in the drafter but {target_token} in the target"
    )]
    VocabularyMismatch { target: PathBuf, draft: PathBuf, id: u32, target_token: String, draft_token: String },
    /// Same vocabulary, but a special token (BOS, EOS, control tokens) differs.
    #[error("drafter {draft} and target {target} have different special tokens: {what} differ: {draft_value} in the drafter, {target_value} in the target")]
    SpecialTokenMismatch { target: PathBuf, draft: PathBuf, what: String, target_value: String, draft_value: String },
    /// The drafter's output layer is wider than the target's embedding table.
    #[error("drafter vocabulary has {draft} rows but the target's has {target}: drafted ids could be out of the target's range")]
    VocabSize { target: usize, draft: usize },
    /// A method parameter is outside its valid range.
    #[error("{method}: parameter `{name}` = {value} is invalid: {bound}")]
    Parameter { method: &'static str, name: &'static str, value: String, bound: &'static str },
    #[error("unknown method `{name}` (known methods: {})", known.join(", "))]
    UnknownMethod { name: String, known: Vec<&'static str> },
    #[error("method `{method}`: parameter `{param}` = {value}: {problem}")]
    InvalidParam { method: String, param: &'static str, value: String, problem: String },
    /// A trained drafter (ReDrafter, TokenSwift) could not be loaded or does not fit the target.
    #[error(transparent)]
    Heads(#[from] draftsmith_heads::HeadsError),
    #[error("drafter does not fit the target: {0}")]
    Drafter(String),
}
