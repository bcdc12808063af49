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
use crate::pool::DisjointSlice;

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
    /// Sums of each block's first 16 values (only after [`ActQuant::quantize`] with `halves`).
    pub lo: &'a [i32],
}

/// Quantized activations for `n` rows of `cols` values; reused between calls as scratch.
#[derive(Default)]
pub(crate) struct ActQuant {
    n: usize,
    cols: usize,
    qs: Vec<i8>,
    d: Vec<f32>,
    sum: Vec<i32>,
    lo: Vec<i32>,
    /// The rows' split into kernel tiles, `(first row, rows)` ([`tile_split`] for the path).
    tiles: Vec<(usize, usize)>,
    /// On the SIMD paths, the rows laid out per tile instead (see [`Packed`]).
    packed: Packed,
}

/// Rows `c0 .. c0 + cn` of each tile interleaved block by block: block `b` of the tile's row
/// `t` at `qs[c0·cols + (b·cn + t)·32 ..]`, its scale, `scale · Σ q` and `−128 · Σ q` at
/// `[c0·nb + b·cn + t]`, and (with `halves`) `−32 · Σ q` of its two halves of 16 at
/// `half_bias[2·(c0·nb + b·cn + t) ..]`. A kernel then reads a whole tile from one pointer with
/// constant offsets. Only the layout changes: every value is the one of the row-major form.
#[derive(Default)]
struct Packed {
    qs: Vec<i8>,
    d: Vec<f32>,
    dsum: Vec<f32>,
    bias: Vec<i32>,
    half_bias: Vec<i32>,
}

/// One tile of [`Packed`] activations.
#[derive(Clone, Copy)]
pub(crate) struct PackedTile<'a> {
    pub qs: &'a [i8],
    pub d: &'a [f32],
    pub dsum: &'a [f32],
    pub bias: &'a [i32],
    /// `−32 · Σ q` of each block's two halves (empty unless quantized with `halves`).
    pub half_bias: &'a [i32],
    /// Rows in the tile.
    pub cn: usize,
}

/// `−32 · Σ q` of the two halves of 16 of a quantized block, from the block sum `sum` and its
/// first half's `lo`: the integer offset a Q6_K half's dot product starts from (its weights are
/// stored as `q_w + 32`).
pub(crate) fn half_bias(sum: i32, lo: i32) -> [i32; 2] {
    [-32 * lo, -32 * (sum - lo)]
}

/// The sum of the first 16 values of a quantized block.
fn first_half(q: &[i8]) -> i32 {
    q[..QK / 2].iter().map(|&v| i32::from(v)).sum()
}

/// The near-equal split of `n` rows into tiles of at most `width` (17 rows, width 8 → 6, 6, 5,
/// which keeps every kernel call well filled): `(first row, rows)` per tile.
pub(crate) fn tile_split(n: usize, width: usize) -> impl ExactSizeIterator<Item = (usize, usize)> + Clone {
    let tiles = n.div_ceil(width);
    (0..tiles).map(move |i| {
        let r = crate::pool::split(n, i, tiles);
        (r.start, r.len())
    })
}

impl ActQuant {
    /// Quantizes `x` (`n × cols`, row-major) with the quantizer matching `path`, split into
    /// tiles of the path's width: per tile on the SIMD paths ([`Packed`], read with
    /// [`ActQuant::packed_tile`]), row by row on the scalar path ([`ActQuant::row`]). With
    /// `halves`, the sums of each block's two halves of 16 are kept too (Q6_K weights, whose
    /// scales change every 16 values, need them).
    pub(crate) fn quantize(&mut self, x: &[f32], n: usize, cols: usize, path: KernelPath, halves: bool) {
        assert_eq!(x.len(), n * cols, "activation length must be n * cols");
        assert_eq!(cols % QK, 0, "cols must be a multiple of 32");
        if path.simd() {
            let shared = self.packed_for(n, cols, path, halves);
            // SAFETY: one thread quantizes the whole input (the only share of a 1-way split).
            return unsafe { shared.quantize_part(x, 0, 1) };
        }
        (self.n, self.cols) = (n, cols);
        self.tiles.clear();
        self.tiles.extend(tile_split(n, path.tile_width(halves)));
        self.quantize_rows(x, path);
        self.lo.clear();
        if halves {
            self.lo.extend(self.qs.chunks_exact(QK).map(first_half));
        }
    }

    /// The row-major form.
    fn quantize_rows(&mut self, x: &[f32], path: KernelPath) {
        let (n, cols) = (self.n, self.cols);
        let blocks = n * cols / QK;
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
        jobs.into_par_iter().for_each(|((x, qs), (d, sum))| quantize_blocks(path, x, qs, d, sum));
    }

    /// Sizes the per-tile layout of [`Packed`] for `n × cols` values on the SIMD path `path`
    /// (with `halves` as in [`ActQuant::quantize`]) and returns the handle through which threads
    /// quantize shares of the input side by side and then read the tiles ([`SharedAct`]).
    pub(crate) fn packed_for(&mut self, n: usize, cols: usize, path: KernelPath, halves: bool) -> SharedAct<'_> {
        assert_eq!(cols % QK, 0, "cols must be a multiple of 32");
        assert_ne!(path, KernelPath::Scalar, "the scalar path keeps row-major rows");
        (self.n, self.cols) = (n, cols);
        self.tiles.clear();
        self.tiles.extend(tile_split(n, path.tile_width(halves)));
        let nb = cols / QK;
        let p = &mut self.packed;
        p.qs.resize(n * cols, 0);
        p.d.resize(n * nb, 0.0);
        p.dsum.resize(n * nb, 0.0);
        p.bias.resize(n * nb, 0);
        p.half_bias.resize(if halves { 2 * n * nb } else { 0 }, 0);
        SharedAct {
            path,
            n,
            cols,
            halves,
            tiles: &self.tiles,
            qs: DisjointSlice::new(&mut p.qs),
            d: DisjointSlice::new(&mut p.d),
            dsum: DisjointSlice::new(&mut p.dsum),
            bias: DisjointSlice::new(&mut p.bias),
            half_bias: DisjointSlice::new(&mut p.half_bias),
        }
    }

    /// Tile `i` in the packed layout (SIMD paths only).
    pub(crate) fn packed_tile(&self, i: usize) -> PackedTile<'_> {
        let (c0, cn) = self.tiles[i];
        let nb = self.cols / QK;
        let p = &self.packed;
        PackedTile {
            qs: &p.qs[c0 * self.cols..][..cn * self.cols],
            d: &p.d[c0 * nb..][..cn * nb],
            dsum: &p.dsum[c0 * nb..][..cn * nb],
            bias: &p.bias[c0 * nb..][..cn * nb],
            half_bias: if p.half_bias.is_empty() { &[] } else { &p.half_bias[2 * c0 * nb..][..2 * cn * nb] },
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
            lo: if self.lo.is_empty() { &[] } else { &self.lo[c * nb..][..nb] },
        }
    }
}

/// Where a product's kernels read its quantized activations: tiles of rows, packed per tile
/// on the SIMD paths ([`PackedTile`]) or row by row on the scalar path ([`ActRow`]).
pub(crate) trait ActTiles: Sync {
    /// `(first row, rows)` of each tile.
    fn tiles(&self) -> &[(usize, usize)];
    /// Tile `i` in the packed layout (SIMD paths).
    fn packed_tile(&self, i: usize) -> PackedTile<'_>;
    /// Row `c` (scalar path).
    fn row(&self, c: usize) -> ActRow<'_>;
}

impl ActTiles for ActQuant {
    /// The tiles of the last [`ActQuant::quantize`].
    fn tiles(&self) -> &[(usize, usize)] {
        &self.tiles
    }

    fn packed_tile(&self, i: usize) -> PackedTile<'_> {
        ActQuant::packed_tile(self, i)
    }

    fn row(&self, c: usize) -> ActRow<'_> {
        ActQuant::row(self, c)
    }
}

/// The packed activations of [`ActQuant::packed_for`], shared by the threads of one product:
/// each quantizes its share of the blocks ([`SharedAct::quantize_part`]), and once all have,
/// every thread reads every tile ([`SharedAct::ready`]). So the input is quantized by all
/// threads at once, inside the product's own job, instead of by the calling thread while the
/// others wait. A block's values do not depend on the split.
pub(crate) struct SharedAct<'a> {
    path: KernelPath,
    n: usize,
    cols: usize,
    halves: bool,
    tiles: &'a [(usize, usize)],
    qs: DisjointSlice<'a, i8>,
    d: DisjointSlice<'a, f32>,
    dsum: DisjointSlice<'a, f32>,
    bias: DisjointSlice<'a, i32>,
    half_bias: DisjointSlice<'a, i32>,
}

impl SharedAct<'_> {
    /// Quantizes share `part` of `parts` of the input's blocks (`x`: `n × cols`, row-major),
    /// split evenly in their packed order.
    ///
    /// # Safety
    /// Within one split (one `parts`), no two calls for the same `part` run at once, and no
    /// tile is read ([`SharedAct::ready`]) while any call runs.
    pub(crate) unsafe fn quantize_part(&self, x: &[f32], part: usize, parts: usize) {
        assert_eq!(x.len(), self.n * self.cols, "activation length must be n * cols");
        // The blocks are taken in their order in [`Packed`] (tile by tile, block by block, row
        // by row), so each share writes one contiguous range and no cache line but the ends'
        // is written by two threads. Up to CHUNK blocks at a time are gathered from their rows
        // and quantized together straight into place.
        const CHUNK: usize = 64;
        let mut gathered = [0f32; CHUNK * QK];
        let mut sum = [0i32; CHUNK];
        let nb = self.cols / QK;
        let blocks = crate::pool::split(self.n * nb, part, parts);
        let (mut i, mut tile) = (blocks.start, 0);
        while i < blocks.end {
            while (self.tiles[tile].0 + self.tiles[tile].1) * nb <= i {
                tile += 1;
            }
            let (c0, cn) = self.tiles[tile];
            let k = ((c0 + cn) * nb).min(blocks.end).min(i + CHUNK) - i;
            for (j, dst) in gathered.chunks_exact_mut(QK).take(k).enumerate() {
                let (b, r) = ((i + j - c0 * nb) / cn, (i + j - c0 * nb) % cn);
                dst.copy_from_slice(&x[(c0 + r) * self.cols + b * QK..][..QK]);
            }
            // SAFETY: blocks `i .. i + k` belong to this share alone, and the caller runs each
            // share once.
            let (q, d) = unsafe { (self.qs.part(i * QK, k * QK), self.d.part(i, k)) };
            quantize_blocks(self.path, &gathered[..k * QK], q, d, &mut sum[..k]);
            // SAFETY: as above.
            let (dsum, bias) = unsafe { (self.dsum.part(i, k), self.bias.part(i, k)) };
            for j in 0..k {
                dsum[j] = d[j] * sum[j] as f32;
                bias[j] = -128 * sum[j];
            }
            if self.halves {
                // SAFETY: as above (two per block).
                let half = unsafe { self.half_bias.part(2 * i, 2 * k) };
                for (j, h) in half.chunks_exact_mut(2).enumerate() {
                    h.copy_from_slice(&half_bias(sum[j], first_half(&q[j * QK..][..QK])));
                }
            }
            i += k;
        }
    }

    /// Read access to the tiles.
    ///
    /// # Safety
    /// Every share of the split has been quantized, and none is quantized again while the
    /// result lives.
    pub(crate) unsafe fn ready(&self) -> ReadyAct<'_, '_> {
        ReadyAct(self)
    }
}

/// [`SharedAct`] once every share is quantized ([`SharedAct::ready`]).
pub(crate) struct ReadyAct<'s, 'a>(&'s SharedAct<'a>);

impl ActTiles for ReadyAct<'_, '_> {
    fn tiles(&self) -> &[(usize, usize)] {
        self.0.tiles
    }

    fn packed_tile(&self, i: usize) -> PackedTile<'_> {
        let a = self.0;
        let (c0, cn) = a.tiles[i];
        let nb = a.cols / QK;
        // SAFETY: `ready`'s contract: every block is written and none is written any more.
        unsafe {
            PackedTile {
                qs: a.qs.get(c0 * a.cols, cn * a.cols),
                d: a.d.get(c0 * nb, cn * nb),
                dsum: a.dsum.get(c0 * nb, cn * nb),
                bias: a.bias.get(c0 * nb, cn * nb),
                half_bias: if a.halves { a.half_bias.get(2 * c0 * nb, 2 * cn * nb) } else { &[] },
                cn,
            }
        }
    }

    fn row(&self, _c: usize) -> ActRow<'_> {
        unreachable!("the packed layout of the SIMD paths has no row-major rows")
    }
}

/// Quantizes consecutive blocks of `x` into `qs`, `d`, `sum`.
fn quantize_blocks(path: KernelPath, x: &[f32], qs: &mut [i8], d: &mut [f32], sum: &mut [i32]) {
    #[cfg(target_arch = "x86_64")]
    if path.simd() && path.is_supported() {
        if path.wide() {
            // SAFETY: the wide paths require AVX-512 F/BW/VL, checked by `is_supported`.
            unsafe { crate::avx512::quantize_blocks(x, qs, d, sum) };
        } else {
            // SAFETY: every non-scalar path requires AVX2, checked by `is_supported`.
            unsafe { crate::avx2::quantize_blocks(x, qs, d, sum) };
        }
        return;
    }
    let _ = path;
    let blocks = x.chunks_exact(QK).zip(qs.chunks_exact_mut(QK));
    for ((xb, qb), (db, sb)) in blocks.zip(d.iter_mut().zip(sum.iter_mut())) {
        (*db, *sb) = quantize_block_scalar(xb, qb);
    }
}
