//! Element-wise and per-row operations of the decode path (RMSNorm, SwiGLU, `exp`), on host
//! buffers.
//!
//! Each function treats every row on its own with one fixed sequence of operations that depends
//! only on the row's length and the kernel path (fixed for a process), so a token's results are
//! bit-identical whatever rows sit beside it: the batch invariance the lossless CPU path needs.

use crate::dispatch::KernelPath;

/// `out[r] = x[r] / sqrt(mean(x[r]²) + eps) · w` for every row `r` of `x` (`[n, w.len()]`).
pub fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let d = w.len();
    assert!(d > 0 && x.len() == out.len() && x.len().is_multiple_of(d), "rms_norm: shapes");
    for (xr, or) in x.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
        let inv = 1.0 / (sum_squares(xr) / d as f32 + eps).sqrt();
        for ((o, &v), &g) in or.iter_mut().zip(xr).zip(w) {
            *o = v * inv * g;
        }
    }
}

/// `Σ v²` with eight interleaved partial sums (lane `l` takes elements `l, l + 8, …`), combined
/// pairwise, then the tail.
pub fn sum_squares(x: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if KernelPath::detect().simd() {
        // SAFETY: AVX2 and FMA are available (every non-scalar path requires them).
        return unsafe { avx2::sum_squares(x) };
    }
    let mut acc = [0.0f32; 8];
    let chunks = x.chunks_exact(8);
    let tail: f32 = chunks.remainder().iter().map(|v| v * v).sum();
    for c in chunks {
        for l in 0..8 {
            acc[l] = c[l].mul_add(c[l], acc[l]);
        }
    }
    reduce8(acc) + tail
}

fn reduce8(a: [f32; 8]) -> f32 {
    ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]))
}

/// SwiGLU: `out[i] = silu(gate[i]) · up[i]` with `silu(g) = g / (1 + exp(−g))`.
pub fn silu_mul(gate: &[f32], up: &[f32], out: &mut [f32]) {
    assert!(gate.len() == up.len() && up.len() == out.len(), "silu_mul: lengths");
    #[cfg(target_arch = "x86_64")]
    if KernelPath::detect().simd() {
        // SAFETY: as in `sum_squares` (and AVX-512 F with `wide()`).
        unsafe {
            if KernelPath::detect().wide() {
                avx2::silu_mul_wide(gate, up, out)
            } else {
                avx2::silu_mul(gate, up, out)
            }
        };
        return;
    }
    for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
        *o = g / (1.0 + exp_scalar(-g)) * u;
    }
}

/// `x ← exp(x − shift)` element-wise (softmax numerators).
pub fn exp_shifted(x: &mut [f32], shift: f32) {
    #[cfg(target_arch = "x86_64")]
    if KernelPath::detect().simd() {
        // SAFETY: AVX2 and FMA are available (`simd`).
        unsafe { avx2::exp_shifted(x, shift) };
        return;
    }
    x.iter_mut().for_each(|v| *v = exp_scalar(*v - shift));
}

/// Softmax numerators in place, `x ← exp(x − max x)`, returning their sum `Σ x`: the max is
/// exact whatever the order, the numerators are [`exp_shifted`]'s, and the sum is taken with
/// eight interleaved partial sums (lane `l` takes elements `l, l + 8, …`) combined pairwise,
/// then the tail in order — one fixed sequence for a given length, on both paths.
pub fn softmax_numerators(x: &mut [f32]) -> f32 {
    let max = row_max(x);
    #[cfg(target_arch = "x86_64")]
    if KernelPath::detect().simd() {
        // SAFETY: AVX2 and FMA (and with `wide()` AVX-512 F) are available.
        let acc = unsafe {
            if KernelPath::detect().wide() {
                avx2::exp_shifted_wide(x, max)
            } else {
                avx2::exp_shifted(x, max)
            }
        };
        let tail: f32 = x[x.len() / 8 * 8..].iter().sum();
        return reduce8(acc) + tail;
    }
    exp_shifted(x, max);
    let mut acc = [0.0f32; 8];
    let chunks = x.chunks_exact(8);
    let tail: f32 = chunks.remainder().iter().sum();
    for c in chunks {
        for l in 0..8 {
            acc[l] += c[l];
        }
    }
    reduce8(acc) + tail
}

/// The largest value of `x` (−∞ when empty); NaN-free input assumed, as for scores. A maximum
/// is exact in any order, so the vector forms return the same value.
pub fn row_max(x: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if KernelPath::detect().simd() {
        // SAFETY: AVX2 (and with `wide()` AVX-512 F) is available.
        return unsafe {
            if KernelPath::detect().wide() {
                avx2::row_max_wide(x)
            } else {
                avx2::row_max(x)
            }
        };
    }
    let mut acc = [f32::NEG_INFINITY; 8];
    let chunks = x.chunks_exact(8);
    let tail = chunks.remainder().iter().copied().fold(f32::NEG_INFINITY, f32::max);
    for c in chunks {
        for l in 0..8 {
            acc[l] = acc[l].max(c[l]);
        }
    }
    acc.iter().copied().fold(tail, f32::max)
}

/// `exp` on the scalar path (the platform's `expf`).
fn exp_scalar(v: f32) -> f32 {
    v.exp()
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::reduce8;

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn sum_squares(x: &[f32]) -> f32 {
        let chunks = x.len() / 8;
        let mut acc = _mm256_setzero_ps();
        for c in 0..chunks {
            // SAFETY: c * 8 + 8 <= x.len().
            let v = unsafe { _mm256_loadu_ps(x.as_ptr().add(c * 8)) };
            acc = _mm256_fmadd_ps(v, v, acc);
        }
        let mut lanes = [0.0f32; 8];
        // SAFETY: `lanes` holds 8 values.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc) };
        let tail: f32 = x[chunks * 8..].iter().map(|v| v * v).sum();
        reduce8(lanes) + tail
    }

    /// `exp(v)` of eight lanes: Cephes' `expf` polynomial (~1 ulp), inputs clamped to the
    /// range where the result is a normal f32 or rounds to 0.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn exp8(v: __m256) -> __m256 {
        let v = _mm256_max_ps(_mm256_min_ps(v, _mm256_set1_ps(88.0)), _mm256_set1_ps(-87.336_55));
        // n = round(v·log2 e); r = v − n·ln 2 (ln 2 split in two for precision).
        let n = _mm256_round_ps(
            _mm256_mul_ps(v, _mm256_set1_ps(std::f32::consts::LOG2_E)),
            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC,
        );
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693_359_4), v);
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.121_944_4e-4), r);
        let mut y = _mm256_set1_ps(1.987_569_1e-4);
        for c in [1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 1.666_666_5e-1, 5.0e-1] {
            y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(c));
        }
        let y = _mm256_add_ps(_mm256_fmadd_ps(y, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0));
        // 2^n through the exponent bits.
        let bits = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
        _mm256_mul_ps(y, _mm256_castsi256_ps(_mm256_slli_epi32::<23>(bits)))
    }

    /// [`super::exp_shifted`] in one call (a call per eight values cost as much as their
    /// `exp` at long context); returns the lane sums of the whole 8-value chunks, lane `l`
    /// adding elements `l, l + 8, …` in order (what [`super::softmax_numerators`] sums). The
    /// tail goes through the same vector code on a padded copy, so every element gets the same
    /// rounding wherever it sits.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn exp_shifted(x: &mut [f32], shift: f32) -> [f32; 8] {
        let s = _mm256_set1_ps(shift);
        let mut acc = _mm256_setzero_ps();
        let mut chunks = x.chunks_exact_mut(8);
        for c in &mut chunks {
            // SAFETY: `c` holds 8 values.
            unsafe {
                let e = exp8(_mm256_sub_ps(_mm256_loadu_ps(c.as_ptr()), s));
                _mm256_storeu_ps(c.as_mut_ptr(), e);
                acc = _mm256_add_ps(acc, e);
            }
        }
        let tail = chunks.into_remainder();
        if !tail.is_empty() {
            let mut pad = [0.0f32; 8];
            pad[..tail.len()].copy_from_slice(tail);
            // SAFETY: `pad` holds 8 values.
            unsafe {
                let v = _mm256_sub_ps(_mm256_loadu_ps(pad.as_ptr()), s);
                _mm256_storeu_ps(pad.as_mut_ptr(), exp8(v));
            }
            let n = tail.len();
            tail.copy_from_slice(&pad[..n]);
        }
        let mut lanes = [0.0f32; 8];
        // SAFETY: `lanes` holds 8 values.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc) };
        lanes
    }

    /// [`super::row_max`] eight lanes at a time (`vmaxps`; the scalar form's `f32::max` keeps
    /// the compiler to 4-lane SSE with NaN blends, a tenth of a multi-row attention's time).
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn row_max(x: &[f32]) -> f32 {
        let mut acc = _mm256_set1_ps(f32::NEG_INFINITY);
        let mut chunks = x.chunks_exact(8);
        for c in &mut chunks {
            // SAFETY: `c` holds 8 values.
            acc = _mm256_max_ps(unsafe { _mm256_loadu_ps(c.as_ptr()) }, acc);
        }
        let mut lanes = [0.0f32; 8];
        // SAFETY: `lanes` holds 8 values.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc) };
        lanes.iter().chain(chunks.remainder()).copied().fold(f32::NEG_INFINITY, f32::max)
    }

    /// [`row_max`] sixteen lanes at a time.
    #[target_feature(enable = "avx2,avx512f")]
    pub(super) unsafe fn row_max_wide(x: &[f32]) -> f32 {
        let mut acc = _mm512_set1_ps(f32::NEG_INFINITY);
        let mut chunks = x.chunks_exact(16);
        for c in &mut chunks {
            // SAFETY: `c` holds 16 values.
            acc = _mm512_max_ps(unsafe { _mm512_loadu_ps(c.as_ptr()) }, acc);
        }
        // SAFETY: the same CPU features.
        unsafe { row_max(chunks.remainder()) }.max(_mm512_reduce_max_ps(acc))
    }

    /// [`exp8`] on sixteen lanes: the same operations per lane, so the same bits.
    #[target_feature(enable = "avx2,fma,avx512f")]
    fn exp16(v: __m512) -> __m512 {
        let v = _mm512_max_ps(_mm512_min_ps(v, _mm512_set1_ps(88.0)), _mm512_set1_ps(-87.336_55));
        let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm512_mul_ps(
            v,
            _mm512_set1_ps(std::f32::consts::LOG2_E),
        ));
        let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693_359_4), v);
        let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.121_944_4e-4), r);
        let mut y = _mm512_set1_ps(1.987_569_1e-4);
        for c in [1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 1.666_666_5e-1, 5.0e-1] {
            y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(c));
        }
        let y = _mm512_add_ps(_mm512_fmadd_ps(y, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0));
        let bits = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
        _mm512_mul_ps(y, _mm512_castsi512_ps(_mm512_slli_epi32::<23>(bits)))
    }

    /// [`exp_shifted`] sixteen values at a time ([`exp16`]: the same bits per element); the lane
    /// sums still add each 8-value chunk in order (the low half, then the high half), so they
    /// are [`exp_shifted`]'s too. An odd last chunk and the tail go through it.
    #[target_feature(enable = "avx2,fma,avx512f")]
    pub(super) unsafe fn exp_shifted_wide(x: &mut [f32], shift: f32) -> [f32; 8] {
        let s = _mm512_set1_ps(shift);
        let mut acc = _mm256_setzero_ps();
        let wide = x.len() / 16 * 16;
        for c in x[..wide].chunks_exact_mut(16) {
            // SAFETY: `c` holds 16 values.
            unsafe {
                let e = exp16(_mm512_sub_ps(_mm512_loadu_ps(c.as_ptr()), s));
                _mm512_storeu_ps(c.as_mut_ptr(), e);
                acc = _mm256_add_ps(acc, _mm512_castps512_ps256(e));
                acc = _mm256_add_ps(acc, _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(e))));
            }
        }
        // SAFETY: the same CPU features.
        let rest = unsafe { exp_shifted(&mut x[wide..], shift) };
        let mut lanes = [0.0f32; 8];
        // SAFETY: `lanes` holds 8 values.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), _mm256_add_ps(acc, _mm256_loadu_ps(rest.as_ptr()))) };
        lanes
    }

    /// [`silu_mul`] sixteen values at a time ([`exp16`] and the division per lane as eight
    /// lanes do them: the same bits per element), the rest through [`silu_mul`]. Half the
    /// instructions: SmolLM2-135M's SwiGLU of a 64-token pass took 1.4 ms of 33 with eight lanes
    /// on the 2-core AMX Xeon (session 60).
    #[target_feature(enable = "avx2,fma,avx512f")]
    pub(super) unsafe fn silu_mul_wide(gate: &[f32], up: &[f32], out: &mut [f32]) {
        let wide = out.len() / 16 * 16;
        let one = _mm512_set1_ps(1.0);
        for ((g, u), o) in
            gate[..wide].chunks_exact(16).zip(up[..wide].chunks_exact(16)).zip(out[..wide].chunks_exact_mut(16))
        {
            // SAFETY: each chunk holds 16 values.
            unsafe {
                let gv = _mm512_loadu_ps(g.as_ptr());
                let e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), gv));
                let sv = _mm512_div_ps(gv, _mm512_add_ps(one, e));
                _mm512_storeu_ps(o.as_mut_ptr(), _mm512_mul_ps(sv, _mm512_loadu_ps(u.as_ptr())));
            }
        }
        // SAFETY: the same CPU features.
        unsafe { silu_mul(&gate[wide..], &up[wide..], &mut out[wide..]) };
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn silu_mul(gate: &[f32], up: &[f32], out: &mut [f32]) {
        let n = out.len();
        let one = _mm256_set1_ps(1.0);
        let mut i = 0;
        let step = |g: &[f32], u: &[f32], o: &mut [f32]| {
            // SAFETY: the callers pass 8-value slices.
            unsafe {
                let gv = _mm256_loadu_ps(g.as_ptr());
                let e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), gv));
                let s = _mm256_div_ps(gv, _mm256_add_ps(one, e));
                _mm256_storeu_ps(o.as_mut_ptr(), _mm256_mul_ps(s, _mm256_loadu_ps(u.as_ptr())));
            }
        };
        while i + 8 <= n {
            step(&gate[i..i + 8], &up[i..i + 8], &mut out[i..i + 8]);
            i += 8;
        }
        if i < n {
            let (mut g, mut u, mut o) = ([0.0f32; 8], [0.0f32; 8], [0.0f32; 8]);
            g[..n - i].copy_from_slice(&gate[i..]);
            u[..n - i].copy_from_slice(&up[i..]);
            step(&g, &u, &mut o);
            out[i..].copy_from_slice(&o[..n - i]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_numerators_sum_and_max() {
        for len in [1usize, 7, 8, 9, 64, 203] {
            let x: Vec<f32> = (0..len).map(|i| ((i * 7919 % 1013) as f32 - 506.0) / 97.0).collect();
            let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            assert_eq!(row_max(&x).to_bits(), max.to_bits(), "len {len}");
            let mut got = x.clone();
            let sum = softmax_numerators(&mut got);
            let mut want = x.clone();
            exp_shifted(&mut want, max);
            assert!(got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "len {len}");
            let exact: f64 = want.iter().map(|&v| v as f64).sum();
            assert!((sum as f64 - exact).abs() <= 1e-6 * exact, "len {len}: {sum} vs {exact}");
            // The documented order: lane l sums elements l, l + 8, … in order, then the tail.
            let mut lanes = [0.0f32; 8];
            let chunks = want.chunks_exact(8);
            let tail: f32 = chunks.remainder().iter().sum();
            chunks.for_each(|c| (0..8).for_each(|l| lanes[l] += c[l]));
            assert_eq!(sum.to_bits(), (reduce8(lanes) + tail).to_bits(), "len {len}: summation order");
        }
        assert_eq!(row_max(&[]), f32::NEG_INFINITY);
    }

    #[test]
    fn rms_norm_matches_f64() {
        let d = 67;
        let x: Vec<f32> = (0..2 * d).map(|i| ((i * 37 % 23) as f32 - 11.0) / 7.0).collect();
        let w: Vec<f32> = (0..d).map(|i| 0.5 + i as f32 / 100.0).collect();
        let mut out = vec![0.0; 2 * d];
        rms_norm(&x, &w, 1e-5, &mut out);
        for r in 0..2 {
            let row = &x[r * d..][..d];
            let ms: f64 = row.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / d as f64;
            let inv = 1.0 / (ms + 1e-5).sqrt();
            for j in 0..d {
                let want = row[j] as f64 * inv * w[j] as f64;
                assert!((out[r * d + j] as f64 - want).abs() < 1e-5, "row {r} col {j}");
            }
        }
        // A row's result does not depend on its neighbours.
        let mut alone = vec![0.0; d];
        rms_norm(&x[d..], &w, 1e-5, &mut alone);
        assert!(alone.iter().zip(&out[d..]).all(|(a, b)| a.to_bits() == b.to_bits()));
    }

    #[test]
    fn silu_mul_matches_f64() {
        let g: Vec<f32> = (0..29).map(|i| (i as f32 - 14.0) * 0.9).collect();
        let u: Vec<f32> = (0..29).map(|i| 1.0 + i as f32 * 0.1).collect();
        let mut out = vec![0.0; 29];
        silu_mul(&g, &u, &mut out);
        for i in 0..29 {
            let (gv, uv) = (g[i] as f64, u[i] as f64);
            let want = gv / (1.0 + (-gv).exp()) * uv;
            assert!((out[i] as f64 - want).abs() <= 1e-6 * want.abs().max(1.0), "{i}");
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn silu_mul_wide_has_the_eight_lane_bits() {
        if !KernelPath::detect().wide() {
            return;
        }
        for len in [1usize, 8, 15, 16, 17, 40, 1536] {
            let g: Vec<f32> = (0..len).map(|i| ((i * 7919 % 1013) as f32 - 506.0) / 23.0).collect();
            let u: Vec<f32> = (0..len).map(|i| ((i * 104_729 % 977) as f32 - 488.0) / 97.0).collect();
            let (mut narrow, mut wide) = (vec![0.0f32; len], vec![0.0f32; len]);
            // SAFETY: `wide()` means AVX2, FMA and AVX-512 F are available.
            unsafe {
                avx2::silu_mul(&g, &u, &mut narrow);
                avx2::silu_mul_wide(&g, &u, &mut wide);
            }
            assert!(narrow.iter().zip(&wide).all(|(a, b)| a.to_bits() == b.to_bits()), "len {len}");
        }
    }

    #[test]
    fn exp_is_accurate_and_underflows_to_zero() {
        let xs: Vec<f32> = (0..37).map(|i| -(i as f32) * 2.7 + 3.0).collect();
        let mut got = xs.clone();
        exp_shifted(&mut got, 3.0);
        for (&x, &g) in xs.iter().zip(&got) {
            let want = ((x - 3.0) as f64).exp();
            assert!((g as f64 - want).abs() <= 4e-7 * want + 1e-37, "exp({})", x - 3.0);
        }
        let mut tiny = vec![-200.0f32; 9];
        exp_shifted(&mut tiny, 0.0);
        assert!(tiny.iter().all(|&t| (0.0..1e-37).contains(&t)));
    }
}
