//! Attention over the host cache: every query row over its visible keys in position order.

use draftsmith_kernels::{KernelPath, QMatrix};

#[cfg(target_arch = "x86_64")]
use super::simd::{
    scores_avx2, scores_pairs_zmm, scores_rows_avx2, weighted_sum_avx2, weighted_sums_avx2, weighted_sums_zmm,
};
use super::{axpy, dot, KvElem};

/// Which cached + new keys query row `i` may see.
pub enum Visibility<'a> {
    /// Row `i` sees keys `0..=cached + i`.
    Causal { cached: usize },
    /// A mask's rows, split once for every layer and head of a pass ([`MaskRows::new`]).
    Mask(&'a MaskRows),
}

/// A row-major `[n, total]` visibility mask (`true` = visible) as the attention kernels walk
/// it: per row a run `0..prefix` and the later visible keys, ascending — found once per pass.
/// (Each layer and kv head scanning the mask again cost batched decoding, whose rows are as long
/// as the whole cache of 16 sequences, a sizeable part of a pass.)
pub struct MaskRows {
    total: usize,
    /// Per row, the run of visible keys from position 0.
    prefix: Vec<usize>,
    /// Row `r`'s later keys: `extra[starts[r]..starts[r + 1]]`.
    extra: Vec<usize>,
    starts: Vec<usize>,
}

impl MaskRows {
    /// Splits the rows of `mask` (`[n, total]`, `total` > 0 unless `mask` is empty).
    pub fn new(mask: &[bool], total: usize) -> Self {
        let n = mask.len().checked_div(total).unwrap_or(0);
        let (mut prefix, mut extra, mut starts) = (Vec::with_capacity(n), Vec::new(), Vec::with_capacity(n + 1));
        starts.push(0);
        for row in mask.chunks_exact(total.max(1)).take(n) {
            let run = row.iter().position(|&v| !v).unwrap_or(row.len());
            prefix.push(run);
            extra.extend((run..total).filter(|&j| row[j]));
            starts.push(extra.len());
        }
        Self { total, prefix, extra, starts }
    }

    /// Keys per row: the cached ones and the pass's own.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Row `row`'s later keys (past its run).
    fn extra(&self, row: usize) -> &[usize] {
        &self.extra[self.starts[row]..self.starts[row + 1]]
    }
}

impl Visibility<'_> {
    /// Row `row`'s visible keys as a run `0..prefix` (returned) and the later ones in `extra`
    /// (ascending): a draft tree's rows see the whole cache and a few of the tree's nodes.
    fn split(&self, row: usize, extra: &mut Vec<usize>) -> usize {
        extra.clear();
        match self {
            Self::Causal { cached } => cached + row + 1,
            Self::Mask(rows) => {
                extra.extend_from_slice(rows.extra(row));
                rows.prefix[row]
            }
        }
    }
}

/// A query row's visible keys as the attention kernels walk them, in position order: a list,
/// or a run of consecutive positions (no list to build or read).
pub(super) trait Keys: Copy {
    fn len(self) -> usize;
    /// The `i`-th key (`i < len`).
    fn at(self, i: usize) -> usize;
    fn last(self) -> Option<usize>;
    /// The keys from the `i`-th on.
    fn skip(self, i: usize) -> Self;
    /// Whether they ascend strictly (checked in debug builds).
    fn ascends(self) -> bool;
}

impl Keys for &[usize] {
    fn len(self) -> usize {
        <[usize]>::len(self)
    }
    fn at(self, i: usize) -> usize {
        self[i]
    }
    fn last(self) -> Option<usize> {
        <[usize]>::last(self).copied()
    }
    fn skip(self, i: usize) -> Self {
        &self[i..]
    }
    fn ascends(self) -> bool {
        self.windows(2).all(|w| w[0] < w[1])
    }
}

/// Keys `start..start + len`.
#[derive(Debug, Clone, Copy)]
struct Run {
    start: usize,
    len: usize,
}

impl Keys for Run {
    fn len(self) -> usize {
        self.len
    }
    fn at(self, i: usize) -> usize {
        self.start + i
    }
    fn last(self) -> Option<usize> {
        (self.len > 0).then(|| self.start + self.len - 1)
    }
    fn skip(self, i: usize) -> Self {
        Run { start: self.start + i, len: self.len - i }
    }
    fn ascends(self) -> bool {
        true
    }
}

/// Softmax attention of `q` (`[n, heads, head_dim]`) over the cached keys/values of one layer
/// (`[kv_heads, capacity, head_dim]`), grouped-query; returns `[n, heads, head_dim]`.
#[allow(clippy::too_many_arguments)]
pub fn attend<T: KvElem>(
    q: &[f32],
    keys: &[T],
    values: &[T],
    capacity: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    visibility: &Visibility<'_>,
) -> Vec<f32> {
    let mut out = Vec::new();
    attend_into(q, KeysIn::Plain(keys), values, capacity, (heads, kv_heads, head_dim), visibility, &mut out);
    out
}

/// [`attend`] into `out` (resized), with `(heads, kv_heads, head_dim)`. The work is split over
/// the kernels' worker pool in units of one kv head × a run of tokens; inside a unit the keys
/// and values are walked in blocks of `KEY_BLOCK` (128) positions, each block serving every
/// query row of the unit while it is in cache, so a long context is read once per unit rather
/// than once per token. Per query row the arithmetic is that of `attend_group` (the tests'
/// one-row reference).
pub fn attend_into<T: KvElem>(
    q: &[f32],
    keys: KeysIn<'_, T>,
    values: &[T],
    capacity: usize,
    (heads, kv_heads, head_dim): (usize, usize, usize),
    visibility: &Visibility<'_>,
    out: &mut Vec<f32>,
) {
    let n = q.len() / (heads * head_dim);
    // Every element is written by exactly one unit below, so a buffer of the right length is
    // reused as it is: zeroing it would only move its lines to this core before the workers
    // write theirs.
    if out.len() != q.len() {
        out.clear();
        out.resize(q.len(), 0.0);
    }
    let total = match visibility {
        Visibility::Causal { cached } => cached + n,
        Visibility::Mask(rows) => rows.total(),
    };
    let pool = draftsmith_kernels::Pool::global();
    let chunks = if n == 1 { 1 } else { n.min(pool.threads()) };
    let units = kv_heads * chunks;
    let shape = AttendShape {
        heads,
        group: heads / kv_heads,
        head_dim,
        capacity,
        scale: 1.0 / (head_dim as f32).sqrt(),
        simd: KernelPath::detect().simd(),
        wide: KernelPath::detect().wide(),
        prefetch: n > 1,
    };
    let group = shape.group;
    let dst = RowsPtr::new(out);
    let work = |t: usize, threads: usize| {
        let dst = &dst;
        if n == 1 && kv_heads % threads != 0 {
            // One token whose kv heads do not split evenly (SmolLM2: 3 over 2 threads would be
            // 2 : 1): split its query heads instead, each thread taking a run of them kv head by
            // kv head (a kv head on both sides is read by both). Per row the arithmetic is the
            // same whichever rows share a kernel call.
            let mine = draftsmith_kernels::pool::split(heads, t, threads);
            let mut h = mine.start;
            while h < mine.end {
                let g = h / group;
                let end = mine.end.min((g + 1) * group);
                attend_unit(q, keys, values, &shape, 0..1, h..end, visibility, dst);
                h = end;
            }
            return;
        }
        for u in draftsmith_kernels::pool::split(units, t, threads) {
            let (g, c) = (u / chunks, u % chunks);
            let tokens = draftsmith_kernels::pool::split(n, c, chunks);
            attend_unit(q, keys, values, &shape, tokens, g * group..(g + 1) * group, visibility, dst);
        }
    };
    if n * heads * total >= PARALLEL_SCORES && (units > 1 || group > 1) {
        pool.run(&work);
    } else {
        work(0, 1);
    }
}

/// From this many (query row × head × visible key) scores on, an attention call splits its units
/// over the worker pool: a one-token step over 64 cached keys already takes several microseconds
/// per layer, against about one to start and join the pool. (Session 43 tried 1024, after the
/// attention bench alone broke even there with 1 and 2 threads on a Zen 4: inside the model the
/// one-row attention at 64 cached tokens then read 0.30 / 0.32 ms (min / median) against 0.19 /
/// 0.28 split, interleaved; kept at 512.)
const PARALLEL_SCORES: usize = 1 << 9;

/// Keys per block of [`attend_into`]'s walk (128 × head_dim 64 × 4 bytes = 32 KB of keys).
const KEY_BLOCK: usize = 128;

/// Shapes and constants of one attention call.
struct AttendShape {
    heads: usize,
    group: usize,
    head_dim: usize,
    capacity: usize,
    scale: f32,
    simd: bool,
    /// AVX-512 F/VL on top of `simd`: 32 vector registers, so several query rows share a pass.
    wide: bool,
    /// The kernels prefetch the keys and values ahead
    /// ([`prefetch_ahead`](super::simd::prefetch_ahead)): passes over more than one token.
    prefetch: bool,
}

/// The output rows of one attention call, written by units that own disjoint rows.
type RowsPtr<'a> = draftsmith_kernels::pool::DisjointSlice<'a, f32>;

/// One unit of [`attend_into`]: the query heads `heads` (all of one kv head's group) of the
/// tokens in `tokens`.
#[allow(clippy::too_many_arguments)]
fn attend_unit<T: KvElem>(
    q: &[f32],
    keys: KeysIn<'_, T>,
    values: &[T],
    sh: &AttendShape,
    tokens: std::ops::Range<usize>,
    heads: std::ops::Range<usize>,
    visibility: &Visibility<'_>,
    dst: &RowsPtr<'_>,
) {
    let (hd, width, g) = (sh.head_dim, heads.len(), heads.start / sh.group);
    debug_assert!(heads.end <= (g + 1) * sh.group, "a unit's query heads share one kv head");
    let kv = g * sh.capacity * hd..(g + 1) * sh.capacity * hd;
    let keys = match keys {
        KeysIn::Plain(k) => UnitKeys::Plain(&k[kv.clone()]),
        KeysIn::Quant(heads) => UnitKeys::Quant(&heads[g]),
    };
    let values = &values[kv];
    draftsmith_kernels::pool::with_thread_scratch(&UNIT_SCRATCH, |s: &mut UnitScratch| {
        s.prepare(tokens.clone(), visibility, width, hd);
        let first = heads.start;
        s.queries.clear();
        for i in tokens.clone() {
            s.queries.extend_from_slice(&q[(i * sh.heads + first) * hd..][..width * hd]);
        }
        unit_body(keys, values, sh, heads, tokens, s, dst);
    });
}

/// One query row's visible keys in a unit: the run `0..prefix` and the later keys `extra`
/// (a draft tree's nodes), with `extra` cut at the key-block boundaries: in block `b` the row
/// sees the run's part in that block, then `extra[cuts[b]..cuts[b + 1]]`.
#[derive(Default)]
struct RowKeys {
    prefix: usize,
    extra: Vec<usize>,
    cuts: Vec<usize>,
}

impl RowKeys {
    /// How many keys the row sees.
    fn count(&self) -> usize {
        self.prefix + self.extra.len()
    }

    /// The row's keys in block `b`: the run's part and the extra keys' part, each with the
    /// index of its first key among the row's keys.
    fn in_block(&self, b: usize) -> ((Run, usize), (&[usize], usize)) {
        let (lo, hi) = (b * KEY_BLOCK, ((b + 1) * KEY_BLOCK).min(self.prefix));
        let run = Run { start: lo, len: hi.saturating_sub(lo) };
        let (el, eh) = (self.cuts[b], self.cuts[b + 1]);
        ((run, lo), (&self.extra[el..eh], self.prefix + el))
    }
}

/// Per-thread buffers of [`attend_unit`], reused between calls (a decoding step makes a few
/// dozen attention calls per layer stack, each of which would otherwise allocate its lists).
/// A unit's query rows are its tokens' heads in order (`token · width + head`), each with its
/// scores at `weights[row · stride ..]` and its output accumulators at `acc[row · head_dim ..]`,
/// so the rows of several tokens can share one kernel call.
#[derive(Default)]
struct UnitScratch {
    rows: Vec<RowKeys>,
    /// `[tokens × width, stride]`: a row's scores, then its softmax numerators.
    weights: Vec<f32>,
    /// The most keys any token of the unit sees.
    stride: usize,
    sums: Vec<f32>,
    /// One past the last visible key of any row (the key blocks walked: `end / KEY_BLOCK`,
    /// rounded up).
    end: usize,
    /// The unit's query rows, `[tokens × width, head_dim]`.
    queries: Vec<f32>,
    /// Their products with every cached key, `[rows, capacity]` ([`quant_scores`]).
    products: Vec<f32>,
    /// The weighted sums of the values, `[tokens × width, head_dim]`.
    acc: Vec<f32>,
}

impl UnitScratch {
    /// The visible keys of `tokens` and their score rows (`width` query heads per token; their
    /// values are left as they are: the score kernels write every entry before it is read).
    fn prepare(&mut self, tokens: std::ops::Range<usize>, visibility: &Visibility<'_>, width: usize, hd: usize) {
        let rows = tokens.len();
        if self.rows.len() < rows {
            self.rows.resize_with(rows, RowKeys::default);
        }
        let (mut end, mut stride) = (0, 0);
        for (k, i) in tokens.enumerate() {
            let r = &mut self.rows[k];
            r.prefix = visibility.split(i, &mut r.extra);
            end = end.max(r.extra.last().map_or(r.prefix, |&j| j + 1));
            stride = stride.max(r.count());
        }
        self.end = end;
        self.stride = stride.max(1);
        self.weights.resize(rows * width * self.stride, 0.0);
        for r in &mut self.rows[..rows] {
            let extra = &r.extra;
            r.cuts.clear();
            r.cuts.extend((0..=end.div_ceil(KEY_BLOCK)).map(|b| extra.partition_point(|&j| j < b * KEY_BLOCK)));
        }
        self.sums.clear();
        self.sums.resize(rows * width, 0.0);
        self.acc.clear();
        self.acc.resize(rows * width * hd, 0.0);
    }
}

thread_local! {
    static UNIT_SCRATCH: std::cell::RefCell<UnitScratch> = std::cell::RefCell::new(UnitScratch::default());
}

/// The arithmetic of [`attend_unit`] on its prepared rows. Both walks go block by block, every
/// token of the unit within a block, so a block of keys or values serves them all while cached:
/// the part of the block that every token's run covers goes through the kernels once for all
/// the unit's rows, then each token's rest of its run, then its extra keys — so every row still
/// visits its keys in position order, and a row's arithmetic never depends on the rows beside it.
fn unit_body<T: KvElem>(
    keys: UnitKeys<'_, T>,
    values: &[T],
    sh: &AttendShape,
    heads: std::ops::Range<usize>,
    tokens: std::ops::Range<usize>,
    s: &mut UnitScratch,
    dst: &RowsPtr<'_>,
) {
    let (hd, width) = (sh.head_dim, heads.len());
    let UnitScratch { rows, weights, stride, sums, end, queries, products, acc } = s;
    let (stride, blocks, n) = (*stride, end.div_ceil(KEY_BLOCK), tokens.len());
    let rows = &rows[..n];
    // Token k's rows: queries, scores and accumulators.
    let span = |k: usize| k * width..(k + 1) * width;
    // The run every token covers in block b (from the block's start), and each token's run there.
    let common = |b: usize| rows.iter().map(|r| r.in_block(b).0 .0.len).min().unwrap_or(0);
    // Scores.
    match keys {
        UnitKeys::Plain(keys) => {
            for b in 0..blocks {
                let (lo, c) = (b * KEY_BLOCK, common(b));
                if c > 0 {
                    scores(queries, keys, Run { start: lo, len: c }, sh, &mut weights[lo..], stride);
                }
                for (k, row) in rows.iter().enumerate() {
                    let ((run, _), (extra, el)) = row.in_block(b);
                    let (q, r0) = (&queries[span(k).start * hd..span(k).end * hd], span(k).start * stride);
                    if run.len > c {
                        let rest = Run { start: lo + c, len: run.len - c };
                        scores(q, keys, rest, sh, &mut weights[r0 + lo + c..], stride);
                    }
                    if !extra.is_empty() {
                        scores(q, keys, extra, sh, &mut weights[r0 + el..], stride);
                    }
                }
            }
        }
        UnitKeys::Quant(keys) => {
            let parts = QuantParts { queries, products, end: *end };
            quant_scores(keys, sh, width, rows, (weights, stride), parts);
        }
    }
    // Softmax numerators per row, and their sums.
    for (k, row) in rows.iter().enumerate() {
        let m = row.count();
        for r in span(k) {
            sums[r] = draftsmith_kernels::rowops::softmax_numerators(&mut weights[r * stride..][..m]);
        }
    }
    // Weighted sums of the values, in the same walk.
    for b in 0..blocks {
        let (lo, c) = (b * KEY_BLOCK, common(b));
        if c > 0 {
            weighted_sums(values, Run { start: lo, len: c }, &weights[lo..], stride, acc, sh);
        }
        for (k, row) in rows.iter().enumerate() {
            let ((run, _), (extra, el)) = row.in_block(b);
            let (o, r0) = (&mut acc[span(k).start * hd..span(k).end * hd], span(k).start * stride);
            if run.len > c {
                let rest = Run { start: lo + c, len: run.len - c };
                weighted_sums(values, rest, &weights[r0 + lo + c..], stride, o, sh);
            }
            if !extra.is_empty() {
                weighted_sums(values, extra, &weights[r0 + el..], stride, o, sh);
            }
        }
    }
    for (k, i) in tokens.enumerate() {
        // SAFETY: a unit writes only the rows of its own kv head and tokens.
        let o = unsafe { dst.part((i * sh.heads + heads.start) * hd, width * hd) };
        for ((oh, a), r) in o.chunks_mut(hd).zip(acc[span(k).start * hd..].chunks(hd)).zip(span(k)) {
            let inv = 1.0 / sums[r];
            oh.iter_mut().zip(a).for_each(|(x, &v)| *x = v * inv);
        }
    }
}

/// A layer's cached keys as [`attend_into`] reads them: plain `[kv_heads, capacity, head_dim]`
/// elements, or one Q8_0 matrix `[capacity, head_dim]` per kv head ([`KvFormat::Q8Keys`](super::KvFormat::Q8Keys)).
#[derive(Clone, Copy)]
pub enum KeysIn<'a, T> {
    Plain(&'a [T]),
    Quant(&'a [QMatrix]),
}

/// One kv head's keys in a unit of [`attend_into`].
#[derive(Clone, Copy)]
enum UnitKeys<'a, T> {
    Plain(&'a [T]),
    Quant(&'a QMatrix),
}

/// The scratch of [`quant_scores`] and how far its keys reach.
struct QuantParts<'s> {
    queries: &'s [f32],
    products: &'s mut Vec<f32>,
    end: usize,
}

/// Query rows per product of [`quant_scores`]: one tile of the AVX-512 kernels, which then walk
/// the key groups in one call each.
const QUANT_ROWS: usize = 8;

/// The scores of a unit's query rows (`width` heads per token, `queries` in `parts`) against
/// quantized keys, into each row's visible entries of `weights` (row `r` at `r · stride`, as
/// [`scores`] writes them): the products
/// of the rows with every key up to the last visible one are int8 matrix products
/// ([`QMatrix::matmul_rows_here`]: each query row quantized per 32 values on its own, each
/// product an exact integer sum per block scaled as the matrix kernels do), then scaled, and the
/// visible ones copied out. A row's scores depend only on the row and the keys.
fn quant_scores(
    keys: &QMatrix,
    sh: &AttendShape,
    width: usize,
    rows: &[RowKeys],
    (weights, stride): (&mut [f32], usize),
    parts: QuantParts<'_>,
) {
    let (hd, cap) = (sh.head_dim, keys.rows());
    let QuantParts { queries, products, end } = parts;
    let total = queries.len() / hd;
    for r0 in (0..total).step_by(QUANT_ROWS) {
        let n = QUANT_ROWS.min(total - r0);
        products.resize(n * cap, 0.0);
        keys.matmul_rows_here(&queries[r0 * hd..(r0 + n) * hd], n, end, &mut products[..n * cap]);
        for (r, all) in (r0..r0 + n).zip(products.chunks_exact(cap)) {
            let row = &rows[r / width];
            let out = &mut weights[r * stride..][..row.count()];
            for (o, &p) in out.iter_mut().zip(&all[..row.prefix]) {
                *o = p * sh.scale;
            }
            for (o, &j) in out[row.prefix..].iter_mut().zip(&row.extra) {
                *o = all[j] * sh.scale;
            }
        }
    }
}

/// Scores of the rows `qs` against the keys `visible` into `out[r · stride + idx]`.
fn scores<T: KvElem, K: Keys>(qs: &[f32], keys: &[T], visible: K, sh: &AttendShape, out: &mut [f32], stride: usize) {
    #[cfg(target_arch = "x86_64")]
    if sh.wide && matches!(sh.head_dim, 64 | 128) {
        // Up to six query rows per pass over the keys (three where fewer are left), two keys
        // per 16-lane vector; the same arithmetic per pair as the one-row 8-lane form.
        let hd = sh.head_dim;
        let rows = qs.len() / hd;
        let mut r0 = 0;
        while r0 < rows {
            let (q, o) = (&qs[r0 * hd..], &mut out[r0 * stride..]);
            // SAFETY: AVX-512 F/VL, AVX2, FMA and F16C are available (`wide`); the kernel checks its bounds.
            r0 += unsafe {
                match (hd, rows - r0) {
                    (64, 1) => scores_pairs_zmm::<T, K, 1, 8>(q, keys, visible, sh.scale, (o, stride), sh.prefetch),
                    (64, 2) => scores_pairs_zmm::<T, K, 2, 8>(q, keys, visible, sh.scale, (o, stride), sh.prefetch),
                    (64, 3..=5) => scores_pairs_zmm::<T, K, 3, 8>(q, keys, visible, sh.scale, (o, stride), sh.prefetch),
                    (64, _) => scores_pairs_zmm::<T, K, 6, 8>(q, keys, visible, sh.scale, (o, stride), sh.prefetch),
                    (_, 1) => scores_pairs_zmm::<T, K, 1, 16>(q, keys, visible, sh.scale, (o, stride), sh.prefetch),
                    (_, 2) => scores_pairs_zmm::<T, K, 2, 16>(q, keys, visible, sh.scale, (o, stride), sh.prefetch),
                    (_, 3..=5) => scores_pairs_zmm::<T, K, 3, 16>(q, keys, visible, sh.scale, (o, stride), sh.prefetch),
                    _ => scores_pairs_zmm::<T, K, 6, 16>(q, keys, visible, sh.scale, (o, stride), sh.prefetch),
                }
            };
        }
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if sh.simd && matches!(sh.head_dim, 64 | 128) {
        // Rows in pairs, four keys at a time (each key chunk loaded once for both), then the
        // one-row kernel for an odd last row; the same arithmetic per pair either way. (Three
        // rows a pass spill accumulators to the stack: slower.)
        let hd = sh.head_dim;
        let rows = qs.len() / hd;
        let mut r0 = 0;
        while r0 < rows {
            let (q, o) = (&qs[r0 * hd..], &mut out[r0 * stride..]);
            // SAFETY: AVX2, FMA and F16C are available (`simd`); the kernels check their bounds.
            r0 += unsafe {
                match (hd, rows - r0) {
                    (64, 1) => {
                        scores_avx2::<T, K, 8>(&q[..hd], keys, visible, sh.scale, (o, stride), sh.prefetch);
                        1
                    }
                    (64, _) => scores_rows_avx2::<T, K, 2, 8>(q, keys, visible, sh.scale, (o, stride), sh.prefetch),
                    (_, 1) => {
                        scores_avx2::<T, K, 16>(&q[..hd], keys, visible, sh.scale, (o, stride), sh.prefetch);
                        1
                    }
                    _ => scores_rows_avx2::<T, K, 2, 16>(q, keys, visible, sh.scale, (o, stride), sh.prefetch),
                }
            };
        }
        return;
    }
    let hd = sh.head_dim;
    let mut buf = vec![0.0f32; hd];
    for (r, qv) in qs.chunks(hd).enumerate() {
        for idx in 0..visible.len() {
            let j = visible.at(idx);
            out[r * stride + idx] = dot(qv, T::widen(&keys[j * hd..][..hd], &mut buf)) * sh.scale;
        }
    }
}

/// [`weighted_sum`] for every row of `o` (`[rows, head_dim]`), row `r`'s weights at
/// `w[r · stride ..]`: with AVX-512 F/VL, up to six rows per pass over the values in 16-lane
/// vectors (three where fewer are left, or for 128-wide heads; each value row read once for
/// them), with AVX2 alone two rows per pass; the same FMA per element and key, in the same
/// order.
fn weighted_sums<T: KvElem, K: Keys>(
    values: &[T],
    visible: K,
    w: &[f32],
    stride: usize,
    o: &mut [f32],
    sh: &AttendShape,
) {
    let hd = sh.head_dim;
    let rows = o.len() / hd;
    let mut r0 = 0;
    #[cfg(target_arch = "x86_64")]
    if sh.wide && matches!(hd, 64 | 128) {
        while r0 < rows {
            let (w, o) = (&w[r0 * stride..], &mut o[r0 * hd..]);
            // SAFETY: AVX-512 F/VL, AVX2 and FMA are available (`wide`); the kernel checks its bounds.
            let done = unsafe {
                match (hd, rows - r0) {
                    (64, 1) => weighted_sums_zmm::<T, K, 1, 4>(values, visible, (w, stride), o, sh.prefetch),
                    (64, 2) => weighted_sums_zmm::<T, K, 2, 4>(values, visible, (w, stride), o, sh.prefetch),
                    (64, 3..=5) => weighted_sums_zmm::<T, K, 3, 4>(values, visible, (w, stride), o, sh.prefetch),
                    (64, _) => weighted_sums_zmm::<T, K, 6, 4>(values, visible, (w, stride), o, sh.prefetch),
                    (_, 1) => weighted_sums_zmm::<T, K, 1, 8>(values, visible, (w, stride), o, sh.prefetch),
                    (_, 2) => weighted_sums_zmm::<T, K, 2, 8>(values, visible, (w, stride), o, sh.prefetch),
                    _ => weighted_sums_zmm::<T, K, 3, 8>(values, visible, (w, stride), o, sh.prefetch),
                }
            };
            r0 += done;
        }
    }
    #[cfg(target_arch = "x86_64")]
    if sh.simd && !sh.wide && matches!(hd, 64 | 128) {
        while rows - r0 >= 2 {
            let (w, o) = (&w[r0 * stride..], &mut o[r0 * hd..]);
            // SAFETY: AVX2, FMA and F16C are available (`simd`); the kernel checks its bounds.
            r0 += unsafe {
                match hd {
                    64 => weighted_sums_avx2::<T, K, 2, 8>(values, visible, (w, stride), o, sh.prefetch),
                    _ => weighted_sums_avx2::<T, K, 2, 16>(values, visible, (w, stride), o, sh.prefetch),
                }
            };
        }
    }
    for r in r0..rows {
        weighted_sum(values, visible, &w[r * stride..][..visible.len()], &mut o[r * hd..(r + 1) * hd], sh);
    }
}

/// `o += Σ_j w_j · v_j` over `visible` in order (one FMA per element per key).
fn weighted_sum<T: KvElem, K: Keys>(values: &[T], visible: K, w: &[f32], o: &mut [f32], sh: &AttendShape) {
    #[cfg(target_arch = "x86_64")]
    if sh.simd && matches!(sh.head_dim, 64 | 128) {
        // SAFETY: as in `scores`.
        unsafe {
            match sh.head_dim {
                64 => weighted_sum_avx2::<T, K, 8>(values, visible, w, o, sh.prefetch),
                _ => weighted_sum_avx2::<T, K, 16>(values, visible, w, o, sh.prefetch),
            }
        }
        return;
    }
    let hd = sh.head_dim;
    let mut buf = vec![0.0f32; hd];
    for (idx, &p) in w.iter().enumerate().take(visible.len()) {
        axpy(o, p, T::widen(&values[visible.at(idx) * hd..][..hd], &mut buf), sh.simd);
    }
}

#[cfg(test)]
/// The query rows `qs` (`[group, head_dim]`) of one kv head against its keys and values
/// (`[capacity, head_dim]`): per row, softmax over the `visible` keys in position order, written
/// into `o` (`[group, head_dim]`, zeroed). A row's arithmetic depends only on the row and its
/// visible keys, never on the other rows; the AVX2 kernels for head_dim 64 and 128 do exactly
/// the operations of [`dot`] and [`axpy`], reading each key once for the whole group and
/// keeping the accumulators in registers.
#[allow(clippy::too_many_arguments)]
fn attend_group<T: KvElem>(
    qs: &[f32],
    keys: &[T],
    values: &[T],
    head_dim: usize,
    scale: f32,
    visible: &[usize],
    o: &mut [f32],
    simd: bool,
) {
    let rows = qs.len() / head_dim;
    let m = visible.len();
    let mut weights = vec![0.0f32; rows * m];
    #[cfg(target_arch = "x86_64")]
    let fused = simd && matches!(head_dim, 64 | 128);
    #[cfg(not(target_arch = "x86_64"))]
    let fused = false;
    if fused {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 and FMA are available (`simd`); the kernels check their bounds.
        unsafe {
            match head_dim {
                64 => scores_avx2::<T, &[usize], 8>(qs, keys, visible, scale, (&mut weights, m), false),
                _ => scores_avx2::<T, &[usize], 16>(qs, keys, visible, scale, (&mut weights, m), false),
            }
        }
    } else {
        for (qv, w) in qs.chunks(head_dim).zip(weights.chunks_mut(m.max(1))) {
            for (x, &j) in w.iter_mut().zip(visible) {
                *x = dot(qv, T::widen(&keys[j * head_dim..][..head_dim], &mut vec![0.0; head_dim])) * scale;
            }
        }
    }
    for (w, oh) in weights.chunks_mut(m.max(1)).zip(o.chunks_mut(head_dim)) {
        let sum = draftsmith_kernels::rowops::softmax_numerators(w);
        if fused {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            unsafe {
                match head_dim {
                    64 => weighted_sum_avx2::<T, &[usize], 8>(values, visible, w, oh, false),
                    _ => weighted_sum_avx2::<T, &[usize], 16>(values, visible, w, oh, false),
                }
            }
        } else {
            for (&j, &p) in visible.iter().zip(w.iter()) {
                axpy(oh, p, T::widen(&values[j * head_dim..][..head_dim], &mut vec![0.0; head_dim]), simd);
            }
        }
        let inv = 1.0 / sum;
        oh.iter_mut().for_each(|x| *x *= inv);
    }
}

#[cfg(test)]
mod tests {
    use half::f16;

    use super::*;

    #[test]
    fn attention_row_ignores_masked_neighbours_bit_for_bit() {
        // 2 kv heads, 4 query heads, head_dim 8, 5 keys.
        let (heads, kvh, d, cap) = (4, 2, 8, 5);
        let f = |i: usize| ((i * 37 % 23) as f32 - 11.0) / 7.0;
        let keys: Vec<f32> = (0..kvh * cap * d).map(f).collect();
        let values: Vec<f32> = (0..kvh * cap * d).map(|i| f(i + 5)).collect();
        let q1: Vec<f32> = (0..heads * d).map(|i| f(i + 9)).collect();
        // Alone: causal row 0 after 2 cached keys sees keys 0..=2.
        let alone = attend(&q1, &keys, &values, cap, heads, kvh, d, &Visibility::Causal { cached: 2 });
        // In a batch of 3 rows with a mask where our row (row 1) sees keys 0, 1, 2 only.
        let mut q3 = vec![0.5f32; heads * d];
        q3.extend(&q1);
        q3.extend(vec![-0.25f32; heads * d]);
        let mut mask = vec![true; 3 * cap];
        mask[cap + 3] = false;
        mask[cap + 4] = false;
        let rows = MaskRows::new(&mask, cap);
        let batch = attend(&q3, &keys, &values, cap, heads, kvh, d, &Visibility::Mask(&rows));
        let ours = &batch[heads * d..2 * heads * d];
        assert!(alone.iter().zip(ours).all(|(a, b)| a.to_bits() == b.to_bits()));
        // And it is a proper softmax average: with equal keys it returns the mean of values.
        let flat_keys = vec![0.0f32; kvh * cap * d];
        let out = attend(&q1, &flat_keys, &values, cap, heads, kvh, d, &Visibility::Causal { cached: 1 });
        let mean0 = (values[0] + values[d]) / 2.0;
        assert!((out[0] - mean0).abs() < 1e-6);
    }

    #[test]
    fn mask_rows_split_each_row_into_its_run_and_later_keys() {
        // Rows: all visible; none; a run with gaps after it; a batch row seeing its own slots
        // only (no run from key 0).
        let total = 6;
        let mask: Vec<bool> = [
            [true, true, true, true, true, true],
            [false, false, false, false, false, false],
            [true, true, false, true, false, true],
            [false, true, false, false, true, true],
        ]
        .concat();
        let rows = MaskRows::new(&mask, total);
        assert_eq!(rows.total(), total);
        let mut extra = Vec::new();
        let split: Vec<(usize, Vec<usize>)> = (0..4)
            .map(|r| {
                let prefix = Visibility::Mask(&rows).split(r, &mut extra);
                (prefix, extra.clone())
            })
            .collect();
        assert_eq!(split, [(6, vec![]), (0, vec![]), (2, vec![3, 5]), (0, vec![1, 4, 5])]);
        assert_eq!(MaskRows::new(&[], 0).prefix.len(), 0);
    }

    /// `xs` rounded to the cache element `T`.
    fn cached<T: KvElem>(xs: impl Iterator<Item = f32>) -> Vec<T> {
        xs.map(T::from_f32).collect()
    }

    /// `xs` widened back to f32.
    fn widened<T: KvElem>(xs: &[T]) -> Vec<f32> {
        xs.iter().map(|&x| x.to_f32()).collect()
    }

    #[test]
    fn fused_row_kernels_match_dot_and_axpy_bit_for_bit() {
        if !KernelPath::detect().simd() {
            return;
        }
        fused_rows_match::<f32>();
        fused_rows_match::<f16>();
    }

    fn fused_rows_match<T: KvElem>() {
        for d in [64usize, 128] {
            let f = |i: usize| ((i * 7919 % 1013) as f32 - 506.0) / 317.0;
            let keys: Vec<T> = cached((0..40 * d).map(f));
            let values: Vec<T> = cached((0..40 * d).map(|i| f(i + 3)));
            let (kf, vf) = (widened(&keys), widened(&values));
            let q: Vec<f32> = (0..d).map(|i| f(i + 11)).collect();
            let visible: Vec<usize> = (0..40).filter(|j| j % 3 != 1).collect();
            let scale = 1.0 / (d as f32).sqrt();
            let (mut fused, mut generic) = (vec![0.0f32; d], vec![0.0f32; d]);
            attend_group(&q, &keys, &values, d, scale, &visible, &mut fused, true);
            // The generic path: dot + axpy per key over the widened cache, as for other head sizes.
            let mut w: Vec<f32> = visible.iter().map(|&j| dot(&q, &kf[j * d..][..d]) * scale).collect();
            let sum = draftsmith_kernels::rowops::softmax_numerators(&mut w);
            for (&j, &p) in visible.iter().zip(&w) {
                axpy(&mut generic, p, &vf[j * d..][..d], true);
            }
            generic.iter_mut().for_each(|x| *x *= 1.0 / sum);
            assert!(fused.iter().zip(&generic).all(|(a, b)| a.to_bits() == b.to_bits()), "head_dim {d}");
            // A group of three rows (GQA) gives each row the bits it gets alone.
            let mut qs: Vec<f32> = (0..d).map(|i| f(i + 101)).collect();
            qs.extend(&q);
            qs.extend((0..d).map(|i| f(i + 202)));
            let mut group = vec![0.0f32; 3 * d];
            attend_group(&qs, &keys, &values, d, scale, &visible, &mut group, true);
            assert!(
                group[d..2 * d].iter().zip(&fused).all(|(a, b)| a.to_bits() == b.to_bits()),
                "head_dim {d}, grouped"
            );
        }
    }

    #[test]
    fn blocked_multi_token_attention_matches_the_row_reference_bit_for_bit() {
        blocked_matches_rows::<f32>();
        blocked_matches_rows::<f16>();
    }

    fn blocked_matches_rows<T: KvElem>() {
        // Long enough for several key blocks and the 8-key score path with a remainder.
        for d in [64usize, 128, 8] {
            let (heads, kvh, cached_len, n) = (6, 2, 300, 5);
            let cap = cached_len + n;
            let f = |i: usize| ((i * 7919 % 1013) as f32 - 506.0) / 317.0;
            let keys: Vec<T> = cached((0..kvh * cap * d).map(f));
            let values: Vec<T> = cached((0..kvh * cap * d).map(|i| f(i + 3)));
            let q: Vec<f32> = (0..n * heads * d).map(|i| f(i + 11) * 0.1).collect();
            // A tree mask: every row sees the cache and a few of the new tokens.
            let total = cached_len + n;
            let mask: Vec<bool> = (0..n * total)
                .map(|x| {
                    x % total < cached_len
                        || (x % total - cached_len) * 2 <= x / total * 2 && (x % total - cached_len) % 2 == 0
                        || x % total - cached_len == x / total
                })
                .collect();
            let rows = MaskRows::new(&mask, total);
            let by_mask: Vec<Vec<usize>> =
                (0..n).map(|i| (0..total).filter(|&j| mask[i * total + j]).collect()).collect();
            // A chain too: each token sees one key more than the one before (the runs of a
            // unit's tokens end at different keys inside the last block).
            let chain: Vec<Vec<usize>> = (0..n).map(|i| (0..=cached_len + i).collect()).collect();
            for (vis, visible) in
                [(Visibility::Mask(&rows), by_mask), (Visibility::Causal { cached: cached_len }, chain)]
            {
                blocked_case(&q, (&keys, &values), (heads, kvh, d, cap, n), (&vis, &visible));
            }
        }
    }

    /// Asserts that attention over `vis` has, token by token, the bits of the row reference over
    /// the keys `visible[i]` token `i` sees by definition, and that a cache of halves attends
    /// exactly as an f32 cache holding the same values.
    fn blocked_case<T: KvElem>(
        q: &[f32],
        (keys, values): (&[T], &[T]),
        (heads, kvh, d, cap, n): (usize, usize, usize, usize, usize),
        (vis, visible): (&Visibility<'_>, &[Vec<usize>]),
    ) {
        let got = attend(q, keys, values, cap, heads, kvh, d, vis);
        let (kf, vf) = (widened(keys), widened(values));
        let as_f32 = attend(q, &kf, &vf, cap, heads, kvh, d, vis);
        assert!(got.iter().zip(&as_f32).all(|(a, b)| a.to_bits() == b.to_bits()), "head_dim {d}: widened");
        let row = heads * d;
        for i in 0..n {
            let (q, got) = (&q[i * row..(i + 1) * row], &got[i * row..(i + 1) * row]);
            let what = format!("head_dim {d}, token {i}");
            assert_token_matches_reference(q, (keys, values), (cap, kvh, d), &visible[i], got, &what);
        }
    }

    /// Asserts that `got`, one token's attention output (`[heads, d]`), has kv head by kv head
    /// the bits of [`attend_group`] for its queries `q` over the `visible` keys.
    fn assert_token_matches_reference<T: KvElem>(
        q: &[f32],
        (keys, values): (&[T], &[T]),
        (cap, kvh, d): (usize, usize, usize),
        visible: &[usize],
        got: &[f32],
        what: &str,
    ) {
        let group = q.len() / d / kvh;
        for g in 0..kvh {
            let (kv, span) = (g * cap * d..(g + 1) * cap * d, g * group * d..(g + 1) * group * d);
            let mut want = vec![0.0f32; group * d];
            let scale = 1.0 / (d as f32).sqrt();
            attend_group(
                &q[span.clone()],
                &keys[kv.clone()],
                &values[kv],
                d,
                scale,
                visible,
                &mut want,
                KernelPath::detect().simd(),
            );
            assert!(got[span].iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "{what}, kv head {g}");
        }
    }

    #[test]
    fn a_token_whose_heads_split_over_threads_matches_the_row_reference_bit_for_bit() {
        // SmolLM2's shape: 9 query heads over 3 kv heads, which a 2-thread pool splits by
        // query head; long enough a context to run on the pool.
        let (heads, kvh, d, cached_len) = (9, 3, 64, 200);
        let cap = cached_len + 1;
        let f = |i: usize| ((i * 7919 % 1013) as f32 - 506.0) / 317.0;
        let keys: Vec<f16> = cached((0..kvh * cap * d).map(f));
        let values: Vec<f16> = cached((0..kvh * cap * d).map(|i| f(i + 3)));
        let q: Vec<f32> = (0..heads * d).map(|i| f(i + 11) * 0.1).collect();
        let vis = Visibility::Causal { cached: cached_len };
        let got = attend(&q, &keys, &values, cap, heads, kvh, d, &vis);
        let visible: Vec<usize> = (0..=cached_len).collect();
        assert_token_matches_reference(&q, (&keys, &values), (cap, kvh, d), &visible, &got, "one token");
    }
}
