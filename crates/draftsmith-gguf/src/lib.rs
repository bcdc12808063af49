//! A pure-Rust reader for GGUF (v2 and v3) files and a dequantizer for the ggml tensor types
//! that small language models use: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and
//! Q6_K.
//!
//! ```no_run
//! use draftsmith_gguf::GgufFile;
//!
//! let gguf = GgufFile::open("model.gguf")?;
//! let arch = gguf.get_str("general.architecture")?;
//! let layers = gguf.get_u64(&format!("{arch}.block_count"))?;
//! let embd = gguf.dequantize("token_embd.weight")?; // row-major, dims[0] fastest
//! # Ok::<(), draftsmith_gguf::GgufError>(())
//! ```
//!
//! The file is memory-mapped; tensor bytes are borrowed from the map
//! ([`GgufFile::tensor_bytes`]) and dequantized on request. Dequantization reproduces ggml's
//! arithmetic exactly (tests compare bit for bit with gguf-py).

pub mod dequant;
mod error;
mod file;
mod getters;
mod metadata;
mod parse;
mod reader;
mod tensor;
mod types;

pub use error::{DequantError, GgufError};
pub use file::GgufFile;
pub use metadata::MetadataValue;
pub use parse::{DEFAULT_ALIGNMENT, MAX_METADATA, MAX_TENSORS};
pub use tensor::{TensorInfo, MAX_DIMS};
pub use types::{GgmlType, QK_K};
