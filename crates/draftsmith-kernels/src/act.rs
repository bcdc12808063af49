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
