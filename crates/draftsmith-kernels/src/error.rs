//! Typed errors for building a [`QMatrix`](crate::QMatrix).

use crate::QFormat;

/// Why a quantized matrix could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// The number of input columns is not a multiple of the 32-element block size.
    #[error("matrix has {cols} columns, which is not a multiple of the block size 32")]
    ColsNotBlockMultiple {
        /// The offending column count.
        cols: usize,
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
}
