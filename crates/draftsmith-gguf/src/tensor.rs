//! Tensor descriptors as stored in a GGUF file's tensor-info section.

use crate::types::GgmlType;

/// ggml's maximum number of dimensions.
pub const MAX_DIMS: usize = 4;

/// One tensor's name, shape, type and data location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// The tensor's name, e.g. `blk.0.attn_q.weight`.
    pub name: String,
    /// The shape in ggml order: `dims[0]` is the fastest-varying (row length). A PyTorch weight
    /// of shape `[out, in]` is stored as `dims = [in, out]`.
    pub dims: Vec<u64>,
    /// The element type.
    pub dtype: GgmlType,
    /// Byte offset of the tensor's data, relative to the start of the data section.
    pub offset: u64,
}

impl TensorInfo {
    /// Number of elements (product of `dims`; 1 for a zero-dimensional tensor).
    ///
    /// Tensors returned by [`crate::GgufFile`] are validated not to overflow; for a hand-made
    /// info the product saturates at `u64::MAX`.
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().fold(1u64, |acc, &d| acc.saturating_mul(d))
    }

    /// Number of bytes of the tensor's data (whole blocks of its type).
    pub fn n_bytes(&self) -> u64 {
        let blocks = self.n_elements() / self.dtype.block_size() as u64;
        blocks.saturating_mul(self.dtype.type_size() as u64)
    }

    /// The shape in row-major (PyTorch/NumPy) order: `dims` reversed, as `usize`.
    pub fn shape(&self) -> Vec<usize> {
        self.dims.iter().rev().map(|&d| d as usize).collect()
    }

    /// Checks what ggml requires of a shape: at most [`MAX_DIMS`] dims, an element count that
    /// does not overflow, and rows made of whole blocks. Returns a description of the problem.
    pub(crate) fn shape_problem(&self) -> Option<String> {
        if self.dims.len() > MAX_DIMS {
            return Some(format!("{} dims, ggml allows at most {MAX_DIMS}", self.dims.len()));
        }
        let product = self.dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d));
        let Some(n_elements) = product.filter(|&n| n <= i64::MAX as u64) else {
            return Some("element count overflows".to_string());
        };
        let block = self.dtype.block_size() as u64;
        let row = self.dims.first().copied().unwrap_or(1);
        if row % block != 0 || n_elements % block != 0 {
            return Some(format!("row length {row} is not a multiple of the {} block size {block}", self.dtype));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(dims: Vec<u64>, dtype: GgmlType) -> TensorInfo {
        TensorInfo { name: "t".into(), dims, dtype, offset: 0 }
    }

    #[test]
    fn sizes() {
        let t = info(vec![576, 49152], GgmlType::Q8_0);
        assert_eq!(t.n_elements(), 576 * 49152);
        assert_eq!(t.n_bytes(), 576 / 32 * 34 * 49152);
        assert_eq!(t.shape(), vec![49152, 576]);
        assert_eq!(info(vec![], GgmlType::F32).n_elements(), 1);
        assert_eq!(info(vec![256, 2], GgmlType::Q6_K).n_bytes(), 2 * 210);
    }

    #[test]
    fn shape_problems() {
        assert!(info(vec![64, 3], GgmlType::Q4_0).shape_problem().is_none());
        assert!(info(vec![48, 2], GgmlType::Q4_0).shape_problem().unwrap().contains("block size"));
        assert!(info(vec![1; 5], GgmlType::F32).shape_problem().unwrap().contains("at most"));
        let huge = info(vec![u64::MAX, 2], GgmlType::F32);
        assert!(huge.shape_problem().unwrap().contains("overflow"));
    }
}
