//! The CPU path of the attention block, on host memory: rotary embedding, a host-resident KV
//! cache and attention computed row by row in a fixed order. Every query row visits exactly its
//! visible keys, in position order, with fixed-shape reductions, so its result does not depend
//! on how many rows are in the batch or which masked keys sit beside it: a token verified inside
//! a draft tree gets bit-identical outputs to the same token decoded alone. That is what makes
//! greedy speculative decoding exactly lossless on the CPU.

use draftsmith_kernels::{KernelPath, QFormat, QMatrix};
use half::f16;

/// One element of the host KV cache: `f32`, or `f16` for half the bytes a long context reads.
/// A value is rounded once, when its token's pass writes it, and widened exactly on every read,
/// so a token's cached keys and values are the same whichever pass (alone, in a batch, in a
/// draft tree) wrote them, and attention stays batch-invariant in both formats.
pub trait KvElem: Copy + Default + Send + Sync + 'static {
    /// Whether the element is an IEEE half (the SIMD kernels widen it with `vcvtph2ps`).
    const F16: bool;
    /// Rounds `x` to the element (round to nearest even).
    fn from_f32(x: f32) -> Self;
    /// The element as f32 (exact).
    fn to_f32(self) -> f32;
    /// `dst[i] = from_f32(src[i])` (the same lengths).
    fn round_slice(src: &[f32], dst: &mut [Self]) {
        dst.iter_mut().zip(src).for_each(|(o, &x)| *o = Self::from_f32(x));
    }
    /// `dst[i] = src[i].to_f32()` (the same lengths).
    fn widen_slice(src: &[Self], dst: &mut [f32]) {
        dst.iter_mut().zip(src).for_each(|(o, &x)| *o = x.to_f32());
    }
    /// `row` as f32: its exact widening into `buf` (at least as long), or for f32 the row itself.
    fn widen<'a>(row: &'a [Self], buf: &'a mut [f32]) -> &'a [f32] {
        let out = &mut buf[..row.len()];
        Self::widen_slice(row, out);
        out
    }
}

impl KvElem for f32 {
    const F16: bool = false;
    fn from_f32(x: f32) -> Self {
        x
    }
    fn to_f32(self) -> f32 {
        self
    }
    fn widen<'a>(row: &'a [f32], _buf: &'a mut [f32]) -> &'a [f32] {
        row
    }
}

impl KvElem for f16 {
    const F16: bool = true;
    fn from_f32(x: f32) -> Self {
        f16::from_f32(x)
    }
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    // Eight at a time with F16C where the CPU has it; the same round-to-nearest-even bits.
    fn round_slice(src: &[f32], dst: &mut [Self]) {
        half::slice::HalfFloatSliceExt::convert_from_f32_slice(dst, src);
    }
    fn widen_slice(src: &[Self], dst: &mut [f32]) {
        half::slice::HalfFloatSliceExt::convert_to_f32_slice(src, dst);
    }
}

/// The element formats of a host cache's keys and values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KvFormat {
    /// Keys and values in f32 (the f32-activation mode's cache).
    F32,
    /// Keys and values in f16: half the bytes a long context reads.
    #[default]
    F16,
    /// Keys in Q8_0 (per 32 values an f16 scale and 8-bit integers, ggml's rounding), values
    /// in f16: the scores are int8 dot products of the keys and the queries (quantized per row
    /// and 32 values like every int8 activation), on the matrix kernels — a quarter of the
    /// f32 arithmetic's instructions a row, and about half the key bytes of f16.
    Q8Keys,
}

/// Per layer, one buffer `[kv_heads, capacity, head_dim]` of elements `T`.
type Buffers<T> = Vec<Vec<T>>;

/// The host cache's keys in the format chosen at creation.
#[derive(Debug, Clone)]
pub(crate) enum KeyStore {
    F32(Buffers<f32>),
    F16(Buffers<f16>),
    /// Per layer, per kv head, `[capacity, head_dim]` in Q8_0.
    Q8(Vec<Vec<QMatrix>>),
}

/// The host cache's values in the format chosen at creation.
#[derive(Debug, Clone)]
pub(crate) enum ValueStore {
    F32(Buffers<f32>),
    F16(Buffers<f16>),
}

/// Runs `$body` with `$b` bound to the [`Buffers`] of a [`ValueStore`], whatever the element.
macro_rules! with_values {
    ($store:expr, $b:ident => $body:expr) => {
        match $store {
            ValueStore::F32($b) => $body,
            ValueStore::F16($b) => $body,
        }
    };
}
/// Runs `$body` with `$b` bound to the [`Buffers`] of a [`KeyStore`]'s plain formats, whatever
/// the element, and `$q8` with `$m` bound to its quantized one's matrices.
macro_rules! with_keys {
    ($store:expr, $b:ident => $body:expr, $m:ident => $q8:expr) => {
        match $store {
            KeyStore::F32($b) => $body,
            KeyStore::F16($b) => $body,
            KeyStore::Q8($m) => $q8,
        }
    };
}

/// Keys and values of all layers, `[kv_heads, capacity, head_dim]` per layer, in host memory,
/// in a [`KvFormat`].
#[derive(Debug, Clone)]
pub struct HostKv {
    pub(crate) keys: KeyStore,
    pub(crate) values: ValueStore,
    pub(crate) kv_heads: usize,
    pub(crate) head_dim: usize,
    pub(crate) capacity: usize,
}

/// The buffer operations of [`HostKv`] on one plain `[kv_heads, capacity, head_dim]` buffer.
struct Plain {
    heads: usize,
    dim: usize,
    capacity: usize,
}

impl Plain {
    fn grow<T: KvElem>(&self, buf: &mut Vec<T>, capacity: usize, len: usize) {
        let (h, d, old) = (self.heads, self.dim, self.capacity);
        let mut new = vec![T::default(); h * capacity * d];
        for head in 0..h {
            new[head * capacity * d..][..len * d].copy_from_slice(&buf[head * old * d..][..len * d]);
        }
        *buf = new;
    }

    /// Writes rows `[n, heads, dim]` at positions `start..start + n`.
    fn write<T: KvElem>(&self, buf: &mut [T], start: usize, src: &[f32]) {
        let (h, d, cap) = (self.heads, self.dim, self.capacity);
        for (i, row) in src.chunks_exact(h * d).enumerate() {
            for head in 0..h {
                T::round_slice(&row[head * d..][..d], &mut buf[(head * cap + start + i) * d..][..d]);
            }
        }
    }

    fn compact<T: KvElem>(&self, buf: &mut [T], to: usize, from: &[usize]) {
        let (h, d, cap) = (self.heads, self.dim, self.capacity);
        for head in 0..h {
            for (i, &src) in from.iter().enumerate() {
                let (s, t) = ((head * cap + src) * d, (head * cap + to + i) * d);
                buf.copy_within(s..s + d, t);
            }
        }
    }

    /// Positions `start..start + count` as f32, `[heads, count, dim]`.
    fn read<T: KvElem>(&self, buf: &[T], start: usize, count: usize) -> Vec<f32> {
        let (h, d, cap) = (self.heads, self.dim, self.capacity);
        let mut out = vec![0.0f32; h * count * d];
        for head in 0..h {
            let rows = &buf[(head * cap + start) * d..(head * cap + start + count) * d];
            T::widen_slice(rows, &mut out[head * count * d..(head + 1) * count * d]);
        }
        out
    }

    /// Writes `[heads, count, dim]` at positions `start..start + count`.
    fn write_rows<T: KvElem>(&self, buf: &mut [T], start: usize, src: &[f32]) {
        let (h, d, cap) = (self.heads, self.dim, self.capacity);
        let count = src.len() / (h * d);
        for head in 0..h {
            T::round_slice(
                &src[head * count * d..(head + 1) * count * d],
                &mut buf[(head * cap + start) * d..(head * cap + start + count) * d],
            );
        }
    }
}

impl HostKv {
    /// An empty cache; [`KvFormat::Q8Keys`] needs a `head_dim` that is a multiple of 32 and
    /// falls back to [`KvFormat::F16`] otherwise.
    pub fn new(layers: usize, kv_heads: usize, head_dim: usize, capacity: usize, format: KvFormat) -> Self {
        fn zeros<T: KvElem>(layers: usize, size: usize) -> Buffers<T> {
            vec![vec![T::default(); size]; layers]
        }
        let size = kv_heads * capacity * head_dim;
        let q8 = || -> Option<Vec<Vec<QMatrix>>> {
            let head = QMatrix::zeros(QFormat::Q8_0, capacity, head_dim).ok()?;
            Some(vec![vec![head; kv_heads]; layers])
        };
        let (keys, values) = match format {
            KvFormat::F32 => (KeyStore::F32(zeros(layers, size)), ValueStore::F32(zeros(layers, size))),
            KvFormat::F16 => (KeyStore::F16(zeros(layers, size)), ValueStore::F16(zeros(layers, size))),
            KvFormat::Q8Keys => match q8() {
                Some(k) => (KeyStore::Q8(k), ValueStore::F16(zeros(layers, size))),
                None => (KeyStore::F16(zeros(layers, size)), ValueStore::F16(zeros(layers, size))),
            },
        };
        Self { keys, values, kv_heads, head_dim, capacity }
    }

    /// The formats the keys and values are held in.
    pub fn format(&self) -> KvFormat {
        match (&self.keys, &self.values) {
            (KeyStore::Q8(_), _) => KvFormat::Q8Keys,
            (_, ValueStore::F16(_)) => KvFormat::F16,
            _ => KvFormat::F32,
        }
    }

    fn plain(&self) -> Plain {
        Plain { heads: self.kv_heads, dim: self.head_dim, capacity: self.capacity }
    }

    /// Number of layers.
    pub fn num_layers(&self) -> usize {
        with_values!(&self.values, b => b.len())
    }

    /// Grows every layer to `capacity` positions, keeping the first `len`.
    pub fn grow(&mut self, capacity: usize, len: usize) {
        let p = self.plain();
        with_keys!(&mut self.keys, b => b.iter_mut().for_each(|buf| p.grow(buf, capacity, len)),
            m => m.iter_mut().flatten().for_each(|head| *head = head.resized(capacity, len)));
        with_values!(&mut self.values, b => b.iter_mut().for_each(|buf| p.grow(buf, capacity, len)));
        self.capacity = capacity;
    }

    /// Writes `[n, kv_heads, head_dim]` rows at positions `start..start+n` of `layer`.
    pub fn write(&mut self, layer: usize, start: usize, k: &[f32], v: &[f32]) {
        let (p, d) = (self.plain(), self.head_dim);
        with_keys!(&mut self.keys, b => p.write(&mut b[layer], start, k), m => {
            for (i, row) in k.chunks_exact(p.heads * d).enumerate() {
                for (head, key) in m[layer].iter_mut().zip(row.chunks_exact(d)) {
                    head.set_row(start + i, key);
                }
            }
        });
        with_values!(&mut self.values, b => p.write(&mut b[layer], start, v));
    }

    /// Moves the entries at `from` (increasing) to positions `to..to+from.len()`.
    pub fn compact(&mut self, to: usize, from: &[usize]) {
        let p = self.plain();
        with_keys!(&mut self.keys, b => b.iter_mut().for_each(|buf| p.compact(buf, to, from)),
        m => m.iter_mut().flatten().for_each(|head| {
            from.iter().enumerate().for_each(|(i, &src)| head.copy_row(src, to + i));
        }));
        with_values!(&mut self.values, b => b.iter_mut().for_each(|buf| p.compact(buf, to, from)));
    }

    /// Keys and values of positions `start..start + count` of `layer`, widened to f32,
    /// `[kv_heads, count, head_dim]` each (quantized keys as their exact values).
    pub fn read_rows(&self, layer: usize, start: usize, count: usize) -> (Vec<f32>, Vec<f32>) {
        let (p, d) = (self.plain(), self.head_dim);
        let k = with_keys!(&self.keys, b => p.read(&b[layer], start, count), m => {
            let mut out = vec![0.0f32; p.heads * count * d];
            for (head, rows) in m[layer].iter().zip(out.chunks_exact_mut(count * d)) {
                for (j, row) in rows.chunks_exact_mut(d).enumerate() {
                    head.dequantize_row(start + j, row);
                }
            }
            out
        });
        (k, with_values!(&self.values, b => p.read(&b[layer], start, count)))
    }

    /// Writes `[kv_heads, count, head_dim]` keys and values at positions `start..start + count`
    /// of `layer` (rounded to the cache's formats; a row read by [`HostKv::read_rows`] is
    /// written back unchanged).
    pub fn write_rows(&mut self, layer: usize, start: usize, k: &[f32], v: &[f32]) {
        let (p, d) = (self.plain(), self.head_dim);
        with_keys!(&mut self.keys, b => p.write_rows(&mut b[layer], start, k), m => {
            let count = k.len() / (p.heads * d);
            for (head, rows) in m[layer].iter_mut().zip(k.chunks_exact(count * d)) {
                for (j, row) in rows.chunks_exact(d).enumerate() {
                    head.set_row(start + j, row);
                }
            }
        });
        with_values!(&mut self.values, b => p.write_rows(&mut b[layer], start, v));
    }

    /// [`attend_into`] of the queries `q` over `layer`'s cached keys and values.
    pub fn attend(&self, layer: usize, q: &[f32], heads: usize, visibility: &Visibility<'_>, out: &mut Vec<f32>) {
        let dims = (heads, self.kv_heads, self.head_dim);
        let cap = self.capacity;
        match (&self.keys, &self.values) {
            (KeyStore::F32(k), ValueStore::F32(v)) => {
                attend_into(q, KeysIn::Plain(&k[layer]), &v[layer], cap, dims, visibility, out)
            }
            (KeyStore::F16(k), ValueStore::F16(v)) => {
                attend_into(q, KeysIn::Plain(&k[layer]), &v[layer], cap, dims, visibility, out)
            }
            (KeyStore::Q8(k), ValueStore::F16(v)) => {
                attend_into(q, KeysIn::Quant(&k[layer]), &v[layer], cap, dims, visibility, out)
            }
            _ => unreachable!("HostKv::new pairs the key and value formats"),
        }
    }
}

/// `o ← o + p·v`, elementwise (AVX2 + FMA with `simd`).
#[inline]
fn axpy(o: &mut [f32], p: f32, v: &[f32], simd: bool) {
    #[cfg(target_arch = "x86_64")]
    if simd {
        // SAFETY: `simd` is only true when AVX2 and FMA are available.
        unsafe { axpy_avx2(o, p, v) };
        return;
    }
    let _ = simd;
    o.iter_mut().zip(v).for_each(|(acc, &x)| *acc += p * x);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn axpy_avx2(o: &mut [f32], p: f32, v: &[f32]) {
    use std::arch::x86_64::*;
    let n = o.len().min(v.len());
    let chunks = n / 8;
    let pv = _mm256_set1_ps(p);
    for c in 0..chunks {
        // SAFETY: c * 8 + 8 <= n, within both slices.
        unsafe {
            let acc = _mm256_loadu_ps(o.as_ptr().add(c * 8));
            _mm256_storeu_ps(
                o.as_mut_ptr().add(c * 8),
                _mm256_fmadd_ps(pv, _mm256_loadu_ps(v.as_ptr().add(c * 8)), acc),
            );
        }
    }
    for (acc, &x) in o[chunks * 8..n].iter_mut().zip(&v[chunks * 8..n]) {
        *acc = p.mul_add(x, *acc);
    }
}

/// Dot product with a fixed 8-lane accumulation pattern: its rounding depends only on the
/// length (and on whether this machine has AVX2+FMA, which is fixed for a process).
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if KernelPath::detect().simd() {
        // SAFETY: the CPU supports AVX2 and FMA (checked above).
        return unsafe { dot_avx2(a, b) };
    }
    dot_portable(a, b)
}

fn reduce_lanes(acc: [f32; 8], tail: f32) -> f32 {
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

fn dot_portable(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    reduce_lanes(acc, tail)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::{_mm256_fmadd_ps, _mm256_loadu_ps, _mm256_setzero_ps, _mm256_storeu_ps};
    let n = a.len().min(b.len());
    let chunks = n / 8;
    let mut acc = _mm256_setzero_ps();
    for c in 0..chunks {
        // SAFETY: c * 8 + 8 <= n, within both slices.
        let (x, y) = unsafe { (_mm256_loadu_ps(a.as_ptr().add(c * 8)), _mm256_loadu_ps(b.as_ptr().add(c * 8))) };
        acc = _mm256_fmadd_ps(x, y, acc);
    }
    let mut lanes = [0.0f32; 8];
    // SAFETY: `lanes` holds 8 f32.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc) };
    let tail: f32 = a[chunks * 8..n].iter().zip(&b[chunks * 8..n]).map(|(x, y)| x * y).sum();
    reduce_lanes(lanes, tail)
}

/// Rotate-half RoPE of one row's heads (`src`, heads of `cos.len()` values each) into `dst`,
/// with that row's `cos`/`sin` (`[head_dim]`): each pair `(x_i, x_{i + d/2})` rotated.
pub fn rope_heads(src: &[f32], cos: &[f32], sin: &[f32], dst: &mut [f32]) {
    let (d, half) = (cos.len(), cos.len() / 2);
    for (x, out) in src.chunks_exact(d).zip(dst.chunks_exact_mut(d)) {
        for i in 0..half {
            let (a, b) = (x[i], x[i + half]);
            out[i] = a * cos[i] - b * sin[i];
            out[i + half] = b * cos[i + half] + a * sin[i + half];
        }
    }
}

/// Which cached + new keys query row `i` may see.
pub enum Visibility<'a> {
    /// Row `i` sees keys `0..=cached + i`.
    Causal { cached: usize },
    /// Row-major `[n, total]`, `true` = visible.
    Mask { mask: &'a [bool], total: usize },
}

impl Visibility<'_> {
    /// Row `row`'s visible keys as a run `0..prefix` (returned) and the later ones in `extra`
    /// (ascending): a draft tree's rows see the whole cache and a few of the tree's nodes.
    fn split(&self, row: usize, extra: &mut Vec<usize>) -> usize {
        extra.clear();
        match self {
            Self::Causal { cached } => cached + row + 1,
            Self::Mask { mask, total } => {
                let row = &mask[row * total..][..*total];
                let prefix = row.iter().position(|&v| !v).unwrap_or(row.len());
                extra.extend((prefix..*total).filter(|&j| row[j]));
                prefix
            }
        }
    }

    /// Row `row`'s visible keys as one list, by the definition (the tests' reference for
    /// [`Visibility::split`]'s run and list).
    #[cfg(test)]
    fn keys(&self, row: usize, out: &mut Vec<usize>) {
        out.clear();
        match self {
            Self::Causal { cached } => out.extend(0..=cached + row),
            Self::Mask { mask, total } => out.extend((0..*total).filter(|&j| mask[row * total + j])),
        }
    }
}

/// A query row's visible keys as the attention kernels walk them, in position order: a list,
/// or a run of consecutive positions (no list to build or read).
trait Keys: Copy {
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
/// and values are walked in blocks of [`KEY_BLOCK`] positions, each block serving every query
/// row of the unit while it is in cache, so a long context is read once per unit rather than
/// once per token. Per query row the arithmetic is that of [`attend_group`].
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
        Visibility::Mask { total, .. } => *total,
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
    /// The kernels prefetch the keys and values ahead ([`prefetch_ahead`]): passes over more
    /// than one token.
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
/// elements, or one Q8_0 matrix `[capacity, head_dim]` per kv head ([`KvFormat::Q8Keys`]).
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

/// Prefetches `lines` cache lines from [`PREFETCH_AHEAD`] bytes past `p` when `on` (a run's
/// later rows; for a list of keys a wasted hint, never a fault). Multi-token passes, which
/// compute long enough per key for the hint to arrive in time, gain 6–8 % of their attention
/// after 4096 cached tokens; one-token steps, bound by the memory stream the hardware
/// prefetcher already follows, do not (session 36), so they pass `on = false`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch_ahead<T>(on: bool, p: *const T, lines: usize) {
    use std::arch::x86_64::*;
    if !on {
        return;
    }
    let base = p.cast::<i8>().wrapping_add(PREFETCH_AHEAD);
    for l in 0..lines {
        // SAFETY: a prefetch hint reads nothing and cannot fault.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(base.wrapping_add(64 * l)) };
    }
}

/// How far ahead of the key or value row in use the attention kernels prefetch.
const PREFETCH_AHEAD: usize = 4096;

/// Eight cache elements at `p` as f32: a plain load, or `vcvtph2ps` of eight halves (exact).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
#[inline]
unsafe fn load8<T: KvElem>(p: *const T) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    // SAFETY: the caller guarantees eight elements at `p`.
    unsafe {
        if T::F16 {
            _mm256_cvtph_ps(_mm_loadu_si128(p.cast()))
        } else {
            _mm256_loadu_ps(p.cast())
        }
    }
}

/// The scores of eight keys from their accumulators (`acc[k]`: key `k`'s eight lanes), times
/// `scale`: lanes `l` and `l + 4` first, then the pairs, exactly the order of [`reduce_lanes`]
/// (plus its `+ 0.0`), so each score has the bits of the one-pair form.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
fn reduce_eight_keys(acc: &[std::arch::x86_64::__m256; 8], scale: f32) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    // Per key: t = low half + high half = [a0+a4, a1+a5, a2+a6, a3+a7].
    let half = |x: __m256, y: __m256| {
        _mm256_add_ps(_mm256_permute2f128_ps::<0x20>(x, y), _mm256_permute2f128_ps::<0x31>(x, y))
    };
    let (u01, u23, u45, u67) = (half(acc[0], acc[1]), half(acc[2], acc[3]), half(acc[4], acc[5]), half(acc[6], acc[7]));
    // (t0+t1) and (t2+t3) pairs, then their sum: keys in the order 0 2 4 6 | 1 3 5 7.
    let v = _mm256_hadd_ps(_mm256_hadd_ps(u01, u23), _mm256_hadd_ps(u45, u67));
    let v = _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_mul_ps(_mm256_add_ps(v, _mm256_setzero_ps()), _mm256_set1_ps(scale))
}

/// `q_r · k_j · scale` for every row r of `qs` and visible key j, into `out[r · stride + idx]`
/// (`C` × 8 = head_dim): per pair, the FMA sequence and lane reduction of [`dot_avx2`]. Keys go
/// eight at a time: their eight accumulators are reduced together by vector adds in exactly
/// the order of [`reduce_lanes`] (lanes `l` and `l + 4` first, then the pairs), so every score
/// has the bits of the one-pair form, which handles the remainder.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn scores_avx2<T: KvElem, K: Keys, const C: usize>(
    qs: &[f32],
    keys: &[T],
    visible: K,
    scale: f32,
    (out, stride): (&mut [f32], usize),
    prefetch: bool,
) {
    use std::arch::x86_64::*;
    let d = C * 8;
    let (rows, m) = (qs.len() / d, visible.len());
    assert!(
        qs.len() == rows * d
            && (rows == 0 || out.len() >= (rows - 1) * stride + m)
            && rows_in_bounds(visible, d, keys.len())
    );
    let full = m / 8 * 8;
    for r in 0..rows {
        // SAFETY (all loads and stores): key rows, the rows of `qs` and `out` are in bounds (asserted).
        let qp = unsafe { qs.as_ptr().add(r * d) };
        for base in (0..full).step_by(8) {
            let mut acc = [_mm256_setzero_ps(); 8];
            let kp: [*const T; 8] = std::array::from_fn(|k| unsafe { keys.as_ptr().add(visible.at(base + k) * d) });
            prefetch_ahead(prefetch, kp[0], 8 * d * std::mem::size_of::<T>() / 64);
            // Chunk-outer: each query chunk is loaded once for the eight keys; every pair still
            // accumulates its chunks in order, as `dot_avx2` does.
            for c in 0..C {
                let qc = unsafe { _mm256_loadu_ps(qp.add(c * 8)) };
                for (a, p) in acc.iter_mut().zip(&kp) {
                    *a = _mm256_fmadd_ps(qc, unsafe { load8(p.add(c * 8)) }, *a);
                }
            }
            unsafe { _mm256_storeu_ps(out.as_mut_ptr().add(r * stride + base), reduce_eight_keys(&acc, scale)) };
        }
        for idx in full..m {
            let kp = unsafe { keys.as_ptr().add(visible.at(idx) * d) };
            let mut acc = _mm256_setzero_ps();
            for c in 0..C {
                acc = _mm256_fmadd_ps(unsafe { _mm256_loadu_ps(qp.add(c * 8)) }, unsafe { load8(kp.add(c * 8)) }, acc);
            }
            let mut lanes = [0.0f32; 8];
            unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc) };
            out[r * stride + idx] = reduce_lanes(lanes, 0.0) * scale;
        }
    }
}

/// `o = Σ_j w_j · v_j` over the visible keys in order: [`axpy_avx2`]'s FMA per element, with
/// the `C` × 8 accumulators in registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn weighted_sum_avx2<T: KvElem, K: Keys, const C: usize>(
    values: &[T],
    visible: K,
    weights: &[f32],
    o: &mut [f32],
    prefetch: bool,
) {
    use std::arch::x86_64::*;
    let d = C * 8;
    assert!(o.len() == d && rows_in_bounds(visible, d, values.len()));
    // SAFETY (all loads and stores): `o` holds d floats and every visible value row d floats.
    let mut acc: [__m256; C] = std::array::from_fn(|c| unsafe { _mm256_loadu_ps(o.as_ptr().add(c * 8)) });
    for (idx, &p) in weights.iter().enumerate().take(visible.len()) {
        let vp = unsafe { values.as_ptr().add(visible.at(idx) * d) };
        prefetch_ahead(prefetch, vp, d * std::mem::size_of::<T>() / 64);
        let pv = _mm256_set1_ps(p);
        for (c, a) in acc.iter_mut().enumerate() {
            *a = _mm256_fmadd_ps(pv, unsafe { load8(vp.add(c * 8)) }, *a);
        }
    }
    for (c, a) in acc.iter().enumerate() {
        unsafe { _mm256_storeu_ps(o.as_mut_ptr().add(c * 8), *a) };
    }
}

/// [`scores_avx2`] for `R` rows at once (`qs` = `[R, C·8]`, row `r` into `out[r · stride + idx]`;
/// returns `R`): keys go four at a time, each key chunk loaded (and widened) once for the `R`
/// rows, every pair accumulating its chunks in order as [`dot_avx2`] does; the four keys' lanes
/// are then reduced by [`reduce_four_keys`] in the order of [`reduce_lanes`], so every score has
/// the bits of the one-pair form (which handles the remainder). `4 · R` accumulators, `R` query
/// chunks and a key chunk stay in registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn scores_rows_avx2<T: KvElem, K: Keys, const R: usize, const C: usize>(
    qs: &[f32],
    keys: &[T],
    visible: K,
    scale: f32,
    (out, stride): (&mut [f32], usize),
    prefetch: bool,
) -> usize {
    use std::arch::x86_64::*;
    let d = C * 8;
    let m = visible.len();
    assert!(qs.len() >= R * d && out.len() >= (R - 1) * stride + m && rows_in_bounds(visible, d, keys.len()));
    let full = m / 4 * 4;
    for base in (0..full).step_by(4) {
        let mut acc = [[_mm256_setzero_ps(); 4]; R];
        // SAFETY (all loads and stores): key rows, the rows of `qs` and `out` are in bounds (asserted).
        let kp: [*const T; 4] = std::array::from_fn(|k| unsafe { keys.as_ptr().add(visible.at(base + k) * d) });
        prefetch_ahead(prefetch, kp[0], 4 * d * std::mem::size_of::<T>() / 64);
        for c in 0..C {
            let q: [__m256; R] = std::array::from_fn(|r| unsafe { _mm256_loadu_ps(qs.as_ptr().add(r * d + c * 8)) });
            for (k, p) in kp.iter().enumerate() {
                let kv = unsafe { load8(p.add(c * 8)) };
                for r in 0..R {
                    acc[r][k] = _mm256_fmadd_ps(q[r], kv, acc[r][k]);
                }
            }
        }
        for (r, a) in acc.iter().enumerate() {
            unsafe { _mm_storeu_ps(out.as_mut_ptr().add(r * stride + base), reduce_four_keys(a, scale)) };
        }
    }
    if full < m {
        // SAFETY: the same CPU features; `scores_avx2` checks its bounds.
        unsafe {
            scores_avx2::<T, K, C>(&qs[..R * d], keys, visible.skip(full), scale, (&mut out[full..], stride), prefetch)
        };
    }
    R
}

/// [`reduce_eight_keys`] for four keys (`acc[k]`: key `k`'s eight lanes): per key lanes `l` and
/// `l + 4` first, then the two pairs of those sums, then their sum, plus `0.0`, times `scale` —
/// the additions of [`reduce_lanes`] in its order.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
fn reduce_four_keys(acc: &[std::arch::x86_64::__m256; 4], scale: f32) -> std::arch::x86_64::__m128 {
    use std::arch::x86_64::*;
    // Per key t = low half + high half; keys 0 | 1 and 2 | 3 share a vector.
    let half = |x: __m256, y: __m256| {
        _mm256_add_ps(_mm256_permute2f128_ps::<0x20>(x, y), _mm256_permute2f128_ps::<0x31>(x, y))
    };
    // (t.0 + t.1), (t.2 + t.3) per key: keys 0 2 | 1 3; then their sums.
    let h = _mm256_hadd_ps(half(acc[0], acc[1]), half(acc[2], acc[3]));
    let h = _mm256_hadd_ps(h, h);
    let v = _mm_unpacklo_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps::<1>(h));
    _mm_mul_ps(_mm_add_ps(v, _mm_setzero_ps()), _mm_set1_ps(scale))
}

/// [`weighted_sum_avx2`] for `R` rows at once (`w`: row `r` at `w[r · stride ..]`; `o`: at least
/// `[R, C·8]`, of which the first `R` rows are summed into; returns `R`): the head is walked in
/// parts of [`PART`] chunks, each value chunk loaded (and widened) once for the `R` rows, and
/// every output element still takes one FMA per key, in key order — the arithmetic of
/// [`weighted_sum_avx2`] per element. `R · PART` accumulators stay in registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn weighted_sums_avx2<T: KvElem, K: Keys, const R: usize, const C: usize>(
    values: &[T],
    visible: K,
    (w, stride): (&[f32], usize),
    o: &mut [f32],
    prefetch: bool,
) -> usize {
    use std::arch::x86_64::*;
    let d = C * 8;
    let m = visible.len();
    assert!(
        C.is_multiple_of(PART)
            && o.len() >= R * d
            && (m == 0 || w.len() >= (R - 1) * stride + m)
            && rows_in_bounds(visible, d, values.len())
    );
    for c0 in (0..C).step_by(PART) {
        // SAFETY (all loads and stores): `o` holds R·d floats, every visible value row d floats,
        // and row r's weights are in bounds (asserted).
        let mut acc: [[__m256; PART]; R] = std::array::from_fn(|r| {
            std::array::from_fn(|c| unsafe { _mm256_loadu_ps(o.as_ptr().add(r * d + (c0 + c) * 8)) })
        });
        for idx in 0..m {
            let vp = unsafe { values.as_ptr().add(visible.at(idx) * d) };
            prefetch_ahead(prefetch && c0 == 0, vp, d * std::mem::size_of::<T>() / 64);
            let p: [__m256; R] = std::array::from_fn(|r| _mm256_set1_ps(unsafe { *w.get_unchecked(r * stride + idx) }));
            for (c, part) in (c0..c0 + PART).enumerate() {
                let v = unsafe { load8(vp.add(part * 8)) };
                for (a, &pr) in acc.iter_mut().zip(&p) {
                    a[c] = _mm256_fmadd_ps(pr, v, a[c]);
                }
            }
        }
        for (r, a) in acc.iter().enumerate() {
            for (c, x) in a.iter().enumerate() {
                unsafe { _mm256_storeu_ps(o.as_mut_ptr().add(r * d + (c0 + c) * 8), *x) };
            }
        }
    }
    R
}

/// Chunks of eight per pass of [`weighted_sums_avx2`]: two rows' accumulators, two weights and a
/// value chunk fit AVX2's sixteen registers.
#[cfg(target_arch = "x86_64")]
const PART: usize = 4;

/// Whether every row `j` of the ascending `visible` (a run or a list of [`Visibility::split`]) lies
/// within `len` elements of `d`-wide rows: the last one decides (the order itself is checked in
/// debug builds; a full scan per call cost a tenth of the score kernels' time at long context).
fn rows_in_bounds<K: Keys>(visible: K, d: usize, len: usize) -> bool {
    debug_assert!(visible.ascends(), "visible keys ascend");
    visible.last().is_none_or(|j| (j + 1) * d <= len)
}

/// [`scores_avx2`] for `R` rows at once with 16-lane vectors, two keys per vector (`qs` =
/// `[R, C·8]`, row `r` into `out[r · stride + idx]`): keys go eight at a time, as four pairs whose
/// chunks share a 16-lane register (a key's chunk `c` in the low half, the next key's in the high
/// half, each row's chunk `c` in both halves), so one FMA advances two keys' accumulators by the
/// same operations the 8-lane kernel applies to each; the pairs are then reduced by
/// [`reduce_eight_key_pairs`] (the additions of [`reduce_eight_keys`], in its order), so every
/// score has the bits of the one-pair form (which handles the remainder). Returns `R`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
unsafe fn scores_pairs_zmm<T: KvElem, K: Keys, const R: usize, const C: usize>(
    qs: &[f32],
    keys: &[T],
    visible: K,
    scale: f32,
    (out, stride): (&mut [f32], usize),
    prefetch: bool,
) -> usize {
    use std::arch::x86_64::*;
    let d = C * 8;
    let m = visible.len();
    assert!(qs.len() >= R * d && out.len() >= (R - 1) * stride + m && rows_in_bounds(visible, d, keys.len()));
    let full = m / 8 * 8;
    for base in (0..full).step_by(8) {
        let mut acc = [[_mm512_setzero_ps(); 4]; R];
        // SAFETY (all loads and stores): key rows, the rows of `qs` and `out` are in bounds (asserted).
        let kp: [*const T; 8] = std::array::from_fn(|k| unsafe { keys.as_ptr().add(visible.at(base + k) * d) });
        prefetch_ahead(prefetch, kp[0], 8 * d * std::mem::size_of::<T>() / 64);
        for c in 0..C {
            let q: [__m512; R] = std::array::from_fn(|r| {
                let h = unsafe { _mm256_loadu_ps(qs.as_ptr().add(r * d + c * 8)) };
                _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(h)))
            });
            for p in 0..4 {
                let kv = unsafe { load8_pair(kp[2 * p].add(c * 8), kp[2 * p + 1].add(c * 8)) };
                for r in 0..R {
                    acc[r][p] = _mm512_fmadd_ps(q[r], kv, acc[r][p]);
                }
            }
        }
        for (r, a) in acc.iter().enumerate() {
            unsafe { _mm256_storeu_ps(out.as_mut_ptr().add(r * stride + base), reduce_eight_key_pairs(a, scale)) };
        }
    }
    if full < m {
        // SAFETY: the same CPU features; `scores_avx2` checks its bounds.
        unsafe {
            scores_avx2::<T, K, C>(&qs[..R * d], keys, visible.skip(full), scale, (&mut out[full..], stride), prefetch)
        };
    }
    R
}

/// [`reduce_eight_keys`] for eight keys held in pairs (`acc[p]`: key `2p`'s eight lanes, then key
/// `2p + 1`'s), in 16-lane operations: per key its lanes `l` and `l + 4` first, then the two
/// pairs of those sums, then their sum — the same additions in the same order, so the same bits.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,avx512f")]
#[inline]
fn reduce_eight_key_pairs(acc: &[std::arch::x86_64::__m512; 4], scale: f32) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    // Per key t = low quarter + high quarter, four keys a vector: [t0 t1 t2 t3], [t4 t5 t6 t7].
    let t =
        |x: __m512, y: __m512| _mm512_add_ps(_mm512_shuffle_f32x4::<0x88>(x, y), _mm512_shuffle_f32x4::<0xDD>(x, y));
    let sums = |t: __m512| {
        // (t.0 + t.1) and (t.2 + t.3), then their sum, in lane 0 of each key's quarter.
        let z = _mm512_add_ps(t, _mm512_permute_ps::<0b10_11_00_01>(t));
        _mm512_add_ps(z, _mm512_permute_ps::<0b01_00_11_10>(z))
    };
    let (lo, hi) = (sums(t(acc[0], acc[1])), sums(t(acc[2], acc[3])));
    let at = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 0, 0, 0, 0, 0, 0, 0);
    let v = _mm512_castps512_ps256(_mm512_permutex2var_ps(lo, at, hi));
    _mm256_mul_ps(_mm256_add_ps(v, _mm256_setzero_ps()), _mm256_set1_ps(scale))
}

/// Eight cache elements at `lo` and eight at `hi` as one 16-lane f32 vector (`lo` in the low
/// half), widened exactly.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c,avx512f")]
#[inline]
unsafe fn load8_pair<T: KvElem>(lo: *const T, hi: *const T) -> std::arch::x86_64::__m512 {
    use std::arch::x86_64::*;
    // SAFETY: the caller guarantees eight elements at `lo` and at `hi`.
    unsafe {
        if T::F16 {
            let h = _mm256_inserti128_si256::<1>(
                _mm256_castsi128_si256(_mm_loadu_si128(lo.cast())),
                _mm_loadu_si128(hi.cast()),
            );
            _mm512_cvtph_ps(h)
        } else {
            let l = _mm512_castpd256_pd512(_mm256_castps_pd(_mm256_loadu_ps(lo.cast())));
            _mm512_castpd_ps(_mm512_insertf64x4::<1>(l, _mm256_castps_pd(_mm256_loadu_ps(hi.cast()))))
        }
    }
}

/// [`weighted_sum_avx2`] for `R` rows at once with 16-lane vectors (`w`: row `r` at
/// `w[r · stride ..]`; `o`: at least `[R, Z·16]`, of which the first `R` rows are summed into;
/// returns `R`): each value row is loaded once for the `R` rows, and every output element still
/// takes one FMA per key, in key order — the same arithmetic per element as the 8-lane kernels,
/// whatever the vector width (an element's sum never mixes lanes), with half their instructions.
/// `R · Z` ≤ 24 accumulators stay in registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
unsafe fn weighted_sums_zmm<T: KvElem, K: Keys, const R: usize, const Z: usize>(
    values: &[T],
    visible: K,
    (w, stride): (&[f32], usize),
    o: &mut [f32],
    prefetch: bool,
) -> usize {
    use std::arch::x86_64::*;
    let d = Z * 16;
    let m = visible.len();
    assert!(
        R * Z <= 24
            && o.len() >= R * d
            && (m == 0 || w.len() >= (R - 1) * stride + m)
            && rows_in_bounds(visible, d, values.len())
    );
    // SAFETY (all loads and stores): `o` holds R·d floats, every visible value row d floats,
    // and row r's weights are in bounds (asserted).
    let mut acc: [[__m512; Z]; R] =
        std::array::from_fn(|r| std::array::from_fn(|z| unsafe { _mm512_loadu_ps(o.as_ptr().add(r * d + z * 16)) }));
    for idx in 0..m {
        let vp = unsafe { values.as_ptr().add(visible.at(idx) * d) };
        prefetch_ahead(prefetch, vp, d * std::mem::size_of::<T>() / 64);
        let p: [__m512; R] = std::array::from_fn(|r| _mm512_set1_ps(unsafe { *w.get_unchecked(r * stride + idx) }));
        for z in 0..Z {
            let v = unsafe { load16(vp.add(z * 16)) };
            for (a, &pr) in acc.iter_mut().zip(&p) {
                a[z] = _mm512_fmadd_ps(pr, v, a[z]);
            }
        }
    }
    for (r, a) in acc.iter().enumerate() {
        for (z, x) in a.iter().enumerate() {
            unsafe { _mm512_storeu_ps(o.as_mut_ptr().add(r * d + z * 16), *x) };
        }
    }
    R
}

/// Sixteen cache elements at `p` as f32: a plain load, or `vcvtph2ps` of sixteen halves (exact).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c,avx512f")]
#[inline]
unsafe fn load16<T: KvElem>(p: *const T) -> std::arch::x86_64::__m512 {
    use std::arch::x86_64::*;
    // SAFETY: the caller guarantees sixteen elements at `p`.
    unsafe {
        if T::F16 {
            _mm512_cvtph_ps(_mm256_loadu_si256(p.cast()))
        } else {
            _mm512_loadu_ps(p.cast())
        }
    }
}

#[cfg(test)]
mod tests {
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
        let batch = attend(&q3, &keys, &values, cap, heads, kvh, d, &Visibility::Mask { mask: &mask, total: cap });
        let ours = &batch[heads * d..2 * heads * d];
        assert!(alone.iter().zip(ours).all(|(a, b)| a.to_bits() == b.to_bits()));
        // And it is a proper softmax average: with equal keys it returns the mean of values.
        let flat_keys = vec![0.0f32; kvh * cap * d];
        let out = attend(&q1, &flat_keys, &values, cap, heads, kvh, d, &Visibility::Causal { cached: 1 });
        let mean0 = (values[0] + values[d]) / 2.0;
        assert!((out[0] - mean0).abs() < 1e-6);
    }

    #[test]
    fn attention_over_quantized_keys_is_batch_invariant_and_near_the_float_keys() {
        // SmolLM2's shape: 3 kv heads of 3 query heads each, head_dim 64; 150 cached keys (a
        // partial last group of 16), rows alone and in a tree batch that hides some keys.
        let (heads, kvh, d, cap) = (9, 3, 64, 150);
        let f = |i: usize| ((i * 7919 % 1013) as f32 - 506.0) / 317.0;
        let (cached, n) = (140, 5);
        let mut kv = HostKv::new(1, kvh, d, cap, KvFormat::Q8Keys);
        let mut float = HostKv::new(1, kvh, d, cap, KvFormat::F16);
        assert_eq!(kv.format(), KvFormat::Q8Keys);
        let k: Vec<f32> = (0..(cached + n) * kvh * d).map(f).collect();
        let v: Vec<f32> = (0..(cached + n) * kvh * d).map(|i| f(i + 3)).collect();
        kv.write(0, 0, &k, &v);
        float.write(0, 0, &k, &v);
        let q: Vec<f32> = (0..n * heads * d).map(|i| f(i + 11)).collect();
        let row = heads * d;
        // The batch: row t sees the cache and itself and, for odd t, the row before it.
        let total = cached + n;
        let mut mask = vec![false; n * total];
        for t in 0..n {
            mask[t * total..t * total + cached].iter_mut().for_each(|m| *m = true);
            mask[t * total + cached + t] = true;
            if t % 2 == 1 {
                mask[t * total + cached + t - 1] = true;
            }
        }
        let visibility = Visibility::Mask { mask: &mask, total };
        let (mut batch, mut reference) = (Vec::new(), Vec::new());
        kv.attend(0, &q, heads, &visibility, &mut batch);
        float.attend(0, &q, heads, &visibility, &mut reference);
        for t in 0..n {
            let alone_mask = &mask[t * total..(t + 1) * total];
            let mut alone = Vec::new();
            let vis = Visibility::Mask { mask: alone_mask, total };
            kv.attend(0, &q[t * row..(t + 1) * row], heads, &vis, &mut alone);
            let ours = &batch[t * row..(t + 1) * row];
            assert!(alone.iter().zip(ours).all(|(a, b)| a.to_bits() == b.to_bits()), "row {t} alone vs in the batch");
        }
        let worst = batch.iter().zip(&reference).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(worst < 0.02, "8-bit keys and queries moved an output by {worst}");
        // The keys read back as their exact quantized values, and write back unchanged.
        let (k8, _) = kv.read_rows(0, 10, 3);
        kv.write_rows(0, 20, &k8, &vec![0.0; k8.len()]);
        assert_eq!(kv.read_rows(0, 20, 3).0, k8);
        assert!(k8.iter().zip(float.read_rows(0, 10, 3).0).all(|(a, b)| (a - b).abs() < 0.01));
        // Accepted tree rows move down bit for bit, and growing keeps every row.
        let rows = |kv: &HostKv, js: &[usize]| js.iter().map(|&j| kv.read_rows(0, j, 1)).collect::<Vec<_>>();
        let moved = rows(&kv, &[141, 142, 144]);
        kv.compact(100, &[141, 142, 144]);
        assert_eq!(rows(&kv, &[100, 101, 102]), moved);
        let before = kv.read_rows(0, 0, 103);
        kv.grow(300, 103);
        assert_eq!(kv.read_rows(0, 0, 103), before);
    }

    #[test]
    fn axpy_paths_agree_with_scalar() {
        for simd in [false, KernelPath::detect().simd()] {
            let (mut o, v) = (vec![1.0f32; 67], (0..67).map(|i| i as f32 * 0.5).collect::<Vec<_>>());
            axpy(&mut o, 0.25, &v, simd);
            assert!(o.iter().zip(&v).all(|(a, b)| (a - (1.0 + 0.25 * b)).abs() < 1e-6));
        }
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
            let mask_vis = Visibility::Mask { mask: &mask, total };
            // A chain too: each token sees one key more than the one before (the runs of a
            // unit's tokens end at different keys inside the last block).
            for vis in [mask_vis, Visibility::Causal { cached: cached_len }] {
                blocked_case(&q, (&keys, &values), (heads, kvh, d, cap, n), &vis);
            }
        }
    }

    /// Asserts that attention over `vis` has, token by token, the bits of the row reference,
    /// and that a cache of halves attends exactly as an f32 cache holding the same values.
    fn blocked_case<T: KvElem>(
        q: &[f32],
        (keys, values): (&[T], &[T]),
        (heads, kvh, d, cap, n): (usize, usize, usize, usize, usize),
        vis: &Visibility<'_>,
    ) {
        let got = attend(q, keys, values, cap, heads, kvh, d, vis);
        let (kf, vf) = (widened(keys), widened(values));
        let as_f32 = attend(q, &kf, &vf, cap, heads, kvh, d, vis);
        assert!(got.iter().zip(&as_f32).all(|(a, b)| a.to_bits() == b.to_bits()), "head_dim {d}: widened");
        let row = heads * d;
        for i in 0..n {
            let mut visible = Vec::new();
            vis.keys(i, &mut visible);
            let (q, got) = (&q[i * row..(i + 1) * row], &got[i * row..(i + 1) * row]);
            let what = format!("head_dim {d}, token {i}");
            assert_token_matches_reference(q, (keys, values), (cap, kvh, d), &visible, got, &what);
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

    #[test]
    fn dot_paths_agree() {
        let a: Vec<f32> = (0..67).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..67).map(|i| (i as f32 * 0.11).cos()).collect();
        let exact: f64 = a.iter().zip(&b).map(|(x, y)| *x as f64 * *y as f64).sum();
        assert!((dot(&a, &b) as f64 - exact).abs() < 1e-5);
        assert!((dot_portable(&a, &b) as f64 - exact).abs() < 1e-5);
    }

    #[test]
    fn slice_rounding_gives_each_elements_bits() {
        // Normal, subnormal, overflowing and tie values, in a length with a remainder.
        let xs: Vec<f32> = (0..203)
            .map(|i| match i % 5 {
                0 => (i as f32 * 0.731).sin() * 3.0,
                1 => 1e-6 * i as f32,
                2 => 7e4 * i as f32,
                3 => 1.0 + (i as f32) * 2f32.powi(-11),
                _ => -(i as f32) / 7.0,
            })
            .collect();
        let mut halves = vec![f16::ZERO; xs.len()];
        f16::round_slice(&xs, &mut halves);
        assert!(halves.iter().zip(&xs).all(|(h, &x)| h.to_bits() == f16::from_f32(x).to_bits()));
        let mut back = vec![0.0f32; xs.len()];
        f16::widen_slice(&halves, &mut back);
        assert!(back.iter().zip(&halves).all(|(b, h)| b.to_bits() == h.to_f32().to_bits()));
    }

    #[test]
    fn rope_rotates_half_pairs() {
        let (c, s) = ([0.0f32; 4], [1.0f32; 4]);
        let mut out = [0.0f32; 8];
        rope_heads(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], &c, &s, &mut out);
        assert_eq!(
            out,
            [-3.0, -4.0, 1.0, 2.0, -7.0, -8.0, 5.0, 6.0],
            "a 90° rotation of each (x_i, x_i+d/2) pair, head by head"
        );
    }

    #[test]
    fn write_grow_compact_keep_rows() {
        for half in [false, true] {
            let format = if half { KvFormat::F16 } else { KvFormat::F32 };
            let mut kv = HostKv::new(1, 2, 2, 2, format);
            assert_eq!(kv.format(), format);
            kv.write(0, 0, &[1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0], &[0.0; 8]);
            kv.grow(4, 2);
            kv.write(0, 2, &[5.0, 5.0, 6.0, 6.0], &[0.0; 4]);
            // head 0 rows: 1, 3, 5; head 1 rows: 2, 4, 6.
            assert_eq!(kv.read_rows(0, 0, 3).0, [1.0, 1.0, 3.0, 3.0, 5.0, 5.0, 2.0, 2.0, 4.0, 4.0, 6.0, 6.0]);
            kv.compact(1, &[2]);
            assert_eq!(kv.read_rows(0, 1, 1).0, [5.0, 5.0, 6.0, 6.0]);
            kv.write_rows(0, 3, &[0.1, 0.2, 0.3, 0.4], &[1.0; 4]);
            let (k, v) = kv.read_rows(0, 3, 1);
            let round = |x: f32| if half { f16::from_f32(x).to_f32() } else { x };
            assert_eq!(k, [round(0.1), round(0.2), round(0.3), round(0.4)]);
            assert_eq!(v, [1.0; 4]);
        }
    }
}
