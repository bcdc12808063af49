//! The x86 kernels of the host attention: AVX2 + FMA (+ F16C) and AVX-512 F/VL forms of its scores
//! and weighted sums, each with the arithmetic of the portable row helpers.

use super::attend::Keys;
use super::{reduce_lanes, KvElem};

/// Prefetches `lines` cache lines from [`PREFETCH_AHEAD`] bytes past `p` when `on` (a run's
/// later rows; for a list of keys a wasted hint, never a fault). Multi-token passes, which
/// compute long enough per key for the hint to arrive in time, gain 6–8 % of their attention
/// after 4096 cached tokens; one-token steps, bound by the memory stream the hardware
/// prefetcher already follows, do not (session 36), so they pass `on = false`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn prefetch_ahead<T>(on: bool, p: *const T, lines: usize) {
    use std::arch::x86_64::*;
    if !on {
        return;
    }
    let base = p.cast::<i8>().wrapping_add(PREFETCH_AHEAD);
    for l in 0..lines {
        // SAFETY: a prefetch hint reads nothing and cannot fault.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(base.wrapping_add(64 * l)) };
    }
}

/// How far ahead of the key or value row in use the attention kernels prefetch.
const PREFETCH_AHEAD: usize = 4096;

/// Eight cache elements at `p` as f32: a plain load, or `vcvtph2ps` of eight halves (exact).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
#[inline]
unsafe fn load8<T: KvElem>(p: *const T) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    // SAFETY: the caller guarantees eight elements at `p`.
    unsafe {
        if T::F16 {
            _mm256_cvtph_ps(_mm_loadu_si128(p.cast()))
        } else {
            _mm256_loadu_ps(p.cast())
        }
    }
}

/// The scores of eight keys from their accumulators (`acc[k]`: key `k`'s eight lanes), times
/// `scale`: lanes `l` and `l + 4` first, then the pairs, exactly the order of [`reduce_lanes`]
/// (plus its `+ 0.0`), so each score has the bits of the one-pair form.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
fn reduce_eight_keys(acc: &[std::arch::x86_64::__m256; 8], scale: f32) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    // Per key: t = low half + high half = [a0+a4, a1+a5, a2+a6, a3+a7].
    let half = |x: __m256, y: __m256| {
        _mm256_add_ps(_mm256_permute2f128_ps::<0x20>(x, y), _mm256_permute2f128_ps::<0x31>(x, y))
    };
    let (u01, u23, u45, u67) = (half(acc[0], acc[1]), half(acc[2], acc[3]), half(acc[4], acc[5]), half(acc[6], acc[7]));
    // (t0+t1) and (t2+t3) pairs, then their sum: keys in the order 0 2 4 6 | 1 3 5 7.
    let v = _mm256_hadd_ps(_mm256_hadd_ps(u01, u23), _mm256_hadd_ps(u45, u67));
    let v = _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_mul_ps(_mm256_add_ps(v, _mm256_setzero_ps()), _mm256_set1_ps(scale))
}

/// `q_r · k_j · scale` for every row r of `qs` and visible key j, into `out[r · stride + idx]`
/// (`C` × 8 = head_dim): per pair, the FMA sequence and lane reduction of [`dot_avx2`](super::dot_avx2). Keys go
/// eight at a time: their eight accumulators are reduced together by vector adds in exactly
/// the order of [`reduce_lanes`] (lanes `l` and `l + 4` first, then the pairs), so every score
/// has the bits of the one-pair form, which handles the remainder.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn scores_avx2<T: KvElem, K: Keys, const C: usize>(
    qs: &[f32],
    keys: &[T],
    visible: K,
    scale: f32,
    (out, stride): (&mut [f32], usize),
    prefetch: bool,
) {
    use std::arch::x86_64::*;
    let d = C * 8;
    let (rows, m) = (qs.len() / d, visible.len());
    assert!(
        qs.len() == rows * d
            && (rows == 0 || out.len() >= (rows - 1) * stride + m)
            && rows_in_bounds(visible, d, keys.len())
    );
    let full = m / 8 * 8;
    for r in 0..rows {
        // SAFETY (all loads and stores): key rows, the rows of `qs` and `out` are in bounds (asserted).
        let qp = unsafe { qs.as_ptr().add(r * d) };
        for base in (0..full).step_by(8) {
            let mut acc = [_mm256_setzero_ps(); 8];
            let kp: [*const T; 8] = std::array::from_fn(|k| unsafe { keys.as_ptr().add(visible.at(base + k) * d) });
            prefetch_ahead(prefetch, kp[0], 8 * d * std::mem::size_of::<T>() / 64);
            // Chunk-outer: each query chunk is loaded once for the eight keys; every pair still
            // accumulates its chunks in order, as `dot_avx2` does.
            for c in 0..C {
                let qc = unsafe { _mm256_loadu_ps(qp.add(c * 8)) };
                for (a, p) in acc.iter_mut().zip(&kp) {
                    *a = _mm256_fmadd_ps(qc, unsafe { load8(p.add(c * 8)) }, *a);
                }
            }
            unsafe { _mm256_storeu_ps(out.as_mut_ptr().add(r * stride + base), reduce_eight_keys(&acc, scale)) };
        }
        for idx in full..m {
            let kp = unsafe { keys.as_ptr().add(visible.at(idx) * d) };
            let mut acc = _mm256_setzero_ps();
            for c in 0..C {
                acc = _mm256_fmadd_ps(unsafe { _mm256_loadu_ps(qp.add(c * 8)) }, unsafe { load8(kp.add(c * 8)) }, acc);
            }
            let mut lanes = [0.0f32; 8];
            unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc) };
            out[r * stride + idx] = reduce_lanes(lanes, 0.0) * scale;
        }
    }
}

/// `o = Σ_j w_j · v_j` over the visible keys in order: [`axpy_avx2`](super::axpy_avx2)'s FMA per element, with
/// the `C` × 8 accumulators in registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn weighted_sum_avx2<T: KvElem, K: Keys, const C: usize>(
    values: &[T],
    visible: K,
    weights: &[f32],
    o: &mut [f32],
    prefetch: bool,
) {
    use std::arch::x86_64::*;
    let d = C * 8;
    assert!(o.len() == d && rows_in_bounds(visible, d, values.len()));
    // SAFETY (all loads and stores): `o` holds d floats and every visible value row d floats.
    let mut acc: [__m256; C] = std::array::from_fn(|c| unsafe { _mm256_loadu_ps(o.as_ptr().add(c * 8)) });
    for (idx, &p) in weights.iter().enumerate().take(visible.len()) {
        let vp = unsafe { values.as_ptr().add(visible.at(idx) * d) };
        prefetch_ahead(prefetch, vp, d * std::mem::size_of::<T>() / 64);
        let pv = _mm256_set1_ps(p);
        for (c, a) in acc.iter_mut().enumerate() {
            *a = _mm256_fmadd_ps(pv, unsafe { load8(vp.add(c * 8)) }, *a);
        }
    }
    for (c, a) in acc.iter().enumerate() {
        unsafe { _mm256_storeu_ps(o.as_mut_ptr().add(c * 8), *a) };
    }
}

/// [`scores_avx2`] for `R` rows at once (`qs` = `[R, C·8]`, row `r` into `out[r · stride + idx]`;
/// returns `R`): keys go four at a time, each key chunk loaded (and widened) once for the `R`
/// rows, every pair accumulating its chunks in order as [`dot_avx2`](super::dot_avx2) does; the four keys' lanes
/// are then reduced by [`reduce_four_keys`] in the order of [`reduce_lanes`], so every score has
/// the bits of the one-pair form (which handles the remainder). `4 · R` accumulators, `R` query
/// chunks and a key chunk stay in registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn scores_rows_avx2<T: KvElem, K: Keys, const R: usize, const C: usize>(
    qs: &[f32],
    keys: &[T],
    visible: K,
    scale: f32,
    (out, stride): (&mut [f32], usize),
    prefetch: bool,
) -> usize {
    use std::arch::x86_64::*;
    let d = C * 8;
    let m = visible.len();
    assert!(qs.len() >= R * d && out.len() >= (R - 1) * stride + m && rows_in_bounds(visible, d, keys.len()));
    let full = m / 4 * 4;
    for base in (0..full).step_by(4) {
        let mut acc = [[_mm256_setzero_ps(); 4]; R];
        // SAFETY (all loads and stores): key rows, the rows of `qs` and `out` are in bounds (asserted).
        let kp: [*const T; 4] = std::array::from_fn(|k| unsafe { keys.as_ptr().add(visible.at(base + k) * d) });
        prefetch_ahead(prefetch, kp[0], 4 * d * std::mem::size_of::<T>() / 64);
        for c in 0..C {
            let q: [__m256; R] = std::array::from_fn(|r| unsafe { _mm256_loadu_ps(qs.as_ptr().add(r * d + c * 8)) });
            for (k, p) in kp.iter().enumerate() {
                let kv = unsafe { load8(p.add(c * 8)) };
                for r in 0..R {
                    acc[r][k] = _mm256_fmadd_ps(q[r], kv, acc[r][k]);
                }
            }
        }
        for (r, a) in acc.iter().enumerate() {
            unsafe { _mm_storeu_ps(out.as_mut_ptr().add(r * stride + base), reduce_four_keys(a, scale)) };
        }
    }
    if full < m {
        // SAFETY: the same CPU features; `scores_avx2` checks its bounds.
        unsafe {
            scores_avx2::<T, K, C>(&qs[..R * d], keys, visible.skip(full), scale, (&mut out[full..], stride), prefetch)
        };
    }
    R
}

/// [`reduce_eight_keys`] for four keys (`acc[k]`: key `k`'s eight lanes): per key lanes `l` and
/// `l + 4` first, then the two pairs of those sums, then their sum, plus `0.0`, times `scale` —
/// the additions of [`reduce_lanes`] in its order.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
fn reduce_four_keys(acc: &[std::arch::x86_64::__m256; 4], scale: f32) -> std::arch::x86_64::__m128 {
    use std::arch::x86_64::*;
    // Per key t = low half + high half; keys 0 | 1 and 2 | 3 share a vector.
    let half = |x: __m256, y: __m256| {
        _mm256_add_ps(_mm256_permute2f128_ps::<0x20>(x, y), _mm256_permute2f128_ps::<0x31>(x, y))
    };
    // (t.0 + t.1), (t.2 + t.3) per key: keys 0 2 | 1 3; then their sums.
    let h = _mm256_hadd_ps(half(acc[0], acc[1]), half(acc[2], acc[3]));
    let h = _mm256_hadd_ps(h, h);
    let v = _mm_unpacklo_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps::<1>(h));
    _mm_mul_ps(_mm_add_ps(v, _mm_setzero_ps()), _mm_set1_ps(scale))
}

/// [`weighted_sum_avx2`] for `R` rows at once (`w`: row `r` at `w[r · stride ..]`; `o`: at least
/// `[R, C·8]`, of which the first `R` rows are summed into; returns `R`): the head is walked in
/// parts of [`PART`] chunks, each value chunk loaded (and widened) once for the `R` rows, and
/// every output element still takes one FMA per key, in key order — the arithmetic of
/// [`weighted_sum_avx2`] per element. `R · PART` accumulators stay in registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn weighted_sums_avx2<T: KvElem, K: Keys, const R: usize, const C: usize>(
    values: &[T],
    visible: K,
    (w, stride): (&[f32], usize),
    o: &mut [f32],
    prefetch: bool,
) -> usize {
    use std::arch::x86_64::*;
    let d = C * 8;
    let m = visible.len();
    assert!(
        C.is_multiple_of(PART)
            && o.len() >= R * d
            && (m == 0 || w.len() >= (R - 1) * stride + m)
            && rows_in_bounds(visible, d, values.len())
    );
    for c0 in (0..C).step_by(PART) {
        // SAFETY (all loads and stores): `o` holds R·d floats, every visible value row d floats,
        // and row r's weights are in bounds (asserted).
        let mut acc: [[__m256; PART]; R] = std::array::from_fn(|r| {
            std::array::from_fn(|c| unsafe { _mm256_loadu_ps(o.as_ptr().add(r * d + (c0 + c) * 8)) })
        });
        for idx in 0..m {
            let vp = unsafe { values.as_ptr().add(visible.at(idx) * d) };
            prefetch_ahead(prefetch && c0 == 0, vp, d * std::mem::size_of::<T>() / 64);
            let p: [__m256; R] = std::array::from_fn(|r| _mm256_set1_ps(unsafe { *w.get_unchecked(r * stride + idx) }));
            for (c, part) in (c0..c0 + PART).enumerate() {
                let v = unsafe { load8(vp.add(part * 8)) };
                for (a, &pr) in acc.iter_mut().zip(&p) {
                    a[c] = _mm256_fmadd_ps(pr, v, a[c]);
                }
            }
        }
        for (r, a) in acc.iter().enumerate() {
            for (c, x) in a.iter().enumerate() {
                unsafe { _mm256_storeu_ps(o.as_mut_ptr().add(r * d + (c0 + c) * 8), *x) };
            }
        }
    }
    R
}

/// Chunks of eight per pass of [`weighted_sums_avx2`]: two rows' accumulators, two weights and a
/// value chunk fit AVX2's sixteen registers.
#[cfg(target_arch = "x86_64")]
const PART: usize = 4;

/// Whether every row `j` of the ascending `visible` (a run or a list of
/// [`Visibility::split`](super::Visibility::split)) lies within `len` elements of `d`-wide rows:
/// the last one decides (the order itself is checked in debug builds; a full scan per call cost
/// a tenth of the score kernels' time at long context).
fn rows_in_bounds<K: Keys>(visible: K, d: usize, len: usize) -> bool {
    debug_assert!(visible.ascends(), "visible keys ascend");
    visible.last().is_none_or(|j| (j + 1) * d <= len)
}

/// [`scores_avx2`] for `R` rows at once with 16-lane vectors, two keys per vector (`qs` =
/// `[R, C·8]`, row `r` into `out[r · stride + idx]`): keys go eight at a time, as four pairs whose
/// chunks share a 16-lane register (a key's chunk `c` in the low half, the next key's in the high
/// half, each row's chunk `c` in both halves), so one FMA advances two keys' accumulators by the
/// same operations the 8-lane kernel applies to each; the pairs are then reduced by
/// [`reduce_eight_key_pairs`] (the additions of [`reduce_eight_keys`], in its order), so every
/// score has the bits of the one-pair form (which handles the remainder). Returns `R`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
pub(super) unsafe fn scores_pairs_zmm<T: KvElem, K: Keys, const R: usize, const C: usize>(
    qs: &[f32],
    keys: &[T],
    visible: K,
    scale: f32,
    (out, stride): (&mut [f32], usize),
    prefetch: bool,
) -> usize {
    use std::arch::x86_64::*;
    let d = C * 8;
    let m = visible.len();
    assert!(qs.len() >= R * d && out.len() >= (R - 1) * stride + m && rows_in_bounds(visible, d, keys.len()));
    let full = m / 8 * 8;
    for base in (0..full).step_by(8) {
        let mut acc = [[_mm512_setzero_ps(); 4]; R];
        // SAFETY (all loads and stores): key rows, the rows of `qs` and `out` are in bounds (asserted).
        let kp: [*const T; 8] = std::array::from_fn(|k| unsafe { keys.as_ptr().add(visible.at(base + k) * d) });
        prefetch_ahead(prefetch, kp[0], 8 * d * std::mem::size_of::<T>() / 64);
        for c in 0..C {
            let q: [__m512; R] = std::array::from_fn(|r| {
                let h = unsafe { _mm256_loadu_ps(qs.as_ptr().add(r * d + c * 8)) };
                _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(h)))
            });
            for p in 0..4 {
                let kv = unsafe { load8_pair(kp[2 * p].add(c * 8), kp[2 * p + 1].add(c * 8)) };
                for r in 0..R {
                    acc[r][p] = _mm512_fmadd_ps(q[r], kv, acc[r][p]);
                }
            }
        }
        for (r, a) in acc.iter().enumerate() {
            unsafe { _mm256_storeu_ps(out.as_mut_ptr().add(r * stride + base), reduce_eight_key_pairs(a, scale)) };
        }
    }
    if full < m {
        // SAFETY: the same CPU features; `scores_avx2` checks its bounds.
        unsafe {
            scores_avx2::<T, K, C>(&qs[..R * d], keys, visible.skip(full), scale, (&mut out[full..], stride), prefetch)
        };
    }
    R
}

/// [`reduce_eight_keys`] for eight keys held in pairs (`acc[p]`: key `2p`'s eight lanes, then key
/// `2p + 1`'s), in 16-lane operations: per key its lanes `l` and `l + 4` first, then the two
/// pairs of those sums, then their sum — the same additions in the same order, so the same bits.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,avx512f")]
#[inline]
fn reduce_eight_key_pairs(acc: &[std::arch::x86_64::__m512; 4], scale: f32) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    // Per key t = low quarter + high quarter, four keys a vector: [t0 t1 t2 t3], [t4 t5 t6 t7].
    let t =
        |x: __m512, y: __m512| _mm512_add_ps(_mm512_shuffle_f32x4::<0x88>(x, y), _mm512_shuffle_f32x4::<0xDD>(x, y));
    let sums = |t: __m512| {
        // (t.0 + t.1) and (t.2 + t.3), then their sum, in lane 0 of each key's quarter.
        let z = _mm512_add_ps(t, _mm512_permute_ps::<0b10_11_00_01>(t));
        _mm512_add_ps(z, _mm512_permute_ps::<0b01_00_11_10>(z))
    };
    let (lo, hi) = (sums(t(acc[0], acc[1])), sums(t(acc[2], acc[3])));
    let at = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 0, 0, 0, 0, 0, 0, 0);
    let v = _mm512_castps512_ps256(_mm512_permutex2var_ps(lo, at, hi));
    _mm256_mul_ps(_mm256_add_ps(v, _mm256_setzero_ps()), _mm256_set1_ps(scale))
}

/// Eight cache elements at `lo` and eight at `hi` as one 16-lane f32 vector (`lo` in the low
/// half), widened exactly.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c,avx512f")]
#[inline]
unsafe fn load8_pair<T: KvElem>(lo: *const T, hi: *const T) -> std::arch::x86_64::__m512 {
    use std::arch::x86_64::*;
    // SAFETY: the caller guarantees eight elements at `lo` and at `hi`.
    unsafe {
        if T::F16 {
            let h = _mm256_inserti128_si256::<1>(
                _mm256_castsi128_si256(_mm_loadu_si128(lo.cast())),
                _mm_loadu_si128(hi.cast()),
            );
            _mm512_cvtph_ps(h)
        } else {
            let l = _mm512_castpd256_pd512(_mm256_castps_pd(_mm256_loadu_ps(lo.cast())));
            _mm512_castpd_ps(_mm512_insertf64x4::<1>(l, _mm256_castps_pd(_mm256_loadu_ps(hi.cast()))))
        }
    }
}

/// [`weighted_sum_avx2`] for `R` rows at once with 16-lane vectors (`w`: row `r` at
/// `w[r · stride ..]`; `o`: at least `[R, Z·16]`, of which the first `R` rows are summed into;
/// returns `R`): each value row is loaded once for the `R` rows, and every output element still
/// takes one FMA per key, in key order — the same arithmetic per element as the 8-lane kernels,
/// whatever the vector width (an element's sum never mixes lanes), with half their instructions.
/// `R · Z` ≤ 24 accumulators stay in registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
pub(super) unsafe fn weighted_sums_zmm<T: KvElem, K: Keys, const R: usize, const Z: usize>(
    values: &[T],
    visible: K,
    (w, stride): (&[f32], usize),
    o: &mut [f32],
    prefetch: bool,
) -> usize {
    use std::arch::x86_64::*;
    let d = Z * 16;
    let m = visible.len();
    assert!(
        R * Z <= 24
            && o.len() >= R * d
            && (m == 0 || w.len() >= (R - 1) * stride + m)
            && rows_in_bounds(visible, d, values.len())
    );
    // SAFETY (all loads and stores): `o` holds R·d floats, every visible value row d floats,
    // and row r's weights are in bounds (asserted).
    let mut acc: [[__m512; Z]; R] =
        std::array::from_fn(|r| std::array::from_fn(|z| unsafe { _mm512_loadu_ps(o.as_ptr().add(r * d + z * 16)) }));
    for idx in 0..m {
        let vp = unsafe { values.as_ptr().add(visible.at(idx) * d) };
        prefetch_ahead(prefetch, vp, d * std::mem::size_of::<T>() / 64);
        let p: [__m512; R] = std::array::from_fn(|r| _mm512_set1_ps(unsafe { *w.get_unchecked(r * stride + idx) }));
        for z in 0..Z {
            let v = unsafe { load16(vp.add(z * 16)) };
            for (a, &pr) in acc.iter_mut().zip(&p) {
                a[z] = _mm512_fmadd_ps(pr, v, a[z]);
            }
        }
    }
    for (r, a) in acc.iter().enumerate() {
        for (z, x) in a.iter().enumerate() {
            unsafe { _mm512_storeu_ps(o.as_mut_ptr().add(r * d + z * 16), *x) };
        }
    }
    R
}

/// Sixteen cache elements at `p` as f32: a plain load, or `vcvtph2ps` of sixteen halves (exact).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c,avx512f")]
#[inline]
unsafe fn load16<T: KvElem>(p: *const T) -> std::arch::x86_64::__m512 {
    use std::arch::x86_64::*;
    // SAFETY: the caller guarantees sixteen elements at `p`.
    unsafe {
        if T::F16 {
            _mm512_cvtph_ps(_mm256_loadu_si256(p.cast()))
        } else {
            _mm512_loadu_ps(p.cast())
        }
    }
}
