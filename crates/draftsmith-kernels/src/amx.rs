//! AMX-INT8 kernels: one `tdpbsud` per block of 32 values × 16 weight rows × a tile of
//! activation rows.
//!
//! Intel's AMX tiles (Sapphire Rapids and later) multiply a tile of signed bytes by a tile of
//! unsigned bytes into a tile of 32-bit sums in one instruction. The packed weight layout of the
//! vector kernels is already AMX's: a 64-byte unit holds four consecutive bytes of each of a
//! group's 16 rows, which is one row of the "B" tile (`K/4` rows × 16 columns × 4 bytes). So a
//! block's eight units (Q8_0 as stored; the other formats unpacked to bytes in registers, as
//! [`crate::avx512`] does, and stored to a 512-byte buffer) are the B tile, a tile's activation
//! rows (`cn` × 32 signed bytes, [`PackedTile`]) the A tile, and `C = A · B` holds each
//! activation row's 16 integer block sums in one 64-byte row — the register [`crate::avx512`]
//! builds with eight `vpdpbusd`. From there the arithmetic is that kernel's, in the same order
//! (its `fold_*` functions), so both paths give the same bits.
//!
//! The tile instructions are written with `asm!` (Rust's AMX intrinsics are nightly-only). Using
//! them needs the kernel's permission (`arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA)`, Linux 5.16+),
//! asked once by [`available`], and a tile configuration per thread ([`configure`]).
//! One activation row is left to the vector kernel (AMX's fixed cost buys nothing there).
//!
//! Blocks go in rounds of [`ROUND`]: a round's weights are unpacked and multiplied (four
//! products in flight, each into its own sum tile: tile registers are not renamed) before the
//! previous round's sums are folded. A tile holds up to 16 activation rows ([`TILE`]; the
//! vector kernels' hold 12, 8 for Q6_K): a tile product costs about the same whatever its
//! rows, so 16-row tiles halve the products of a long draft (session 41: 16 rows 12.1 → 10.1
//! ms, 64 rows 47.6 → 38.1 ms for SmolLM2-135M's matrices on 2 cores).
//!
//! Still not faster than [`crate::avx512`] on the AMX machines measured (session 30, a 16-core
//! Xeon; session 41, a 2-core Xeon with AMX: `eval/results/session41-xeon-amx/`): 2–8 rows
//! 25–55 % slower, 16–64 rows level to 12 % slower. With GGUF's scale per 32 values, each
//! block's sums must leave the tile unit (`tilestored`), come back into vector registers and be
//! converted, scaled and added there — four vector operations per activation row and block —
//! and on those machines the tile instructions did not overlap with that vector work: a
//! microbenchmark timed about 10 ns per tile product (load, multiply, store) whatever its rows,
//! and a round of products plus the fold of a round as the sum of the two. So
//! [`crate::KernelPath::detect`] never picks this path by itself.

use std::arch::asm;
use std::arch::x86_64::*;
use std::cell::Cell;
use std::sync::OnceLock;

use crate::act::PackedTile;
use crate::avx2::prefetch_block;
use crate::avx512::{
    each, fold_nibbles, fold_q6_k, fold_q8_0, kernel_for, nibble_scales, q6_k_scales, unpack_nibbles, unpack_q6_k,
};
use crate::dispatch::{check_packed, Group, OutPtr, TileOut, TILE};
use crate::layout::{nib, tile_bytes, GROUP, QK, UNIT};
use crate::matrix::QMatrix;
use crate::QFormat;

/// Whether this CPU has AMX-TILE and AMX-INT8 and the operating system lets this process use the
/// tile registers (asked once; the answer holds for every thread of the process).
pub(crate) fn available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        // Leaf 7 (read only where it exists): EDX bit 24 AMX-TILE, bit 25 AMX-INT8.
        let cpu = __get_cpuid_max(0).0 >= 7 && {
            let edx = __cpuid_count(7, 0).edx;
            (edx >> 24) & 1 == 1 && (edx >> 25) & 1 == 1
        };
        cpu && request_tile_permission()
    })
}

/// Asks Linux for the tile data state (`arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`);
/// without it the first tile instruction faults. False on other systems and older kernels.
fn request_tile_permission() -> bool {
    #[cfg(target_os = "linux")]
    {
        const SYS_ARCH_PRCTL: isize = 158;
        const ARCH_REQ_XCOMP_PERM: usize = 0x1023;
        const XFEATURE_XTILEDATA: usize = 18;
        let ret: isize;
        // SAFETY: a plain system call that changes no memory of this process.
        unsafe {
            asm!(
                "syscall",
                inlateout("rax") SYS_ARCH_PRCTL => ret,
                in("rdi") ARCH_REQ_XCOMP_PERM,
                in("rsi") XFEATURE_XTILEDATA,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        ret == 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// The 64-byte operand of `ldtilecfg` (palette 1).
#[repr(C, align(64))]
struct TileConfig {
    palette: u8,
    start_row: u8,
    reserved: [u8; 14],
    /// Bytes per row of each tile register.
    colsb: [u16; 16],
    /// Rows of each tile register.
    rows: [u8; 16],
}

thread_local! {
    /// The `(rows, k)` of this thread's loaded tile configuration (0: none yet).
    static CONFIGURED: Cell<usize> = const { Cell::new(0) };
}

/// Loads this thread's tile configuration for `cn` activation rows and format `f`'s products of
/// `k` values (32, a block; 16, a Q6_K half), unless it is the one loaded last: `tmm0`/`tmm1`
/// activations (`cn` × `k` bytes), `tmm4`/`tmm5` weights (`k/4` × 64 bytes),
/// `tmm2`/`tmm3`/`tmm6`/`tmm7` sums (`cn` × 16 × i32): four products in flight (tile registers
/// are not renamed).
///
/// # Safety
/// [`available`] must be true.
unsafe fn configure(f: QFormat, cn: usize) {
    let k = if f == QFormat::Q6K { QK / 2 } else { QK };
    let key = (cn << 8) | k;
    if CONFIGURED.with(Cell::get) == key {
        return;
    }
    let mut cfg = TileConfig { palette: 1, start_row: 0, reserved: [0; 14], colsb: [0; 16], rows: [0; 16] };
    let (a, b, c) = ((k, cn), (UNIT, k / 4), (UNIT, cn));
    for (t, (colsb, rows)) in [(0, a), (1, a), (4, b), (5, b), (2, c), (3, c), (6, c), (7, c)] {
        cfg.colsb[t] = colsb as u16;
        cfg.rows[t] = rows as u8;
    }
    asm!("ldtilecfg [{}]", in(reg) &cfg, options(nostack, readonly, preserves_flags));
    CONFIGURED.with(|c| c.set(key));
}

/// Blocks whose products one round of tile instructions computes before their sums are folded.
const ROUND: usize = 8;

/// One round's weights unpacked to bytes (B tiles; Q8_0's are read where they are stored) and
/// integer sums (C tiles, `[half][block]`: a row of 16 per activation row; Q6_K's second half
/// in `[1]`).
#[repr(C, align(64))]
struct Round {
    weights: [[u8; 8 * UNIT]; ROUND],
    sums: [[[[i32; GROUP]; TILE]; ROUND]; 2],
}

/// Runs blocks `0 .. nb` in rounds of [`ROUND`]: `stage(b0, len, round)` unpacks and multiplies
/// a round's blocks into `round`, `fold(b0, len, round)` folds their sums. Each round is staged
/// before the previous one is folded, so the tile unit multiplies while the vector unit folds,
/// and no fold waits on the tile stores just issued.
#[inline(always)]
unsafe fn pipelined(
    nb: usize,
    mut stage: impl FnMut(usize, usize, *mut Round),
    mut fold: impl FnMut(usize, usize, *const Round),
) {
    // Every byte a fold reads is written by its round's stage first.
    let mut rounds = std::mem::MaybeUninit::<[Round; 2]>::uninit();
    let r = rounds.as_mut_ptr().cast::<Round>();
    let rounds_n = nb.div_ceil(ROUND);
    let len = |k: usize| ROUND.min(nb - k * ROUND);
    if rounds_n == 0 {
        return;
    }
    stage(0, len(0), r);
    for k in 0..rounds_n {
        if k + 1 < rounds_n {
            stage((k + 1) * ROUND, len(k + 1), r.add((k + 1) % 2));
        }
        fold(k * ROUND, len(k), r.add(k % 2));
    }
}

/// Row `c` of the sums of block `j` (half `half`) of `round`, plus the integer start `start`.
#[inline(always)]
unsafe fn sum_row(round: *const Round, half: usize, j: usize, c: usize, start: i32) -> __m512i {
    let row = std::ptr::addr_of!((*round).sums[half][j][c]);
    _mm512_add_epi32(_mm512_load_si512(row.cast()), _mm512_set1_epi32(start))
}

/// Where the sums of block `j` (half `half`) of `round` go.
#[inline(always)]
unsafe fn sums_at(round: *mut Round, half: usize, j: usize) -> *mut i32 {
    std::ptr::addr_of_mut!((*round).sums[half][j]).cast()
}

/// One tile product: `out = A · B`, A the tile's activation rows (`k` signed bytes each at `x`,
/// 32 apart), B the configured `k/4` rows of 64 bytes at `w` (4 bytes of each of 16 weight
/// rows per row), `out` one row of 16 sums per activation row.
type Product = (*const i8, *const u8, *mut i32);

/// Four tile products, each into its own sum tile and with alternating operand tiles, so they
/// overlap (tile registers are not renamed).
#[inline(always)]
unsafe fn four_products(p: [Product; 4]) {
    asm!(
        "tilezero tmm2",
        "tileloadd tmm0, [{x0} + {sx}*1]",
        "tileloadd tmm4, [{w0} + {sw}*1]",
        "tdpbsud tmm2, tmm0, tmm4",
        "tilezero tmm3",
        "tileloadd tmm1, [{x1} + {sx}*1]",
        "tileloadd tmm5, [{w1} + {sw}*1]",
        "tdpbsud tmm3, tmm1, tmm5",
        "tilezero tmm6",
        "tileloadd tmm0, [{x2} + {sx}*1]",
        "tileloadd tmm4, [{w2} + {sw}*1]",
        "tdpbsud tmm6, tmm0, tmm4",
        "tilezero tmm7",
        "tileloadd tmm1, [{x3} + {sx}*1]",
        "tileloadd tmm5, [{w3} + {sw}*1]",
        "tdpbsud tmm7, tmm1, tmm5",
        "tilestored [{o0} + {sw}*1], tmm2",
        "tilestored [{o1} + {sw}*1], tmm3",
        "tilestored [{o2} + {sw}*1], tmm6",
        "tilestored [{o3} + {sw}*1], tmm7",
        x0 = in(reg) p[0].0,
        x1 = in(reg) p[1].0,
        x2 = in(reg) p[2].0,
        x3 = in(reg) p[3].0,
        w0 = in(reg) p[0].1,
        w1 = in(reg) p[1].1,
        w2 = in(reg) p[2].1,
        w3 = in(reg) p[3].1,
        o0 = in(reg) p[0].2,
        o1 = in(reg) p[1].2,
        o2 = in(reg) p[2].2,
        o3 = in(reg) p[3].2,
        sx = in(reg) QK,
        sw = in(reg) UNIT,
        options(nostack, preserves_flags),
    );
}

/// One tile product on its own.
#[inline(always)]
unsafe fn one_product((x, w, out): Product) {
    asm!(
        "tilezero tmm2",
        "tileloadd tmm0, [{x} + {sx}*1]",
        "tileloadd tmm4, [{w} + {sw}*1]",
        "tdpbsud tmm2, tmm0, tmm4",
        "tilestored [{o} + {sw}*1], tmm2",
        x = in(reg) x,
        w = in(reg) w,
        o = in(reg) out,
        sx = in(reg) QK,
        sw = in(reg) UNIT,
        options(nostack, preserves_flags),
    );
}

/// Multiplies a round's `len` blocks, `b0 ..`, of 32 values each: block `b`'s activation rows
/// at `x(b)` by its B tile (8 rows) at `w(j)`, into the round's sums; four at a time.
#[inline(always)]
unsafe fn multiply_round(
    round: *mut Round,
    (b0, len): (usize, usize),
    x: impl Fn(usize) -> *const i8,
    w: impl Fn(usize) -> *const u8,
) {
    let product = |j: usize| (x(b0 + j), w(j), sums_at(round, 0, j));
    let mut j = 0;
    while j + 4 <= len {
        four_products([product(j), product(j + 1), product(j + 2), product(j + 3)]);
        j += 4;
    }
    for j in j..len {
        one_product(product(j));
    }
}

/// [`multiply_round`] for Q6_K (configured with `k` = 16): each block's two halves of 16 its own
/// product (B tiles of 4 rows at `weights[j]` and 256 bytes on), the second half's sums in
/// `sums[1]`; two blocks (four products) at a time.
#[inline(always)]
unsafe fn multiply_round_halves(round: *mut Round, (b0, len): (usize, usize), x: impl Fn(usize) -> *const i8) {
    let halves = |j: usize| {
        let (xb, wb) = (x(b0 + j), std::ptr::addr_of!((*round).weights[j]).cast::<u8>());
        [(xb, wb, sums_at(round, 0, j)), (xb.add(QK / 2), wb.add(4 * UNIT), sums_at(round, 1, j))]
    };
    let mut j = 0;
    while j + 2 <= len {
        let ([p0, p1], [p2, p3]) = (halves(j), halves(j + 1));
        four_products([p0, p1, p2, p3]);
        j += 2;
    }
    if j < len {
        halves(j).into_iter().for_each(|p| one_product(p));
    }
}

/// Stores a block's unpacked units (`lo`, `hi` of unit `u`) as rows `u` and `4 + u` of its B
/// tile, `j` of `round`.
#[inline(always)]
unsafe fn store_units(round: *mut Round, j: usize, u: usize, (lo, hi): (__m512i, __m512i)) {
    let tile = std::ptr::addr_of_mut!((*round).weights[j]).cast::<u8>();
    _mm512_store_si512(tile.add(u * UNIT).cast(), lo);
    _mm512_store_si512(tile.add((4 + u) * UNIT).cast(), hi);
}

/// One packed row group against one tile of 2 ..= [`TILE`](crate::dispatch::TILE) activation
/// rows (one row goes to [`crate::avx512::tile_packed`]), with exactly its arithmetic.
///
/// # Safety
/// The CPU must support AVX-512 F/BW/VL/VNNI, AVX2, FMA and F16C, and [`available`] must be true.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn tile_packed(f: QFormat, w: Group<'_>, a: PackedTile<'_>, out: &mut TileOut) {
    if a.cn < 2 {
        return crate::avx512::tile_packed(f, w, a, out);
    }
    check_packed(f, w, a, TILE);
    kernel_for!(wide f, a.cn, q8_0, nibbles, q6_k)(&w, &a, out)
}

/// Row groups `groups` of `m` against one packed activation tile (its rows `c0 ..`), as
/// [`crate::avx512::groups_packed`] walks them (one row: that function).
///
/// # Safety
/// As [`tile_packed`]; no other thread may write the output of these row groups for the tile's
/// rows.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn groups_packed(
    m: &QMatrix,
    groups: std::ops::Range<usize>,
    a: PackedTile<'_>,
    c0: usize,
    out: &OutPtr<'_>,
) {
    if a.cn < 2 {
        return crate::avx512::groups_packed(m, groups, a, c0, out);
    }
    let f = m.format();
    each(m, groups, &[(a, c0, kernel_for!(wide f, a.cn, q8_0, nibbles, q6_k))], TILE, out);
}

/// [`groups_packed`] for several activation tiles (each with its first row), as
/// [`crate::avx512::groups_tiles`] walks them.
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
    let kernels: Vec<_> = tiles
        .iter()
        .map(|&(a, c0)| {
            // Several tiles are 17 rows or more, split near-equally: none has one row.
            assert!(a.cn >= 2, "AMX tiles have two rows or more");
            (a, c0, kernel_for!(wide f, a.cn, q8_0, nibbles, q6_k))
        })
        .collect();
    each(m, groups, &kernels, TILE, out);
}

/// Q8_0 group × `C` packed activation rows: the stored units are the B tile.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn q8_0<const C: usize>(w: &Group<'_>, a: &PackedTile<'_>, out: &mut TileOut) {
    configure(QFormat::Q8_0, C);
    let tb = tile_bytes(QFormat::Q8_0);
    let x = |b: usize| a.qs.as_ptr().add(b * C * QK);
    let mut facc = [_mm512_setzero_ps(); C];
    pipelined(
        w.quants.len() / tb,
        |b0, len, r| {
            for b in b0..b0 + len {
                prefetch_block(w, QFormat::Q8_0, b);
            }
            multiply_round(r, (b0, len), x, |j| w.quants.as_ptr().add((b0 + j) * tb));
        },
        |b0, len, r| {
            for j in 0..len {
                let b = b0 + j;
                let dw = _mm512_cvtph_ps(_mm256_loadu_si256(w.scales.as_ptr().add(b * GROUP).cast()));
                let bias = a.bias.as_ptr().add(b * C);
                fold_q8_0(&mut facc, |c| sum_row(r, 0, j, c, *bias.add(c)), dw, a.d.as_ptr().add(b * C));
            }
        },
    );
    for c in 0..C {
        _mm512_storeu_ps(out[c].as_mut_ptr(), facc[c]);
    }
}

/// A nibble format's group ([`nib`] kind `N`) × `C` packed activation rows.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn nibbles<const C: usize, const N: u8>(w: &Group<'_>, a: &PackedTile<'_>, out: &mut TileOut) {
    let f = nib::format(N);
    configure(f, C);
    let tb = tile_bytes(f);
    let x = |b: usize| a.qs.as_ptr().add(b * C * QK);
    let mut facc = [_mm512_setzero_ps(); C];
    pipelined(
        w.quants.len() / tb,
        |b0, len, r| {
            for j in 0..len {
                let b = b0 + j;
                prefetch_block(w, f, b);
                let wq = w.quants.as_ptr().add(b * tb);
                let t =
                    if nib::fifth(N) { _mm512_loadu_si512(wq.add(4 * UNIT).cast()) } else { _mm512_setzero_si512() };
                for u in 0..4 {
                    store_units(r, j, u, unpack_nibbles::<N>(wq, t, u));
                }
            }
            multiply_round(r, (b0, len), x, |j| std::ptr::addr_of!((*r).weights[j]).cast());
        },
        |b0, len, r| {
            for j in 0..len {
                let b = b0 + j;
                let (db, bias, sb) = (a.d.as_ptr().add(b * C), a.bias.as_ptr().add(b * C), a.dsum.as_ptr().add(b * C));
                let isum = |c: usize| sum_row(r, 0, j, c, nib::start(N, *bias.add(c)));
                fold_nibbles::<C, N>(&mut facc, isum, nibble_scales::<N>(w.scales.as_ptr(), b), db, sb);
            }
        },
    );
    for c in 0..C {
        _mm512_storeu_ps(out[c].as_mut_ptr(), facc[c]);
    }
}

/// Q6_K group × `C` packed activation rows: each half of 16 its own product.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn q6_k<const C: usize>(w: &Group<'_>, a: &PackedTile<'_>, out: &mut TileOut) {
    configure(QFormat::Q6K, C);
    let tb = tile_bytes(QFormat::Q6K);
    let x = |b: usize| a.qs.as_ptr().add(b * C * QK);
    let mut facc = [_mm512_setzero_ps(); C];
    pipelined(
        w.quants.len() / tb,
        |b0, len, r| {
            for j in 0..len {
                let b = b0 + j;
                prefetch_block(w, QFormat::Q6K, b);
                let wq = w.quants.as_ptr().add(b * tb);
                let planes = (_mm512_loadu_si512(wq.add(4 * UNIT).cast()), _mm512_loadu_si512(wq.add(5 * UNIT).cast()));
                for u in 0..4 {
                    store_units(r, j, u, unpack_q6_k(wq, planes, u));
                }
            }
            multiply_round_halves(r, (b0, len), x);
        },
        |b0, len, r| {
            for j in 0..len {
                let b = b0 + j;
                let hb = a.half_bias.as_ptr().add(2 * b * C);
                let ia = std::array::from_fn(|c| sum_row(r, 0, j, c, *hb.add(2 * c)));
                let ib = std::array::from_fn(|c| sum_row(r, 1, j, c, *hb.add(2 * c + 1)));
                fold_q6_k(&mut facc, (ia, ib), q6_k_scales(w.scales.as_ptr(), b), a.d.as_ptr().add(b * C));
            }
        },
    );
    for c in 0..C {
        _mm512_storeu_ps(out[c].as_mut_ptr(), facc[c]);
    }
}
