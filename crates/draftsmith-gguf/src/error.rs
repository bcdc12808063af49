//! Typed errors for reading GGUF files and dequantizing their tensors.
//!
//! Every [`GgufError`] names the file it concerns; parse errors also say at which byte offset and
//! what was being read, so a message alone is enough to locate a corrupt file.

use std::path::PathBuf;

use crate::types::GgmlType;

/// An error raised while opening, parsing or reading a GGUF file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GgufError {
    /// The file could not be opened, measured or memory-mapped.
    #[error("{path}: cannot read GGUF file: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying I/O error.
        source: std::io::Error,
    },

    /// The file is shorter than the fixed GGUF header.
    #[error(
        "{path}: file is {len} bytes, shorter than the {needed}-byte GGUF header \
         (empty or truncated download?)"
    )]
    TooShort {
        /// The file.
        path: PathBuf,
        /// Length of the file in bytes.
        len: u64,
        /// Length of the fixed header (magic, version and the two counts).
        needed: u64,
    },

    /// The first four bytes are not `GGUF`.
    #[error("{path}: not a GGUF file: magic bytes are {found:02x?} ({shown:?}), expected \"GGUF\"")]
    BadMagic {
        /// The file.
        path: PathBuf,
        /// The four bytes found at offset 0.
        found: [u8; 4],
        /// The same bytes shown as (lossy) text.
        shown: String,
    },

    /// The header version is not 2 or 3.
    #[error("{path}: unsupported GGUF version {version} (supported: 2, 3){hint}")]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version read from the header.
        version: u32,
        /// Extra explanation (e.g. a big-endian file), possibly empty.
        hint: String,
    },

    /// The file ends in the middle of the header, the metadata or the tensor infos.
    #[error(
        "{path}: truncated: needed {needed} bytes at offset {offset} to read {what}, but the file is {file_len} bytes"
    )]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Byte offset at which the read started.
        offset: u64,
        /// Number of bytes the read needed.
        needed: u64,
        /// What was being read.
        what: String,
        /// Length of the file in bytes.
        file_len: u64,
    },

    /// A count or length is too large to be plausible for this file.
    #[error("{path}: absurd {what}: {value} at offset {offset} (limit {limit}); the file is corrupt or truncated")]
    AbsurdValue {
        /// The file.
        path: PathBuf,
        /// Byte offset of the field.
        offset: u64,
        /// The kind of count or length.
        what: String,
        /// The value read.
        value: u64,
        /// The largest value accepted.
        limit: u64,
    },

    /// A string is not valid UTF-8.
    #[error("{path}: invalid UTF-8 in {what} at offset {offset}")]
    InvalidUtf8 {
        /// The file.
        path: PathBuf,
        /// Byte offset of the string's bytes.
        offset: u64,
        /// What the string is.
        what: String,
    },

    /// A metadata value has a type id that GGUF does not define.
    #[error("{path}: metadata key {key:?} has unknown value type id {type_id} at offset {offset}")]
    UnknownValueType {
        /// The file.
        path: PathBuf,
        /// The metadata key.
        key: String,
        /// The type id read.
        type_id: u32,
        /// Byte offset of the type id.
        offset: u64,
    },

    /// The same metadata key or tensor name appears twice.
    #[error("{path}: duplicate {what} {name:?}")]
    Duplicate {
        /// The file.
        path: PathBuf,
        /// "metadata key" or "tensor name".
        what: &'static str,
        /// The repeated key or name.
        name: String,
    },

    /// `general.alignment` is zero or not a power of two.
    #[error("{path}: general.alignment {alignment} is not a non-zero power of two")]
    BadAlignment {
        /// The file.
        path: PathBuf,
        /// The alignment read.
        alignment: u64,
    },

    /// A tensor's type id is not a ggml type.
    #[error("{path}: tensor {tensor:?} has unknown ggml type id {type_id}")]
    UnknownTensorType {
        /// The file.
        path: PathBuf,
        /// The tensor name.
        tensor: String,
        /// The type id read.
        type_id: u32,
    },

    /// A tensor's type is a known ggml type that this crate cannot dequantize.
    #[error(
        "{path}: tensor {tensor:?} has ggml type {dtype}, which draftsmith-gguf does not support \
         (supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K)"
    )]
    UnsupportedTensorType {
        /// The file.
        path: PathBuf,
        /// The tensor name.
        tensor: String,
        /// The tensor's type.
        dtype: GgmlType,
    },

    /// A tensor's shape is invalid (too many dims, overflow, row not a whole number of blocks).
    #[error("{path}: tensor {tensor:?} has invalid shape {dims:?}: {problem}")]
    BadShape {
        /// The file.
        path: PathBuf,
        /// The tensor name.
        tensor: String,
        /// The dims read (ggml order).
        dims: Vec<u64>,
        /// What is wrong.
        problem: String,
    },

    /// A tensor's data offset is not a multiple of the file's alignment.
    #[error("{path}: tensor {tensor:?} data offset {offset} is not a multiple of the alignment {alignment}")]
    MisalignedTensor {
        /// The file.
        path: PathBuf,
        /// The tensor name.
        tensor: String,
        /// The offset relative to the data section.
        offset: u64,
        /// The file's alignment.
        alignment: u64,
    },

    /// A tensor's bytes extend past the end of the file.
    #[error(
        "{path}: tensor {tensor:?} data extends past end of file: bytes {start}..{end} \
         but the file is {file_len} bytes (truncated download?)"
    )]
    TensorOutOfBounds {
        /// The file.
        path: PathBuf,
        /// The tensor name.
        tensor: String,
        /// Absolute start offset of the tensor's data.
        start: u64,
        /// Absolute end offset (exclusive) of the tensor's data.
        end: u64,
        /// Length of the file in bytes.
        file_len: u64,
    },

    /// A tensor's data is followed by at least the alignment's worth of unused bytes before the
    /// next tensor's: the table declares it smaller than the data written for it (typically a
    /// tensor whose declared type or shape was changed). GGUF writers place each tensor right
    /// after the previous one, padded to the alignment.
    #[error(
        "{path}: tensor {tensor:?} ({dtype}, bytes {start}..{end}) is followed by {} unused bytes \
         before tensor {next:?} (at byte {next_start}); writers place each tensor right after the \
         previous one, padded to {alignment} bytes, so the tensor table is corrupt (wrong type or \
         shape?)",
        next_start - end
    )]
    TensorGap {
        /// The file.
        path: PathBuf,
        /// The tensor followed by the gap.
        tensor: String,
        /// Its declared type.
        dtype: GgmlType,
        /// Absolute start offset of its data.
        start: u64,
        /// Absolute end offset (exclusive) of its data, as declared.
        end: u64,
        /// The next tensor in the file.
        next: String,
        /// Absolute start offset of the next tensor's data.
        next_start: u64,
        /// The file's alignment.
        alignment: u64,
    },

    /// Two tensors' data ranges overlap: the tensor table is corrupt (typically a tensor whose
    /// declared type or shape was changed, so that its bytes reach into its neighbour's).
    #[error(
        "{path}: tensor {first:?} ({first_dtype}, bytes {first_start}..{first_end}) overlaps tensor \
         {second:?} ({second_dtype}, bytes {second_start}..{second_end}); the tensor table is corrupt \
         (wrong type or shape?)"
    )]
    OverlappingTensors {
        /// The file.
        path: PathBuf,
        /// The tensor whose data starts first.
        first: String,
        /// Its declared type.
        first_dtype: GgmlType,
        /// Absolute start offset of its data.
        first_start: u64,
        /// Absolute end offset (exclusive) of its data.
        first_end: u64,
        /// The tensor whose data starts inside the first one's.
        second: String,
        /// Its declared type.
        second_dtype: GgmlType,
        /// Absolute start offset of its data.
        second_start: u64,
        /// Absolute end offset (exclusive) of its data.
        second_end: u64,
    },

    /// No tensor of that name exists.
    #[error("{path}: no tensor named {name:?}")]
    TensorNotFound {
        /// The file.
        path: PathBuf,
        /// The requested name.
        name: String,
    },

    /// A metadata key is missing.
    #[error("{path}: missing metadata key {key:?}")]
    MissingKey {
        /// The file.
        path: PathBuf,
        /// The requested key.
        key: String,
    },

    /// A metadata value has a different type than requested.
    #[error("{path}: metadata key {key:?} has the wrong type: expected {expected}, found {found}")]
    WrongType {
        /// The file.
        path: PathBuf,
        /// The requested key.
        key: String,
        /// The type the caller asked for.
        expected: &'static str,
        /// The type found (for arrays, with the offending element's index).
        found: String,
    },

    /// Dequantizing a tensor failed.
    #[error("{path}: cannot dequantize tensor {tensor:?}: {source}")]
    Dequant {
        /// The file.
        path: PathBuf,
        /// The tensor name.
        tensor: String,
        /// The underlying error.
        source: DequantError,
    },
}

/// An error raised by the dequantization kernels, which see only bytes (no file).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DequantError {
    /// The type is known but has no dequantization kernel here.
    #[error("ggml type {0} is not supported for dequantization")]
    Unsupported(GgmlType),

    /// The element count is not a whole number of blocks.
    #[error("{n_elements} elements of {dtype} is not a multiple of its block size {block_size}")]
    PartialBlock {
        /// The type.
        dtype: GgmlType,
        /// The element count requested.
        n_elements: usize,
        /// The type's block size.
        block_size: usize,
    },

    /// The byte slice does not hold exactly the requested number of blocks.
    #[error("{n_elements} elements of {dtype} need {expected} bytes, got {actual}")]
    ByteLength {
        /// The type.
        dtype: GgmlType,
        /// The element count requested.
        n_elements: usize,
        /// Bytes needed.
        expected: usize,
        /// Bytes given.
        actual: usize,
    },
}
