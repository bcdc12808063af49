//! AVX-512 VNNI kernels: one `vpdpbusd` per 4 elements × 16 rows × activation row.
//!
//! Lane `j` of every vector is row `j` of the 16-row group, so a block's integer dot products for
//! all 16 rows come out in one register, which is converted and scaled by `d_w · d_x` with one
//! FMA. Each 64-byte weight unit is loaded once per tile of up to
//! [`TILE`](crate::dispatch::TILE) activation rows.
//!
//! * Q8_0: packed weights are `q + 128` (unsigned); the bias is removed by starting each block's
//!   integer accumulator at `-128 · Σ q_x`.
//! * The nibble formats, one kernel: Q4_1's nibbles are unsigned, the minimum adds
//!   `m · d_x · Σ q_x` per block; Q4_K is Q4_1 with each block's `d = d_sb · sc` and
//!   `m = −dmin · mn` put together (exactly) from the super-block's scales and the block's two
//!   6-bit bytes; Q5_0 and Q5_K put a fifth bit from its plane on each nibble in registers;
//!   Q4_0 and Q5_0 (stored as `q + 8`, `q + 16`) start each block's integer sum at
//!   `−8 · Σ q_x`, `−16 · Σ q_x`.
//! * Q6_K: the six-bit `q` (unsigned) is put together from its two planes in registers; each
//!   half of 16 has its own accumulator, started at `−32 · Σ q_x` of the half (the offset), and
//!   the two are scaled by their `d · sc` and summed before `d_x`.

use std::arch::x86_64::*;

use crate::act::PackedTile;
use crate::avx2::prefetch_block;
use crate::dispatch::{check_packed, Group, OutPtr, TileOut};
use crate::layout::{kquant_scale_at, nib, tile_bytes, tile_scales, GROUP, QK, UNIT};
use crate::matrix::QMatrix;
use crate::QFormat;

/// Broadcasts the four activation bytes at `p` to every 32-bit lane.
macro_rules! bcast4 {
    ($p:expr) => {
        _mm512_set1_epi32($p.cast::<i32>().read_unaligned())
    };
}

/// Most activation rows of one of these kernels' tiles: two accumulators a row (the integer
/// block sum and the float result) for 12 rows, plus the unpacked weights, the nibble mask and
/// the block's scales, fill AVX-512's 32 registers. Q6_K keeps three a row (each half's sum), so
/// its tiles hold at most [`WIDTH_Q6_K`] rows; an activation quantized for a Q6_K matrix is
/// split that way ([`KernelPath::tile_width`](crate::KernelPath)).
///
/// Twelve rather than eight (session 57): a pass over 9–12 rows takes each weight group through
/// the kernel once instead of twice. SmolLM2-135M's step of matrices on the 2-core AMX Xeon
/// (`qmatmul --model-only --int8 --hot`, two alternating runs, medians): 9 / 10 / 12 rows
/// 4.97–5.02 / 5.34–5.40 / 6.07–6.23 ms against 5.30–5.90 / 5.61–5.90 / 6.59–6.89 with tiles
/// of 8, 8 rows unchanged; Q6_K at 12 rows spilled (64 rows of Qwen-1.5B's `ffn_down` 7 %
/// slower), so it stays at 8.
pub(crate) const WIDTH: usize = 12;
/// Most activation rows of a Q6_K tile (see [`WIDTH`]).
pub(crate) const WIDTH_Q6_K: usize = 8;

/// The most activation rows of format `f`'s tiles on this path: the rule the activations are
/// split by ([`KernelPath::tile_width`](crate::KernelPath)), so the two never disagree.
pub(crate) fn width(f: QFormat) -> usize {
    crate::KernelPath::Avx512Vnni.tile_width(f == QFormat::Q6K)
}

/// One kernel: a packed row group × one packed activation tile, into a [`TileOut`].
pub(crate) type Kernel = unsafe fn(&Group<'_>, &PackedTile<'_>, &mut TileOut);

/// `$kernel` (generic over the tile's rows `C`, and over `$k` if given) for tiles of `$cn` rows
/// (1 ..= 8; with `mid`, 1 ..= 12; with `wide`, 1 ..= 16), as a [`Kernel`].
macro_rules! kernel_width {
    (wide $cn:expr, $kernel:ident $(, $k:expr)?) => {
        match $cn {
            13 => $kernel::<13 $(, { $k })?> as crate::avx512::Kernel,
            14 => $kernel::<14 $(, { $k })?>,
            15 => $kernel::<15 $(, { $k })?>,
            16 => $kernel::<16 $(, { $k })?>,
            cn => crate::avx512::kernel_width!(mid cn, $kernel $(, $k)?),
        }
    };
    (mid $cn:expr, $kernel:ident $(, $k:expr)?) => {
        match $cn {
            9 => $kernel::<9 $(, { $k })?> as crate::avx512::Kernel,
            10 => $kernel::<10 $(, { $k })?>,
            11 => $kernel::<11 $(, { $k })?>,
            12 => $kernel::<12 $(, { $k })?>,
            cn => crate::avx512::kernel_width!(cn, $kernel $(, $k)?),
        }
    };
    ($cn:expr, $kernel:ident $(, $k:expr)?) => {
        match $cn {
            1 => $kernel::<1 $(, { $k })?> as crate::avx512::Kernel,
            2 => $kernel::<2 $(, { $k })?>,
            3 => $kernel::<3 $(, { $k })?>,
            4 => $kernel::<4 $(, { $k })?>,
            5 => $kernel::<5 $(, { $k })?>,
            6 => $kernel::<6 $(, { $k })?>,
            7 => $kernel::<7 $(, { $k })?>,
            _ => $kernel::<8 $(, { $k })?>,
        }
    };
}
pub(crate) use kernel_width;

/// The kernel for format `$f` and tiles of `$cn` rows among a path's three (`$q8_0`, `$nibbles`
/// — generic over the [`nib`] kind too — and `$q6_k`): up to [`WIDTH`] rows ([`WIDTH_Q6_K`] for
/// Q6_K), or with `wide` up to 16 for every format.
macro_rules! kernel_for {
    (wide $f:expr, $cn:expr, $q8_0:ident, $nibbles:ident, $q6_k:ident) => {
        crate::avx512::kernel_for!(@ (wide) (wide) $f, $cn, $q8_0, $nibbles, $q6_k)
    };
    (@ ($($w:tt)?) ($($w6:tt)?) $f:expr, $cn:expr, $q8_0:ident, $nibbles:ident, $q6_k:ident) => {
        match $f {
            QFormat::Q8_0 => crate::avx512::kernel_width!($($w)? $cn, $q8_0),
            QFormat::Q4_0 => crate::avx512::kernel_width!($($w)? $cn, $nibbles, nib::Q4_0),
            QFormat::Q5_0 => crate::avx512::kernel_width!($($w)? $cn, $nibbles, nib::Q5_0),
            QFormat::Q5K => crate::avx512::kernel_width!($($w)? $cn, $nibbles, nib::Q5K),
            QFormat::Q4_1 => crate::avx512::kernel_width!($($w)? $cn, $nibbles, nib::Q4_1),
            QFormat::Q4K => crate::avx512::kernel_width!($($w)? $cn, $nibbles, nib::Q4K),
            QFormat::Q6K => crate::avx512::kernel_width!($($w6)? $cn, $q6_k),
        }
    };
    ($f:expr, $cn:expr, $q8_0:ident, $nibbles:ident, $q6_k:ident) => {
        crate::avx512::kernel_for!(@ (mid) () $f, $cn, $q8_0, $nibbles, $q6_k)
    };
}
pub(crate) use kernel_for;

/// One packed row group against one tile of activations packed per tile ([`PackedTile`], 1 ..=
/// [`TILE`](crate::dispatch::TILE) rows): every activation operand lies at a constant offset from
/// one pointer per block (no per-row pointers to spill, no per-row scalar work).
///
/// # Safety
/// The CPU must support AVX-512 F/BW/VL/VNNI, AVX2, FMA and F16C.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn tile_packed(f: QFormat, w: Group<'_>, a: PackedTile<'_>, out: &mut TileOut) {
    check_packed(f, w, a, width(f));
    kernel_for!(f, a.cn, q8_0_packed, nibbles_packed, q6_k_packed)(&w, &a, out)
}

/// Row groups `groups` of `m` against one packed activation tile (its rows `c0 ..`), each
/// group's results copied straight into the output rows: the whole range in one call, so the
/// per-group work outside the arithmetic (slicing, dispatch, checks) is a few instructions.
/// Prefetches the next group of the range while computing one. Every group gets exactly the
/// arithmetic of [`tile_packed`].
///
/// # Safety
/// The CPU must support AVX-512 F/BW/VL/VNNI, AVX2, FMA and F16C; no other thread may write the
/// output of these row groups for the tile's rows.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn groups_packed(
    m: &QMatrix,
    groups: std::ops::Range<usize>,
    a: PackedTile<'_>,
    c0: usize,
    out: &OutPtr<'_>,
) {
    let kernel = kernel_for!(m.format(), a.cn, q8_0_packed, nibbles_packed, q6_k_packed);
    each(m, groups, &[(a, c0, kernel)], width(m.format()), out);
}

/// [`groups_packed`] for several activation tiles (each with its first row): group by group,
/// every tile's product of a group while its weights sit in L1, as the per-group loop of the
/// other paths does, but with each tile's slices, kernel and shape check taken once for the
/// range instead of once per group and tile (at 64 rows those were ~4 % of a pass's samples).
///
/// # Safety
/// As [`groups_packed`], for every tile's rows.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn groups_tiles(
    m: &QMatrix,
    groups: std::ops::Range<usize>,
    tiles: &[(PackedTile<'_>, usize)],
    out: &OutPtr<'_>,
) {
    let f = m.format();
    let tiles: Vec<_> =
        tiles.iter().map(|&(a, c0)| (a, c0, kernel_for!(f, a.cn, q8_0_packed, nibbles_packed, q6_k_packed))).collect();
    each(m, groups, &tiles, width(f), out);
}

/// Runs each tile's kernel (for tiles of at most `width` rows) on row groups `groups` of `m`
/// against its packed activation tile (its rows `c0 ..`), group by group (every tile on a group
/// before the next group), copying each group's results into `out` (the loop of
/// [`groups_packed`], [`groups_tiles`] and of `crate::amx`'s). The next group is prefetched
/// during the first tile's product.
///
/// # Safety
/// As [`groups_packed`], and each kernel must be for `m`'s format and its tile's rows.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn each(
    m: &QMatrix,
    groups: std::ops::Range<usize>,
    tiles: &[(PackedTile<'_>, usize, Kernel)],
    width: usize,
    out: &OutPtr<'_>,
) {
    if groups.is_empty() {
        return;
    }
    let empty: (&[u8], &[u16]) = (&[], &[]);
    // Every group of a matrix has the same shape: one check per tile covers the range.
    let (quants, scales) = m.group(groups.start);
    for &(a, _, _) in tiles {
        check_packed(m.format(), Group { quants, scales, next: empty }, a, width);
    }
    let rows = m.rows();
    let mut tile: TileOut = [[0.0; GROUP]; crate::dispatch::TILE];
    let end = groups.end;
    for g in groups {
        let (quants, scales) = m.group(g);
        let valid = GROUP.min(rows - g * GROUP);
        for (i, (a, c0, kernel)) in tiles.iter().enumerate() {
            let next = if i == 0 && g + 1 < end { m.group(g + 1) } else { empty };
            kernel(&Group { quants, scales, next }, a, &mut tile);
            for (t, res) in tile.iter().enumerate().take(a.cn) {
                crate::dispatch::write_out(out, (c0 + t) * rows + g * GROUP, &res[..valid]);
            }
        }
    }
}

/// Q8_0 group × `C` packed activation rows.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn q8_0_packed<const C: usize>(w: &Group<'_>, a: &PackedTile<'_>, out: &mut TileOut) {
    let (quants, scales) = (w.quants, w.scales);
    let nb = quants.len() / tile_bytes(QFormat::Q8_0);
    let mut facc = [_mm512_setzero_ps(); C];
    for b in 0..nb {
        prefetch_block(w, QFormat::Q8_0, b);
        let wq = quants.as_ptr().add(b * tile_bytes(QFormat::Q8_0));
        let dw = _mm512_cvtph_ps(_mm256_loadu_si256(scales.as_ptr().add(b * GROUP).cast()));
        let xb = a.qs.as_ptr().add(b * C * QK);
        let (db, bias) = (a.d.as_ptr().add(b * C), a.bias.as_ptr().add(b * C));
        let mut ia: [__m512i; C] = std::array::from_fn(|c| _mm512_set1_epi32(*bias.add(c)));
        let mut ib = [_mm512_setzero_si512(); C];
        for k in 0..8 {
            let wk = _mm512_loadu_si512(wq.add(k * UNIT).cast());
            for c in 0..C {
                let x = bcast4!(xb.add(c * QK + 4 * k));
                // With one or two rows a second chain per row hides the `vpdpbusd` latency;
                // with more, the block's other work already does (`ib` stays zero, folds away).
                if C <= 2 && k % 2 == 1 {
                    ib[c] = _mm512_dpbusd_epi32(ib[c], wk, x);
                } else {
                    ia[c] = _mm512_dpbusd_epi32(ia[c], wk, x);
                }
            }
        }
        fold_q8_0(&mut facc, |c| _mm512_add_epi32(ia[c], ib[c]), dw, db);
    }
    for c in 0..C {
        _mm512_storeu_ps(out[c].as_mut_ptr(), facc[c]);
    }
}

/// The 16 rows' scale `d` and minimum `m` of block `b` of a packed nibble row group ([`nib`]
/// kind `N`) whose scales start at `s`: f16 `d` (and `m`: Q4_1) per block, or the K-quants'
/// exact `d_sb · sc` and `−dmin · mn` (`m` is zero where the format has none).
#[inline(always)]
pub(crate) unsafe fn nibble_scales<const N: u8>(s: *const u16, b: usize) -> (__m512, __m512) {
    if !nib::k_scales(N) {
        let sc = s.add(b * tile_scales(nib::format(N)));
        let d = _mm512_cvtph_ps(_mm256_loadu_si256(sc.cast()));
        let m = if nib::affine(N) {
            _mm512_cvtph_ps(_mm256_loadu_si256(sc.add(GROUP).cast()))
        } else {
            _mm512_setzero_ps()
        };
        return (d, m);
    }
    let (at_d, at_sc) = kquant_scale_at(nib::format(N), b);
    let d = _mm512_cvtph_ps(_mm256_loadu_si256(s.add(at_d).cast()));
    let neg_dmin = _mm512_cvtph_ps(_mm256_loadu_si256(s.add(at_d + GROUP).cast()));
    let v = _mm512_cvtepu16_epi32(_mm256_loadu_si256(s.add(at_sc).cast()));
    let (sc, mn) = (_mm512_and_si512(v, _mm512_set1_epi32(0xFF)), _mm512_srli_epi32::<8>(v));
    (_mm512_mul_ps(d, _mm512_cvtepi32_ps(sc)), _mm512_mul_ps(neg_dmin, _mm512_cvtepi32_ps(mn)))
}

/// A nibble format's group ([`nib`] kind `N`: Q4_0, Q4_1, Q5_0, Q4_K, Q5_K) × `C` packed
/// activation rows.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn nibbles_packed<const C: usize, const N: u8>(w: &Group<'_>, a: &PackedTile<'_>, out: &mut TileOut) {
    let (quants, scales) = (w.quants, w.scales);
    let f = nib::format(N);
    let tb = tile_bytes(f);
    let nb = quants.len() / tb;
    let mut facc = [_mm512_setzero_ps(); C];
    for b in 0..nb {
        prefetch_block(w, f, b);
        let wq = quants.as_ptr().add(b * tb);
        let xb = a.qs.as_ptr().add(b * C * QK);
        let (db, bias, sb) = (a.d.as_ptr().add(b * C), a.bias.as_ptr().add(b * C), a.dsum.as_ptr().add(b * C));
        let t = if nib::fifth(N) { _mm512_loadu_si512(wq.add(4 * UNIT).cast()) } else { _mm512_setzero_si512() };
        let mut ia: [__m512i; C] = std::array::from_fn(|c| _mm512_set1_epi32(nib::start(N, *bias.add(c))));
        let mut ib = [_mm512_setzero_si512(); C];
        for u in 0..4 {
            let (lo, hi) = unpack_nibbles::<N>(wq, t, u);
            for c in 0..C {
                let x = xb.add(c * QK + 4 * u);
                ia[c] = _mm512_dpbusd_epi32(ia[c], lo, bcast4!(x));
                // With one or two rows a second chain per row hides the `vpdpbusd` latency.
                if C <= 2 {
                    ib[c] = _mm512_dpbusd_epi32(ib[c], hi, bcast4!(x.add(16)));
                } else {
                    ia[c] = _mm512_dpbusd_epi32(ia[c], hi, bcast4!(x.add(16)));
                }
            }
        }
        let isum = |c: usize| _mm512_add_epi32(ia[c], ib[c]);
        fold_nibbles::<C, N>(&mut facc, isum, nibble_scales::<N>(scales.as_ptr(), b), db, sb);
    }
    for c in 0..C {
        _mm512_storeu_ps(out[c].as_mut_ptr(), facc[c]);
    }
}

/// The two sub-block scales `d · sc` of the 16 rows of block `b` of a packed Q6_K row group
/// whose scales start at `s`.
#[inline(always)]
pub(crate) unsafe fn q6_k_scales(s: *const u16, b: usize) -> (__m512, __m512) {
    let (at_d, at_sc) = kquant_scale_at(QFormat::Q6K, b);
    let d = _mm512_cvtph_ps(_mm256_loadu_si256(s.add(at_d).cast()));
    // Each row's two signed scale bytes as one sign-extended 16-bit value `hi·256 + lo as u8`.
    let v = _mm512_cvtepi16_epi32(_mm256_loadu_si256(s.add(at_sc).cast()));
    let lo = _mm512_srai_epi32::<24>(_mm512_slli_epi32::<24>(v));
    let hi = _mm512_srai_epi32::<8>(v);
    (_mm512_mul_ps(d, _mm512_cvtepi32_ps(lo)), _mm512_mul_ps(d, _mm512_cvtepi32_ps(hi)))
}

/// Q6_K group × `C` packed activation rows.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn q6_k_packed<const C: usize>(w: &Group<'_>, a: &PackedTile<'_>, out: &mut TileOut) {
    let (quants, scales) = (w.quants, w.scales);
    let tb = tile_bytes(QFormat::Q6K);
    let nb = quants.len() / tb;
    let mut facc = [_mm512_setzero_ps(); C];
    for b in 0..nb {
        prefetch_block(w, QFormat::Q6K, b);
        let wq = quants.as_ptr().add(b * tb);
        let xb = a.qs.as_ptr().add(b * C * QK);
        let (t0, t1) = (_mm512_loadu_si512(wq.add(4 * UNIT).cast()), _mm512_loadu_si512(wq.add(5 * UNIT).cast()));
        // Each half's integer sum starts at −32 · Σ q_x of the half (the weights' offset).
        let hb = a.half_bias.as_ptr().add(2 * b * C);
        let mut ia: [__m512i; C] = std::array::from_fn(|c| _mm512_set1_epi32(*hb.add(2 * c)));
        let mut ib: [__m512i; C] = std::array::from_fn(|c| _mm512_set1_epi32(*hb.add(2 * c + 1)));
        for u in 0..4 {
            let (lo, hi) = unpack_q6_k(wq, (t0, t1), u);
            for c in 0..C {
                let x = xb.add(c * QK + 4 * u);
                ia[c] = _mm512_dpbusd_epi32(ia[c], lo, bcast4!(x));
                ib[c] = _mm512_dpbusd_epi32(ib[c], hi, bcast4!(x.add(16)));
            }
        }
        fold_q6_k(&mut facc, (ia, ib), q6_k_scales(scales.as_ptr(), b), a.d.as_ptr().add(b * C));
    }
    for c in 0..C {
        _mm512_storeu_ps(out[c].as_mut_ptr(), facc[c]);
    }
}

// The pieces of the kernels above that the AMX kernels (`crate::amx`) share: a block's weights
// unpacked to bytes, and its integer sums folded into the float accumulators. Inlined, so each
// kernel compiles to the same instructions as when they were written out in its loop.

/// Unit `u` of a nibble block at `wq` ([`nib`] kind `N`; `t`: the block's fifth-bit plane, if
/// any) as bytes: the weights paired with activations `4u .. 4u + 4` and `16 + 4u .. 20 + 4u`.
#[inline(always)]
pub(crate) unsafe fn unpack_nibbles<const N: u8>(wq: *const u8, t: __m512i, u: usize) -> (__m512i, __m512i) {
    let (low, top) = (_mm512_set1_epi8(0x0F), _mm512_set1_epi8(0x10));
    let v = _mm512_loadu_si512(wq.add(u * UNIT).cast());
    if !nib::fifth(N) {
        return (_mm512_and_si512(v, low), _mm512_and_si512(_mm512_srli_epi16::<4>(v), low));
    }
    // Unit u's fifth bits (bits u and 4 + u of each plane byte) moved to bit 4; the 16-bit
    // shifts' spill into the neighbouring byte is masked off.
    let (h0, h1) = match u {
        0 => (_mm512_slli_epi16::<4>(t), t),
        1 => (_mm512_slli_epi16::<3>(t), _mm512_srli_epi16::<1>(t)),
        2 => (_mm512_slli_epi16::<2>(t), _mm512_srli_epi16::<2>(t)),
        _ => (_mm512_slli_epi16::<1>(t), _mm512_srli_epi16::<3>(t)),
    };
    // (nibble & 0x0F) | (fifth & 0x10) in one ternary op each.
    (
        _mm512_ternarylogic_epi32::<0xEC>(v, _mm512_and_si512(h0, top), low),
        _mm512_ternarylogic_epi32::<0xEC>(_mm512_srli_epi16::<4>(v), _mm512_and_si512(h1, top), low),
    )
}

/// Unit `u` of a Q6_K block at `wq` (`t`: its two planes of top bits) as bytes `q + 32`: the
/// weights paired with activations `4u .. 4u + 4` (first half) and `16 + 4u .. 20 + 4u`.
#[inline(always)]
pub(crate) unsafe fn unpack_q6_k(wq: *const u8, (t0, t1): (__m512i, __m512i), u: usize) -> (__m512i, __m512i) {
    let (low, top) = (_mm512_set1_epi8(0x0F), _mm512_set1_epi8(0x30));
    let v = _mm512_loadu_si512(wq.add(u * UNIT).cast());
    // Unit u's top bits (bits 2u..2u+2 of each plane byte) moved to bits 4..6; the 16-bit
    // shifts' spill into the neighbouring byte is masked off.
    let (h0, h1) = match u {
        0 => (_mm512_slli_epi16::<4>(t0), _mm512_slli_epi16::<4>(t1)),
        1 => (_mm512_slli_epi16::<2>(t0), _mm512_slli_epi16::<2>(t1)),
        2 => (t0, t1),
        _ => (_mm512_srli_epi16::<2>(t0), _mm512_srli_epi16::<2>(t1)),
    };
    // (nibble & 0x0F) | (top & 0x30) in one ternary op each.
    let lo = _mm512_ternarylogic_epi32::<0xEC>(v, _mm512_and_si512(h0, top), low);
    let hi = _mm512_ternarylogic_epi32::<0xEC>(_mm512_srli_epi16::<4>(v), _mm512_and_si512(h1, top), low);
    (lo, hi)
}

/// `facc[c] += isum(c) · d_w · d_x[c]`: a Q8_0 block's integer sums (16 rows × `C` activation
/// rows, `isum(c)` for activation row `c`) scaled by the rows' `dw` and the activations' `d_x`
/// at `db`.
#[inline(always)]
pub(crate) unsafe fn fold_q8_0<const C: usize>(
    facc: &mut [__m512; C],
    isum: impl Fn(usize) -> __m512i,
    dw: __m512,
    db: *const f32,
) {
    for c in 0..C {
        let scale = _mm512_mul_ps(dw, _mm512_set1_ps(*db.add(c)));
        facc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum(c)), scale, facc[c]);
    }
}

/// `facc[c] += isum(c) · d_w · d_x[c] (+ m_w · d_x[c] · Σ q_x[c])`: a nibble block's integer sums
/// scaled by the rows' `(d, m)` ([`nibble_scales`]) and the activations' `d_x` at `db` and
/// `d_x · Σ q_x` at `sb`.
#[inline(always)]
pub(crate) unsafe fn fold_nibbles<const C: usize, const N: u8>(
    facc: &mut [__m512; C],
    isum: impl Fn(usize) -> __m512i,
    (dw, mw): (__m512, __m512),
    db: *const f32,
    sb: *const f32,
) {
    for c in 0..C {
        let s = _mm512_cvtepi32_ps(isum(c));
        facc[c] = _mm512_fmadd_ps(s, _mm512_mul_ps(dw, _mm512_set1_ps(*db.add(c))), facc[c]);
        if nib::affine(N) {
            facc[c] = _mm512_fmadd_ps(mw, _mm512_set1_ps(*sb.add(c)), facc[c]);
        }
    }
}

/// `facc[c] += (ia[c] · s0 + ib[c] · s1) · d_x[c]`: a Q6_K block's two halves' integer sums
/// scaled by their sub-block scales ([`q6_k_scales`]) and the activations' `d_x` at `db`.
#[inline(always)]
pub(crate) unsafe fn fold_q6_k<const C: usize>(
    facc: &mut [__m512; C],
    (ia, ib): ([__m512i; C], [__m512i; C]),
    (s0, s1): (__m512, __m512),
    db: *const f32,
) {
    for c in 0..C {
        let v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ib[c]), s1, _mm512_mul_ps(_mm512_cvtepi32_ps(ia[c]), s0));
        facc[c] = _mm512_fmadd_ps(v, _mm512_set1_ps(*db.add(c)), facc[c]);
    }
}

/// [`crate::avx2::quantize_blocks`] sixteen lanes at a time: each block of 32 values in two
/// vectors, the same per-lane arithmetic (scale, clamp, round half away from zero), so the same
/// bytes, scales and sums; a block's maximum and sum are exact in any order.
///
/// # Safety
/// The CPU must support AVX-512 F/BW/VL, AVX2, FMA and F16C.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(crate) unsafe fn quantize_blocks(x: &[f32], qs: &mut [i8], d: &mut [f32], sum: &mut [i32]) {
    let nblk = x.len() / QK;
    assert!(qs.len() >= nblk * QK && d.len() >= nblk && sum.len() >= nblk);
    let (lo, hi) = (_mm512_set1_ps(-127.0), _mm512_set1_ps(127.0));
    let (sign, bias) = (_mm512_set1_epi32(i32::MIN), _mm512_set1_epi32(crate::act::ROUND_BIAS.to_bits() as i32));
    for i in 0..nblk {
        let p = x.as_ptr().add(i * QK);
        let v = [_mm512_loadu_ps(p), _mm512_loadu_ps(p.add(16))];
        // NaN lanes drop out, as in the scalar fold: `max` returns its second operand when
        // either is NaN, and that operand is never NaN here.
        let m = _mm512_max_ps(_mm512_abs_ps(v[0]), _mm512_setzero_ps());
        let amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v[1]), m));
        let dd = amax / 127.0;
        let id = _mm512_set1_ps(if dd != 0.0 { 1.0 / dd } else { 0.0 });
        let q = v.map(|vk| {
            let s = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(vk, id), lo), hi);
            // copysign(ROUND_BIAS, s): the sign bit of `s` on the bias's bits.
            let b = _mm512_ternarylogic_epi32::<0xEA>(_mm512_castps_si512(s), sign, bias);
            _mm512_cvttps_epi32(_mm512_add_ps(s, _mm512_castsi512_ps(b)))
        });
        let out = qs.as_mut_ptr().add(i * QK);
        _mm_storeu_si128(out.cast(), _mm512_cvtsepi32_epi8(q[0]));
        _mm_storeu_si128(out.add(16).cast(), _mm512_cvtsepi32_epi8(q[1]));
        d[i] = dd;
        sum[i] = _mm512_reduce_add_epi32(_mm512_add_epi32(q[0], q[1]));
    }
}
