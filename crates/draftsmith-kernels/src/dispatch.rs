//! Kernel path selection and the parallel `matmul` driver.

use std::cell::RefCell;
use std::ops::Range;
use std::sync::OnceLock;

use crate::act::{ActQuant, ActRow, ActTiles, PackedTile};
use crate::layout::{tile_bytes, tile_scales, GROUP, QK};
use crate::pool::DisjointSlice;
use crate::{QFormat, QMatrix};

/// Most activation rows processed together against one loaded weight tile (the widest
/// [`KernelPath::tile_width`]).
pub(crate) const TILE: usize = 16;
/// Below this many multiply-adds a `matmul` runs on the calling thread: starting and joining the
/// kernel pool's spinning workers costs about a microsecond, which 2^15 MACs take on one core.
pub(crate) const INLINE_MACS: usize = 1 << 15;

/// The packed weights of one 16-row group, plus the next group's to prefetch.
#[derive(Clone, Copy)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) struct Group<'a> {
    /// Packed quants, `cols / 32` tiles.
    pub quants: &'a [u8],
    /// Packed f16 scales, `cols / 32` tiles.
    pub scales: &'a [u16],
    /// The next group's quants and scales, prefetched while this one is computed; empty when
    /// there is nothing (more) to prefetch.
    pub next: (&'a [u8], &'a [u16]),
}

impl Group<'_> {
    /// Whether `next` should be prefetched (it has the same shape as this group).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(crate) fn prefetch(&self) -> bool {
        self.next.0.len() == self.quants.len() && self.next.1.len() == self.scales.len()
    }
}

/// One tile of results: `[activation row][weight row within the group]`.
pub(crate) type TileOut = [[f32; GROUP]; TILE];

/// A SIMD implementation of the kernels.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelPath {
    /// Portable scalar code (any architecture).
    Scalar,
    /// x86-64 AVX2 + FMA + F16C (`vpmaddubsw`).
    Avx2,
    /// x86-64 AVX-512 F/BW/VL + VNNI (`vpdpbusd`), plus AVX2, FMA and F16C.
    Avx512Vnni,
    /// [`KernelPath::Avx512Vnni`] plus AMX-INT8 tiles (`tdpbsud`) for int8 products of two or
    /// more activation rows: Intel Sapphire Rapids and later, on Linux 5.16+. Bit for bit the
    /// AVX-512 VNNI results; only chosen when asked for ([`KernelPath::detect`]).
    Amx,
}

impl KernelPath {
    /// Every path, slowest first.
    pub const ALL: [KernelPath; 4] = [KernelPath::Scalar, KernelPath::Avx2, KernelPath::Avx512Vnni, KernelPath::Amx];

    /// Whether this CPU can run the path.
    pub fn is_supported(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            let avx2 = has!("avx2") && has!("fma") && has!("f16c");
            let avx512 = avx2 && has!("avx512f") && has!("avx512bw") && has!("avx512vl") && has!("avx512vnni");
            match self {
                KernelPath::Scalar => true,
                KernelPath::Avx2 => avx2,
                KernelPath::Avx512Vnni => avx512,
                KernelPath::Amx => avx512 && crate::amx::available(),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self == KernelPath::Scalar
        }
    }

    /// The path `matmul` uses: the fastest supported vector path, or `DRAFTSMITH_KERNEL_PATH`
    /// (`scalar`, `avx2`, `avx512vnni`, `amx`) when set to a supported path. Cached after the
    /// first call.
    ///
    /// [`KernelPath::Amx`] is never chosen by itself: on the AMX machines measured (a 16-core
    /// Xeon host of an H200, session 30; a 2-core Xeon, session 41) its products of 2–8 rows
    /// took 25–55 % longer than AVX-512 VNNI's and those of 16–64 rows as long or up to 12 %
    /// longer, because each block of 32 values still needs its sums stored, reloaded and scaled
    /// on the vector unit (`eval/results/session30-amx/`, `eval/results/session41-xeon-amx/`).
    pub fn detect() -> Self {
        static PATH: OnceLock<KernelPath> = OnceLock::new();
        *PATH.get_or_init(|| match Self::forced().ok().flatten() {
            Some(p) => p,
            None => {
                Self::ALL.into_iter().rev().find(|&p| p != KernelPath::Amx && p.is_supported()).unwrap_or(Self::Scalar)
            }
        })
    }

    /// `DRAFTSMITH_KERNEL_PATH` as set: `None` when unset, the path when it names one this CPU
    /// supports, and what is wrong with it otherwise (an unknown name, or a path the CPU lacks).
    /// [`detect`](Self::detect) ignores a value refused here; the CLI refuses it before anything
    /// runs, so a benchmark never times another path than the one asked for.
    pub fn forced() -> Result<Option<Self>, String> {
        let Some(raw) = std::env::var_os("DRAFTSMITH_KERNEL_PATH") else { return Ok(None) };
        let value = raw.to_string_lossy();
        let names: Vec<&str> = Self::ALL.iter().map(|p| p.name()).collect();
        match Self::ALL.into_iter().find(|p| p.name() == value.trim()) {
            None => Err(format!("DRAFTSMITH_KERNEL_PATH={value}: not a kernel path ({})", names.join(", "))),
            Some(p) if !p.is_supported() => {
                let supported: Vec<&str> =
                    Self::ALL.into_iter().filter(|p| p.is_supported()).map(|p| p.name()).collect();
                Err(format!(
                    "DRAFTSMITH_KERNEL_PATH={value}: this CPU does not support that path (it supports {})",
                    supported.join(", ")
                ))
            }
            Some(p) => Ok(Some(p)),
        }
    }

    /// Activation rows per kernel call: AVX-512 has 32 vector registers, the others 16; an AMX
    /// tile holds 16 rows. `halves`: the activations feed a Q6_K matrix (narrower tiles on
    /// AVX-512, [`crate::avx512::WIDTH_Q6_K`]).
    pub(crate) fn tile_width(self, halves: bool) -> usize {
        match self {
            KernelPath::Amx => TILE,
            KernelPath::Avx512Vnni if halves => crate::avx512::WIDTH_Q6_K,
            KernelPath::Avx512Vnni => crate::avx512::WIDTH,
            KernelPath::Avx2 => crate::avx2::WIDTH,
            _ => 4,
        }
    }

    /// The path whose vector kernels this one runs (all but [`KernelPath::Amx`]'s tile
    /// products): AMX's is [`KernelPath::Avx512Vnni`].
    pub fn vector(self) -> Self {
        match self {
            KernelPath::Amx => KernelPath::Avx512Vnni,
            p => p,
        }
    }

    /// Whether code on this path may use AVX2 and FMA (every path but the scalar one). The
    /// element-wise rows and the host attention ask it of [`KernelPath::detect`]: one dispatch
    /// for the whole process, so every row of every batch takes the same arithmetic, and
    /// `DRAFTSMITH_KERNEL_PATH` governs them as it does the matrix products.
    pub fn simd(self) -> bool {
        self != KernelPath::Scalar
    }

    /// Whether it has AVX-512 F/VL too (16-lane vectors and 32 registers).
    pub fn wide(self) -> bool {
        self.vector() == KernelPath::Avx512Vnni
    }

    /// Short lowercase name (as accepted by `DRAFTSMITH_KERNEL_PATH`).
    pub fn name(self) -> &'static str {
        match self {
            KernelPath::Scalar => "scalar",
            KernelPath::Avx2 => "avx2",
            KernelPath::Avx512Vnni => "avx512vnni",
            KernelPath::Amx => "amx",
        }
    }
}

thread_local! {
    static SCRATCH: RefCell<ActQuant> = RefCell::new(ActQuant::default());
}

/// `y[n, rows] = x[n, cols] · Wᵀ` on `path`, which the caller has checked is supported. On the
/// SIMD paths with two or more rows the pool's threads quantize the input side by side inside
/// the product's own job ([`SharedAct`](crate::act::SharedAct)), then each multiplies its row
/// groups (an 8-row SmolLM2 pass's matrices 2–11 % faster than quantizing on the calling thread
/// first, interleaved A/B on a 2-core Zen 4, session 34); one row is quantized first (splitting
/// its few blocks measured 1–2 % slower).
pub(crate) fn matmul_impl(m: &QMatrix, path: KernelPath, x: &[f32], n: usize, y: &mut [f32]) {
    if path == KernelPath::Scalar || n < 2 {
        return with_quantized(m, path, (x, n), y, |act, y| run(m, path, act, y));
    }
    if !check_shapes(m, x, n, y) {
        return;
    }
    crate::pool::with_thread_scratch(&SCRATCH, |act: &mut ActQuant| {
        let shared = act.packed_for(n, m.cols(), path, m.format() == QFormat::Q6K);
        let macs = m.groups() * GROUP * m.cols() * n;
        // SAFETY: `run_groups_after` runs each share of one split once, every share before
        // any product, and nothing quantizes again until the products are done.
        let quantize = |part, parts| unsafe { shared.quantize_part(x, part, parts) };
        run_groups_after(m.groups(), (macs, INLINE_MACS), y, Some(&quantize), |range, out| {
            // SAFETY: as above.
            compute(m, path, &unsafe { shared.ready() }, range, out)
        });
    });
}

/// [`matmul_impl`] for row groups `0..groups` only, on the calling thread (the same arithmetic
/// per value).
pub(crate) fn matmul_rows_here(m: &QMatrix, path: KernelPath, x: &[f32], n: usize, groups: usize, y: &mut [f32]) {
    with_quantized(m, path, (x, n), y, |act, y| {
        compute(m, path, act, 0..groups.min(m.groups()), &DisjointSlice::new(y));
    });
}

/// Checks the shapes of `y[n, rows] = x[n, cols] · Wᵀ`, quantizes `x` for `path` into this
/// thread's activation scratch and hands it to `product` with `y` (nothing to do when there are
/// no rows).
fn with_quantized(
    m: &QMatrix,
    path: KernelPath,
    (x, n): (&[f32], usize),
    y: &mut [f32],
    product: impl FnOnce(&ActQuant, &mut [f32]),
) {
    if !check_shapes(m, x, n, y) {
        return;
    }
    crate::pool::with_thread_scratch(&SCRATCH, |act: &mut ActQuant| {
        act.quantize(x, n, m.cols(), path, m.format() == QFormat::Q6K);
        product(act, y);
    });
}

/// Asserts the shapes of `y[n, rows] = x[n, cols] · Wᵀ`; returns whether there is anything to
/// compute.
fn check_shapes(m: &QMatrix, x: &[f32], n: usize, y: &[f32]) -> bool {
    assert_eq!(x.len(), n * m.cols(), "x must hold n * cols values");
    assert_eq!(y.len(), n * m.rows(), "y must hold n * rows values");
    n > 0 && m.rows() > 0
}

/// The output of a product, shared by threads that write disjoint row groups.
pub(crate) type OutPtr<'a> = DisjointSlice<'a, f32>;

/// Copies `vals` to `out[at .. at + vals.len()]`, indices of the calling thread's row groups.
pub(crate) fn write_out(out: &OutPtr<'_>, at: usize, vals: &[f32]) {
    // SAFETY: each thread writes only the outputs of its own row groups (`run_groups`).
    let dst = unsafe { out.part(at, vals.len()) };
    // A whole group (every group but a matrix's last) is a fixed-size copy: a few vector moves
    // instead of a `memcpy` call per group and activation row.
    match (<&mut [f32; GROUP]>::try_from(&mut *dst), <&[f32; GROUP]>::try_from(vals)) {
        (Ok(d), Ok(v)) => *d = *v,
        _ => dst.copy_from_slice(vals),
    }
}

/// Splits `groups` row groups over the kernel pool's threads ([`Pool`](crate::Pool)), or runs
/// `compute` inline when the problem has fewer than `inline_macs` multiply-adds (`macs`). Every
/// thread gets a disjoint contiguous range of groups and writes only their outputs, so the split
/// never changes any output value.
pub(crate) fn run_groups(
    groups: usize,
    macs: (usize, usize),
    y: &mut [f32],
    compute: impl Fn(Range<usize>, &OutPtr<'_>) + Sync,
) {
    run_groups_after(groups, macs, y, None, compute);
}

/// [`run_groups`] after a first phase: every thread runs `prologue(share, shares)` for its
/// share of one split, and no thread computes before all shares are done
/// ([`Barrier`](crate::pool::Barrier)); inline, the one share is the whole.
pub(crate) fn run_groups_after(
    groups: usize,
    (macs, inline_macs): (usize, usize),
    y: &mut [f32],
    prologue: Option<&(dyn Fn(usize, usize) + Sync)>,
    compute: impl Fn(Range<usize>, &OutPtr<'_>) + Sync,
) {
    let out = DisjointSlice::new(y);
    let pool = crate::Pool::global();
    if pool.threads() <= 1 || groups < 2 || macs < inline_macs {
        if let Some(first) = prologue {
            first(0, 1);
        }
        compute(0..groups, &out);
        return;
    }
    let barrier = crate::pool::Barrier::default();
    pool.run(&|t, threads| {
        if let Some(first) = prologue {
            first(t, threads);
            barrier.wait(threads);
        }
        let range = crate::pool::split(groups, t, threads);
        if !range.is_empty() {
            compute(range, &out);
        }
    });
}

/// Splits the row groups over rayon tasks, or runs inline for small problems.
fn run(m: &QMatrix, path: KernelPath, act: &ActQuant, y: &mut [f32]) {
    let macs = m.groups() * GROUP * m.cols() * act.n();
    run_groups(m.groups(), (macs, INLINE_MACS), y, |range, out| compute(m, path, act, range, out));
}

/// Computes all activation rows for the row groups in `range`.
fn compute(m: &QMatrix, path: KernelPath, act: &impl ActTiles, range: Range<usize>, out: &OutPtr<'_>) {
    #[cfg(target_arch = "x86_64")]
    if act.tiles().len() == 1 && matches!(path, KernelPath::Avx512Vnni | KernelPath::Amx) {
        // One tile (up to 8 rows: a decoding step or a draft's verification): the kernel walks
        // the whole range itself.
        let (a, c0) = (act.packed_tile(0), act.tiles()[0].0);
        match path {
            // SAFETY: callers only pass supported paths; this thread owns the range's outputs.
            KernelPath::Avx512Vnni => return unsafe { crate::avx512::groups_packed(m, range, a, c0, out) },
            // SAFETY: as above.
            KernelPath::Amx => return unsafe { crate::amx::groups_packed(m, range, a, c0, out) },
            _ => {}
        }
    }
    #[cfg(target_arch = "x86_64")]
    if matches!(path, KernelPath::Avx512Vnni | KernelPath::Amx) {
        // Several tiles (long drafts, prefill).
        let tiles: Vec<_> = (0..act.tiles().len()).map(|i| (act.packed_tile(i), act.tiles()[i].0)).collect();
        return match path {
            // SAFETY: as above.
            KernelPath::Amx => unsafe { crate::amx::groups_tiles(m, range, &tiles, out) },
            // SAFETY: as above.
            _ => unsafe { crate::avx512::groups_tiles(m, range, &tiles, out) },
        };
    }
    let rows = m.rows();
    let mut tile: TileOut = [[0.0; GROUP]; TILE];
    let last = range.end;
    // The SIMD paths' tiles, sliced once for the range rather than once per group (the scalar
    // path reads rows).
    let packed: Vec<PackedTile<'_>> = match path {
        KernelPath::Scalar => Vec::new(),
        _ => (0..act.tiles().len()).map(|i| act.packed_tile(i)).collect(),
    };
    for g in range {
        let (quants, scales) = m.group(g);
        let next = if g + 1 < last { m.group(g + 1) } else { (&[][..], &[][..]) };
        let valid = GROUP.min(rows - g * GROUP);
        for (i, &(c0, cn)) in act.tiles().iter().enumerate() {
            // Only the first pass over the group prefetches the next one.
            let next = if i == 0 { next } else { (&[][..], &[][..]) };
            let w = Group { quants, scales, next };
            kernel(path, m.format(), w, (act, packed.get(i).copied()), i, &mut tile);
            for (t, res) in tile.iter().enumerate().take(cn) {
                write_out(out, (c0 + t) * rows + g * GROUP, &res[..valid]);
            }
        }
    }
}

/// Runs one tile kernel: one packed row group against activation tile `i` of `act` (`packed`:
/// that tile already sliced, on the SIMD paths).
fn kernel(
    path: KernelPath,
    f: QFormat,
    w: Group<'_>,
    (act, packed): (&impl ActTiles, Option<PackedTile<'_>>),
    i: usize,
    out: &mut TileOut,
) {
    let (c0, cn) = act.tiles()[i];
    let tile = || packed.expect("the SIMD paths' tiles are sliced by `compute`");
    match path {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: callers only pass supported paths (`detect` / `matmul_with` check).
        KernelPath::Avx512Vnni => unsafe { crate::avx512::tile_packed(f, w, tile(), out) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above (`is_supported` asked for the tiles).
        KernelPath::Amx => unsafe { crate::amx::tile_packed(f, w, tile(), out) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        KernelPath::Avx2 => unsafe { crate::avx2::tile_packed(f, w, tile(), out) },
        _ => {
            // Only the scalar path keeps row-major rows.
            let acts: [ActRow<'_>; TILE] = std::array::from_fn(|t| act.row(c0 + t.min(cn - 1)));
            crate::scalar::tile(f, w, &acts[..cn], out)
        }
    }
}

/// Asserts the slice lengths the SIMD kernels' unchecked pointer arithmetic relies on, for a
/// tile of at most `width` packed activation rows.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) fn check_packed(f: QFormat, w: Group<'_>, a: PackedTile<'_>, width: usize) {
    let nb = w.quants.len() / tile_bytes(f);
    assert!((1..=width).contains(&a.cn), "tile width must be 1..={width}");
    assert_eq!(w.quants.len(), nb * tile_bytes(f), "packed quants are whole tiles");
    assert!(w.scales.len() >= nb * tile_scales(f), "packed scales too short");
    let rows = nb * a.cn;
    assert!(
        a.qs.len() >= rows * QK && a.d.len() >= rows && a.dsum.len() >= rows && a.bias.len() >= rows,
        "packed activations too short"
    );
    assert!(f != QFormat::Q6K || a.half_bias.len() >= 2 * rows, "Q6_K needs the activations' half sums");
}
