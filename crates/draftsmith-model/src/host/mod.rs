//! The CPU path of the attention block, on host memory: rotary embedding, a host-resident KV
//! cache and attention computed row by row in a fixed order. Every query row visits exactly its
//! visible keys, in position order, with fixed-shape reductions, so its result does not depend
//! on how many rows are in the batch or which masked keys sit beside it: a token verified inside
//! a draft tree gets bit-identical outputs to the same token decoded alone. That is what makes
//! greedy speculative decoding exactly lossless on the CPU.

use draftsmith_kernels::KernelPath;
use half::f16;

mod attend;
mod kv;
#[cfg(target_arch = "x86_64")]
mod simd;

pub use attend::{attend, attend_into, KeysIn, MaskRows, Visibility};
pub use kv::{HostKv, KvFormat};

/// One element of the host KV cache: `f32`, or `f16` for half the bytes a long context reads.
/// A value is rounded once, when its token's pass writes it, and widened exactly on every read,
/// so a token's cached keys and values are the same whichever pass (alone, in a batch, in a
/// draft tree) wrote them, and attention stays batch-invariant in both formats.
pub trait KvElem: Copy + Default + Send + Sync + 'static {
    /// Whether the element is an IEEE half (the SIMD kernels widen it with `vcvtph2ps`).
    const F16: bool;
    /// Rounds `x` to the element (round to nearest even).
    fn from_f32(x: f32) -> Self;
    /// The element as f32 (exact).
    fn to_f32(self) -> f32;
    /// `dst[i] = from_f32(src[i])` (the same lengths).
    fn round_slice(src: &[f32], dst: &mut [Self]) {
        dst.iter_mut().zip(src).for_each(|(o, &x)| *o = Self::from_f32(x));
    }
    /// `dst[i] = src[i].to_f32()` (the same lengths).
    fn widen_slice(src: &[Self], dst: &mut [f32]) {
        dst.iter_mut().zip(src).for_each(|(o, &x)| *o = x.to_f32());
    }
    /// `row` as f32: its exact widening into `buf` (at least as long), or for f32 the row itself.
    fn widen<'a>(row: &'a [Self], buf: &'a mut [f32]) -> &'a [f32] {
        let out = &mut buf[..row.len()];
        Self::widen_slice(row, out);
        out
    }
}

impl KvElem for f32 {
    const F16: bool = false;
    fn from_f32(x: f32) -> Self {
        x
    }
    fn to_f32(self) -> f32 {
        self
    }
    fn widen<'a>(row: &'a [f32], _buf: &'a mut [f32]) -> &'a [f32] {
        row
    }
}

impl KvElem for f16 {
    const F16: bool = true;
    fn from_f32(x: f32) -> Self {
        f16::from_f32(x)
    }
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    // Eight at a time with F16C where the CPU has it; the same round-to-nearest-even bits.
    fn round_slice(src: &[f32], dst: &mut [Self]) {
        half::slice::HalfFloatSliceExt::convert_from_f32_slice(dst, src);
    }
    fn widen_slice(src: &[Self], dst: &mut [f32]) {
        half::slice::HalfFloatSliceExt::convert_to_f32_slice(src, dst);
    }
}

/// `o ← o + p·v`, elementwise (AVX2 + FMA with `simd`).
#[inline]
fn axpy(o: &mut [f32], p: f32, v: &[f32], simd: bool) {
    #[cfg(target_arch = "x86_64")]
    if simd {
        // SAFETY: `simd` is only true when AVX2 and FMA are available.
        unsafe { axpy_avx2(o, p, v) };
        return;
    }
    let _ = simd;
    o.iter_mut().zip(v).for_each(|(acc, &x)| *acc += p * x);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn axpy_avx2(o: &mut [f32], p: f32, v: &[f32]) {
    use std::arch::x86_64::*;
    let n = o.len().min(v.len());
    let chunks = n / 8;
    let pv = _mm256_set1_ps(p);
    for c in 0..chunks {
        // SAFETY: c * 8 + 8 <= n, within both slices.
        unsafe {
            let acc = _mm256_loadu_ps(o.as_ptr().add(c * 8));
            _mm256_storeu_ps(
                o.as_mut_ptr().add(c * 8),
                _mm256_fmadd_ps(pv, _mm256_loadu_ps(v.as_ptr().add(c * 8)), acc),
            );
        }
    }
    for (acc, &x) in o[chunks * 8..n].iter_mut().zip(&v[chunks * 8..n]) {
        *acc = p.mul_add(x, *acc);
    }
}

/// Dot product with a fixed 8-lane accumulation pattern: its rounding depends only on the
/// length (and on whether this machine has AVX2+FMA, which is fixed for a process).
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if KernelPath::detect().simd() {
        // SAFETY: the CPU supports AVX2 and FMA (checked above).
        return unsafe { dot_avx2(a, b) };
    }
    dot_portable(a, b)
}

fn reduce_lanes(acc: [f32; 8], tail: f32) -> f32 {
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

fn dot_portable(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    reduce_lanes(acc, tail)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::{_mm256_fmadd_ps, _mm256_loadu_ps, _mm256_setzero_ps, _mm256_storeu_ps};
    let n = a.len().min(b.len());
    let chunks = n / 8;
    let mut acc = _mm256_setzero_ps();
    for c in 0..chunks {
        // SAFETY: c * 8 + 8 <= n, within both slices.
        let (x, y) = unsafe { (_mm256_loadu_ps(a.as_ptr().add(c * 8)), _mm256_loadu_ps(b.as_ptr().add(c * 8))) };
        acc = _mm256_fmadd_ps(x, y, acc);
    }
    let mut lanes = [0.0f32; 8];
    // SAFETY: `lanes` holds 8 f32.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc) };
    let tail: f32 = a[chunks * 8..n].iter().zip(&b[chunks * 8..n]).map(|(x, y)| x * y).sum();
    reduce_lanes(lanes, tail)
}

/// Rotate-half RoPE of one row's heads (`src`, heads of `cos.len()` values each) into `dst`,
/// with that row's `cos`/`sin` (`[head_dim]`): each pair `(x_i, x_{i + d/2})` rotated.
pub fn rope_heads(src: &[f32], cos: &[f32], sin: &[f32], dst: &mut [f32]) {
    let (d, half) = (cos.len(), cos.len() / 2);
    for (x, out) in src.chunks_exact(d).zip(dst.chunks_exact_mut(d)) {
        for i in 0..half {
            let (a, b) = (x[i], x[i + half]);
            out[i] = a * cos[i] - b * sin[i];
            out[i + half] = b * cos[i + half] + a * sin[i + half];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axpy_paths_agree_with_scalar() {
        for simd in [false, KernelPath::detect().simd()] {
            let (mut o, v) = (vec![1.0f32; 67], (0..67).map(|i| i as f32 * 0.5).collect::<Vec<_>>());
            axpy(&mut o, 0.25, &v, simd);
            assert!(o.iter().zip(&v).all(|(a, b)| (a - (1.0 + 0.25 * b)).abs() < 1e-6));
        }
    }

    #[test]
    fn dot_paths_agree() {
        let a: Vec<f32> = (0..67).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..67).map(|i| (i as f32 * 0.11).cos()).collect();
        let exact: f64 = a.iter().zip(&b).map(|(x, y)| *x as f64 * *y as f64).sum();
        assert!((dot(&a, &b) as f64 - exact).abs() < 1e-5);
        assert!((dot_portable(&a, &b) as f64 - exact).abs() < 1e-5);
    }

    #[test]
    fn slice_rounding_gives_each_elements_bits() {
        // Normal, subnormal, overflowing and tie values, in a length with a remainder.
        let xs: Vec<f32> = (0..203)
            .map(|i| match i % 5 {
                0 => (i as f32 * 0.731).sin() * 3.0,
                1 => 1e-6 * i as f32,
                2 => 7e4 * i as f32,
                3 => 1.0 + (i as f32) * 2f32.powi(-11),
                _ => -(i as f32) / 7.0,
            })
            .collect();
        let mut halves = vec![f16::ZERO; xs.len()];
        f16::round_slice(&xs, &mut halves);
        assert!(halves.iter().zip(&xs).all(|(h, &x)| h.to_bits() == f16::from_f32(x).to_bits()));
        let mut back = vec![0.0f32; xs.len()];
        f16::widen_slice(&halves, &mut back);
        assert!(back.iter().zip(&halves).all(|(b, h)| b.to_bits() == h.to_f32().to_bits()));
    }

    #[test]
    fn rope_rotates_half_pairs() {
        let (c, s) = ([0.0f32; 4], [1.0f32; 4]);
        let mut out = [0.0f32; 8];
        rope_heads(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], &c, &s, &mut out);
        assert_eq!(
            out,
            [-3.0, -4.0, 1.0, 2.0, -7.0, -8.0, 5.0, 6.0],
            "a 90° rotation of each (x_i, x_i+d/2) pair, head by head"
        );
    }
}
