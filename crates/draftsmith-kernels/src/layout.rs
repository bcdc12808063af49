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
//! * Q6_K: the 6-bit `q` (0..=63) of each block of 32 split in two planes. Units 0..4 hold the
//!   low four bits as Q4_1 holds its nibbles (unit `u`: elements `4u .. 4u+4` in the low nibbles,
//!   `16+4u .. 16+4u+4` in the high ones); units 4 and 5 hold the top two bits of elements
//!   `0..16` and `16..32`: in unit `4 + h`, byte `j*4+t` carries element `16h + 4u + t`'s two bits
//!   at bits `2u .. 2u+2`, for `u` in `0..4`.
//!
//! * Q4_0, Q4_K (each block of 32 a sub-block of the file's super-block): as Q4_1's nibbles.
//! * Q5_K: Q4_K's nibbles plus Q5_0's plane of fifth bits (unit 4).
//! * Q5_0: the 5-bit `q` (0..=31) in two planes: units 0..4 hold the low four bits as Q4_1 holds
//!   its nibbles; in unit 4, byte `j*4+t` carries the fifth bit of element `4u + t` at bit `u`
//!   and of element `16 + 4u + t` at bit `4 + u`, for `u` in `0..4`.
//!
//! Scales live in a separate `u16` array, per `(g, b)`: 16 values of `d` (Q8_0, Q4_0, Q5_0: f16 bits), or 16
//! of `d` followed by 16 of `m` (Q4_1). The K-quants keep, per super-block (8 blocks), the 16
//! rows' super-block scales once (Q6_K: `d`; Q4_K, Q5_K: `d`, then `−dmin`, f16 bits), then each
//! block's 16 byte pairs (Q6_K: the first half's signed `sc` in the low byte, the second's in
//! the high byte; Q4_K, Q5_K: the 6-bit `sc` low, the 6-bit minimum `mn` high):
//! [`kquant_scale_at`].
//! Padding rows have zero scales.

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
        QFormat::Q4_0 | QFormat::Q4_1 | QFormat::Q4K => 4 * UNIT,
        QFormat::Q5_0 | QFormat::Q5K => 5 * UNIT,
        QFormat::Q6K => 6 * UNIT,
    }
}

/// f16 scale values per `(group, block)` tile.
pub(crate) const fn tile_scales(format: QFormat) -> usize {
    match format {
        QFormat::Q8_0 | QFormat::Q4_0 | QFormat::Q5_0 => GROUP,
        QFormat::Q4_1 => 2 * GROUP,
        // On average: the super-block's scales once per 8 tiles, 16 byte pairs per tile.
        QFormat::Q6K | QFormat::Q4K | QFormat::Q5K => GROUP + kquant_heads(format) * GROUP / KQ_TILES,
    }
}

/// The nibble formats (values built from four-bit units, with or without a plane of fifth bits)
/// share one kernel body per path, told apart by a `u8` const parameter (stable Rust has no enum
/// const generics); these say what each kind is.
pub(crate) mod nib {
    use crate::QFormat;

    pub(crate) const Q4_0: u8 = 0;
    pub(crate) const Q4_1: u8 = 1;
    pub(crate) const Q5_0: u8 = 2;
    pub(crate) const Q4K: u8 = 3;
    pub(crate) const Q5K: u8 = 4;

    /// The format of `kind`.
    pub(crate) const fn format(kind: u8) -> QFormat {
        match kind {
            Q4_0 => QFormat::Q4_0,
            Q4_1 => QFormat::Q4_1,
            Q5_0 => QFormat::Q5_0,
            Q4K => QFormat::Q4K,
            _ => QFormat::Q5K,
        }
    }

    /// Whether a plane of fifth bits follows the four nibble units.
    pub(crate) const fn fifth(kind: u8) -> bool {
        matches!(kind, Q5_0 | Q5K)
    }

    /// Whether values are `d·q + m` with a minimum per block (else `d·(q − o)`).
    pub(crate) const fn affine(kind: u8) -> bool {
        super::has_min(format(kind))
    }

    /// Whether the block's `d` and `m` come from K-quant super-block scales (else f16 per block).
    pub(crate) const fn k_scales(kind: u8) -> bool {
        matches!(format(kind), QFormat::Q4K | QFormat::Q5K)
    }

    /// Where a block's integer sum starts, from the packed activations' `bias` (`−128 · Σ q_x`):
    /// `−o · Σ q_x` for the formats stored as `q + o` (Q4_0: 8, Q5_0: 16), else 0.
    #[inline(always)]
    pub(crate) const fn start(kind: u8, bias: i32) -> i32 {
        match kind {
            Q4_0 => bias >> 4,
            Q5_0 => bias >> 3,
            _ => 0,
        }
    }
}

/// Whether a nibble format's values are `d·q + m` with a minimum per block (Q4_1, Q4_K, Q5_K;
/// Q4_0 and Q5_0 are `d·(q − o)`).
pub(crate) const fn has_min(format: QFormat) -> bool {
    matches!(format, QFormat::Q4_1 | QFormat::Q4K | QFormat::Q5K)
}

/// Blocks (tiles) per K-quant super-block, which share its scales.
pub(crate) const KQ_TILES: usize = 8;

/// Arrays of 16 super-block scales a K-quant row group keeps per super-block: Q6_K's `d`,
/// Q4_K's and Q5_K's `d` and `−dmin`.
const fn kquant_heads(format: QFormat) -> usize {
    match format {
        QFormat::Q4K | QFormat::Q5K => 2,
        _ => 1,
    }
}

/// Where, in a K-quant row group's scales, block `b`'s super-block scales (16 values each,
/// one array after the other) and its 16 byte pairs start.
#[inline(always)]
pub(crate) const fn kquant_scale_at(format: QFormat, b: usize) -> (usize, usize) {
    let heads = kquant_heads(format) * GROUP;
    let base = (b / KQ_TILES) * (heads + KQ_TILES * GROUP);
    (base, base + heads + (b % KQ_TILES) * GROUP)
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
        QFormat::Q4_0 => {
            s[j] = le16(src);
            pack_tile_row(q, j, |e| if e < 16 { src[2 + e] & 0x0F } else { src[2 + e - 16] >> 4 });
        }
        QFormat::Q5_0 => {
            s[j] = le16(src);
            let qh = u32::from_le_bytes([src[2], src[3], src[4], src[5]]);
            let low = |e: usize| if e < 16 { src[6 + e] & 0x0F } else { src[6 + e - 16] >> 4 };
            pack_tile_row(q, j, |e| low(e) | ((((qh >> e) & 1) as u8) << 4));
        }
        QFormat::Q6K | QFormat::Q4K | QFormat::Q5K => {
            unreachable!("K-quant super-blocks are packed by pack_q6_k / pack_q4_k")
        }
    }
}

/// Writes one GGUF Q6_K super-block (`src`, 210 bytes: `ql` 128, `qh` 64, 16 × i8 scales, f16
/// `d`) of row `row`, super-block `sb` (blocks `8·sb .. 8·sb + 8`) into the packed buffers.
///
/// In each half of 128 values, value `32k + l` takes the low (`k` = 0, 1) or high (`k` = 2, 3)
/// nibble of `ql[64·half + l + 32·(k % 2)]` and bits `2k .. 2k+2` of `qh[32·half + l]`; value
/// `i` of the super-block has scale `i / 16`.
pub(crate) fn pack_q6_k(src: &[u8], (row, sb, nb): (usize, usize, usize), quants: &mut [u8], scales: &mut [u16]) {
    let mut q = [0u8; 256];
    for half in 0..2 {
        let (ql, qh) = (&src[64 * half..][..64], &src[128 + 32 * half..][..32]);
        for l in 0..32 {
            let at = 128 * half + l;
            q[at] = (ql[l] & 0x0F) | ((qh[l] & 3) << 4);
            q[at + 32] = (ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4);
            q[at + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
            q[at + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
        }
    }
    let d = le16(&src[208..]);
    for k in 0..8 {
        pack_q6_k_block(
            &q[32 * k..][..32],
            d,
            [src[192 + 2 * k], src[193 + 2 * k]],
            (row, 8 * sb + k, nb),
            quants,
            scales,
        );
    }
}

/// Writes the 32 six-bit values `q` of block `b` of row `row`, with the super-block scale `d`
/// (f16 bits) and the two sub-block scales `sc` (i8 bits), into the packed buffers.
fn pack_q6_k_block(
    q: &[u8],
    d: u16,
    sc: [u8; 2],
    (row, b, nb): (usize, usize, usize),
    quants: &mut [u8],
    scales: &mut [u16],
) {
    let (g, j) = (row / GROUP, row % GROUP);
    let tile = g * nb + b;
    let t_q = &mut quants[tile * tile_bytes(QFormat::Q6K)..][..tile_bytes(QFormat::Q6K)];
    let s = &mut scales[g * nb * tile_scales(QFormat::Q6K)..];
    let (at_d, at_sc) = kquant_scale_at(QFormat::Q6K, b);
    s[at_d + j] = d;
    s[at_sc + j] = u16::from_le_bytes(sc);
    let (nibbles, tops) = t_q.split_at_mut(4 * UNIT);
    for t in 0..4 {
        for u in 0..4 {
            let (lo, hi) = (q[4 * u + t], q[16 + 4 * u + t]);
            nibbles[u * UNIT + j * 4 + t] = (lo & 0x0F) | ((hi & 0x0F) << 4);
        }
        for h in 0..2 {
            tops[h * UNIT + j * 4 + t] =
                (0..4).fold(0u8, |acc, u| acc | (((q[16 * h + 4 * u + t] >> 4) & 3) << (2 * u)));
        }
    }
}

/// The six-bit value of element `e` (0..32) of row `j` in a packed Q6_K tile `q`.
pub(crate) fn q6_k_value(q: &[u8], j: usize, e: usize) -> u8 {
    let (half, u, t) = (e / 16, (e % 16) / 4, e % 4);
    let nibble = q[u * UNIT + j * 4 + t];
    let low = if half == 0 { nibble & 0x0F } else { nibble >> 4 };
    let top = (q[(4 + half) * UNIT + j * 4 + t] >> (2 * u)) & 3;
    low | (top << 4)
}

/// The four-bit nibble of element `e` (0..32) of row `j` in a packed nibble tile `q`.
pub(crate) fn nibble_value(q: &[u8], j: usize, e: usize) -> u8 {
    let (half, u, t) = (e / 16, (e % 16) / 4, e % 4);
    let byte = q[u * UNIT + j * 4 + t];
    if half == 0 {
        byte & 0x0F
    } else {
        byte >> 4
    }
}

/// The five-bit value of element `e` (0..32) of row `j` in a packed Q5_0 or Q5_K tile `q`.
pub(crate) fn q5_0_value(q: &[u8], j: usize, e: usize) -> u8 {
    let (half, u, t) = (e / 16, (e % 16) / 4, e % 4);
    let top = (q[4 * UNIT + j * 4 + t] >> (4 * half + u)) & 1;
    nibble_value(q, j, e) | (top << 4)
}

/// The integer weight of element `e` (0..32) of row `j` in a packed nibble-format tile `q`:
/// `q − 8` (Q4_0), `q − 16` (Q5_0), or `q` itself (the formats with a minimum).
pub(crate) fn nibble_int(format: QFormat, q: &[u8], j: usize, e: usize) -> i32 {
    match format {
        QFormat::Q4_0 => i32::from(nibble_value(q, j, e)) - 8,
        QFormat::Q5_0 => i32::from(q5_0_value(q, j, e)) - 16,
        QFormat::Q5K => i32::from(q5_0_value(q, j, e)),
        _ => i32::from(nibble_value(q, j, e)),
    }
}

/// Row `j`'s scale `d` and minimum `m` in block `b` of a packed nibble-format row group whose
/// scales are `s`: the f16 `d` (and `m`: Q4_1; zero for Q4_0 and Q5_0) of the block, or Q4_K's
/// and Q5_K's exact `d·sc` and `−dmin·mn`.
pub(crate) fn nibble_scales(format: QFormat, s: &[u16], b: usize, j: usize) -> (f32, f32) {
    if matches!(format, QFormat::Q4K | QFormat::Q5K) {
        return q4_k_scales(s, b, j);
    }
    let t = &s[b * tile_scales(format)..][..tile_scales(format)];
    (f16_to_f32(t[j]), if has_min(format) { f16_to_f32(t[GROUP + j]) } else { 0.0 })
}

/// The two sub-block scales `d · sc` of row `j` in block `b` of a packed Q6_K row group whose
/// scales are `s` (exact in f32: an f16 times a signed byte).
pub(crate) fn q6_k_scales(s: &[u16], b: usize, j: usize) -> [f32; 2] {
    let (at_d, at_sc) = kquant_scale_at(QFormat::Q6K, b);
    let d = f16_to_f32(s[at_d + j]);
    let [lo, hi] = s[at_sc + j].to_le_bytes();
    [d * f32::from(lo as i8), d * f32::from(hi as i8)]
}

/// Writes row `j` of a packed tile `q` (4 units, or 5 with a fifth-bit plane) from the values
/// `value(e)` of its 32 elements (4 bits, or 5 with the plane): the low four bits as Q4_1's
/// nibbles, the fifth as the plane of [`QFormat::Q5_0`] (unit 4, when `q` has it).
fn pack_tile_row(q: &mut [u8], j: usize, value: impl Fn(usize) -> u8) {
    let planes = q.len() / UNIT;
    for t in 0..4 {
        let mut top = 0u8;
        for u in 0..4 {
            let (lo, hi) = (value(4 * u + t), value(16 + 4 * u + t));
            q[u * UNIT + j * 4 + t] = (lo & 0x0F) | ((hi & 0x0F) << 4);
            top |= ((lo >> 4) & 1) << u | ((hi >> 4) & 1) << (4 + u);
        }
        if planes == 5 {
            q[4 * UNIT + j * 4 + t] = top;
        }
    }
}

/// Writes one GGUF Q4_K or Q5_K super-block (`src`: f16 `d`, f16 `dmin`, 12 bytes of packed
/// 6-bit scales and minima, [Q5_K: 32 bytes `qh` of fifth bits], 128 nibble bytes; 144 or 176
/// bytes) of row `row`, super-block `sb` (blocks `8·sb .. 8·sb + 8`) into the packed buffers.
///
/// Sub-block `k` (values `32k .. 32k + 32`) has the low (`k` even) or high (`k` odd) nibbles of
/// bytes `32·(k / 2) ..` (Q5_K: the fifth bit of its value `l` is bit `k` of `qh[l]`) and, as
/// ggml's `get_scale_min_k4` unpacks them, scale `sc[k]` and minimum `mn[k]`: for `k < 4` the
/// low six bits of bytes `k` and `k + 4`; for `k ≥ 4` the nibbles of byte `k + 4` below the top
/// two bits of bytes `k − 4` and `k`.
pub(crate) fn pack_q4_k(
    format: QFormat,
    src: &[u8],
    (row, sb, nb): (usize, usize, usize),
    quants: &mut [u8],
    scales: &mut [u16],
) {
    let (d, dmin) = (le16(src), le16(&src[2..]));
    let p = &src[4..16];
    let (qh, qs) = match format {
        QFormat::Q5K => (Some(&src[16..48]), &src[48..176]),
        _ => (None, &src[16..144]),
    };
    let (g, j) = (row / GROUP, row % GROUP);
    let s = &mut scales[g * nb * tile_scales(format)..];
    for k in 0..KQ_TILES {
        let (sc, mn) = if k < 4 {
            (p[k] & 63, p[k + 4] & 63)
        } else {
            ((p[k + 4] & 0x0F) | ((p[k - 4] >> 6) << 4), (p[k + 4] >> 4) | ((p[k] >> 6) << 4))
        };
        let b = KQ_TILES * sb + k;
        let (at_d, at_sc) = kquant_scale_at(format, b);
        s[at_d + j] = d;
        s[at_d + GROUP + j] = dmin ^ 0x8000;
        s[at_sc + j] = u16::from_le_bytes([sc, mn]);
        let value = |e: usize| {
            let byte = qs[32 * (k / 2) + e];
            let low = if k % 2 == 0 { byte & 0x0F } else { byte >> 4 };
            low | qh.map_or(0, |h| ((h[e] >> k) & 1) << 4)
        };
        let tile = g * nb + b;
        pack_tile_row(&mut quants[tile * tile_bytes(format)..][..tile_bytes(format)], j, value);
    }
}

/// The block scale `d·sc` and minimum `−dmin·mn` of row `j` in block `b` of a packed Q4_K (or
/// Q5_K: the same layout) row group whose scales are `s` (both exact in f32: an f16 times a
/// 6-bit integer).
pub(crate) fn q4_k_scales(s: &[u16], b: usize, j: usize) -> (f32, f32) {
    let (at_d, at_sc) = kquant_scale_at(QFormat::Q4K, b);
    let (d, neg_dmin) = (f16_to_f32(s[at_d + j]), f16_to_f32(s[at_d + GROUP + j]));
    let [sc, mn] = s[at_sc + j].to_le_bytes();
    (d * f32::from(sc), neg_dmin * f32::from(mn))
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
    let group_scales = &scales[g * nb * tile_scales(format)..];
    match format {
        QFormat::Q8_0 => {
            let d = f16_to_f32(scales[tile * tile_scales(format) + j]);
            for (k, unit) in q.chunks_exact(UNIT).enumerate() {
                for t in 0..4 {
                    out[4 * k + t] = d * f32::from((unit[j * 4 + t] ^ 0x80) as i8);
                }
            }
        }
        QFormat::Q4_0 | QFormat::Q4_1 | QFormat::Q5_0 | QFormat::Q4K | QFormat::Q5K => {
            let (d, m) = nibble_scales(format, group_scales, b, j);
            for (e, o) in out.iter_mut().enumerate().take(QK) {
                let v = d * nibble_int(format, q, j, e) as f32;
                *o = if has_min(format) { v + m } else { v };
            }
        }
        QFormat::Q6K => {
            let sc = q6_k_scales(group_scales, b, j);
            for (e, o) in out.iter_mut().enumerate().take(QK) {
                *o = sc[e / 16] * f32::from(q6_k_value(q, j, e) as i8 - 32);
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
