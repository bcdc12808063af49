//! Plain float types: F32, F16 and BF16.

use half::{f16, slice::HalfFloatSliceExt};

use super::assert_blocks;
use crate::types::GgmlType;

/// Copies little-endian f32 values.
pub fn dequantize_f32(bytes: &[u8], out: &mut [f32]) {
    assert_blocks(GgmlType::F32, bytes, out);
    for (src, dst) in bytes.chunks_exact(4).zip(out.iter_mut()) {
        *dst = f32::from_le_bytes([src[0], src[1], src[2], src[3]]);
    }
}

/// Converts little-endian IEEE half floats (exactly; uses F16C when the CPU has it).
pub fn dequantize_f16(bytes: &[u8], out: &mut [f32]) {
    const CHUNK: usize = 256;
    assert_blocks(GgmlType::F16, bytes, out);
    let mut halves = [f16::ZERO; CHUNK];
    for (src, dst) in bytes.chunks(2 * CHUNK).zip(out.chunks_mut(CHUNK)) {
        for (h, pair) in halves.iter_mut().zip(src.chunks_exact(2)) {
            *h = f16::from_bits(u16::from_le_bytes([pair[0], pair[1]]));
        }
        halves[..dst.len()].convert_to_f32_slice(dst);
    }
}

/// Converts little-endian bfloat16 values (the top half of an f32's bits).
pub fn dequantize_bf16(bytes: &[u8], out: &mut [f32]) {
    assert_blocks(GgmlType::BF16, bytes, out);
    for (src, dst) in bytes.chunks_exact(2).zip(out.iter_mut()) {
        *dst = f32::from_bits(u32::from(u16::from_le_bytes([src[0], src[1]])) << 16);
    }
}
