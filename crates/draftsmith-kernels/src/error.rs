//! Typed errors for building a [`QMatrix`](crate::QMatrix).

use crate::QFormat;

/// Why a quantized matrix could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// The number of input columns is not a multiple of the block size.
    #[error("matrix has {cols} columns, which is not a multiple of the block size {block}")]
    ColsNotBlockMultiple {
        /// The offending column count.
        cols: usize,
        /// Elements per block of the format (32, or 256 for a K-quant super-block).
        block: usize,
    },
    /// The format has no quantizer from f32 values (its matrices come from GGUF blocks).
    #[error("{format:?} matrices are read from GGUF blocks; there is no quantizer from f32 values")]
    NoQuantizer {
        /// The format asked for.
        format: QFormat,
    },
    /// The raw GGUF block bytes do not match `rows × cols/32 × block size`.
    #[error("{format:?} matrix of {rows}×{cols} needs {expected} bytes of blocks, got {actual}")]
    ByteLength {
        /// Block format of the data.
        format: QFormat,
        /// Output rows.
        rows: usize,
        /// Input columns.
        cols: usize,
        /// Required number of bytes.
        expected: usize,
        /// Number of bytes supplied.
        actual: usize,
    },
    /// An f32 matrix does not hold `rows × cols` values.
    #[error("f32 matrix of {rows}×{cols} needs {expected} values, got {actual}")]
    ValueCount {
        /// Output rows.
        rows: usize,
        /// Input columns.
        cols: usize,
        /// Required number of values.
        expected: usize,
        /// Number of values supplied.
        actual: usize,
    },
    /// `rows × cols` does not fit in `usize`.
    #[error("matrix shape {rows}×{cols} overflows usize")]
    ShapeOverflow {
        /// Output rows.
        rows: usize,
        /// Input columns.
        cols: usize,
    },
    /// A part of a stacked matrix other than the last has rows that do not fill whole row groups.
    #[error("a stacked part other than the last has {rows} rows, not a multiple of the row group {group}")]
    PartRows {
        /// The part's rows.
        rows: usize,
        /// Rows per packed group.
        group: usize,
    },
}
