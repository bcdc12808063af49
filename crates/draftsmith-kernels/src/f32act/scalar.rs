//! Portable scalar f32-activation kernel: the reference for the canonical order of
//! [`f32act`](super) (every SIMD path matches it bit for bit).
//!
//! `f32::mul_add` is a single instruction where FMA is part of the target (aarch64), but a
//! libm `fmaf` call on x86-64 builds without the `fma` feature: there this path is ~15× slower
//! than the int8 scalar path, and only serves CPUs without AVX2 and the tests.

use super::{check, Packed};
use crate::dispatch::TileOut;
use crate::layout::{
    f16_to_f32, nibble_int, nibble_scales, q6_k_scales, q6_k_value, tile_bytes, tile_scales, GROUP, QK, UNIT,
};
use crate::QFormat;

/// One decoded `(group, block)` tile: `w[j][e]` for the 16 rows `j` and `d[j]` (Q6_K: the
/// two sub-block scales `d[j]`, `d2[j]`).
struct Decoded {
    w: [[f32; QK]; GROUP],
    d: [f32; GROUP],
    d2: [f32; GROUP],
}

/// Computes `out[g][t][j]` for every group `g`, activation row `t` and group row `j`.
pub(super) fn tile(f: QFormat, groups: &[Packed<'_>], xs: &[&[f32]], out: &mut [TileOut]) {
    let nb = check(f, groups, xs, out);
    let mut dec = Decoded { w: [[0.0; QK]; GROUP], d: [0.0; GROUP], d2: [0.0; GROUP] };
    for (&(quants, scales), res) in groups.iter().zip(out.iter_mut()) {
        res.iter_mut().for_each(|r| *r = [0.0; GROUP]);
        for b in 0..nb {
            let q = &quants[b * tile_bytes(f)..][..tile_bytes(f)];
            decode(f, q, (scales, b), &mut dec);
            for (x, acc) in xs.iter().zip(res.iter_mut()) {
                let x = &x[b * QK..][..QK];
                for (j, a) in acc.iter_mut().enumerate() {
                    *a = block_step(f, &dec.w[j], (dec.d[j], dec.d2[j]), x, *a);
                }
            }
        }
    }
}

/// One block of the canonical order: two 16-element FMA chains, their sum, then the scale
/// (Q8_0) or a plain add (Q4_1, whose weights already include `d` and `m`); Q6_K (weights
/// `q − 32`) scales each chain by its own sub-block scale instead: `fma(c1, d2, fma(c0, d, acc))`.
fn block_step(f: QFormat, w: &[f32; QK], (d, d2): (f32, f32), x: &[f32], acc: f32) -> f32 {
    let chain = |r: std::ops::Range<usize>| r.fold(0.0f32, |c, e| w[e].mul_add(x[e], c));
    let (c0, c1) = (chain(0..QK / 2), chain(QK / 2..QK));
    match f {
        QFormat::Q8_0 | QFormat::Q4_0 | QFormat::Q5_0 => (c0 + c1).mul_add(d, acc),
        QFormat::Q4_1 | QFormat::Q4K | QFormat::Q5K => acc + (c0 + c1),
        QFormat::Q6K => c1.mul_add(d2, c0.mul_add(d, acc)),
    }
}

/// Decodes a packed tile: Q8_0, Q4_0 and Q5_0 weights as the integers `q`, `q − 8` and `q − 16`
/// (the scale is applied per block),
/// Q4_1 weights as `fma(q, d, m)`, which equals the exact `d·q` rounded once after adding `m`
/// (Q4_K and Q5_K too, with their exact `d·sc` and `−dmin·mn`), Q6_K weights as the integers `q − 32` with
/// the exact sub-block scales `d·sc`.
fn decode(f: QFormat, q: &[u8], (scales, b): (&[u16], usize), out: &mut Decoded) {
    if matches!(f, QFormat::Q8_0 | QFormat::Q4_0 | QFormat::Q5_0) {
        let s = &scales[b * tile_scales(f)..][..GROUP];
        for j in 0..GROUP {
            out.d[j] = f16_to_f32(s[j]);
        }
    }
    match f {
        QFormat::Q6K => {
            for (j, w) in out.w.iter_mut().enumerate() {
                [out.d[j], out.d2[j]] = q6_k_scales(scales, b, j);
                for (e, v) in w.iter_mut().enumerate() {
                    *v = f32::from(q6_k_value(q, j, e) as i8 - 32);
                }
            }
        }
        QFormat::Q4_0 | QFormat::Q5_0 => {
            for (j, w) in out.w.iter_mut().enumerate() {
                for (e, v) in w.iter_mut().enumerate() {
                    *v = nibble_int(f, q, j, e) as f32;
                }
            }
        }
        QFormat::Q4_1 | QFormat::Q4K | QFormat::Q5K => {
            for (j, w) in out.w.iter_mut().enumerate() {
                let (d, m) = nibble_scales(f, scales, b, j);
                for (e, v) in w.iter_mut().enumerate() {
                    *v = (nibble_int(f, q, j, e) as f32).mul_add(d, m);
                }
            }
        }
        QFormat::Q8_0 => {
            for (k, unit) in q.chunks_exact(UNIT).enumerate() {
                for (j, w) in out.w.iter_mut().enumerate() {
                    for t in 0..4 {
                        w[4 * k + t] = f32::from((unit[4 * j + t] ^ 0x80) as i8);
                    }
                }
            }
        }
    }
}
