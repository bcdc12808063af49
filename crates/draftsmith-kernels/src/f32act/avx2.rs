//! AVX2 + FMA f32-activation kernels: the AVX-512 scheme on 8-row *panels* (half groups).
//!
//! Panel `h` of a group reads the 32-byte half `h` of every 64-byte unit (rows `8h .. 8h+8`)
//! and the matching 8 scales; lane `j` is row `8h + j`. `vpshufb` works within 128-bit lanes,
//! which is all the byte extraction needs (each 32-bit lane only uses its own bytes). The
//! operations per output are those of the canonical order (see [`f32act`](super)).

use std::arch::x86_64::*;

use super::{check, prefetch, Weights, MAX_GROUPS};
use crate::dispatch::TileOut;
use crate::layout::{tile_bytes, tile_scales, GROUP, QK, UNIT};
use crate::QFormat;

/// Rows in one panel.
const HALF: usize = GROUP / 2;

/// One 8-row panel (half `half` of a group): its quants (first unit), scales, and the output
/// for its first row.
#[derive(Clone, Copy)]
struct Panel {
    q: *const u8,
    s: *const u16,
    out: *mut f32,
    half: usize,
}

/// `vpshufb` control: byte `t` of each 32-bit lane to the lane's low byte, other bytes zero.
#[inline(always)]
unsafe fn low_byte(t: usize) -> __m256i {
    let d = |i: i32| (4 * i + t as i32) | 0x8080_8000_u32 as i32;
    _mm256_setr_epi32(d(0), d(1), d(2), d(3), d(0), d(1), d(2), d(3))
}

/// `vpshufb` control: byte `t` of each 32-bit lane to the lane's top byte, other bytes zero.
#[inline(always)]
unsafe fn top_byte(t: usize) -> __m256i {
    let d = |i: i32| ((4 * i + t as i32) << 24) | 0x0080_8080;
    _mm256_setr_epi32(d(0), d(1), d(2), d(3), d(0), d(1), d(2), d(3))
}

/// Loads 8 f16 scales and widens them to f32.
#[inline(always)]
unsafe fn scales8(p: *const u16) -> __m256 {
    _mm256_cvtph_ps(_mm_loadu_si128(p.cast()))
}

/// Runs `groups` × `xs` (1 ..= 4 rows): two panels per call for one or two rows (enough
/// independent FMA chains without spilling), else one panel at a time.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn tile(f: QFormat, w: Weights<'_>, xs: &[&[f32]], out: &mut [TileOut]) {
    let groups = w.groups;
    check(f, groups, xs, out);
    assert!(xs.len() <= 4, "AVX2 tile width is at most 4");
    let mut panels =
        [Panel { q: std::ptr::null(), s: std::ptr::null(), out: std::ptr::null_mut(), half: 0 }; 2 * MAX_GROUPS];
    for (i, ((quants, scales), res)) in groups.iter().zip(out.iter_mut()).enumerate() {
        for h in 0..2 {
            panels[2 * i + h] = Panel {
                q: quants.as_ptr().add(h * 32),
                s: scales.as_ptr().add(h * HALF),
                out: res.as_mut_ptr().cast::<f32>().add(h * HALF),
                half: h,
            };
        }
    }
    let (count, nb) = (2 * groups.len(), groups[0].0.len() / tile_bytes(f));
    let per_call = match xs.len() {
        1 => 2,
        2 => 2,
        _ => 1,
    };
    let mut i = 0;
    while i < count {
        let pn = if count - i >= per_call { per_call } else { 1 };
        let p = &panels[i..i + pn];
        macro_rules! width {
            ($k:ident) => {
                match (pn, xs.len()) {
                    (2, 1) => $k::<2, 1>(p, nb, xs, w.ahead),
                    (2, _) => $k::<2, 2>(p, nb, xs, w.ahead),
                    (_, 1) => $k::<1, 1>(p, nb, xs, w.ahead),
                    (_, 2) => $k::<1, 2>(p, nb, xs, w.ahead),
                    (_, 3) => $k::<1, 3>(p, nb, xs, w.ahead),
                    _ => $k::<1, 4>(p, nb, xs, w.ahead),
                }
            };
        }
        match f {
            QFormat::Q8_0 => width!(q8_0),
            QFormat::Q4_1 => width!(q4_1),
            QFormat::Q4_0 | QFormat::Q5_0 | QFormat::Q4K | QFormat::Q5K | QFormat::Q6K => {
                unreachable!("runs on the scalar f32 kernel")
            }
        }
        i += pn;
    }
}

/// Prefetches block `b` of the next groups for the first panel (half 0) of a group; the
/// second half shares its cache lines.
#[inline(always)]
unsafe fn prefetch_half(p: &Panel, b: usize, f: QFormat, ahead: (usize, usize)) {
    if p.half == 0 {
        prefetch(p.q.add(b * tile_bytes(f)), p.s.add(b * tile_scales(f)), tile_bytes(f), ahead);
    }
}

/// Stores the `P × C` accumulators to the panels' outputs (row stride [`GROUP`]).
#[inline(always)]
unsafe fn store<const P: usize, const C: usize>(acc: &[[__m256; C]; P], p: &[Panel]) {
    for k in 0..P {
        for c in 0..C {
            _mm256_storeu_ps(p[k].out.add(c * GROUP), acc[k][c]);
        }
    }
}

/// Q8_0: `P` panels × `C` activation rows, `nb` blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_0<const P: usize, const C: usize>(p: &[Panel], nb: usize, xs: &[&[f32]], ahead: (usize, usize)) {
    let tb = tile_bytes(QFormat::Q8_0);
    let x: [*const f32; C] = std::array::from_fn(|c| xs[c].as_ptr());
    let (bias, unscale) = (_mm256_set1_epi8(-128), _mm256_set1_ps(1.0 / 16_777_216.0));
    let mut acc = [[_mm256_setzero_ps(); C]; P];
    for b in 0..nb {
        for i in 0..P {
            prefetch_half(&p[i], b, QFormat::Q8_0, ahead);
        }
        let mut c0 = [[_mm256_setzero_ps(); C]; P];
        let mut c1 = [[_mm256_setzero_ps(); C]; P];
        for k in 0..4 {
            for i in 0..P {
                let base = p[i].q.add(b * tb);
                let v0 = _mm256_xor_si256(_mm256_loadu_si256(base.add(k * UNIT).cast()), bias);
                let v1 = _mm256_xor_si256(_mm256_loadu_si256(base.add((k + 4) * UNIT).cast()), bias);
                for t in 0..4 {
                    let w0 = _mm256_cvtepi32_ps(_mm256_shuffle_epi8(v0, top_byte(t)));
                    let w1 = _mm256_cvtepi32_ps(_mm256_shuffle_epi8(v1, top_byte(t)));
                    for c in 0..C {
                        let xe = x[c].add(b * QK + 4 * k + t);
                        c0[i][c] = _mm256_fmadd_ps(w0, _mm256_set1_ps(*xe), c0[i][c]);
                        c1[i][c] = _mm256_fmadd_ps(w1, _mm256_set1_ps(*xe.add(16)), c1[i][c]);
                    }
                }
            }
        }
        for i in 0..P {
            let d = _mm256_mul_ps(scales8(p[i].s.add(b * GROUP)), unscale);
            for c in 0..C {
                let sum = _mm256_add_ps(c0[i][c], c1[i][c]);
                acc[i][c] = _mm256_fmadd_ps(sum, d, acc[i][c]);
            }
        }
    }
    store(&acc, p);
}

/// Q4_1: `P` panels × `C` activation rows, `nb` blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_1<const P: usize, const C: usize>(p: &[Panel], nb: usize, xs: &[&[f32]], ahead: (usize, usize)) {
    let (tb, ts) = (tile_bytes(QFormat::Q4_1), tile_scales(QFormat::Q4_1));
    let x: [*const f32; C] = std::array::from_fn(|c| xs[c].as_ptr());
    let mask = _mm256_set1_epi8(0x0F);
    let mut acc = [[_mm256_setzero_ps(); C]; P];
    for b in 0..nb {
        for i in 0..P {
            prefetch_half(&p[i], b, QFormat::Q4_1, ahead);
        }
        let mut dm = [(_mm256_setzero_ps(), _mm256_setzero_ps()); P];
        for i in 0..P {
            let sc = p[i].s.add(b * ts);
            dm[i] = (scales8(sc), scales8(sc.add(GROUP)));
        }
        let mut c0 = [[_mm256_setzero_ps(); C]; P];
        let mut c1 = [[_mm256_setzero_ps(); C]; P];
        for u in 0..4 {
            for i in 0..P {
                let v = _mm256_loadu_si256(p[i].q.add(b * tb + u * UNIT).cast());
                let vl = _mm256_and_si256(v, mask);
                let vh = _mm256_and_si256(_mm256_srli_epi32::<4>(v), mask);
                let (d, m) = dm[i];
                for t in 0..4 {
                    let wl = _mm256_cvtepi32_ps(_mm256_shuffle_epi8(vl, low_byte(t)));
                    let wh = _mm256_cvtepi32_ps(_mm256_shuffle_epi8(vh, low_byte(t)));
                    let (wl, wh) = (_mm256_fmadd_ps(wl, d, m), _mm256_fmadd_ps(wh, d, m));
                    for c in 0..C {
                        let xe = x[c].add(b * QK + 4 * u + t);
                        c0[i][c] = _mm256_fmadd_ps(wl, _mm256_set1_ps(*xe), c0[i][c]);
                        c1[i][c] = _mm256_fmadd_ps(wh, _mm256_set1_ps(*xe.add(16)), c1[i][c]);
                    }
                }
            }
        }
        for i in 0..P {
            for c in 0..C {
                acc[i][c] = _mm256_add_ps(acc[i][c], _mm256_add_ps(c0[i][c], c1[i][c]));
            }
        }
    }
    store(&acc, p);
}
