//! K-quants: super-blocks of 256 values split into sub-blocks, each with its own scale.
//!
//! * Q4_K / Q5_K: `d`, `dmin` (f16), 12 bytes of packed 6-bit scales and mins for 8 sub-blocks
//!   of 32 ([`scale_min_k4`]), [Q5_K: 32 bytes of fifth bits], 128 bytes of nibbles. Each group of
//!   64 values takes 32 nibble bytes: low nibbles are the first sub-block, high nibbles the second.
//!   `y = (d * scale) * q - (dmin * min)`.
//! * Q6_K: 128 bytes of low nibbles, 64 bytes of 2-bit high parts, 16 signed 8-bit scales (one
//!   per 16 values), `d` (f16). `y = (d * scale) * (q - 32)`.

use super::{assert_blocks, f16_at};
use crate::types::{GgmlType, QK_K};

/// Unpacks the 8 six-bit scales and 8 six-bit mins of a Q4_K/Q5_K super-block
/// (ggml's `get_scale_min_k4`, applied to every sub-block).
///
/// Bytes 0–3 hold scales 0–3 in their low 6 bits, bytes 4–7 mins 0–3; bytes 8–11 hold the low
/// 4 bits of scales 4–7 (low nibble) and mins 4–7 (high nibble), whose top 2 bits are the top
/// 2 bits of bytes 0–3 (scales) and 4–7 (mins).
pub fn scale_min_k4(packed: &[u8; 12]) -> ([u8; 8], [u8; 8]) {
    let mut scales = [0u8; 8];
    let mut mins = [0u8; 8];
    for j in 0..4 {
        scales[j] = packed[j] & 63;
        mins[j] = packed[j + 4] & 63;
        scales[j + 4] = (packed[j + 8] & 0x0F) | ((packed[j] >> 6) << 4);
        mins[j + 4] = (packed[j + 8] >> 4) | ((packed[j + 4] >> 6) << 4);
    }
    (scales, mins)
}

/// Iterates over (super-block bytes, 256 output values) pairs of a `dtype` tensor.
fn super_blocks<'a>(
    dtype: GgmlType,
    bytes: &'a [u8],
    out: &'a mut [f32],
) -> impl Iterator<Item = (&'a [u8], &'a mut [f32; QK_K])> {
    assert_blocks(dtype, bytes, out);
    let outs = out.chunks_exact_mut(QK_K).map(|y| <&mut [f32; QK_K]>::try_from(y).expect("QK_K values"));
    bytes.chunks_exact(dtype.type_size()).zip(outs)
}

/// Per-sub-block multipliers `d * scale` and offsets `dmin * min` of a Q4_K/Q5_K super-block.
#[inline(always)]
fn sub_block_affine(block: &[u8]) -> ([f32; 8], [f32; 8]) {
    let d = f16_at(block, 0);
    let dmin = f16_at(block, 2);
    let packed: &[u8; 12] = block[4..16].try_into().expect("12 scale bytes");
    let (scales, mins) = scale_min_k4(packed);
    (scales.map(|s| d * f32::from(s)), mins.map(|m| dmin * f32::from(m)))
}

/// Q4_K. Super-block: d, dmin (2 bytes each), scales (12), qs (128) = 144 bytes.
pub fn dequantize_q4_k(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in super_blocks(GgmlType::Q4_K, bytes, out) {
        let (mul, sub) = sub_block_affine(block);
        let qs = &block[16..16 + QK_K / 2];
        for (g, (q, yg)) in qs.chunks_exact(32).zip(y.chunks_exact_mut(64)).enumerate() {
            let (lo, hi) = yg.split_at_mut(32);
            let (d1, m1, d2, m2) = (mul[2 * g], sub[2 * g], mul[2 * g + 1], sub[2 * g + 1]);
            for l in 0..32 {
                lo[l] = d1 * f32::from(q[l] & 0x0F) - m1;
                hi[l] = d2 * f32::from(q[l] >> 4) - m2;
            }
        }
    }
}

/// Q5_K. Super-block: d, dmin (2 bytes each), scales (12), qh (32), qs (128) = 176 bytes.
/// The fifth bit of value `32 * s + l` is bit `s` of `qh[l]`.
pub fn dequantize_q5_k(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in super_blocks(GgmlType::Q5_K, bytes, out) {
        let (mul, sub) = sub_block_affine(block);
        let qh = &block[16..48];
        let qs = &block[48..48 + QK_K / 2];
        for (g, (q, yg)) in qs.chunks_exact(32).zip(y.chunks_exact_mut(64)).enumerate() {
            let (lo, hi) = yg.split_at_mut(32);
            let (d1, m1, d2, m2) = (mul[2 * g], sub[2 * g], mul[2 * g + 1], sub[2 * g + 1]);
            let (shift_lo, shift_hi) = (2 * g, 2 * g + 1);
            for l in 0..32 {
                let h_lo = ((qh[l] >> shift_lo) & 1) << 4;
                let h_hi = ((qh[l] >> shift_hi) & 1) << 4;
                lo[l] = d1 * f32::from((q[l] & 0x0F) | h_lo) - m1;
                hi[l] = d2 * f32::from((q[l] >> 4) | h_hi) - m2;
            }
        }
    }
}

/// Q6_K. Super-block: ql (128), qh (64), scales (16 × i8), d (2) = 210 bytes.
///
/// Each half of 128 values uses 64 `ql` bytes and 32 `qh` bytes: value `32 * k + l` of the half
/// takes the low (k = 0, 1) or high (k = 2, 3) nibble of `ql[l + 32 * (k % 2)]` and bits
/// `2k..2k+2` of `qh[l]` as its top two bits.
pub fn dequantize_q6_k(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in super_blocks(GgmlType::Q6_K, bytes, out) {
        let d = f16_at(block, 208);
        let scales: [f32; 16] = std::array::from_fn(|i| d * f32::from(block[192 + i] as i8));
        for half in 0..2 {
            let ql = &block[64 * half..64 * half + 64];
            let qh = &block[128 + 32 * half..128 + 32 * half + 32];
            let yh = &mut y[128 * half..128 * half + 128];
            let sc = &scales[8 * half..8 * half + 8];
            for l in 0..32 {
                let is = l / 16;
                let q1 = (ql[l] & 0x0F) | ((qh[l] & 3) << 4);
                let q2 = (ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4);
                let q3 = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
                let q4 = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
                yh[l] = sc[is] * f32::from(q1 as i8 - 32);
                yh[l + 32] = sc[is + 2] * f32::from(q2 as i8 - 32);
                yh[l + 64] = sc[is + 4] * f32::from(q3 as i8 - 32);
                yh[l + 96] = sc[is + 6] * f32::from(q4 as i8 - 32);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_min_unpacking() {
        let mut packed = [0u8; 12];
        packed[0] = 0b11_000101; // scale 0 = 5, top bits of scale 4 = 3
        packed[4] = 0b01_000111; // min 0 = 7, top bits of min 4 = 1
        packed[8] = 0xA2; // scale 4 low = 2, min 4 low = 10
        let (scales, mins) = scale_min_k4(&packed);
        assert_eq!((scales[0], mins[0]), (5, 7));
        assert_eq!((scales[4], mins[4]), (2 | 3 << 4, 10 | 1 << 4));
        assert_eq!((scales[1], mins[7]), (0, 0));
    }
}
