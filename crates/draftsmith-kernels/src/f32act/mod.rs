//! Weight-only quantization: f32 activations times weights dequantized in registers.
//!
//! [`Activations::F32`](crate::Activations::F32) computes `y = x · Wᵀ` with the weights exactly
//! as stored (`d·q` for Q8_0, `d·q + m` for Q4_1) and the activations unrounded, accumulating in
//! f32 with FMA. The only error is f32 rounding.
//!
//! # Canonical order (batch invariance)
//!
//! Every kernel path computes output `(t, r)` with one fixed sequence of IEEE operations that
//! depends only on `cols`, never on `n`, on the position of token `t` in its tile, on how many
//! rows or groups a kernel call covers, or on the split among threads. For each block `b` of 32
//! elements, with `w_e` the weights and `x_e` the activations of the block:
//!
//! ```text
//! c0 = 0;  for e in  0..16: c0 = fma(w_e, x_e, c0)
//! c1 = 0;  for e in 16..32: c1 = fma(w_e, x_e, c1)
//! s  = c0 + c1
//! Q8_0 (w_e = q_e), Q4_0, Q5_0 (w_e = q_e − 8, q_e − 16): acc = fma(s, d, acc)
//! Q4_1 (w_e = fma(q_e, d, m)): acc = acc + s
//! Q6_K (w_e = q_e − 32):      acc = fma(c1, d·sc₁, fma(c0, d·sc₀, acc))
//! ```
//!
//! starting from `acc = 0`. The SIMD paths evaluate Q8_0 with `w_e = q_e·2²⁴` and `d·2⁻²⁴`,
//! which scales every product and partial sum by an exact power of two, so (barring overflow
//! beyond `|x| ≈ 2⁹⁵` or products below `2⁻¹²⁶`) all paths give bit-identical results.
//!
//! Two chains per block keep the per-block error at ~16 roundings, and the block partial sums
//! keep the whole dot product at about `(16 + cols/32)` roundings of `Σ|w·x|`.

mod scalar;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;

use std::ops::Range;

use crate::act::tile_split;
use crate::dispatch::{run_groups, write_out, KernelPath, OutPtr, TileOut, INLINE_MACS, TILE};
use crate::layout::{tile_bytes, tile_scales, GROUP, QK};
use crate::{QFormat, QMatrix};

/// Most row groups handed to one kernel call (small batches process several groups at once
/// for instruction-level parallelism; the per-output order is unchanged).
pub(crate) const MAX_GROUPS: usize = 4;

/// The packed quants and scales of one 16-row group (`cols / 32` tiles each).
pub(crate) type Packed<'a> = (&'a [u8], &'a [u16]);

/// `y[n, rows] = x[n, cols] · Wᵀ` with f32 activations on `path` (checked supported by the
/// caller).
pub(crate) fn matmul_impl(m: &QMatrix, path: KernelPath, x: &[f32], n: usize, y: &mut [f32]) {
    assert_eq!(x.len(), n * m.cols(), "x must hold n * cols values");
    assert_eq!(y.len(), n * m.rows(), "y must hold n * rows values");
    if n == 0 || m.rows() == 0 {
        return;
    }
    let macs = m.groups() * GROUP * m.cols() * n;
    run_groups(m.groups(), (macs, INLINE_MACS), y, |range, out| compute(m, path, x, n, range, out));
}

/// Activation rows per kernel call on `path`. AVX-512 (32 registers) holds 8 rows × 3
/// accumulators; AVX2 (16 registers) spills with 4 rows, and 3 rows measured fastest.
fn tile_width(path: KernelPath) -> usize {
    match path.vector() {
        KernelPath::Avx512Vnni => 8,
        KernelPath::Avx2 => 3,
        _ => 4,
    }
}

/// The groups of one kernel call, and how far ahead of each group (quant bytes, scale values)
/// the data of the next call's groups lies, for prefetching; `(0, 0)`: nothing to prefetch.
#[derive(Clone, Copy)]
pub(crate) struct Weights<'a> {
    pub groups: &'a [Packed<'a>],
    pub ahead: (usize, usize),
}

/// Computes all activation rows for the row groups in `range`.
fn compute(m: &QMatrix, path: KernelPath, x: &[f32], n: usize, range: Range<usize>, out: &OutPtr<'_>) {
    let (rows, cols) = (m.rows(), m.cols());
    let tiles = tile_split(n, tile_width(path));
    // A single token tile lets the kernel interleave groups; otherwise one group's weights
    // stay in L1 while every token tile passes over them.
    let step = if tiles.len() == 1 { MAX_GROUPS } else { 1 };
    let (gq, gs) = (m.group(0).0.len(), m.group(0).1.len());
    let mut res: [TileOut; MAX_GROUPS] = [[[0.0; GROUP]; TILE]; MAX_GROUPS];
    let mut g0 = range.start;
    while g0 < range.end {
        let gn = step.min(range.end - g0);
        let groups: [Packed<'_>; MAX_GROUPS] = std::array::from_fn(|k| m.group(g0 + k.min(gn - 1)));
        let next = g0 + 2 * gn <= range.end;
        for (i, (c0, cn)) in tiles.clone().enumerate() {
            let xs: [&[f32]; TILE] = std::array::from_fn(|t| {
                let c = (c0 + t).min(n - 1);
                &x[c * cols..][..cols]
            });
            // Only the first pass over these groups prefetches the next ones.
            let ahead = if i == 0 && next { (gn * gq, gn * gs) } else { (0, 0) };
            let w = Weights { groups: &groups[..gn], ahead };
            kernel(path, m.format(), w, &xs[..cn], &mut res[..gn]);
            for (k, tile) in res[..gn].iter().enumerate() {
                let (r0, valid) = ((g0 + k) * GROUP, GROUP.min(rows - (g0 + k) * GROUP));
                for (t, vals) in tile.iter().enumerate().take(cn) {
                    write_out(out, (c0 + t) * rows + r0, &vals[..valid]);
                }
            }
        }
        g0 += gn;
    }
}

/// Runs one kernel call: `w.groups` (1 ..= [`MAX_GROUPS`]) against `xs` (1 ..= [`TILE`] rows).
fn kernel(path: KernelPath, f: QFormat, w: Weights<'_>, xs: &[&[f32]], out: &mut [TileOut]) {
    if !f.fast_in(crate::Activations::F32) {
        // Q4_0, Q5_0 and the K-quants have the reference kernel only: same order, so every path agrees.
        return scalar::tile(f, w.groups, xs, out);
    }
    match path.vector() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: callers only pass supported paths (`detect` / `matmul_f32_with` check).
        KernelPath::Avx512Vnni => unsafe { avx512::tile(f, w, xs, out) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        KernelPath::Avx2 => unsafe { avx2::tile(f, w, xs, out) },
        _ => scalar::tile(f, w.groups, xs, out),
    }
}

/// Prefetches the `bytes` (a multiple of 64) at `q + ahead.0` and the first scale line at
/// `s + ahead.1` into L2 (`T1`, as the int8 kernels do: 3–4 % faster than `T0` on a
/// Qwen2.5-1.5B-shaped step with one to four rows, Zen 4), unless `ahead` is `(0, 0)`.
/// Wrapping arithmetic: the addresses are only hints (the caller guarantees they lie in the
/// matrix when `ahead` is set).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn prefetch(q: *const u8, s: *const u16, bytes: usize, ahead: (usize, usize)) {
    if ahead.0 != 0 {
        use std::arch::x86_64::_MM_HINT_T1;
        crate::avx2::prefetch_tile::<_MM_HINT_T1>(q.wrapping_add(ahead.0), s.wrapping_add(ahead.1), bytes);
    }
}

/// Asserts the slice lengths the SIMD kernels' unchecked pointer arithmetic relies on; returns
/// the number of blocks per row.
pub(crate) fn check(f: QFormat, groups: &[Packed<'_>], xs: &[&[f32]], out: &[TileOut]) -> usize {
    assert!((1..=MAX_GROUPS).contains(&groups.len()), "1..={MAX_GROUPS} groups per call");
    assert!((1..=TILE).contains(&xs.len()), "tile width must be 1..={TILE}");
    assert_eq!(out.len(), groups.len(), "one output tile per group");
    let nb = groups[0].0.len() / tile_bytes(f);
    for (quants, scales) in groups {
        assert_eq!(quants.len(), nb * tile_bytes(f), "packed quants are whole tiles");
        assert!(scales.len() >= nb * tile_scales(f), "packed scales too short");
    }
    for x in xs {
        assert!(x.len() >= nb * QK, "activation row too short");
    }
    nb
}
