//! Block formats rewritten into the two the CPU matrix kernels multiply natively (Q8_0, Q4_1),
//! without going through f32 values and a fresh quantization.
//!
//! * [`q5_0_as_q8_0`], [`q4_0_as_q8_0`]: exact. `(q − 16)·d` and `(q − 8)·d` are a Q8_0 block with
//!   the same `d` and the signed values.
//! * [`q4_k_as_q4_1`]: each 32-value sub-block of a Q4_K super-block becomes one Q4_1 block with
//!   the same nibbles, scale `d·scale` and minimum `−dmin·min` rounded to f16 (relative error at
//!   most 2⁻¹¹ on each; the values themselves are not re-quantized). 20 bytes per 32 values
//!   instead of the 34 of a Q8_0 re-quantization, which is also off by up to half a Q8_0 step.

use super::legacy::{five_bit_values, nibbles, u32_at};
use super::{assert_block_bytes, f16_at};
use crate::types::{GgmlType, QK_K};

/// Bytes of one Q8_0 block.
const Q8_0_BYTES: usize = 34;
/// Bytes of one Q4_1 block.
const Q4_1_BYTES: usize = 20;

fn f16_bytes(v: f32) -> [u8; 2] {
    half::f16::from_f32(v).to_bits().to_le_bytes()
}

/// Q5_0 blocks as Q8_0 blocks holding the same values.
///
/// # Panics
/// If `bytes` is not a whole number of Q5_0 blocks.
pub fn q5_0_as_q8_0(bytes: &[u8]) -> Vec<u8> {
    assert_block_bytes(GgmlType::Q5_0, bytes);
    let mut out = Vec::with_capacity(bytes.len() / GgmlType::Q5_0.type_size() * Q8_0_BYTES);
    for block in bytes.chunks_exact(GgmlType::Q5_0.type_size()) {
        out.extend_from_slice(&block[..2]);
        let q = five_bit_values(u32_at(block, 2), nibbles(block, 6));
        out.extend(q.iter().map(|&v| (v as i8 - 16) as u8));
    }
    out
}

/// Q4_0 blocks as Q8_0 blocks holding the same values.
///
/// # Panics
/// If `bytes` is not a whole number of Q4_0 blocks.
pub fn q4_0_as_q8_0(bytes: &[u8]) -> Vec<u8> {
    assert_block_bytes(GgmlType::Q4_0, bytes);
    let mut out = Vec::with_capacity(bytes.len() / GgmlType::Q4_0.type_size() * Q8_0_BYTES);
    for block in bytes.chunks_exact(GgmlType::Q4_0.type_size()) {
        out.extend_from_slice(&block[..2]);
        let qs = nibbles(block, 2);
        // Elements 0..16 are the low nibbles, 16..32 the high ones.
        out.extend(qs.iter().map(|&b| ((b & 0x0F) as i8 - 8) as u8));
        out.extend(qs.iter().map(|&b| ((b >> 4) as i8 - 8) as u8));
    }
    out
}

/// Q4_K super-blocks as eight Q4_1 blocks each (see the module docs for the rounding).
///
/// # Panics
/// If `bytes` is not a whole number of Q4_K super-blocks.
pub fn q4_k_as_q4_1(bytes: &[u8]) -> Vec<u8> {
    assert_block_bytes(GgmlType::Q4_K, bytes);
    let mut out = Vec::with_capacity(bytes.len() / GgmlType::Q4_K.type_size() * 8 * Q4_1_BYTES);
    for block in bytes.chunks_exact(GgmlType::Q4_K.type_size()) {
        let (d, dmin) = (f16_at(block, 0), f16_at(block, 2));
        let packed: &[u8; 12] = block[4..16].try_into().expect("12 scale bytes");
        let (scales, mins) = super::scale_min_k4(packed);
        let qs = &block[16..16 + QK_K / 2];
        for s in 0..8 {
            // Sub-block `s` is the low (even `s`) or high (odd `s`) nibbles of group `s / 2`.
            let group = &qs[(s / 2) * 32..][..32];
            let nib = |l: usize| if s % 2 == 0 { group[l] & 0x0F } else { group[l] >> 4 };
            out.extend_from_slice(&f16_bytes(d * f32::from(scales[s])));
            out.extend_from_slice(&f16_bytes(-(dmin * f32::from(mins[s]))));
            // Q4_1 nibbles: low = element j, high = element j + 16.
            out.extend((0..16).map(|j| nib(j) | nib(j + 16) << 4));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dequant::{dequantize, dequantize_q4_1, dequantize_q8_0};

    /// Deterministic bytes with valid (finite, moderate) f16 fields at the given offsets.
    fn blocks(dtype: GgmlType, n: usize, f16_at: &[usize]) -> Vec<u8> {
        let size = dtype.type_size();
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut bytes: Vec<u8> = (0..n * size)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 24) as u8
            })
            .collect();
        for (b, block) in bytes.chunks_exact_mut(size).enumerate() {
            for (k, &at) in f16_at.iter().enumerate() {
                let v = 0.001 * (1 + (b + k) % 7) as f32;
                block[at..at + 2].copy_from_slice(&f16_bytes(v));
            }
        }
        bytes
    }

    #[test]
    fn legacy_formats_become_q8_0_exactly() {
        for (dtype, convert) in [(GgmlType::Q5_0, q5_0_as_q8_0 as fn(&[u8]) -> Vec<u8>), (GgmlType::Q4_0, q4_0_as_q8_0)]
        {
            let src = blocks(dtype, 5, &[0]);
            let want = dequantize(dtype, &src, 5 * 32).unwrap();
            let mut got = vec![0.0; 5 * 32];
            dequantize_q8_0(&convert(&src), &mut got);
            assert!(want.iter().zip(&got).all(|(a, b)| a.to_bits() == b.to_bits()), "{dtype:?}");
        }
    }

    #[test]
    fn q4_k_becomes_q4_1_within_f16_scale_rounding() {
        let src = blocks(GgmlType::Q4_K, 3, &[0, 2]);
        let want = dequantize(GgmlType::Q4_K, &src, 3 * QK_K).unwrap();
        let repacked = q4_k_as_q4_1(&src);
        assert_eq!(repacked.len(), 3 * 8 * Q4_1_BYTES);
        let mut got = vec![0.0; 3 * QK_K];
        dequantize_q4_1(&repacked, &mut got);
        // Each value is d·s·q − dmin·m with both products rounded to f16, so off by at most
        // 2⁻¹¹·(15·d·s + dmin·m); here d, dmin ≤ 0.007 and s, m ≤ 63.
        let bound = 2.0f32.powi(-11) * (15.0 * 0.007 * 63.0 + 0.007 * 63.0);
        let worst = want.iter().zip(&got).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(worst <= bound, "max |Δ| {worst} > {bound}");
    }
}
