//! The prompt flags of `generate`: a prompt, a prompt file or chat messages, rendered through
//! the model's chat template unless told otherwise.

use std::path::PathBuf;

use anyhow::{Context, Result};
use burn::tensor::backend::Backend;
use clap::Args;
use draftsmith_model::{ChatMessage, LoadedModel};

/// What to generate from.
#[derive(Debug, Args)]
pub struct PromptArgs {
    /// The prompt (the user message unless --no-chat-template). One of --prompt, --prompt-file
    /// and --messages is needed.
    #[arg(long, short = 'p')]
    pub prompt: Option<String>,
    /// Read the prompt from a text file (e.g. a long book prefix).
    #[arg(long, conflicts_with = "prompt")]
    pub prompt_file: Option<PathBuf>,
    /// A JSON file with chat messages: `[{"role": "user", "content": "…"}, …]`.
    #[arg(long, conflicts_with = "prompt")]
    pub messages: Option<PathBuf>,
    /// A system message placed before the prompt (rendered by the chat template).
    #[arg(long, conflicts_with = "no_chat_template")]
    pub system: Option<String>,
    /// Tokenize the prompt as raw text instead of applying the model's chat template.
    #[arg(long)]
    pub no_chat_template: bool,
}

/// The chat roles a `--messages` file may use (the ones the models' chat templates render).
const ROLES: [&str; 4] = ["system", "user", "assistant", "tool"];

impl PromptArgs {
    /// Refuses, before anything is loaded, a command line without anything to generate from.
    pub fn check(&self) -> Result<()> {
        if self.prompt.is_none() && self.prompt_file.is_none() && self.messages.is_none() {
            anyhow::bail!("nothing to generate from: give --prompt, --prompt-file or --messages");
        }
        Ok(())
    }

    /// The prompt's token ids: chat template applied unless disabled.
    pub fn ids<B: Backend>(&self, loaded: &LoadedModel<B>) -> Result<Vec<u32>> {
        let from_file = match &self.prompt_file {
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .with_context(|| format!("{}: cannot read the prompt file", path.display()))?,
            ),
            None => None,
        };
        let prompt = from_file.or_else(|| self.prompt.clone());
        // An empty or blank prompt (most often an empty or mistyped file) would have the model
        // answer nothing: refused, naming where it came from.
        if let Some(p) = prompt.as_ref().filter(|p| p.trim().is_empty()) {
            let source = self.prompt_file.as_ref().map_or("--prompt".to_string(), |f| f.display().to_string());
            anyhow::bail!("{source}: the prompt is empty{}", if p.is_empty() { "" } else { " (only whitespace)" });
        }
        let text = if self.no_chat_template {
            prompt.clone().context("--no-chat-template needs --prompt or --prompt-file")?
        } else {
            let mut messages: Vec<ChatMessage> = match &self.messages {
                Some(path) => serde_json::from_str(
                    &std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))?,
                )
                .with_context(|| {
                    format!("{}: expected a JSON list of {{\"role\", \"content\"}} objects", path.display())
                })?,
                None => Vec::new(),
            };
            if let (Some(path), Some(m)) = (&self.messages, messages.iter().find(|m| !ROLES.contains(&m.role.as_str())))
            {
                anyhow::bail!("{}: unknown role `{}` (expected one of {})", path.display(), m.role, ROLES.join(", "));
            }
            if let Some(system) = &self.system {
                messages.insert(0, ChatMessage::new("system", system));
            }
            if let Some(prompt) = &prompt {
                messages.push(ChatMessage::new("user", prompt));
            }
            let template = loaded.tokenizer.chat_template().with_context(|| {
                format!("{}: the model has no chat template; pass --no-chat-template", loaded.path.display())
            })?;
            if messages.is_empty() {
                anyhow::bail!("nothing to say: give --prompt, --prompt-file or a non-empty --messages file");
            }
            template.render(&messages, true)?
        };
        let ids = loaded.tokenizer.encode(&text)?;
        let context = loaded.model.config().max_position_embeddings;
        if ids.len() >= context {
            let source = match (&self.prompt_file, &self.messages) {
                (Some(path), _) | (None, Some(path)) => path.display().to_string(),
                _ => "the prompt".to_string(),
            };
            anyhow::bail!(
                "{source}: {} tokens leave no room in the model's context of {context} (shorten it)",
                ids.len()
            );
        }
        Ok(ids)
    }
}
