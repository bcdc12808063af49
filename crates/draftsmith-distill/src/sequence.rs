//! Token sequences from conversations: the prompt of a self-distilled record, and a ground-truth
//! conversation with its assistant spans marked.
//!
//! Assistant spans are found without guessing at the template's markup: for assistant message
//! `i`, `render(messages[..i], add_generation_prompt)` must tokenize to a prefix of
//! `render(messages[..=i])`, which must tokenize to a prefix of the whole conversation — up to
//! one token merged across each boundary by BPE; the tokens between the two prefixes (the reply
//! and the template's end-of-turn markup) are trained on. A conversation where this does not
//! hold is skipped, not approximated.

use draftsmith_core::common_prefix;
use draftsmith_data::{Conversation, Message, Role};
use draftsmith_model::{ChatMessage, ChatTemplate, ModelError, TextTokenizer};
use serde::{Deserialize, Serialize};

/// Why a conversation gave no record of some kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// The prompt has more than `max_prompt_tokens` tokens.
    PromptTooLong,
    /// There is no (non-empty) user message to prompt with.
    NoUserMessage,
    /// No assistant token falls within `max_seq_len` (ground truth).
    NoAssistantTurn,
    /// Rendered prefixes do not tokenize to prefixes of the conversation (ground truth).
    TemplatePrefix,
    /// The chat template refused the conversation (e.g. roles that do not alternate).
    TemplateError,
}

/// A token sequence with its trained positions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labeled {
    pub tokens: Vec<u32>,
    pub loss_mask: Vec<bool>,
}

/// Either a value or the reason the conversation is skipped.
pub type Built<T> = Result<T, SkipReason>;

fn chat_role(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

fn chat_messages(messages: &[Message]) -> Vec<ChatMessage> {
    messages.iter().map(|m| ChatMessage::new(chat_role(m.role), &m.content)).collect()
}

/// Renders, turning a template error into a skip.
fn render(template: &ChatTemplate, messages: &[ChatMessage], generation_prompt: bool) -> Built<String> {
    template.render(messages, generation_prompt).map_err(|e| {
        tracing::debug!(error = %e, "chat template refused a conversation");
        SkipReason::TemplateError
    })
}

/// The prompt of a self-distilled record: the leading system message (if any) and the first
/// user message, rendered with the generation prompt (or the user message as raw text when
/// `template` is `None`).
pub fn response_prompt(
    tokenizer: &TextTokenizer,
    template: Option<&ChatTemplate>,
    conversation: &Conversation,
    max_prompt_tokens: usize,
) -> Result<Built<Vec<u32>>, ModelError> {
    let messages = &conversation.messages;
    let Some(user) = messages.iter().position(|m| m.role == Role::User && !m.content.trim().is_empty()) else {
        return Ok(Err(SkipReason::NoUserMessage));
    };
    let text = match template {
        Some(template) => {
            let mut picked: Vec<&Message> = messages.first().filter(|m| m.role == Role::System).into_iter().collect();
            picked.push(&messages[user]);
            let picked: Vec<Message> = picked.into_iter().cloned().collect();
            match render(template, &chat_messages(&picked), true) {
                Ok(text) => text,
                Err(skip) => return Ok(Err(skip)),
            }
        }
        None => messages[user].content.clone(),
    };
    let tokens = tokenizer.encode(&text)?;
    Ok(if tokens.len() > max_prompt_tokens { Err(SkipReason::PromptTooLong) } else { Ok(tokens) })
}

/// The whole conversation, cut to `max_seq_len` tokens, trained on its assistant spans. Turns
/// before the first user message (other than system messages) are dropped: a conversation
/// cannot open with the assistant under a chat template that injects a default system prompt
/// (SmolLM2's), and ShareGPT has many that do (greetings, scraped fragments).
pub fn ground_truth(
    tokenizer: &TextTokenizer,
    template: &ChatTemplate,
    conversation: &Conversation,
    max_seq_len: usize,
) -> Result<Built<Labeled>, ModelError> {
    let Some(first_user) = conversation.messages.iter().position(|m| m.role == Role::User) else {
        return Ok(Err(SkipReason::NoUserMessage));
    };
    let kept: Vec<Message> = conversation.messages[..first_user]
        .iter()
        .filter(|m| m.role == Role::System)
        .chain(&conversation.messages[first_user..])
        .cloned()
        .collect();
    let messages = chat_messages(&kept);
    let full = match render(template, &messages, false) {
        Ok(text) => tokenizer.encode(&text)?,
        Err(skip) => return Ok(Err(skip)),
    };
    let mut loss_mask = vec![false; full.len()];
    for (i, m) in kept.iter().enumerate() {
        if m.role != Role::Assistant {
            continue;
        }
        let (before, through) = match (render(template, &messages[..i], true), render(template, &messages[..=i], false))
        {
            (Ok(a), Ok(b)) => (tokenizer.encode(&a)?, tokenizer.encode(&b)?),
            (Err(skip), _) | (_, Err(skip)) => return Ok(Err(skip)),
        };
        if before.len() >= max_seq_len {
            break;
        }
        // BPE may merge the template's last token before the reply with the reply's first
        // (`assistant\n` + `\n\nSure` → `\n\n\n`, `Sure`), and likewise at its end: the span
        // starts where the tokens first differ. More than one merged token means the prefix
        // renders differently, and the conversation is skipped.
        let start = common_prefix(&before, &through);
        let end = common_prefix(&through, &full);
        if start + 1 < before.len() || end + 1 < through.len() || end <= start {
            return Ok(Err(SkipReason::TemplatePrefix));
        }
        loss_mask[start..end].fill(true);
    }
    let mut tokens = full;
    tokens.truncate(max_seq_len);
    loss_mask.truncate(max_seq_len);
    Ok(if loss_mask.contains(&true) { Ok(Labeled { tokens, loss_mask }) } else { Err(SkipReason::NoAssistantTurn) })
}
