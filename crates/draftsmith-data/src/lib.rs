//! Datasets for draftsmith: input conversations in, distilled training records out.
//!
//! - [`read_conversations`] reads prompts and reference answers from ShareGPT JSON, JSONL or
//!   Parquet (the accepted schemas are documented in [`conversations`]).
//! - [`ShardWriter`] writes a distilled dataset — `manifest.json` plus Parquet shards (layout in
//!   [`schema`]) — so that a killed run resumes where it stopped; [`read_records`] reads it
//!   back, validated. A distillation split over machines (`distill --shard I/N`) writes one
//!   dataset per part under the output directory ([`Part`]); [`read_records`] reads the parts
//!   as one dataset.
//!
//! - [`hidden`] writes and reads cached target hidden states (`draftsmith hidden`): f16
//!   safetensors shards + manifest, resumable, tied to the target and the dataset.
//! - [`books`] reads long texts (Gutenberg, KJV) and splits them by book for TokenSwift.
//!
//! This crate knows nothing of models or tokenizers: records carry token ids only.

mod arrow_util;
pub mod books;
pub mod conversations;
mod error;
pub mod hidden;
mod leftovers;
mod manifest;
mod parts;
mod record;
pub mod schema;
mod shards;

pub use conversations::{read_conversations, Conversation, Message, ReadReport, Role};
pub use error::DataError;
pub use manifest::{
    read_manifest, DistillManifest, DistillParams, ShardInfo, TargetId, FORMAT_VERSION, INPUT_SHA256, MANIFEST_FILE,
};
pub use parts::{Part, PartInfo};
pub use record::{DistillRecord, RecordSource, NO_TOKEN};
pub use shards::{read_records, ShardWriter};
