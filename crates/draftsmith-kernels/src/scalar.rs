//! Portable scalar kernels on the packed layout (reference for the SIMD paths).

use crate::act::ActRow;
use crate::dispatch::TileOut;
use crate::layout::{f16_to_f32, tile_bytes, tile_scales, GROUP, QK, UNIT};
use crate::QFormat;

/// Computes `out[t][j] = Σ_b` block dot products of group row `j` with activation row `t`.
pub(crate) fn tile(format: QFormat, w: (&[u8], &[u16]), acts: &[ActRow<'_>], out: &mut TileOut) {
    let (quants, scales) = w;
    let nb = quants.len() / tile_bytes(format);
    for (a, res) in acts.iter().zip(out.iter_mut()) {
        for (j, r) in res.iter_mut().enumerate() {
            *r = (0..nb)
                .map(|b| {
                    let q = &quants[b * tile_bytes(format)..][..tile_bytes(format)];
                    let s = &scales[b * tile_scales(format)..][..tile_scales(format)];
                    match format {
                        QFormat::Q8_0 => block_q8_0(q, s, j, a, b),
                        QFormat::Q4_1 => block_q4_1(q, s, j, a, b),
                    }
                })
                .fold(0.0, |acc, v| acc + v);
        }
    }
}

/// Block `b` of packed Q8_0 row `j` dotted with activation row `a`.
fn block_q8_0(q: &[u8], s: &[u16], j: usize, a: &ActRow<'_>, b: usize) -> f32 {
    let x = &a.qs[b * QK..][..QK];
    let mut isum = 0i32;
    for (k, unit) in q.chunks_exact(UNIT).enumerate() {
        for t in 0..4 {
            let wq = i32::from((unit[j * 4 + t] ^ 0x80) as i8);
            isum += wq * i32::from(x[4 * k + t]);
        }
    }
    isum as f32 * (f16_to_f32(s[j]) * a.d[b])
}

/// Block `b` of packed Q4_1 row `j` dotted with activation row `a`:
/// `d·dx·Σ q·qx + m·dx·Σ qx`.
fn block_q4_1(q: &[u8], s: &[u16], j: usize, a: &ActRow<'_>, b: usize) -> f32 {
    let x = &a.qs[b * QK..][..QK];
    let mut isum = 0i32;
    for (u, unit) in q.chunks_exact(UNIT).enumerate() {
        for t in 0..4 {
            let byte = unit[j * 4 + t];
            isum += i32::from(byte & 0x0F) * i32::from(x[4 * u + t]);
            isum += i32::from(byte >> 4) * i32::from(x[16 + 4 * u + t]);
        }
    }
    let dx = a.d[b];
    let (d, m) = (f16_to_f32(s[j]), f16_to_f32(s[GROUP + j]));
    isum as f32 * (d * dx) + m * (dx * a.sum[b] as f32)
}
