//! Typed errors of a distillation run. A conversation that cannot be used (prompt too long,
//! template prefix mismatch…) is skipped and counted in [`crate::DistillStats`], not an error.

use std::path::PathBuf;

/// What stops a distillation run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DistillError {
    /// A setting is out of range or contradicts another.
    #[error("distill config: `{key}` {problem}")]
    Config {
        /// The recipe key.
        key: &'static str,
        /// What is wrong with it.
        problem: String,
    },

    /// The settings need the model's chat template and the tokenizer has none.
    #[error("{tokenizer}: the model has no chat template; distill with chat_template = false (--no-chat-template), which also rules out ground-truth records")]
    NoChatTemplate {
        /// Where the tokenizer came from.
        tokenizer: PathBuf,
    },

    /// The settings need the model's chat template and it does not compile (the error names
    /// its file).
    #[error(transparent)]
    BrokenChatTemplate(Box<draftsmith_model::ModelError>),

    /// The dataset writer was opened with parameters other than the config's.
    #[error("the dataset writer stores {field} = {writer:?} but the distill config says {config:?}")]
    WriterMismatch {
        /// `teacher_len` or `topk`.
        field: &'static str,
        /// The writer's value.
        writer: Option<usize>,
        /// The config's value.
        config: Option<usize>,
    },

    /// The target model failed (forward pass, tokenizer).
    #[error("conversation `{id}`: {source}")]
    Model {
        /// The conversation being processed.
        id: String,
        /// The underlying error.
        source: Box<draftsmith_model::ModelError>,
    },

    /// Writing a shard or the manifest failed.
    #[error(transparent)]
    Data(#[from] draftsmith_data::DataError),
}
