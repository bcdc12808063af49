//! The original 32-value block formats: Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0.
//!
//! In the 4- and 5-bit formats, byte `j` of `qs` holds value `j` in its low nibble and value
//! `j + 16` in its high nibble; the 5-bit formats keep the fifth bit of value `i` in bit `i` of a
//! little-endian `u32` `qh`.

use super::{assert_blocks, f16_at};
use crate::types::GgmlType;

/// Values per block of the legacy formats.
const QK: usize = 32;
/// Bytes of packed nibbles per block.
const NIBBLES: usize = QK / 2;

/// Iterates over (block bytes, output values) pairs of a `dtype` tensor.
fn blocks<'a>(
    dtype: GgmlType,
    bytes: &'a [u8],
    out: &'a mut [f32],
) -> impl Iterator<Item = (&'a [u8], &'a mut [f32; QK])> {
    assert_blocks(dtype, bytes, out);
    let outs = out.chunks_exact_mut(QK).map(|y| <&mut [f32; QK]>::try_from(y).expect("QK values"));
    bytes.chunks_exact(dtype.type_size()).zip(outs)
}

/// Splits the 16 packed nibble bytes at `at` of `block`.
#[inline(always)]
pub(super) fn nibbles(block: &[u8], at: usize) -> &[u8; NIBBLES] {
    block[at..at + NIBBLES].try_into().expect("16 nibble bytes")
}

/// Q4_0: `y = (q - 8) * d` with f16 `d` and 4-bit `q`. Block: d (2 bytes), qs (16).
pub fn dequantize_q4_0(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in blocks(GgmlType::Q4_0, bytes, out) {
        let d = f16_at(block, 0);
        let qs = nibbles(block, 2);
        for j in 0..NIBBLES {
            y[j] = (i32::from(qs[j] & 0x0F) - 8) as f32 * d;
            y[j + NIBBLES] = (i32::from(qs[j] >> 4) - 8) as f32 * d;
        }
    }
}

/// Q4_1: `y = q * d + m` with f16 `d`, `m` and 4-bit `q`. Block: d, m (2 bytes each), qs (16).
pub fn dequantize_q4_1(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in blocks(GgmlType::Q4_1, bytes, out) {
        let d = f16_at(block, 0);
        let m = f16_at(block, 2);
        let qs = nibbles(block, 4);
        for j in 0..NIBBLES {
            y[j] = f32::from(qs[j] & 0x0F) * d + m;
            y[j + NIBBLES] = f32::from(qs[j] >> 4) * d + m;
        }
    }
}

/// The 5-bit values of a Q5 block: nibbles from `qs`, fifth bits from `qh`.
#[inline(always)]
pub(super) fn five_bit_values(qh: u32, qs: &[u8; NIBBLES]) -> [u8; QK] {
    let mut q = [0u8; QK];
    for j in 0..NIBBLES {
        let high_lo = (((qh >> j) & 1) << 4) as u8;
        let high_hi = (((qh >> (j + NIBBLES)) & 1) << 4) as u8;
        q[j] = (qs[j] & 0x0F) | high_lo;
        q[j + NIBBLES] = (qs[j] >> 4) | high_hi;
    }
    q
}

/// Reads the little-endian `u32` at `block[at..at + 4]`.
#[inline(always)]
pub(super) fn u32_at(block: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([block[at], block[at + 1], block[at + 2], block[at + 3]])
}

/// Q5_0: `y = (q - 16) * d` with 5-bit `q`. Block: d (2 bytes), qh (4), qs (16).
pub fn dequantize_q5_0(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in blocks(GgmlType::Q5_0, bytes, out) {
        let d = f16_at(block, 0);
        let q = five_bit_values(u32_at(block, 2), nibbles(block, 6));
        for (yi, &qi) in y.iter_mut().zip(q.iter()) {
            *yi = (i32::from(qi) - 16) as f32 * d;
        }
    }
}

/// Q5_1: `y = q * d + m` with 5-bit `q`. Block: d, m (2 bytes each), qh (4), qs (16).
pub fn dequantize_q5_1(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in blocks(GgmlType::Q5_1, bytes, out) {
        let d = f16_at(block, 0);
        let m = f16_at(block, 2);
        let q = five_bit_values(u32_at(block, 4), nibbles(block, 8));
        for (yi, &qi) in y.iter_mut().zip(q.iter()) {
            *yi = f32::from(qi) * d + m;
        }
    }
}

/// Q8_0: `y = q * d` with signed 8-bit `q`. Block: d (2 bytes), qs (32).
pub fn dequantize_q8_0(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in blocks(GgmlType::Q8_0, bytes, out) {
        let d = f16_at(block, 0);
        for (yi, &qi) in y.iter_mut().zip(block[2..2 + QK].iter()) {
            *yi = f32::from(qi as i8) * d;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// f16 1.0 followed by `rest`.
    fn block_with_unit_scale(rest: &[u8]) -> Vec<u8> {
        let mut block = half::f16::ONE.to_bits().to_le_bytes().to_vec();
        block.extend_from_slice(rest);
        block
    }

    #[test]
    fn q4_0_nibble_order() {
        let mut qs = [0x88u8; 16];
        qs[0] = 0x9A; // value 0 = 0xA - 8 = 2, value 16 = 0x9 - 8 = 1
        let mut y = [0.0; 32];
        dequantize_q4_0(&block_with_unit_scale(&qs), &mut y);
        assert_eq!((y[0], y[16], y[1]), (2.0, 1.0, 0.0));
    }

    #[test]
    fn q5_0_high_bits() {
        // qh bit 0 -> value 0, bit 16 -> value 16; nibbles all 0 => values 16-16=0 or 0-16.
        let mut rest = (1u32 | 1 << 16).to_le_bytes().to_vec();
        rest.extend_from_slice(&[0u8; 16]);
        let mut y = [0.0; 32];
        dequantize_q5_0(&block_with_unit_scale(&rest), &mut y);
        assert_eq!((y[0], y[16], y[1], y[17]), (0.0, 0.0, -16.0, -16.0));
    }

    #[test]
    fn q8_0_signed() {
        let mut qs = [0u8; 32];
        qs[0] = 0xFF;
        qs[31] = 0x7F;
        let mut y = [0.0; 32];
        dequantize_q8_0(&block_with_unit_scale(&qs), &mut y);
        assert_eq!((y[0], y[31]), (-1.0, 127.0));
    }
}
