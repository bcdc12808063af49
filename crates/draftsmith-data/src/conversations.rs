//! Input conversations: the prompts (and reference answers) a distillation run starts from.
//!
//! [`read_conversations`] reads three formats. The format is chosen from the content, not the
//! name: a file ending in `.parquet` or starting with the bytes `PAR1` is Parquet; otherwise the
//! first non-blank character decides — `[` is a JSON array, `{` is JSONL.
//!
//! # JSON array (ShareGPT)
//!
//! A top-level array of records, typically ShareGPT:
//!
//! ```json
//! [{"id": "QWJhYvA_0", "conversations": [{"from": "human", "value": "Hi"},
//!                                         {"from": "gpt", "value": "Hello!"}]}]
//! ```
//!
//! `from` is `human` (user), `gpt`, `chatgpt`, `bing` or `bard` (assistant) or `system`. The
//! array is read record by record, so a file cut off mid-record (the public
//! `ShareGPT_V3_unfiltered_cleaned_split.json` is) still yields every complete record, with
//! [`ReadReport::truncated_tail`] set. Elements may use any of the JSONL record shapes below.
//!
//! # JSONL
//!
//! One JSON object per line (blank lines are ignored). The id is the first of `id`,
//! `question_id`, `task_id` present (a string or an integer); without one, the record's 0-based
//! position is used. The conversation is the first present of:
//!
//! - `messages`: `[{"role": "system"|"user"|"assistant", "content": "..."}]`;
//! - `conversations`: ShareGPT turns as above;
//! - `turns`: a list of strings, each a user message (multi-turn benchmarks such as MT-Bench;
//!   there are no assistant turns);
//! - `prompt`: one string, a single user message.
//!
//! Other fields are ignored. A line that is not such an object is an error naming the line.
//!
//! # Parquet
//!
//! Columns `id: Utf8` (optional; the row index is used without it) and
//! `messages: List<Struct<role: Utf8, content: Utf8>>` with roles as in JSONL `messages`.
//! Large/view string and list variants are accepted too; other columns are ignored.
//!
//! # Skipped conversations
//!
//! A conversation with no message, with only empty messages, or with a role outside the lists
//! above is not returned but counted in [`ReadReport::skipped`].

mod json;
mod parquet_in;

use std::io::Read;
use std::path::Path;

use serde::Deserialize;

use crate::error::DataError;

/// Who wrote a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// A system prompt.
    System,
    /// The human side.
    User,
    /// The model side.
    Assistant,
}

/// The chat-template role names, each with its role.
const CHAT_NAMES: [(&str, Role); 3] = [("system", Role::System), ("user", Role::User), ("assistant", Role::Assistant)];

/// ShareGPT's `from` values, each with its role.
const SHAREGPT_NAMES: [(&str, Role); 6] = [
    ("system", Role::System),
    ("human", Role::User),
    ("gpt", Role::Assistant),
    ("chatgpt", Role::Assistant),
    ("bing", Role::Assistant),
    ("bard", Role::Assistant),
];

/// The role `name` stands for in `names`.
fn lookup(names: &[(&str, Role)], name: &str) -> Option<Role> {
    names.iter().find(|(n, _)| *n == name).map(|&(_, role)| role)
}

/// `names`' names, comma separated, for a message.
fn listed(names: &[(&str, Role)]) -> String {
    names.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

impl Role {
    /// Parses a chat-template role name (`system`, `user`, `assistant`).
    pub fn from_chat(role: &str) -> Option<Role> {
        lookup(&CHAT_NAMES, role)
    }

    /// Parses a ShareGPT `from` value (`human`, `gpt`, `chatgpt`, `bing`, `bard`, `system`).
    pub fn from_sharegpt(from: &str) -> Option<Role> {
        lookup(&SHAREGPT_NAMES, from)
    }
}

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its text.
    pub content: String,
}

/// One input conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conversation {
    /// The id from the file (or the record's position when it has none).
    pub id: String,
    /// The messages in order.
    pub messages: Vec<Message>,
}

/// What [`read_conversations`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadReport {
    /// The usable conversations, in file order.
    pub conversations: Vec<Conversation>,
    /// Conversations dropped as empty or having an unknown role.
    pub skipped: usize,
    /// Why the first of them was dropped, naming it (``conversation `7`: role `tool` is not one
    /// of system, user, assistant``).
    pub first_skip: Option<String>,
    /// The file ended in the middle of a JSON array (every complete record before it is kept).
    /// Only known when the whole file was read, i.e. not when `limit` stopped reading early.
    pub truncated_tail: bool,
}

/// Reads conversations from a ShareGPT JSON, JSONL or Parquet file (see the module doc).
///
/// `limit` caps the number of conversations returned; reading stops as soon as it is reached,
/// so a small limit on a large JSON or JSONL file is fast.
pub fn read_conversations(path: &Path, limit: Option<usize>) -> Result<ReadReport, DataError> {
    let limit = limit.unwrap_or(usize::MAX);
    let mut file = std::fs::File::open(path).map_err(DataError::io(path))?;
    let mut head = [0u8; 4];
    let n = read_up_to(&mut file, &mut head).map_err(DataError::io(path))?;
    let is_parquet_name = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("parquet"));
    if is_parquet_name || &head[..n] == b"PAR1" {
        return parquet_in::read(path, limit);
    }
    json::read(path, limit)
}

/// Fills as much of `buf` as the reader has; returns the number of bytes read.
fn read_up_to(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..])? {
            0 => break,
            k => filled += k,
        }
    }
    Ok(filled)
}

/// Accumulates kept and skipped conversations up to a limit.
struct Collector {
    report: ReadReport,
    limit: usize,
}

impl Collector {
    fn new(limit: usize) -> Self {
        let report = ReadReport { conversations: Vec::new(), skipped: 0, first_skip: None, truncated_tail: false };
        Collector { report, limit }
    }

    /// Adds a conversation, or counts one skipped for the reason given; returns `true` once the
    /// limit is reached.
    fn add(&mut self, conversation: Result<Conversation, String>) -> bool {
        let skip = match conversation {
            Ok(c) if c.messages.iter().any(|m| !m.content.trim().is_empty()) => {
                self.report.conversations.push(c);
                None
            }
            Ok(c) => Some(format!("conversation `{}` has no message with text", c.id)),
            Err(reason) => Some(reason),
        };
        if let Some(reason) = skip {
            self.report.skipped += 1;
            self.report.first_skip.get_or_insert(reason);
        }
        self.full()
    }

    fn full(&self) -> bool {
        self.report.conversations.len() >= self.limit
    }
}

/// One ShareGPT turn.
#[derive(Deserialize)]
struct RawTurn {
    from: String,
    value: String,
}

/// One chat-template message.
#[derive(Deserialize)]
struct RawMessage {
    role: String,
    content: String,
}

/// Any of the record shapes of the module doc; unknown fields are ignored.
#[derive(Deserialize)]
struct RawRecord {
    id: Option<serde_json::Value>,
    question_id: Option<serde_json::Value>,
    task_id: Option<serde_json::Value>,
    messages: Option<Vec<RawMessage>>,
    conversations: Option<Vec<RawTurn>>,
    turns: Option<Vec<String>>,
    prompt: Option<String>,
}

/// The reason a conversation with an unknown role is skipped (`field` names the role list the
/// record used).
fn unknown_role(id: &str, role: &str, field: &str, known: &[(&str, Role)]) -> String {
    format!("conversation `{id}`: role `{role}` is not one of {} (`{field}`)", listed(known))
}

/// The roles of `messages` (JSONL and Parquet).
/// Parses one JSON record: `Err` is a malformed record, `Ok(Err(reason))` a conversation to
/// skip (an unknown role). `index` is the fallback id.
fn parse_record(bytes: &[u8], index: usize) -> Result<Result<Conversation, String>, String> {
    let raw: RawRecord = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    let id = match (raw.id.map(|v| ("id", v)))
        .or(raw.question_id.map(|v| ("question_id", v)))
        .or(raw.task_id.map(|v| ("task_id", v)))
    {
        Some((_, serde_json::Value::String(s))) => s,
        Some((_, serde_json::Value::Number(n))) if n.is_i64() || n.is_u64() => n.to_string(),
        Some((field, other)) => return Err(format!("`{field}` must be a string or an integer, got {other}")),
        None => index.to_string(),
    };
    let messages: Result<Vec<Message>, String> = if let Some(ms) = raw.messages {
        ms.into_iter()
            .map(|m| match Role::from_chat(&m.role) {
                Some(role) => Ok(Message { role, content: m.content }),
                None => Err(unknown_role(&id, &m.role, "messages", &CHAT_NAMES)),
            })
            .collect()
    } else if let Some(turns) = raw.conversations {
        turns
            .into_iter()
            .map(|t| match Role::from_sharegpt(&t.from) {
                Some(role) => Ok(Message { role, content: t.value }),
                None => Err(unknown_role(&id, &t.from, "conversations", &SHAREGPT_NAMES)),
            })
            .collect()
    } else if let Some(turns) = raw.turns {
        Ok(turns.into_iter().map(|content| Message { role: Role::User, content }).collect())
    } else if let Some(prompt) = raw.prompt {
        Ok(vec![Message { role: Role::User, content: prompt }])
    } else {
        return Err("record has none of the fields messages, conversations, turns, prompt".into());
    };
    Ok(messages.map(|messages| Conversation { id, messages }))
}
