//! The host-resident KV cache: [`HostKv`], its keys and values in a [`KvFormat`].

use draftsmith_kernels::{QFormat, QMatrix};
use half::f16;

use super::{attend_into, KeysIn, KvElem, Visibility};

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

#[cfg(test)]
mod tests {
    use super::*;

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
        let rows = crate::host::MaskRows::new(&mask, total);
        let visibility = Visibility::Mask(&rows);
        let (mut batch, mut reference) = (Vec::new(), Vec::new());
        kv.attend(0, &q, heads, &visibility, &mut batch);
        float.attend(0, &q, heads, &visibility, &mut reference);
        for t in 0..n {
            let alone_mask = &mask[t * total..(t + 1) * total];
            let mut alone = Vec::new();
            let alone_rows = crate::host::MaskRows::new(alone_mask, total);
            let vis = Visibility::Mask(&alone_rows);
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
