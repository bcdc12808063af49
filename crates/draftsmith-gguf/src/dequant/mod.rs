//! Dequantization of ggml blocks to `f32`, with exactly ggml's arithmetic (same operation order,
//! so results match `ggml-quants.c` and gguf-py's `gguf.quants.dequantize` bit for bit).
//!
//! [`dequantize`] and [`dequantize_into`] validate lengths and dispatch on the type; the
//! per-type functions (`dequantize_q4_k`, …) take already-sized slices and panic otherwise.
//! All kernels are plain loops over fixed-size blocks, written so that the compiler vectorizes
//! the inner loops.

mod float;
mod kquants;
mod legacy;
mod repack;

pub use float::{dequantize_bf16, dequantize_f16, dequantize_f32};
pub use kquants::{dequantize_q4_k, dequantize_q5_k, dequantize_q6_k, scale_min_k4};
pub use legacy::{dequantize_q4_0, dequantize_q4_1, dequantize_q5_0, dequantize_q5_1, dequantize_q8_0};
pub use repack::{q4_0_as_q8_0, q4_k_as_q4_1, q5_0_as_q8_0};

pub use crate::error::DequantError;
use crate::types::GgmlType;

/// Number of bytes that `n_elements` values of `dtype` occupy.
///
/// Fails if `dtype` is unsupported or `n_elements` is not a whole number of blocks.
pub fn byte_len(dtype: GgmlType, n_elements: usize) -> Result<usize, DequantError> {
    if !dtype.is_supported() {
        return Err(DequantError::Unsupported(dtype));
    }
    let block_size = dtype.block_size();
    if !n_elements.is_multiple_of(block_size) {
        return Err(DequantError::PartialBlock { dtype, n_elements, block_size });
    }
    Ok(n_elements / block_size * dtype.type_size())
}

/// Dequantizes `bytes`, holding exactly `n_elements` values of `dtype`, into a new vector.
pub fn dequantize(dtype: GgmlType, bytes: &[u8], n_elements: usize) -> Result<Vec<f32>, DequantError> {
    check_bytes(dtype, bytes, n_elements)?;
    let mut out = vec![0.0f32; n_elements];
    dequantize_into(dtype, bytes, &mut out)?;
    Ok(out)
}

/// Dequantizes `bytes` into `out`; `bytes` must hold exactly `out.len()` values of `dtype`.
pub fn dequantize_into(dtype: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<(), DequantError> {
    check_bytes(dtype, bytes, out.len())?;
    let kernel: fn(&[u8], &mut [f32]) = match dtype {
        GgmlType::F32 => dequantize_f32,
        GgmlType::F16 => dequantize_f16,
        GgmlType::BF16 => dequantize_bf16,
        GgmlType::Q4_0 => dequantize_q4_0,
        GgmlType::Q4_1 => dequantize_q4_1,
        GgmlType::Q5_0 => dequantize_q5_0,
        GgmlType::Q5_1 => dequantize_q5_1,
        GgmlType::Q8_0 => dequantize_q8_0,
        GgmlType::Q4_K => dequantize_q4_k,
        GgmlType::Q5_K => dequantize_q5_k,
        GgmlType::Q6_K => dequantize_q6_k,
        other => return Err(DequantError::Unsupported(other)),
    };
    kernel(bytes, out);
    Ok(())
}

/// The byte offsets of a block's f16 scales (`d`, and `m` / `dmin` where the type has one);
/// empty for the plain float types, whose values are checked as values.
fn scale_offsets(dtype: GgmlType) -> &'static [usize] {
    match dtype {
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => &[0],
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4_K | GgmlType::Q5_K => &[0, 2],
        // `ql` 128, `qh` 64, 16 scales, then `d`.
        GgmlType::Q6_K => &[208],
        _ => &[],
    }
}

/// The first block of `bytes` (whole `dtype` blocks) whose f16 scale is NaN or infinite, with
/// that scale: a damaged or badly converted file. The int8 kernels would turn such a block's
/// NaN into finite numbers, so it is found at load rather than in the logits.
pub fn first_non_finite_scale(dtype: GgmlType, bytes: &[u8]) -> Option<(usize, f32)> {
    let offsets = scale_offsets(dtype);
    if offsets.is_empty() {
        return None;
    }
    // The f16 exponent all ones: NaN or infinity.
    let bad = |bits: u16| bits & 0x7C00 == 0x7C00;
    bytes.chunks_exact(dtype.type_size()).enumerate().find_map(|(i, block)| {
        offsets
            .iter()
            .find(|&&at| bad(u16::from_le_bytes([block[at], block[at + 1]])))
            .map(|&at| (i, f16_at(block, at)))
    })
}

/// Checks that `bytes` holds exactly `n_elements` values of `dtype`.
fn check_bytes(dtype: GgmlType, bytes: &[u8], n_elements: usize) -> Result<(), DequantError> {
    let expected = byte_len(dtype, n_elements)?;
    if bytes.len() != expected {
        return Err(DequantError::ByteLength { dtype, n_elements, expected, actual: bytes.len() });
    }
    Ok(())
}

/// Panics unless `bytes` and `out` are the same whole number of `dtype` blocks.
/// Used by the per-type kernels, whose slices the caller must size.
fn assert_blocks(dtype: GgmlType, bytes: &[u8], out: &[f32]) {
    let (block, size) = (dtype.block_size(), dtype.type_size());
    assert!(
        out.len().is_multiple_of(block) && bytes.len() == out.len() / block * size,
        "{dtype}: {} bytes do not hold exactly {} values (block {block}, {size} bytes per block)",
        bytes.len(),
        out.len()
    );
}

/// Panics unless `bytes` is a whole number of `dtype` blocks.
fn assert_block_bytes(dtype: GgmlType, bytes: &[u8]) {
    let size = dtype.type_size();
    assert!(bytes.len().is_multiple_of(size), "{dtype}: {} bytes are not whole {size}-byte blocks", bytes.len());
}

/// Reads the little-endian f16 at `bytes[at..at + 2]` as f32.
#[inline(always)]
fn f16_at(bytes: &[u8], at: usize) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([bytes[at], bytes[at + 1]])).to_f32()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_errors() {
        let err = dequantize(GgmlType::Q4_0, &[0; 18], 16).unwrap_err();
        assert!(matches!(err, DequantError::PartialBlock { block_size: 32, .. }), "{err}");
        let err = dequantize(GgmlType::Q4_0, &[0; 17], 32).unwrap_err();
        assert_eq!(err.to_string(), "32 elements of Q4_0 need 18 bytes, got 17");
        let err = dequantize(GgmlType::Q2_K, &[0; 84], 256).unwrap_err();
        assert_eq!(err, DequantError::Unsupported(GgmlType::Q2_K));
        let err = dequantize_into(GgmlType::F32, &[0; 8], &mut [0.0; 3]).unwrap_err();
        assert!(matches!(err, DequantError::ByteLength { expected: 12, actual: 8, .. }));
    }

    #[test]
    fn a_non_finite_scale_is_found_with_its_block() {
        let mut q4_1 = vec![0u8; 3 * 20];
        assert_eq!(first_non_finite_scale(GgmlType::Q4_1, &q4_1), None);
        q4_1[2 * 20 + 2..][..2].copy_from_slice(&half::f16::INFINITY.to_bits().to_le_bytes());
        assert_eq!(first_non_finite_scale(GgmlType::Q4_1, &q4_1), Some((2, f32::INFINITY)));
        let mut q6_k = vec![0u8; 2 * 210];
        q6_k[210 + 208..][..2].copy_from_slice(&half::f16::NAN.to_bits().to_le_bytes());
        let (block, scale) = first_non_finite_scale(GgmlType::Q6_K, &q6_k).unwrap();
        assert!(block == 1 && scale.is_nan());
        // The sixteen 8-bit sub-block scales before `d` are not f16.
        assert_eq!(
            first_non_finite_scale(GgmlType::Q6_K, &[0xFF; 208].iter().chain(&[0; 2]).copied().collect::<Vec<_>>()),
            None
        );
        assert_eq!(first_non_finite_scale(GgmlType::F16, &[0xFF; 4]), None);
    }

    #[test]
    fn empty_input_is_fine() {
        assert_eq!(dequantize(GgmlType::Q6_K, &[], 0).unwrap(), Vec::<f32>::new());
    }

    #[test]
    #[should_panic(expected = "Q8_0")]
    fn kernels_panic_on_mis_sized_slices() {
        dequantize_q8_0(&[0; 34], &mut [0.0; 31]);
    }
}
