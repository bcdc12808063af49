//! Datasets for draftsmith: input conversations in, distilled training records out.
//!
//! - [`read_conversations`] reads prompts and reference answers from ShareGPT JSON, JSONL or
//!   Parquet (the accepted schemas are documented in [`conversations`]).
//! - [`ShardWriter`] writes a distilled dataset — `manifest.json` plus Parquet shards — so that a
//!   killed run resumes where it stopped; [`read_records`] reads it back, validated.
//!
//! This crate knows nothing of models or tokenizers: records carry token ids only.

mod arrow_util;
pub mod conversations;
mod error;

pub use conversations::{read_conversations, Conversation, Message, ReadReport, Role};
pub use error::DataError;
