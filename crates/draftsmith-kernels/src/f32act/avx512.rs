//! AVX-512 f32-activation kernels: lane `j` of every vector is row `j` of a 16-row group.
//!
//! A 64-byte unit holds four bytes of each row (see [`layout`](crate::layout)). One `vpshufb`
//! moves byte `t` of every 32-bit lane into place and zeroes the rest, `vcvtdq2ps` turns it into
//! 16 weights of one column, and each weight vector is then FMA'd against a broadcast activation
//! for every token of the tile. Per weight vector:
//!
//! * Q4_1: `vl = v & 0x0F`, `vh = (v >> 4) & 0x0F` once per unit; then shuffle, convert and
//!   `fma(q, d, m)` — the dequantized weight exactly as `dequantize_row` gives it.
//! * Q8_0: `v ^ 0x80` once per unit (the packed bytes are `q + 128`); the shuffle puts the byte
//!   at the top of the lane, so the conversion yields `q·2²⁴` and the block scale is `d·2⁻²⁴`.
//!
//! With one or two tokens the kernel interleaves several groups so that enough independent FMA
//! chains are in flight; the operations for each output stay those of the canonical order.

use std::arch::x86_64::*;

use super::{check, prefetch, Packed, Weights};
use crate::dispatch::TileOut;
use crate::layout::{tile_bytes, tile_scales, GROUP, QK, UNIT};
use crate::QFormat;

/// `vpshufb` control: byte `t` of each 32-bit lane to the lane's low byte, other bytes zero.
#[inline(always)]
unsafe fn low_byte(t: usize) -> __m512i {
    let d = |i: i32| (4 * i + t as i32) | 0x8080_8000_u32 as i32;
    _mm512_set4_epi32(d(3), d(2), d(1), d(0))
}

/// `vpshufb` control: byte `t` of each 32-bit lane to the lane's top byte, other bytes zero.
#[inline(always)]
unsafe fn top_byte(t: usize) -> __m512i {
    let d = |i: i32| ((4 * i + t as i32) << 24) | 0x0080_8080;
    _mm512_set4_epi32(d(3), d(2), d(1), d(0))
}

/// Loads 16 f16 scales and widens them to f32.
#[inline(always)]
unsafe fn scales16(p: *const u16) -> __m512 {
    _mm512_cvtph_ps(_mm256_loadu_si256(p.cast()))
}

/// Runs `groups` × `xs` (1 ..= 8 rows): several groups per call for 1 or 2 rows, else one.
///
/// # Safety
/// The CPU must support AVX-512 F/BW, AVX2, FMA and F16C.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) unsafe fn tile(f: QFormat, w: Weights<'_>, xs: &[&[f32]], out: &mut [TileOut]) {
    let (groups, ahead) = (w.groups, w.ahead);
    check(f, groups, xs, out);
    let per_call = match xs.len() {
        1 => 4,
        2 => 2,
        _ => 1,
    };
    let mut i = 0;
    while i < groups.len() {
        let gn = if groups.len() - i >= per_call { per_call } else { 1 };
        let (w, o) = (&groups[i..i + gn], &mut out[i..i + gn]);
        macro_rules! width {
            ($k:ident) => {
                match (gn, xs.len()) {
                    (4, _) => $k::<4, 1>(w, xs, o, ahead),
                    (2, 1) => $k::<2, 1>(w, xs, o, ahead),
                    (2, _) => $k::<2, 2>(w, xs, o, ahead),
                    (_, 1) => $k::<1, 1>(w, xs, o, ahead),
                    (_, 2) => $k::<1, 2>(w, xs, o, ahead),
                    (_, 3) => $k::<1, 3>(w, xs, o, ahead),
                    (_, 4) => $k::<1, 4>(w, xs, o, ahead),
                    (_, 5) => $k::<1, 5>(w, xs, o, ahead),
                    (_, 6) => $k::<1, 6>(w, xs, o, ahead),
                    (_, 7) => $k::<1, 7>(w, xs, o, ahead),
                    _ => $k::<1, 8>(w, xs, o, ahead),
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
        i += gn;
    }
}

/// Stores the `G × C` accumulators.
#[inline(always)]
unsafe fn store<const G: usize, const C: usize>(acc: &[[__m512; C]; G], out: &mut [TileOut]) {
    for g in 0..G {
        for c in 0..C {
            _mm512_storeu_ps(out[g][c].as_mut_ptr(), acc[g][c]);
        }
    }
}

/// Q8_0: `G` groups × `C` activation rows (`xs.len() >= C`, `w.len() == G`).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn q8_0<const G: usize, const C: usize>(
    w: &[Packed<'_>],
    xs: &[&[f32]],
    out: &mut [TileOut],
    ahead: (usize, usize),
) {
    let (tb, nb) = (tile_bytes(QFormat::Q8_0), w[0].0.len() / tile_bytes(QFormat::Q8_0));
    let q: [*const u8; G] = std::array::from_fn(|g| w[g].0.as_ptr());
    let s: [*const u16; G] = std::array::from_fn(|g| w[g].1.as_ptr());
    let x: [*const f32; C] = std::array::from_fn(|c| xs[c].as_ptr());
    let (bias, unscale) = (_mm512_set1_epi8(-128), _mm512_set1_ps(1.0 / 16_777_216.0));
    let mut acc = [[_mm512_setzero_ps(); C]; G];
    for b in 0..nb {
        for g in 0..G {
            prefetch(q[g].add(b * tb), s[g].add(b * GROUP), tb, ahead);
        }
        let mut c0 = [[_mm512_setzero_ps(); C]; G];
        let mut c1 = [[_mm512_setzero_ps(); C]; G];
        for k in 0..4 {
            for g in 0..G {
                let base = q[g].add(b * tb);
                let v0 = _mm512_xor_si512(_mm512_loadu_si512(base.add(k * UNIT).cast()), bias);
                let v1 = _mm512_xor_si512(_mm512_loadu_si512(base.add((k + 4) * UNIT).cast()), bias);
                for t in 0..4 {
                    let w0 = _mm512_cvtepi32_ps(_mm512_shuffle_epi8(v0, top_byte(t)));
                    let w1 = _mm512_cvtepi32_ps(_mm512_shuffle_epi8(v1, top_byte(t)));
                    for c in 0..C {
                        let xe = x[c].add(b * QK + 4 * k + t);
                        c0[g][c] = _mm512_fmadd_ps(w0, _mm512_set1_ps(*xe), c0[g][c]);
                        c1[g][c] = _mm512_fmadd_ps(w1, _mm512_set1_ps(*xe.add(16)), c1[g][c]);
                    }
                }
            }
        }
        for g in 0..G {
            let d = _mm512_mul_ps(scales16(s[g].add(b * GROUP)), unscale);
            for c in 0..C {
                let sum = _mm512_add_ps(c0[g][c], c1[g][c]);
                acc[g][c] = _mm512_fmadd_ps(sum, d, acc[g][c]);
            }
        }
    }
    store(&acc, out);
}

/// Q4_1: `G` groups × `C` activation rows (`xs.len() >= C`, `w.len() == G`).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn q4_1<const G: usize, const C: usize>(
    w: &[Packed<'_>],
    xs: &[&[f32]],
    out: &mut [TileOut],
    ahead: (usize, usize),
) {
    let (tb, ts) = (tile_bytes(QFormat::Q4_1), tile_scales(QFormat::Q4_1));
    let nb = w[0].0.len() / tb;
    let q: [*const u8; G] = std::array::from_fn(|g| w[g].0.as_ptr());
    let s: [*const u16; G] = std::array::from_fn(|g| w[g].1.as_ptr());
    let x: [*const f32; C] = std::array::from_fn(|c| xs[c].as_ptr());
    let mask = _mm512_set1_epi8(0x0F);
    let mut acc = [[_mm512_setzero_ps(); C]; G];
    for b in 0..nb {
        for g in 0..G {
            prefetch(q[g].add(b * tb), s[g].add(b * ts), tb, ahead);
        }
        let mut dm = [(_mm512_setzero_ps(), _mm512_setzero_ps()); G];
        for g in 0..G {
            let sc = s[g].add(b * ts);
            dm[g] = (scales16(sc), scales16(sc.add(GROUP)));
        }
        let mut c0 = [[_mm512_setzero_ps(); C]; G];
        let mut c1 = [[_mm512_setzero_ps(); C]; G];
        for u in 0..4 {
            for g in 0..G {
                let v = _mm512_loadu_si512(q[g].add(b * tb + u * UNIT).cast());
                let vl = _mm512_and_si512(v, mask);
                let vh = _mm512_and_si512(_mm512_srli_epi32::<4>(v), mask);
                let (d, m) = dm[g];
                for t in 0..4 {
                    let wl = _mm512_cvtepi32_ps(_mm512_shuffle_epi8(vl, low_byte(t)));
                    let wh = _mm512_cvtepi32_ps(_mm512_shuffle_epi8(vh, low_byte(t)));
                    let (wl, wh) = (_mm512_fmadd_ps(wl, d, m), _mm512_fmadd_ps(wh, d, m));
                    for c in 0..C {
                        let xe = x[c].add(b * QK + 4 * u + t);
                        c0[g][c] = _mm512_fmadd_ps(wl, _mm512_set1_ps(*xe), c0[g][c]);
                        c1[g][c] = _mm512_fmadd_ps(wh, _mm512_set1_ps(*xe.add(16)), c1[g][c]);
                    }
                }
            }
        }
        for g in 0..G {
            for c in 0..C {
                acc[g][c] = _mm512_add_ps(acc[g][c], _mm512_add_ps(c0[g][c], c1[g][c]));
            }
        }
    }
    store(&acc, out);
}
