//! Packed, row-interleaved weight layout shared by every kernel path.
//!
//! Rows are padded to a multiple of [`GROUP`] (16) and processed 16 at a time. For row group `g`
//! and block `b` (32 input columns) the packed quants form one *tile* of `8 × 64` bytes (Q8_0) or
//! `4 × 64` bytes (Q4_1). Inside a tile, 64-byte *unit* `k` holds four bytes per row:
//! bytes `j*4 .. j*4+4` belong to row `j` of the group.
//!
//! * Q8_0: unit `k` holds elements `4k .. 4k+4` of each row, stored as `q ^ 0x80` (that is,
//!   `q + 128` as an unsigned byte) so that AVX-512 VNNI can use it as the unsigned operand.
//! * Q4_1: unit `u` holds the GGUF nibble bytes `4u .. 4u+4` of each row: low nibbles are
//!   elements `4u .. 4u+4`, high nibbles elements `16+4u .. 16+4u+4`.
//!
//! Scales live in a separate `u16` (f16 bits) array, per `(g, b)`: 16 values of `d` (Q8_0), or 16
//! of `d` followed by 16 of `m` (Q4_1). Padding rows have zero scales.

use crate::QFormat;

/// Elements per quantization block.
pub(crate) const QK: usize = 32;
/// Weight rows interleaved in one group (one AVX-512 lane per row).
pub(crate) const GROUP: usize = 16;
/// Bytes of one unit: four bytes for each of the [`GROUP`] rows.
pub(crate) const UNIT: usize = 64;

/// Packed quant bytes per `(group, block)` tile.
pub(crate) const fn tile_bytes(format: QFormat) -> usize {
    match format {
        QFormat::Q8_0 => 8 * UNIT,
        QFormat::Q4_1 => 4 * UNIT,
    }
}

/// f16 scale values per `(group, block)` tile.
pub(crate) const fn tile_scales(format: QFormat) -> usize {
    match format {
        QFormat::Q8_0 => GROUP,
        QFormat::Q4_1 => 2 * GROUP,
    }
}

/// One 64-byte aligned cache line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// A byte buffer whose start is aligned to 64 bytes.
#[derive(Clone)]
pub(crate) struct AlignedBytes {
    lines: Vec<Line>,
    len: usize,
}

impl AlignedBytes {
    /// `len` bytes, all set to `fill`.
    pub(crate) fn filled(len: usize, fill: u8) -> Self {
        let lines = vec![Line([fill; 64]); len.div_ceil(64)];
        Self { lines, len }
    }

    /// The bytes.
    pub(crate) fn as_slice(&self) -> &[u8] {
        // SAFETY: `Line` is a plain `[u8; 64]` with no padding; `len <= lines.len() * 64`.
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr().cast::<u8>(), self.len) }
    }

    /// The bytes, mutably.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and we hold `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast::<u8>(), self.len) }
    }
}

/// Reads a little-endian u16 from the first two bytes of `b`.
fn le16(b: &[u8]) -> u16 {
    u16::from_le_bytes([b[0], b[1]])
}

/// Writes one GGUF block (`src`, `format.block_bytes()` long) of row `row`, block `b` into the
/// packed buffers. `nb` is the number of blocks per row.
pub(crate) fn pack_block(
    format: QFormat,
    src: &[u8],
    (row, b, nb): (usize, usize, usize),
    quants: &mut [u8],
    scales: &mut [u16],
) {
    let (g, j) = (row / GROUP, row % GROUP);
    let tile = g * nb + b;
    let q = &mut quants[tile * tile_bytes(format)..][..tile_bytes(format)];
    let s = &mut scales[tile * tile_scales(format)..][..tile_scales(format)];
    match format {
        QFormat::Q8_0 => {
            s[j] = le16(src);
            for (k, unit) in q.chunks_exact_mut(UNIT).enumerate() {
                for t in 0..4 {
                    unit[j * 4 + t] = src[2 + 4 * k + t] ^ 0x80;
                }
            }
        }
        QFormat::Q4_1 => {
            s[j] = le16(src);
            s[GROUP + j] = le16(&src[2..]);
            for (u, unit) in q.chunks_exact_mut(UNIT).enumerate() {
                unit[j * 4..j * 4 + 4].copy_from_slice(&src[4 + 4 * u..4 + 4 * u + 4]);
            }
        }
    }
}

/// Decodes block `b` of row `row` from the packed buffers into `out` (32 values).
pub(crate) fn unpack_block(
    format: QFormat,
    (row, b, nb): (usize, usize, usize),
    quants: &[u8],
    scales: &[u16],
    out: &mut [f32],
) {
    let (g, j) = (row / GROUP, row % GROUP);
    let tile = g * nb + b;
    let q = &quants[tile * tile_bytes(format)..][..tile_bytes(format)];
    let s = &scales[tile * tile_scales(format)..][..tile_scales(format)];
    let d = f16_to_f32(s[j]);
    match format {
        QFormat::Q8_0 => {
            for (k, unit) in q.chunks_exact(UNIT).enumerate() {
                for t in 0..4 {
                    out[4 * k + t] = d * f32::from((unit[j * 4 + t] ^ 0x80) as i8);
                }
            }
        }
        QFormat::Q4_1 => {
            let m = f16_to_f32(s[GROUP + j]);
            for (u, unit) in q.chunks_exact(UNIT).enumerate() {
                for t in 0..4 {
                    let byte = unit[j * 4 + t];
                    out[4 * u + t] = d * f32::from(byte & 0x0F) + m;
                    out[16 + 4 * u + t] = d * f32::from(byte >> 4) + m;
                }
            }
        }
    }
}

/// Converts f16 bits to f32.
#[inline]
pub(crate) fn f16_to_f32(bits: u16) -> f32 {
    half::f16::from_bits(bits).to_f32()
}

/// Converts f32 to f16 bits (round to nearest even, as ggml does).
#[inline]
pub(crate) fn f32_to_f16(v: f32) -> u16 {
    half::f16::from_f32(v).to_bits()
}
