//! Portable scalar kernels on the packed layout (reference for the SIMD paths).
//!
//! Loops run over whole 64-byte units (all 16 rows at once) so the compiler can vectorize them
//! with the baseline instruction set of any target.

use crate::act::{half_bias, ActRow};
use crate::dispatch::{Group, TileOut};
use crate::layout::{
    f16_to_f32, has_min, nibble_int, nibble_scales, q6_k_scales, q6_k_value, tile_bytes, tile_scales, GROUP, QK, UNIT,
};
use crate::QFormat;

/// Computes `out[t][j] = Σ_b` block dot products of group row `j` with activation row `t`.
pub(crate) fn tile(format: QFormat, w: Group<'_>, acts: &[ActRow<'_>], out: &mut TileOut) {
    let (tb, ts) = (tile_bytes(format), tile_scales(format));
    let nb = w.quants.len() / tb;
    out.iter_mut().for_each(|res| *res = [0.0; GROUP]);
    let mut sf = [0.0f32; 2 * GROUP];
    for b in 0..nb {
        let q = &w.quants[b * tb..][..tb];
        // Once per block, shared by all activation rows: each row's `d` (and the nibble
        // formats' `m`); Q6_K reads its two scales per row in `block_q6_k`.
        match format {
            QFormat::Q8_0 => {
                for (f, &h) in sf.iter_mut().zip(&w.scales[b * ts..][..ts]) {
                    *f = f16_to_f32(h);
                }
            }
            QFormat::Q6K => {}
            _ => {
                for j in 0..GROUP {
                    (sf[j], sf[GROUP + j]) = nibble_scales(format, w.scales, b, j);
                }
            }
        }
        for (a, res) in acts.iter().zip(out.iter_mut()) {
            let x = &a.qs[b * QK..][..QK];
            match format {
                QFormat::Q8_0 => block_q8_0(q, &sf, x, a.d[b], res),
                QFormat::Q4_0 | QFormat::Q5_0 | QFormat::Q5K => {
                    block_nibbles(format, q, &sf, x, (a.d[b], a.sum[b]), res)
                }
                QFormat::Q4_1 | QFormat::Q4K => block_q4_1(q, &sf, x, (a.d[b], a.sum[b]), res),
                QFormat::Q6K => block_q6_k(q, (w.scales, b), x, (a.d[b], half_bias(a.sum[b], a.lo[b])), res),
            }
        }
    }
}

/// Adds block products of a packed Q8_0 tile (f32 scales `s`) with activation block `x`
/// (scale `dx`) to `acc`.
fn block_q8_0(q: &[u8], s: &[f32], x: &[i8], dx: f32, acc: &mut [f32; GROUP]) {
    // Lane i of a unit is row i/4, element i%4: accumulate 64 lanes, then fold rows.
    let mut lanes = [0i32; UNIT];
    for (k, unit) in q.chunks_exact(UNIT).enumerate() {
        let xk = &x[4 * k..4 * k + 4];
        for (l, wj) in lanes.chunks_exact_mut(4).zip(unit.chunks_exact(4)) {
            for t in 0..4 {
                l[t] += i32::from((wj[t] ^ 0x80) as i8) * i32::from(xk[t]);
            }
        }
    }
    add_scaled(acc, &lanes, |j| s[j] * dx, |_| 0.0);
}

/// Adds block products of a packed Q4_0 or Q5_0 tile (f32 scales `s`, weights `q − 8`,
/// `q − 16`) or Q5_K tile (scales `s[j]`, minima `s[16 + j]`, weights `d·q + m`) with activation
/// block `x` (scale `dx`, sum `xsum`) to `acc`.
fn block_nibbles(f: QFormat, q: &[u8], s: &[f32], x: &[i8], (dx, xsum): (f32, i32), acc: &mut [f32; GROUP]) {
    let mut lanes = [0i32; UNIT];
    for (j, l) in lanes.chunks_exact_mut(4).enumerate() {
        l[0] = x.iter().enumerate().map(|(e, &xe)| nibble_int(f, q, j, e) * i32::from(xe)).sum();
    }
    let sx = dx * xsum as f32;
    let min = |j: usize| if has_min(f) { s[GROUP + j] * sx } else { 0.0 };
    add_scaled(acc, &lanes, |j| s[j] * dx, min);
}

/// Adds `d·dx·Σ q·qx + m·dx·Σ qx` for a packed Q4_1 tile and activation block `x` to `acc`.
fn block_q4_1(q: &[u8], s: &[f32], x: &[i8], (dx, xsum): (f32, i32), acc: &mut [f32; GROUP]) {
    let mut lanes = [0i32; UNIT];
    for (u, unit) in q.chunks_exact(UNIT).enumerate() {
        let (lo, hi) = (&x[4 * u..4 * u + 4], &x[16 + 4 * u..16 + 4 * u + 4]);
        for (l, wj) in lanes.chunks_exact_mut(4).zip(unit.chunks_exact(4)) {
            for t in 0..4 {
                l[t] += i32::from(wj[t] & 0x0F) * i32::from(lo[t]);
                l[t] += i32::from(wj[t] >> 4) * i32::from(hi[t]);
            }
        }
    }
    let sx = dx * xsum as f32;
    add_scaled(acc, &lanes, |j| s[j] * dx, |j| s[GROUP + j] * sx);
}

/// Adds `dx · (s₀·I₀ + s₁·I₁)` for a packed Q6_K tile (block `b` of a row group whose scales
/// are `s`; `s_h = d·sc_h`) and activation block `x` to `acc`, where `I_h = Σ_{half h} q·qx −
/// 32·Σ_{half h} qx` is exact (`bias` holds the second terms) — the SIMD kernels' order.
fn block_q6_k(q: &[u8], (s, b): (&[u16], usize), x: &[i8], (dx, bias): (f32, [i32; 2]), acc: &mut [f32; GROUP]) {
    for (j, a) in acc.iter_mut().enumerate() {
        let sc = q6_k_scales(s, b, j);
        let mut isum = bias;
        for (e, &xe) in x.iter().enumerate() {
            isum[e / 16] += i32::from(q6_k_value(q, j, e)) * i32::from(xe);
        }
        let v = (isum[1] as f32).mul_add(sc[1], isum[0] as f32 * sc[0]);
        *a = v.mul_add(dx, *a);
    }
}

/// `acc[j] += (Σ_{t<4} lanes[4j+t]) · scale(j) + offset(j)`.
fn add_scaled(
    acc: &mut [f32; GROUP],
    lanes: &[i32; UNIT],
    scale: impl Fn(usize) -> f32,
    offset: impl Fn(usize) -> f32,
) {
    for (j, (a, l)) in acc.iter_mut().zip(lanes.chunks_exact(4)).enumerate() {
        let sum = l[0] + l[1] + l[2] + l[3];
        *a += sum as f32 * scale(j) + offset(j);
    }
}
