//! The token-embedding table: a dense tensor, or a GGUF file's table kept in its own block
//! format and dequantized a row at a time as tokens are embedded.

use std::sync::Arc;

use burn::tensor::{backend::Backend, Int, Tensor, TensorData};
use draftsmith_gguf::{dequant, GgmlType};

use crate::model::host_f32;

/// `[vocab, hidden]` token embeddings.
#[derive(Debug, Clone)]
pub(crate) enum Embeddings<B: Backend> {
    /// f32 on the model's device (safetensors sources, and tables whose rows split blocks).
    Dense(Tensor<B, 2>),
    /// A GGUF table as stored (`row_bytes` a row). A token's row is dequantized when it is
    /// embedded — the values a whole-table dequantization gives, bit for bit, since a block never
    /// straddles two rows — so loading neither dequantizes the table nor holds it as f32:
    /// Qwen2.5-Coder-1.5B's (Q4_K, 151936 × 1536) is 131 MB against 933 MB as f32, which loading
    /// wrote twice (the values, then the tensor built from them), each page faulted in fresh.
    Blocks { dtype: GgmlType, bytes: Arc<Vec<u8>>, row_bytes: usize, cols: usize },
}

impl<B: Backend> Embeddings<B> {
    /// A GGUF table of `rows × cols` values of `dtype` as stored; `None` where a row is not a
    /// whole number of blocks (or the bytes do not match the shape).
    pub(crate) fn blocks(dtype: GgmlType, bytes: Vec<u8>, rows: usize, cols: usize) -> Option<Self> {
        let row_bytes = dequant::byte_len(dtype, cols).ok()?;
        (bytes.len() == rows * row_bytes).then(|| Self::Blocks { dtype, bytes: Arc::new(bytes), row_bytes, cols })
    }

    /// The rows of `tokens` on the host, `[n, hidden]` row-major.
    pub(crate) fn rows_host(&self, tokens: &[u32], device: &B::Device) -> Vec<f32> {
        match self {
            Self::Dense(_) => host_f32(self.rows(tokens, device)),
            Self::Blocks { dtype, bytes, row_bytes, cols } => {
                let mut out = vec![0.0f32; tokens.len() * cols];
                for (&t, row) in tokens.iter().zip(out.chunks_exact_mut(*cols)) {
                    let block = &bytes[t as usize * row_bytes..][..*row_bytes];
                    dequant::dequantize_into(*dtype, block, row).expect("a row of whole blocks (checked at load)");
                }
                out
            }
        }
    }

    /// The rows of `tokens` on `device`, `[n, hidden]`.
    pub(crate) fn rows(&self, tokens: &[u32], device: &B::Device) -> Tensor<B, 2> {
        match self {
            Self::Dense(table) => {
                let ids: Vec<i32> = tokens.iter().map(|&t| t as i32).collect();
                let ids = Tensor::<B, 1, Int>::from_data(TensorData::new(ids, [tokens.len()]), device);
                table.clone().select(0, ids)
            }
            Self::Blocks { cols, .. } => {
                Tensor::from_data(TensorData::new(self.rows_host(tokens, device), [tokens.len(), *cols]), device)
            }
        }
    }

    /// The whole table on `device` (dequantized on each call for a block table).
    pub(crate) fn table(&self, device: &B::Device) -> Tensor<B, 2> {
        match self {
            Self::Dense(table) => table.clone(),
            Self::Blocks { dtype, bytes, row_bytes, cols } => {
                let rows = bytes.len() / row_bytes;
                let values = dequant::dequantize(*dtype, bytes, rows * cols).expect("whole blocks (checked at load)");
                Tensor::from_data(TensorData::new(values, [rows, *cols]), device)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use burn::backend::Flex;

    use super::*;

    /// Random blocks of `dtype` whose f16 scales are finite (bits below the exponent's top).
    fn random_blocks(dtype: GgmlType, rows: usize, cols: usize, seed: u64) -> Vec<u8> {
        let n = dequant::byte_len(dtype, rows * cols).unwrap();
        let mut state = seed;
        let mut bytes: Vec<u8> = (0..n)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (state >> 33) as u8
            })
            .collect();
        // Clear bit 6 of every byte that may be a scale's high byte, so no f16 is inf or NaN.
        bytes.iter_mut().skip(1).step_by(2).for_each(|b| *b &= 0xBF);
        bytes
    }

    #[test]
    fn a_block_table_embeds_the_rows_a_whole_table_dequantization_gives_bit_for_bit() {
        let device = Default::default();
        for (dtype, cols) in [(GgmlType::Q8_0, 64), (GgmlType::Q4_K, 512), (GgmlType::Q6_K, 256), (GgmlType::F16, 40)] {
            let rows = 7;
            let bytes = random_blocks(dtype, rows, cols, cols as u64);
            let whole = dequant::dequantize(dtype, &bytes, rows * cols).unwrap();
            let table = Embeddings::<Flex>::blocks(dtype, bytes, rows, cols).expect("whole blocks a row");
            let tokens = [3u32, 0, 6, 3];
            let rows_host = table.rows_host(&tokens, &device);
            for (&t, row) in tokens.iter().zip(rows_host.chunks_exact(cols)) {
                let want = &whole[t as usize * cols..][..cols];
                assert!(row.iter().zip(want).all(|(a, b)| a.to_bits() == b.to_bits()), "{dtype:?} row {t}");
            }
            assert_eq!(host_f32(table.rows(&tokens, &device)), rows_host, "{dtype:?}");
            assert_eq!(host_f32(table.table(&device)), whole, "{dtype:?}");
        }
        // A row that would split a block is not a block table.
        assert!(Embeddings::<Flex>::blocks(GgmlType::Q8_0, vec![0; 34 * 3], 2, 48).is_none());
    }
}
