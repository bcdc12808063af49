//! The [`QMatrix`] type: construction, accessors and row dequantization.

use crate::act::quantize_block_scalar;
use crate::dispatch::{matmul_impl, KernelPath};
use crate::layout::{self, AlignedBytes, GROUP, QK};
use crate::{f32act, Activations, KernelError, QFormat};

/// Weight matrix `W` with `rows` outputs × `cols` inputs, quantized in a GGUF block format.
///
/// Internally the blocks are repacked into a row-interleaved layout (see the crate docs); the
/// values are exactly those of the GGUF blocks.
#[derive(Clone)]
pub struct QMatrix {
    format: QFormat,
    rows: usize,
    cols: usize,
    /// Row groups of [`GROUP`] rows (the last one zero-padded).
    groups: usize,
    quants: AlignedBytes,
    scales: Vec<u16>,
}

impl std::fmt::Debug for QMatrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QMatrix")
            .field("format", &self.format)
            .field("rows", &self.rows)
            .field("cols", &self.cols)
            .field("n_bytes", &self.n_bytes())
            .finish()
    }
}

/// Checks `cols % block == 0` and that `rows × cols` fits; returns `rows × cols / block` blocks.
fn check_shape(rows: usize, cols: usize, block: usize) -> Result<usize, KernelError> {
    if !cols.is_multiple_of(block) {
        return Err(KernelError::ColsNotBlockMultiple { cols, block });
    }
    rows.checked_mul(cols).map(|e| e / block).ok_or(KernelError::ShapeOverflow { rows, cols })
}

impl QMatrix {
    /// Rows per packed row group: a matrix can follow another in one stacked matrix
    /// ([`QMatrix::stack`], [`QMatrix::from_ggml_parts`]) when the first's rows are a multiple
    /// of it.
    pub const ROW_GROUP: usize = GROUP;

    /// An all-zero matrix ready to be filled block by block.
    fn empty(format: QFormat, rows: usize, cols: usize) -> Self {
        let groups = rows.div_ceil(GROUP);
        let tiles = groups * (cols / QK);
        let fill = if format == QFormat::Q8_0 { 0x80 } else { 0 };
        Self {
            format,
            rows,
            cols,
            groups,
            quants: AlignedBytes::filled(tiles * layout::tile_bytes(format), fill),
            scales: vec![0; tiles * layout::tile_scales(format)],
        }
    }

    /// Wraps raw GGUF block bytes (row-major, each row `cols / 32` blocks).
    ///
    /// Q8_0 block: f16 `d` + 32 × i8 (34 bytes). Q5_0 block: see [`QFormat::Q5_0`]. Q4_1 block: f16 `d`, f16 `m`, 16 nibble bytes
    /// (20 bytes), `value = d * q + m`, low nibbles are elements 0..16, high nibbles 16..32.
    /// Q6_K super-block: 256 values in 210 bytes (see [`QFormat::Q6K`]); Q4_K: 256 values in 144
    /// bytes (see [`QFormat::Q4K`]); Q5_K: 176 bytes (see [`QFormat::Q5K`]).
    ///
    /// # Errors
    /// [`KernelError::ColsNotBlockMultiple`] when `cols` is not a multiple of the format's
    /// [block](QFormat::block_elems), [`KernelError::ByteLength`] when `bytes.len() != rows ×
    /// cols / block_elems × block_bytes`, [`KernelError::ShapeOverflow`].
    pub fn from_ggml_blocks(format: QFormat, bytes: &[u8], rows: usize, cols: usize) -> Result<Self, KernelError> {
        Self::from_ggml_parts(format, &[(bytes, rows)], cols)
    }

    /// Several matrices' GGUF blocks (each `(bytes, rows)`, all of `format` with `cols` columns)
    /// packed straight into one matrix of their rows one after another (`[Σ rows, cols]`): the
    /// matrix [`QMatrix::stack`] would build from them one by one, without a second copy.
    ///
    /// # Errors
    /// As [`QMatrix::from_ggml_blocks`] for each part; [`KernelError::PartRows`] when a part
    /// other than the last has a row count that is not a multiple of 16 (its last row group
    /// would be padded).
    pub fn from_ggml_parts(format: QFormat, parts: &[(&[u8], usize)], cols: usize) -> Result<Self, KernelError> {
        let mut rows = 0usize;
        for (i, &(bytes, part_rows)) in parts.iter().enumerate() {
            if i + 1 < parts.len() && !part_rows.is_multiple_of(GROUP) {
                return Err(KernelError::PartRows { rows: part_rows, group: GROUP });
            }
            let blocks = check_shape(part_rows, cols, format.block_elems())?;
            let expected =
                blocks.checked_mul(format.block_bytes()).ok_or(KernelError::ShapeOverflow { rows: part_rows, cols })?;
            if bytes.len() != expected {
                let actual = bytes.len();
                return Err(KernelError::ByteLength { format, rows: part_rows, cols, expected, actual });
            }
            rows = rows.checked_add(part_rows).ok_or(KernelError::ShapeOverflow { rows, cols })?;
        }
        check_shape(rows, cols, format.block_elems())?;
        let mut m = Self::empty(format, rows, cols);
        let mut row0 = 0;
        for &(bytes, part_rows) in parts {
            m.pack_rows(bytes, row0);
            row0 += part_rows;
        }
        Ok(m)
    }

    /// Packs whole rows of GGUF blocks (`bytes`, checked by the caller) from row `row0` on.
    fn pack_rows(&mut self, bytes: &[u8], row0: usize) {
        let format = self.format;
        let nb = self.cols / QK;
        let per_row = self.cols / format.block_elems();
        for (i, src) in bytes.chunks_exact(format.block_bytes()).enumerate() {
            let (row, b) = (row0 + i / per_row, i % per_row);
            match format {
                QFormat::Q6K => layout::pack_q6_k(src, (row, b, nb), self.quants.as_mut_slice(), &mut self.scales),
                QFormat::Q4K | QFormat::Q5K => {
                    layout::pack_q4_k(format, src, (row, b, nb), self.quants.as_mut_slice(), &mut self.scales)
                }
                _ => self.pack(src, row, b),
            }
        }
    }

    /// Quantizes an f32 row-major `[rows, cols]` matrix to Q8_0 with ggml's rounding:
    /// `d = amax / 127` (stored as f16), `q = round(x / d)`.
    ///
    /// # Errors
    /// [`KernelError::ColsNotBlockMultiple`], [`KernelError::ValueCount`] when
    /// `w.len() != rows × cols`, [`KernelError::ShapeOverflow`].
    pub fn quantize_q8_0(w: &[f32], rows: usize, cols: usize) -> Result<Self, KernelError> {
        Self::quantize_blocks(QFormat::Q8_0, w, rows, cols, encode_q8_0)
    }

    /// Quantizes an f32 row-major `[rows, cols]` matrix to Q4_1 with ggml's rounding:
    /// `m = min`, `d = (max − min) / 15` (both stored as f16), `q = min(15, trunc((x − m) / d +
    /// 0.5))`: 20 bytes per 32 values against Q8_0's 34, for layers read once per call where the
    /// bytes cost more than the coarser rounding (a drafter's).
    ///
    /// # Errors
    /// As [`QMatrix::quantize_q8_0`].
    pub fn quantize_q4_1(w: &[f32], rows: usize, cols: usize) -> Result<Self, KernelError> {
        Self::quantize_blocks(QFormat::Q4_1, w, rows, cols, encode_q4_1)
    }

    /// Quantizes an f32 row-major `[rows, cols]` matrix to Q4_0 with ggml's rounding: `d = v /
    /// −8` for the block's value `v` of largest magnitude (stored as f16), `q = min(15,
    /// trunc(x / d + 8.5))`: 18 bytes per 32 values, the fewest of the formats with a quantizer.
    ///
    /// # Errors
    /// As [`QMatrix::quantize_q8_0`].
    pub fn quantize_q4_0(w: &[f32], rows: usize, cols: usize) -> Result<Self, KernelError> {
        Self::quantize_blocks(QFormat::Q4_0, w, rows, cols, encode_q4_0)
    }

    /// A `[rows, cols]` matrix of `format` from f32 values, each 32-value block encoded into
    /// its GGUF bytes by `encode`.
    fn quantize_blocks(
        format: QFormat,
        w: &[f32],
        rows: usize,
        cols: usize,
        encode: Encode,
    ) -> Result<Self, KernelError> {
        let blocks = check_shape(rows, cols, QK)?;
        if w.len() != blocks * QK {
            let (expected, actual) = (blocks * QK, w.len());
            return Err(KernelError::ValueCount { rows, cols, expected, actual });
        }
        let mut m = Self::empty(format, rows, cols);
        let mut block = vec![0u8; format.block_bytes()];
        for r in 0..rows {
            m.encode_row(r, &w[r * cols..][..cols], encode, &mut block);
        }
        Ok(m)
    }

    /// Encodes the f32 values of row `r` block by block (`block`: one block's scratch bytes).
    fn encode_row(&mut self, r: usize, row: &[f32], encode: Encode, block: &mut [u8]) {
        for (b, x) in row.chunks_exact(QK).enumerate() {
            encode(x, block);
            self.pack(block, r, b);
        }
    }

    /// [`QMatrix::quantize_q8_0`], [`QMatrix::quantize_q4_1`] or [`QMatrix::quantize_q4_0`] by
    /// `format`.
    ///
    /// # Errors
    /// As [`QMatrix::quantize_q8_0`]; [`KernelError::NoQuantizer`] for Q5_0 and the K-quants.
    pub fn quantize(format: QFormat, w: &[f32], rows: usize, cols: usize) -> Result<Self, KernelError> {
        Self::quantize_blocks(format, w, rows, cols, encoder(format)?)
    }

    /// This matrix's values re-quantized to `format`, a row at a time (no f32 copy of the whole
    /// matrix): a lossy conversion for weights whose bytes cost more than their precision buys
    /// (a draft model's, whose output the target checks token by token).
    ///
    /// # Errors
    /// [`KernelError::NoQuantizer`] for Q5_0 and the K-quants.
    pub fn requantize(&self, format: QFormat) -> Result<Self, KernelError> {
        let encode = encoder(format)?;
        let mut m = Self::empty(format, self.rows, self.cols);
        let mut row = vec![0.0f32; self.cols];
        let mut block = vec![0u8; format.block_bytes()];
        for r in 0..self.rows {
            self.dequantize_row(r, &mut row);
            m.encode_row(r, &row, encode, &mut block);
        }
        Ok(m)
    }

    /// An all-zero `[rows, cols]` matrix of a format with a quantizer, filled row by row with
    /// [`QMatrix::set_row`]: the store of a quantized key cache, whose rows arrive one token at
    /// a time.
    ///
    /// # Errors
    /// [`KernelError::ColsNotBlockMultiple`], [`KernelError::ShapeOverflow`],
    /// [`KernelError::NoQuantizer`] for Q5_0 and the K-quants.
    pub fn zeros(format: QFormat, rows: usize, cols: usize) -> Result<Self, KernelError> {
        check_shape(rows, cols, QK)?;
        encoder(format)?;
        Ok(Self::empty(format, rows, cols))
    }

    /// Quantizes `values` into row `r` with the format's rounding (that of
    /// [`QMatrix::quantize`]).
    ///
    /// # Panics
    /// If `r >= rows`, `values.len() != cols`, or the format has no quantizer.
    pub fn set_row(&mut self, r: usize, values: &[f32]) {
        assert!(r < self.rows, "row {r} out of range for {} rows", self.rows);
        assert_eq!(values.len(), self.cols, "a row holds cols values");
        let encode = encoder(self.format).expect("set_row needs a format with a quantizer");
        let mut block = [0u8; 64];
        self.encode_row(r, values, encode, &mut block[..self.format.block_bytes()]);
    }

    /// Copies row `from` to row `to`, bit for bit.
    ///
    /// # Panics
    /// If either row is out of range, or for the K-quants (their scales are shared by a
    /// super-block).
    pub fn copy_row(&mut self, from: usize, to: usize) {
        assert!(from < self.rows && to < self.rows, "rows {from}, {to} out of range for {} rows", self.rows);
        assert!(self.format.block_elems() == QK, "copy_row takes formats of 32-value blocks");
        if from == to {
            return;
        }
        let (nb, tb, ts) = (self.cols / QK, layout::tile_bytes(self.format), layout::tile_scales(self.format));
        let ((gf, jf), (gt, jt)) = ((from / GROUP, from % GROUP), (to / GROUP, to % GROUP));
        let quants = self.quants.as_mut_slice();
        for b in 0..nb {
            let (tf, tt) = (gf * nb + b, gt * nb + b);
            // Every unit holds four bytes per row (layout docs); every scale plane one value.
            for u in 0..tb / layout::UNIT {
                let (s, d) = (tf * tb + u * layout::UNIT + jf * 4, tt * tb + u * layout::UNIT + jt * 4);
                quants.copy_within(s..s + 4, d);
            }
            for plane in 0..ts / GROUP {
                self.scales[tt * ts + plane * GROUP + jt] = self.scales[tf * ts + plane * GROUP + jf];
            }
        }
    }

    /// This matrix grown or shrunk to `rows` rows, the first `keep` rows' values kept (those of
    /// later rows are unspecified).
    ///
    /// # Panics
    /// If `keep` exceeds either row count.
    pub fn resized(&self, rows: usize, keep: usize) -> Self {
        assert!(keep <= rows && keep <= self.rows, "keep {keep} rows of {} into {rows}", self.rows);
        let mut m = Self::empty(self.format, rows, self.cols);
        // Groups are stored one after another: the kept rows' groups are a prefix of both.
        let nb = self.cols / QK;
        let groups = keep.div_ceil(GROUP);
        let (qn, sn) = (groups * nb * layout::tile_bytes(self.format), groups * nb * layout::tile_scales(self.format));
        m.quants.as_mut_slice()[..qn].copy_from_slice(&self.quants.as_slice()[..qn]);
        m.scales[..sn].copy_from_slice(&self.scales[..sn]);
        m
    }

    /// The matrices' rows one after another, as one matrix (`[Σ rows, cols]`): one kernel call
    /// for several projections of the same input (q, k and v; gate and up). `None` when the
    /// formats or column counts differ, or a part other than the last has padding rows.
    pub fn stack(parts: &[&QMatrix]) -> Option<QMatrix> {
        let first = parts.first()?;
        let same = parts.iter().all(|p| p.format == first.format && p.cols == first.cols);
        let aligned = parts[..parts.len() - 1].iter().all(|p| p.rows.is_multiple_of(GROUP));
        if !same || !aligned {
            return None;
        }
        let rows = parts.iter().map(|p| p.rows).sum();
        let mut quants = AlignedBytes::filled(parts.iter().map(|p| p.quants.as_slice().len()).sum(), 0);
        let mut at = 0;
        for p in parts {
            let src = p.quants.as_slice();
            quants.as_mut_slice()[at..at + src.len()].copy_from_slice(src);
            at += src.len();
        }
        Some(QMatrix {
            format: first.format,
            rows,
            cols: first.cols,
            groups: rows.div_ceil(GROUP),
            quants,
            scales: parts.iter().flat_map(|p| p.scales.iter().copied()).collect(),
        })
    }

    /// Stores one GGUF-format block at `(row, b)`.
    fn pack(&mut self, src: &[u8], row: usize, b: usize) {
        let nb = self.cols / QK;
        let quants = self.quants.as_mut_slice();
        layout::pack_block(self.format, src, (row, b, nb), quants, &mut self.scales);
    }

    /// Number of output rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of input columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Block format of the weights.
    pub fn format(&self) -> QFormat {
        self.format
    }

    /// Bytes of weight storage held (packed quants and scales, rows padded to a multiple of 16).
    /// For `rows % 16 == 0` this equals the GGUF size `rows × cols/32 × block_bytes`.
    pub fn n_bytes(&self) -> usize {
        self.quants.as_slice().len() + 2 * self.scales.len()
    }

    /// Number of 16-row groups.
    pub(crate) fn groups(&self) -> usize {
        self.groups
    }

    /// Packed quants and scales of row group `g` (all `cols / 32` blocks). Inlined: called per
    /// group in the kernels' loops, whose next step loads the four words it returns at once
    /// (returned through memory, they stalled that load: ~8 % of an 8-row SmolLM2 pass).
    #[inline(always)]
    pub(crate) fn group(&self, g: usize) -> (&[u8], &[u16]) {
        let nb = self.cols / QK;
        let qb = nb * layout::tile_bytes(self.format);
        let sb = nb * layout::tile_scales(self.format);
        (&self.quants.as_slice()[g * qb..][..qb], &self.scales[g * sb..][..sb])
    }

    /// `y[n, rows] = x[n, cols] · Wᵀ` with f32 activations ([`Activations::F32`]): the exact
    /// product of the dequantized weights up to f32 rounding, bit-identical for a given token
    /// whatever `n`. Runs on rayon's global pool, split over output rows; small problems run
    /// inline.
    ///
    /// # Panics
    /// If `x.len() != n × cols` or `y.len() != n × rows`.
    pub fn matmul(&self, x: &[f32], n: usize, y: &mut [f32]) {
        self.matmul_mode(Activations::F32, x, n, y);
    }

    /// `y[n, rows] = x[n, cols] · Wᵀ` in `mode`, on the detected kernel path.
    ///
    /// [`Activations::Int8`] quantizes each row of `x` per 32 values to 8 bits (scale
    /// `amax / 127`, with the block sum kept for Q4_1's minimum term, as llama.cpp's Q8_0 /
    /// Q8_1), then every block product is an exact integer dot product.
    ///
    /// # Panics
    /// If `x.len() != n × cols` or `y.len() != n × rows`.
    pub fn matmul_mode(&self, mode: Activations, x: &[f32], n: usize, y: &mut [f32]) {
        self.run_mode(mode, KernelPath::detect(), x, n, y);
    }

    /// [`matmul_mode`](Self::matmul_mode) on an explicit kernel path (for tests and benchmarks).
    ///
    /// # Panics
    /// As `matmul`, and if `path` is not supported by this CPU.
    #[doc(hidden)]
    pub fn matmul_mode_with(&self, mode: Activations, path: KernelPath, x: &[f32], n: usize, y: &mut [f32]) {
        assert!(path.is_supported(), "kernel path {path:?} is not supported on this CPU");
        self.run_mode(mode, path, x, n, y);
    }

    /// The [`Activations::Int8`] product on an explicit kernel path (for tests and benchmarks).
    ///
    /// # Panics
    /// As `matmul`, and if `path` is not supported by this CPU.
    #[doc(hidden)]
    pub fn matmul_with(&self, path: KernelPath, x: &[f32], n: usize, y: &mut [f32]) {
        self.matmul_mode_with(Activations::Int8, path, x, n, y);
    }

    /// The [`Activations::F32`] product on an explicit kernel path (for tests and benchmarks).
    ///
    /// # Panics
    /// As `matmul`, and if `path` is not supported by this CPU.
    #[doc(hidden)]
    pub fn matmul_f32_with(&self, path: KernelPath, x: &[f32], n: usize, y: &mut [f32]) {
        self.matmul_mode_with(Activations::F32, path, x, n, y);
    }

    /// The [`Activations::Int8`] product for the first `limit` rows only (rounded up to whole
    /// 16-row groups), on the calling thread: `y[c · rows + r] = x_c · W_r`, each value exactly
    /// as [`QMatrix::matmul_mode`] computes it; the other entries of `y` are left as they are.
    /// For products inside work that is already split over threads (attention over a quantized
    /// key cache: a row per cached position, the first `limit` of them filled).
    ///
    /// # Panics
    /// If `x.len() != n × cols`, `y.len() != n × rows` or `limit > rows`.
    pub fn matmul_rows_here(&self, x: &[f32], n: usize, limit: usize, y: &mut [f32]) {
        assert!(limit <= self.rows, "limit {limit} beyond {} rows", self.rows);
        crate::dispatch::matmul_rows_here(self, KernelPath::detect(), x, n, limit.div_ceil(GROUP), y);
    }

    /// Runs `mode` on `path` (supported, checked by the callers).
    fn run_mode(&self, mode: Activations, path: KernelPath, x: &[f32], n: usize, y: &mut [f32]) {
        match mode {
            Activations::F32 => f32act::matmul_impl(self, path, x, n, y),
            Activations::Int8 => matmul_impl(self, path, x, n, y),
        }
    }

    /// Dequantizes row `row` into `out` (embedding lookup).
    ///
    /// # Panics
    /// If `row >= rows` or `out.len() != cols`.
    pub fn dequantize_row(&self, row: usize, out: &mut [f32]) {
        assert!(row < self.rows, "row {row} out of range for {} rows", self.rows);
        assert_eq!(out.len(), self.cols, "output length must equal cols");
        let nb = self.cols / QK;
        let quants = self.quants.as_slice();
        for (b, chunk) in out.chunks_exact_mut(QK).enumerate() {
            layout::unpack_block(self.format, (row, b, nb), quants, &self.scales, chunk);
        }
    }
}

/// Encodes 32 f32 values into one block of a format's GGUF bytes.
pub(crate) type Encode = fn(&[f32], &mut [u8]);

/// The block encoder of a format with a quantizer.
pub(crate) fn encoder(format: QFormat) -> Result<Encode, KernelError> {
    match format {
        QFormat::Q8_0 => Ok(encode_q8_0),
        QFormat::Q4_1 => Ok(encode_q4_1),
        QFormat::Q4_0 => Ok(encode_q4_0),
        QFormat::Q5_0 | QFormat::Q4K | QFormat::Q5K | QFormat::Q6K => Err(KernelError::NoQuantizer { format }),
    }
}

/// One Q8_0 block (see [`QMatrix::quantize_q8_0`]).
fn encode_q8_0(x: &[f32], block: &mut [u8]) {
    let mut q = [0i8; QK];
    let (d, _) = quantize_block_scalar(x, &mut q);
    block[..2].copy_from_slice(&layout::f32_to_f16(d).to_le_bytes());
    for (dst, &v) in block[2..].iter_mut().zip(&q) {
        *dst = v as u8;
    }
}

/// One Q4_1 block (see [`QMatrix::quantize_q4_1`]).
fn encode_q4_1(x: &[f32], block: &mut [u8]) {
    let (lo, hi) = x.iter().fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), &v| (a.min(v), b.max(v)));
    let d = (hi - lo) / 15.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    block[..2].copy_from_slice(&layout::f32_to_f16(d).to_le_bytes());
    block[2..4].copy_from_slice(&layout::f32_to_f16(lo).to_le_bytes());
    let q = |v: f32| ((v - lo) * id + 0.5).min(15.0) as u8;
    for j in 0..QK / 2 {
        block[4 + j] = q(x[j]) | (q(x[j + QK / 2]) << 4);
    }
}

/// One Q4_0 block (see [`QMatrix::quantize_q4_0`]).
fn encode_q4_0(x: &[f32], block: &mut [u8]) {
    let v = x.iter().fold(0.0f32, |m, &v| if v.abs() > m.abs() { v } else { m });
    let d = v / -8.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    block[..2].copy_from_slice(&layout::f32_to_f16(d).to_le_bytes());
    // ggml: min(15, (int8_t)(x / d + 8.5)); x / d >= -8 by the choice of d, so the cast truncates
    // a non-negative value.
    let q = |v: f32| (v * id + 8.5).clamp(0.0, 15.0) as u8;
    for j in 0..QK / 2 {
        block[2 + j] = q(x[j]) | (q(x[j + QK / 2]) << 4);
    }
}
