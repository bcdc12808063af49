//! Quantization of f32 activation rows to 8 bits per 32-element block (llama.cpp Q8_0 / Q8_1).
//!
//! For block values `x`: `d = amax / 127`, `q = round(x / d)` (half away from zero), and the
//! block sum `Σ q` is kept (Q4_1 weights need it for their minimum term; Q8_0 weights on the
//! AVX-512 path need it to undo the `+128` bias of the packed weights). Unlike llama.cpp, `d` is
//! kept in f32 rather than rounded to f16, which is slightly more accurate.
//!
//! The scalar and SIMD quantizers perform the same IEEE operations in the same order and give
//! bit-identical results, so all kernel paths see the same integers.

use rayon::prelude::*;

use crate::dispatch::KernelPath;
use crate::layout::QK;

/// From this many activation values on, rows are quantized in parallel.
const PARALLEL_VALUES: usize = 1 << 15;

/// Largest f32 below 0.5: `trunc(s + copysign(ROUND_BIAS, s))` rounds half away from zero.
pub(crate) const ROUND_BIAS: f32 = 0.499_999_97;

/// Quantizes one 32-value block into `q`; returns `(d, Σ q)`.
///
/// `|q| <= 127` always holds, even for non-finite input (NaN maps to -127, ±inf to ±127).
pub(crate) fn quantize_block_scalar(x: &[f32], q: &mut [i8]) -> (f32, i32) {
    let amax = x.iter().fold(0.0f32, |m, v| v.abs().max(m));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut sum = 0i32;
    for (dst, &v) in q.iter_mut().zip(x) {
        // Not `clamp`: `max` maps NaN to -127 exactly like `_mm256_max_ps` does.
        #[allow(clippy::manual_clamp)]
        let s = (v * id).max(-127.0).min(127.0);
        let r = (s + ROUND_BIAS.copysign(s)) as i32;
        *dst = r as i8;
        sum += r;
    }
    (d, sum)
}

/// Borrowed view of one quantized activation row.
#[derive(Clone, Copy)]
pub(crate) struct ActRow<'a> {
    /// Quantized values, `cols` long.
    pub qs: &'a [i8],
    /// Block scales, `cols / 32` long.
    pub d: &'a [f32],
    /// Block sums `Σ q`, `cols / 32` long.
    pub sum: &'a [i32],
}

/// Quantized activations for `n` rows of `cols` values; reused between calls as scratch.
#[derive(Default)]
pub(crate) struct ActQuant {
    n: usize,
    cols: usize,
    qs: Vec<i8>,
    d: Vec<f32>,
    sum: Vec<i32>,
    /// The same rows laid out per kernel tile (see [`ActQuant::quantize_packed`]).
    packed: Packed,
}

/// Rows `c0 .. c0 + cn` of each tile interleaved block by block: block `b` of the tile's row
/// `t` at `qs[c0·cols + (b·cn + t)·32 ..]`, its scale, `scale · Σ q` and `−128 · Σ q` at
/// `[c0·nb + b·cn + t]`. A kernel then reads a whole tile from one pointer with constant
/// offsets. Only the layout changes: every value is the one of the row-major form.
#[derive(Default)]
struct Packed {
    tiles: Vec<(usize, usize)>,
    qs: Vec<i8>,
    d: Vec<f32>,
    dsum: Vec<f32>,
    bias: Vec<i32>,
}

/// Where [`ActQuant::quantize_packed`]'s threads write (disjoint indices per tile).
struct PackedPtrs {
    qs: *mut i8,
    d: *mut f32,
    dsum: *mut f32,
    bias: *mut i32,
}

// SAFETY: the threads of `quantize_packed` write disjoint indices.
unsafe impl Sync for PackedPtrs {}

/// One tile of [`Packed`] activations.
#[derive(Clone, Copy)]
pub(crate) struct PackedTile<'a> {
    pub qs: &'a [i8],
    pub d: &'a [f32],
    pub dsum: &'a [f32],
    pub bias: &'a [i32],
    /// Rows in the tile.
    pub cn: usize,
}

/// The near-equal split of `n` rows into tiles of at most `width` (17 rows, width 8 → 6, 6, 5):
/// `(first row, rows)` per tile.
pub(crate) fn tile_split(n: usize, width: usize) -> Vec<(usize, usize)> {
    let tiles = n.div_ceil(width);
    let mut c0 = 0;
    (0..tiles)
        .map(|i| {
            let cn = n / tiles + usize::from(i < n % tiles);
            c0 += cn;
            (c0 - cn, cn)
        })
        .collect()
}

impl ActQuant {
    /// Quantizes `x` (`n × cols`, row-major) with the quantizer matching `path`.
    pub(crate) fn quantize(&mut self, x: &[f32], n: usize, cols: usize, path: KernelPath) {
        assert_eq!(x.len(), n * cols, "activation length must be n * cols");
        assert_eq!(cols % QK, 0, "cols must be a multiple of 32");
        let blocks = n * cols / QK;
        self.n = n;
        self.cols = cols;
        self.qs.resize(n * cols, 0);
        self.d.resize(blocks, 0.0);
        self.sum.resize(blocks, 0);
        if n * cols < PARALLEL_VALUES || n < 2 || rayon::current_num_threads() < 2 {
            quantize_blocks(path, x, &mut self.qs, &mut self.d, &mut self.sum);
            return;
        }
        let nb = cols / QK;
        let rows = (x.chunks(cols), self.qs.chunks_mut(cols));
        let scales = (self.d.chunks_mut(nb), self.sum.chunks_mut(nb));
        let jobs: Vec<_> = rows.0.zip(rows.1).zip(scales.0.zip(scales.1)).collect();
        jobs.into_par_iter()
            .for_each(|((x, qs), (d, sum))| quantize_blocks(path, x, qs, d, sum));
    }

    /// Quantizes `x` (`n × cols`, row-major) straight into the per-tile layout of [`Packed`]
    /// (tiles of at most `width` rows), tiles split over the kernel pool's threads when there
    /// are several and enough values. The row-major form is not kept (`row` is not valid after).
    pub(crate) fn quantize_packed(&mut self, x: &[f32], n: usize, cols: usize, path: KernelPath, width: usize) {
        assert_eq!(x.len(), n * cols, "activation length must be n * cols");
        assert_eq!(cols % QK, 0, "cols must be a multiple of 32");
        let nb = cols / QK;
        self.n = n;
        self.cols = cols;
        let p = &mut self.packed;
        p.tiles = tile_split(n, width);
        p.qs.resize(n * cols, 0);
        p.d.resize(n * nb, 0.0);
        p.dsum.resize(n * nb, 0.0);
        p.bias.resize(n * nb, 0);
        let out = PackedPtrs { qs: p.qs.as_mut_ptr(), d: p.d.as_mut_ptr(), dsum: p.dsum.as_mut_ptr(), bias: p.bias.as_mut_ptr() };
        let tiles = &p.tiles;
        let work = |t: usize, threads: usize| {
            let out = &out;
            for &(c0, cn) in &tiles[crate::pool::split(tiles.len(), t, threads)] {
                let (mut q, mut d, mut sum) = ([0i8; QK], [0.0f32; 1], [0i32; 1]);
                for r in 0..cn {
                    for b in 0..nb {
                        quantize_blocks(path, &x[(c0 + r) * cols + b * QK..][..QK], &mut q, &mut d, &mut sum);
                        let (qi, si) = (c0 * cols + (b * cn + r) * QK, c0 * nb + b * cn + r);
                        // SAFETY: tiles are disjoint row ranges, so each index is written by one
                        // thread only, and all lie within the buffers sized above.
                        unsafe {
                            std::ptr::copy_nonoverlapping(q.as_ptr(), out.qs.add(qi), QK);
                            *out.d.add(si) = d[0];
                            *out.dsum.add(si) = d[0] * sum[0] as f32;
                            *out.bias.add(si) = -128 * sum[0];
                        }
                    }
                }
            }
        };
        if tiles.len() > 1 && n * cols >= PARALLEL_VALUES / 4 {
            crate::Pool::global().run(&work);
        } else {
            work(0, 1);
        }
    }

    /// The tiles of the last [`ActQuant::quantize_packed`].
    pub(crate) fn tiles(&self) -> &[(usize, usize)] {
        &self.packed.tiles
    }

    /// Tile `i` of the packed layout.
    pub(crate) fn packed_tile(&self, i: usize) -> PackedTile<'_> {
        let (c0, cn) = self.packed.tiles[i];
        let nb = self.cols / QK;
        let p = &self.packed;
        PackedTile {
            qs: &p.qs[c0 * self.cols..][..cn * self.cols],
            d: &p.d[c0 * nb..][..cn * nb],
            dsum: &p.dsum[c0 * nb..][..cn * nb],
            bias: &p.bias[c0 * nb..][..cn * nb],
            cn,
        }
    }

    /// Number of quantized rows.
    pub(crate) fn n(&self) -> usize {
        self.n
    }

    /// Row `c`.
    pub(crate) fn row(&self, c: usize) -> ActRow<'_> {
        let nb = self.cols / QK;
        ActRow {
            qs: &self.qs[c * self.cols..][..self.cols],
            d: &self.d[c * nb..][..nb],
            sum: &self.sum[c * nb..][..nb],
        }
    }
}

/// Quantizes consecutive blocks of `x` into `qs`, `d`, `sum`.
fn quantize_blocks(path: KernelPath, x: &[f32], qs: &mut [i8], d: &mut [f32], sum: &mut [i32]) {
    #[cfg(target_arch = "x86_64")]
    if path != KernelPath::Scalar && path.is_supported() {
        // SAFETY: every non-scalar path requires AVX2, checked by `is_supported`.
        unsafe { crate::avx2::quantize_blocks(x, qs, d, sum) };
        return;
    }
    let _ = path;
    let blocks = x.chunks_exact(QK).zip(qs.chunks_exact_mut(QK));
    for ((xb, qb), (db, sb)) in blocks.zip(d.iter_mut().zip(sum.iter_mut())) {
        (*db, *sb) = quantize_block_scalar(xb, qb);
    }
}
