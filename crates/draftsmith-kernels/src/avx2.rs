//! AVX2 kernels (`vpmaddubsw`) and the SIMD activation quantizer.
//!
//! A 16-row group is processed as two halves of 8 rows (lane `j` = row `j` of the half); each
//! half reads the 32-byte half of every 64-byte unit.
//!
//! * Q8_0: weights are turned back into signed bytes and multiplied with llama.cpp's
//!   `maddubs(|w|, sign(x, w))` trick (no saturation since `|x| <= 127`).
//! * The nibble formats (Q4_0, Q4_1, Q5_0, Q4_K, Q5_K), one kernel: four-bit values (≤ 15)
//!   times activations (|x| ≤ 127) keep a block's 16-bit pair sums below `8 · 2 · 15 · 127 =
//!   30480`, so they are accumulated in 16 bits and widened once; five-bit ones (put together
//!   from their two planes) are widened per unit; scales and offsets as on the AVX-512 path.
//! * Q6_K: six-bit values (≤ 63) put together from their two planes; two units' pair sums (≤
//!   `2 · 2 · 63 · 127`) are added in 16 bits and widened, each half of 16 into its own
//!   accumulator.

use std::arch::x86_64::*;

use crate::act::{PackedTile, ROUND_BIAS};
use crate::dispatch::{check_packed, Group, TileOut};
use crate::layout::{kquant_scale_at, nib, tile_bytes, tile_scales, GROUP, QK, UNIT};
use crate::QFormat;

/// Most activation rows per tile. Up to four rows the accumulators fit the 16 vector registers;
/// wider tiles spill some to the stack and still beat two narrower tiles, which unpack every
/// weight unit twice (float accumulators kept in the output tile by hand for wider Q8_0 tiles
/// measured no better). A SmolLM2-135M pass (Q4_1 with a Q8_0 LM head; `bench ar`, 64 cached
/// tokens, AVX2 Zen 3, 2 threads, the binaries interleaved, minimum of six) over 5 / 6 / 8
/// tokens took 6.34 / 7.20 / 9.14 ms with tiles of up to eight against 7.05 / 7.81 / 9.96 ms with
/// tiles of up to four (4 tokens: 5.5 ms either way; Qwen2.5-Coder-0.5B 28.3 against 33.0 ms over
/// 5 tokens, 39.7 against 45.8 over 8); then over 10 / 12 / 64 tokens 10.8 / 12.3 / 64.8 ms with
/// tiles of up to twelve against 13.2 / 14.3 / 73.3 with eight (8 and 16 tokens, tiles of eight
/// either way, unchanged). Sixteen did no better than eight over 16 and 64 rows in the qmatmul
/// bench's model step, where twelve beat eight.
pub(crate) const WIDTH: usize = 12;

/// Rows in one half group.
const HALF: usize = GROUP / 2;

/// Broadcasts the four activation bytes at `p` to every 32-bit lane.
macro_rules! bcast4 {
    ($p:expr) => {
        _mm256_set1_epi32($p.cast::<i32>().read_unaligned())
    };
}

/// One packed row group against one tile of activations packed per tile ([`PackedTile`], 1 ..=
/// [`WIDTH`] rows), as on the AVX-512 path: every activation operand lies at a constant offset
/// from one pointer per block, and `d · Σ q` comes precomputed, so the inner loops do no per-row
/// pointer or scalar work (and up to four rows the 16 vector registers hold the accumulators
/// without spills).
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn tile_packed(f: QFormat, w: Group<'_>, a: PackedTile<'_>, out: &mut TileOut) {
    check_packed(f, w, a, WIDTH);
    macro_rules! width {
        ($kernel:ident, $h:expr $(, $k:expr)?) => {
            match a.cn {
                1 => $kernel::<1 $(, { $k })?>(w, a, out, $h),
                2 => $kernel::<2 $(, { $k })?>(w, a, out, $h),
                3 => $kernel::<3 $(, { $k })?>(w, a, out, $h),
                4 => $kernel::<4 $(, { $k })?>(w, a, out, $h),
                5 => $kernel::<5 $(, { $k })?>(w, a, out, $h),
                6 => $kernel::<6 $(, { $k })?>(w, a, out, $h),
                7 => $kernel::<7 $(, { $k })?>(w, a, out, $h),
                8 => $kernel::<8 $(, { $k })?>(w, a, out, $h),
                9 => $kernel::<9 $(, { $k })?>(w, a, out, $h),
                10 => $kernel::<10 $(, { $k })?>(w, a, out, $h),
                11 => $kernel::<11 $(, { $k })?>(w, a, out, $h),
                _ => $kernel::<12 $(, { $k })?>(w, a, out, $h),
            }
        };
    }
    for h in 0..2 {
        match f {
            QFormat::Q8_0 => width!(q8_0, h),
            QFormat::Q4_0 => width!(nibbles, h, nib::Q4_0),
            QFormat::Q4_1 => width!(nibbles, h, nib::Q4_1),
            QFormat::Q5_0 => width!(nibbles, h, nib::Q5_0),
            QFormat::Q4K => width!(nibbles, h, nib::Q4K),
            QFormat::Q5K => width!(nibbles, h, nib::Q5K),
            QFormat::Q6K => width!(q6_k, h),
        }
    }
}

/// Q8_0 half group `h` × `C` packed activation rows.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_0<const C: usize>(w: Group<'_>, a: PackedTile<'_>, out: &mut TileOut, h: usize) {
    let (quants, scales) = (w.quants, w.scales);
    let nb = quants.len() / tile_bytes(QFormat::Q8_0);
    let (ones, bias) = (_mm256_set1_epi16(1), _mm256_set1_epi8(-128));
    let mut facc = [_mm256_setzero_ps(); C];
    for b in 0..nb {
        if h == 0 {
            prefetch_block(&w, QFormat::Q8_0, b);
        }
        let wq = quants.as_ptr().add(b * tile_bytes(QFormat::Q8_0) + h * 32);
        let xb = a.qs.as_ptr().add(b * C * QK);
        let mut ia = [_mm256_setzero_si256(); C];
        for k in 0..8 {
            let wk = _mm256_xor_si256(_mm256_loadu_si256(wq.add(k * UNIT).cast()), bias);
            let aw = _mm256_abs_epi8(wk);
            for c in 0..C {
                let xs = _mm256_sign_epi8(bcast4!(xb.add(c * QK + 4 * k)), wk);
                let p = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, xs), ones);
                ia[c] = _mm256_add_epi32(ia[c], p);
            }
        }
        let dw = _mm256_cvtph_ps(_mm_loadu_si128(scales.as_ptr().add(b * GROUP + h * HALF).cast()));
        let db = a.d.as_ptr().add(b * C);
        for c in 0..C {
            let scale = _mm256_mul_ps(dw, _mm256_set1_ps(*db.add(c)));
            facc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[c]), scale, facc[c]);
        }
    }
    for c in 0..C {
        _mm256_storeu_ps(out[c].as_mut_ptr().add(h * HALF), facc[c]);
    }
}

/// A nibble format's half group `h` ([`nib`] kind `N`: Q4_0, Q4_1, Q5_0, Q4_K, Q5_K) × `C`
/// packed activation rows. Four-bit values (≤ 15) times activations (|x| ≤ 127): a block's
/// eight 16-bit pair sums stay below `8 · 2 · 15 · 127 = 30480` and are widened once; five-bit
/// ones (≤ 31) are widened per unit.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn nibbles<const C: usize, const N: u8>(w: Group<'_>, a: PackedTile<'_>, out: &mut TileOut, h: usize) {
    let (quants, scales) = (w.quants, w.scales);
    let f = nib::format(N);
    let tb = tile_bytes(f);
    let nb = quants.len() / tb;
    let (ones, low, top) = (_mm256_set1_epi16(1), _mm256_set1_epi8(0x0F), _mm256_set1_epi8(0x10));
    let mut facc = [_mm256_setzero_ps(); C];
    for b in 0..nb {
        if h == 0 {
            prefetch_block(&w, f, b);
        }
        let wq = quants.as_ptr().add(b * tb + h * 32);
        let xb = a.qs.as_ptr().add(b * C * QK);
        let t = if nib::fifth(N) { _mm256_loadu_si256(wq.add(4 * UNIT).cast()) } else { _mm256_setzero_si256() };
        let bias = a.bias.as_ptr().add(b * C);
        let mut ia: [__m256i; C] = std::array::from_fn(|c| _mm256_set1_epi32(nib::start(N, *bias.add(c))));
        let mut acc16 = [_mm256_setzero_si256(); C];
        for u in 0..4 {
            let v = _mm256_loadu_si256(wq.add(u * UNIT).cast());
            let (lo, hi) = if nib::fifth(N) {
                // As on the AVX-512 path: unit u's fifth bits moved to bit 4, spills masked off.
                let (h0, h1) = match u {
                    0 => (_mm256_slli_epi16::<4>(t), t),
                    1 => (_mm256_slli_epi16::<3>(t), _mm256_srli_epi16::<1>(t)),
                    2 => (_mm256_slli_epi16::<2>(t), _mm256_srli_epi16::<2>(t)),
                    _ => (_mm256_slli_epi16::<1>(t), _mm256_srli_epi16::<3>(t)),
                };
                (
                    _mm256_or_si256(_mm256_and_si256(v, low), _mm256_and_si256(h0, top)),
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(v), low), _mm256_and_si256(h1, top)),
                )
            } else {
                (_mm256_and_si256(v, low), _mm256_and_si256(_mm256_srli_epi16::<4>(v), low))
            };
            for c in 0..C {
                let x = xb.add(c * QK + 4 * u);
                let p = _mm256_add_epi16(
                    _mm256_maddubs_epi16(lo, bcast4!(x)),
                    _mm256_maddubs_epi16(hi, bcast4!(x.add(16))),
                );
                if nib::fifth(N) {
                    ia[c] = _mm256_add_epi32(ia[c], _mm256_madd_epi16(p, ones));
                } else {
                    acc16[c] = _mm256_add_epi16(acc16[c], p);
                }
            }
        }
        // The scales are loaded after the integer loop so they are not live across it.
        let (dw, mw) = nibble_scales::<N>(scales.as_ptr(), b, h);
        let (db, sb) = (a.d.as_ptr().add(b * C), a.dsum.as_ptr().add(b * C));
        for c in 0..C {
            let isum = if nib::fifth(N) { ia[c] } else { _mm256_add_epi32(ia[c], _mm256_madd_epi16(acc16[c], ones)) };
            facc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_set1_ps(*db.add(c))), facc[c]);
            if nib::affine(N) {
                facc[c] = _mm256_fmadd_ps(mw, _mm256_set1_ps(*sb.add(c)), facc[c]);
            }
        }
    }
    for c in 0..C {
        _mm256_storeu_ps(out[c].as_mut_ptr().add(h * HALF), facc[c]);
    }
}

/// Half `h` of the 16 rows' scale `d` and minimum `m` of block `b` of a packed nibble row group
/// ([`nib`] kind `N`) whose scales start at `s`: f16 `d` (and `m`: Q4_1) per block, or the
/// K-quants' exact `d_sb · sc` and `−dmin · mn` (`m` is zero where the format has none).
#[inline(always)]
unsafe fn nibble_scales<const N: u8>(s: *const u16, b: usize, h: usize) -> (__m256, __m256) {
    if !nib::k_scales(N) {
        let sc = s.add(b * tile_scales(nib::format(N)) + h * HALF);
        let d = _mm256_cvtph_ps(_mm_loadu_si128(sc.cast()));
        let m =
            if nib::affine(N) { _mm256_cvtph_ps(_mm_loadu_si128(sc.add(GROUP).cast())) } else { _mm256_setzero_ps() };
        return (d, m);
    }
    let (at_d, at_sc) = kquant_scale_at(nib::format(N), b);
    let d = _mm256_cvtph_ps(_mm_loadu_si128(s.add(at_d + h * HALF).cast()));
    let neg_dmin = _mm256_cvtph_ps(_mm_loadu_si128(s.add(at_d + GROUP + h * HALF).cast()));
    let v = _mm256_cvtepu16_epi32(_mm_loadu_si128(s.add(at_sc + h * HALF).cast()));
    let (sc, mn) = (_mm256_and_si256(v, _mm256_set1_epi32(0xFF)), _mm256_srli_epi32::<8>(v));
    (_mm256_mul_ps(d, _mm256_cvtepi32_ps(sc)), _mm256_mul_ps(neg_dmin, _mm256_cvtepi32_ps(mn)))
}

/// Q6_K half group `h` × `C` packed activation rows. Two units' pair sums are added in 16 bits
/// before they are widened (half the `vpmaddwd` and `vpaddd` a row): on a Zen 3, one thread,
/// Qwen-1.5B's `ffn_down` shape took 0.51 / 2.01 / 14.5 ms at 1 / 8 / 64 rows against 0.53 /
/// 2.32 / 18.4 when each unit was widened (`qmatmul --int8`, minima of three alternations,
/// session 77); the integer sums, and so every output, are unchanged.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q6_k<const C: usize>(w: Group<'_>, a: PackedTile<'_>, out: &mut TileOut, h: usize) {
    let (quants, scales) = (w.quants, w.scales);
    let tb = tile_bytes(QFormat::Q6K);
    let nb = quants.len() / tb;
    let (ones, low, top) = (_mm256_set1_epi16(1), _mm256_set1_epi8(0x0F), _mm256_set1_epi8(0x30));
    let mut facc = [_mm256_setzero_ps(); C];
    for b in 0..nb {
        if h == 0 {
            prefetch_block(&w, QFormat::Q6K, b);
        }
        let wq = quants.as_ptr().add(b * tb + h * 32);
        let xb = a.qs.as_ptr().add(b * C * QK);
        let t0 = _mm256_loadu_si256(wq.add(4 * UNIT).cast());
        let t1 = _mm256_loadu_si256(wq.add(5 * UNIT).cast());
        let hb = a.half_bias.as_ptr().add(2 * b * C);
        let mut ia: [__m256i; C] = std::array::from_fn(|c| _mm256_set1_epi32(*hb.add(2 * c)));
        let mut ib: [__m256i; C] = std::array::from_fn(|c| _mm256_set1_epi32(*hb.add(2 * c + 1)));
        // Unit u's six-bit values: its low nibbles, and its top bits moved to bits 4..6 with the
        // spills masked off (as on the AVX-512 path).
        let unpack = |u: usize| {
            let v = _mm256_loadu_si256(wq.add(u * UNIT).cast());
            let (h0, h1) = match u {
                0 => (_mm256_slli_epi16::<4>(t0), _mm256_slli_epi16::<4>(t1)),
                1 => (_mm256_slli_epi16::<2>(t0), _mm256_slli_epi16::<2>(t1)),
                2 => (t0, t1),
                _ => (_mm256_srli_epi16::<2>(t0), _mm256_srli_epi16::<2>(t1)),
            };
            let lo = _mm256_or_si256(_mm256_and_si256(v, low), _mm256_and_si256(h0, top));
            let hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(v), low), _mm256_and_si256(h1, top));
            (lo, hi)
        };
        // Two units at a time: their pair sums (each ≤ 2 · 63 · 127 = 16002) add up in 16 bits
        // without overflow, so each half of 16 is widened once per two units.
        for u in [0, 2] {
            let ((lo0, hi0), (lo1, hi1)) = (unpack(u), unpack(u + 1));
            for c in 0..C {
                let x = xb.add(c * QK + 4 * u);
                let pa = _mm256_add_epi16(
                    _mm256_maddubs_epi16(lo0, bcast4!(x)),
                    _mm256_maddubs_epi16(lo1, bcast4!(x.add(4))),
                );
                let pb = _mm256_add_epi16(
                    _mm256_maddubs_epi16(hi0, bcast4!(x.add(16))),
                    _mm256_maddubs_epi16(hi1, bcast4!(x.add(20))),
                );
                ia[c] = _mm256_add_epi32(ia[c], _mm256_madd_epi16(pa, ones));
                ib[c] = _mm256_add_epi32(ib[c], _mm256_madd_epi16(pb, ones));
            }
        }
        let (at_d, at_sc) = kquant_scale_at(QFormat::Q6K, b);
        let d = _mm256_cvtph_ps(_mm_loadu_si128(scales.as_ptr().add(at_d + h * HALF).cast()));
        let v = _mm256_cvtepi16_epi32(_mm_loadu_si128(scales.as_ptr().add(at_sc + h * HALF).cast()));
        let s0 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_srai_epi32::<24>(_mm256_slli_epi32::<24>(v))));
        let s1 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_srai_epi32::<8>(v)));
        let db = a.d.as_ptr().add(b * C);
        for c in 0..C {
            let v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ib[c]), s1, _mm256_mul_ps(_mm256_cvtepi32_ps(ia[c]), s0));
            facc[c] = _mm256_fmadd_ps(v, _mm256_set1_ps(*db.add(c)), facc[c]);
        }
    }
    for c in 0..C {
        _mm256_storeu_ps(out[c].as_mut_ptr().add(h * HALF), facc[c]);
    }
}

/// Prefetches block `b` of the next group (quants and scales), when `w` has one, into L2
/// (`T1`), not L1: with two to eight activation rows the weight stream then overlaps the dot
/// products instead of queueing behind them. A Qwen2.5-1.5B-shaped step of matrices (1067 MB,
/// int8 activations, Zen 4, 2 threads, best of 16): n = 2 / 3 / 4 / 8 rows 34.2 / 36.6 / 39.0 /
/// 48.0 ms with `T0` against 33.5 / 33.7 / 34.1 / 45.1 ms with `T1`; one row 32.9 ms either way;
/// SmolLM2-135M's step unchanged (within 0.1 ms).
///
/// Before that, the quants and scales [`L1_AHEAD`] blocks further on in this group (past its
/// end: the next group's first, contiguous in memory) into L1 (`T0`), from where the `T1`
/// prefetch left them: without it each block's loads from L2 trickle in one by one between
/// its dot products, and the weight stream from memory waits with them. Qwen2.5-1.5B's layer
/// shapes streamed on one thread of the AMX Xeon (session 66,
/// `eval/results/session66-xeon/`): 1 / 2 / 4 / 8 rows 56 / 60–62 / 68 / 77.5 ms against
/// 61 / 65–67 / 74 / 83.6 without.
#[inline(always)]
pub(crate) fn prefetch_block(w: &Group<'_>, f: QFormat, b: usize) {
    let (tb, ts) = (tile_bytes(f), tile_scales(f));
    let near = b + L1_AHEAD;
    prefetch_tile::<_MM_HINT_T0>(
        w.quants.as_ptr().wrapping_add(near * tb),
        w.scales.as_ptr().wrapping_add(near * ts),
        tb,
    );
    if w.prefetch() {
        prefetch_tile::<_MM_HINT_T1>(
            w.next.0.as_ptr().wrapping_add(b * tb),
            w.next.1.as_ptr().wrapping_add(b * ts),
            tb,
        );
    }
}

/// Prefetches the `bytes` (a multiple of 64) of a tile's quants at `q` and the scales' line at
/// `s` with the hint `HINT` (`_MM_HINT_T0`: into L1, `_MM_HINT_T1`: into L2). A prefetch never
/// faults, so the addresses may lie past their buffers (callers build them with `wrapping_add`,
/// which keeps the arithmetic defined).
#[inline(always)]
pub(crate) fn prefetch_tile<const HINT: i32>(q: *const u8, s: *const u16, bytes: usize) {
    // SAFETY: prefetching is a hint; any address is allowed.
    unsafe {
        for line in (0..bytes).step_by(64) {
            _mm_prefetch::<HINT>(q.wrapping_add(line).cast());
        }
        _mm_prefetch::<HINT>(s.cast());
    }
}

/// Blocks ahead of the current one whose quants and scales [`prefetch_block`] brings into L1.
const L1_AHEAD: usize = 4;

/// Quantizes consecutive 32-value blocks of `x`; bit-identical to
/// [`quantize_block_scalar`](crate::act::quantize_block_scalar).
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn quantize_blocks(x: &[f32], qs: &mut [i8], d: &mut [f32], sum: &mut [i32]) {
    let nblk = x.len() / QK;
    assert!(qs.len() >= nblk * QK && d.len() >= nblk && sum.len() >= nblk);
    let absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFF_FFFF));
    for i in 0..nblk {
        let p = x.as_ptr().add(i * QK);
        let v: [__m256; 4] = std::array::from_fn(|k| _mm256_loadu_ps(p.add(8 * k)));
        let mut amax = _mm256_setzero_ps();
        for vk in v {
            amax = _mm256_max_ps(_mm256_and_ps(vk, absmask), amax);
        }
        let amax = hmax(amax);
        let dd = amax / 127.0;
        let id = if dd != 0.0 { 1.0 / dd } else { 0.0 };
        let q: [__m256i; 4] = std::array::from_fn(|k| round_clamped(v[k], id));
        let s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
        let packed = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        let packed = _mm256_permutevar8x32_epi32(packed, order);
        _mm256_storeu_si256(qs.as_mut_ptr().add(i * QK).cast(), packed);
        d[i] = dd;
        sum[i] = hsum_epi32(s);
    }
}

/// `trunc(clamp(v·id, ±127) + copysign(ROUND_BIAS, ·))` per lane, as in the scalar quantizer.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn round_clamped(v: __m256, id: f32) -> __m256i {
    let s = _mm256_mul_ps(v, _mm256_set1_ps(id));
    let s = _mm256_min_ps(_mm256_max_ps(s, _mm256_set1_ps(-127.0)), _mm256_set1_ps(127.0));
    let bias = _mm256_or_ps(_mm256_and_ps(s, _mm256_set1_ps(-0.0)), _mm256_set1_ps(ROUND_BIAS));
    _mm256_cvttps_epi32(_mm256_add_ps(s, bias))
}

/// Maximum of the eight lanes.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn hmax(v: __m256) -> f32 {
    let m4 = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    _mm_cvtss_f32(_mm_max_ss(m2, _mm_movehdup_ps(m2)))
}

/// Sum of the eight 32-bit lanes.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn hsum_epi32(v: __m256i) -> i32 {
    let s4 = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s2 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
    _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32::<1>(s2)))
}
