//! The CPU path of the attention block, on host memory: rotary embedding, a host-resident KV
//! cache and attention computed row by row in a fixed order. Every query row visits exactly its
//! visible keys, in position order, with fixed-shape reductions, so its result does not depend
//! on how many rows are in the batch or which masked keys sit beside it: a token verified inside
//! a draft tree gets bit-identical outputs to the same token decoded alone. That is what makes
//! greedy speculative decoding exactly lossless on the CPU.

use rayon::prelude::*;

/// Keys and values of all layers, `[kv_heads, capacity, head_dim]` per layer, in host memory.
#[derive(Debug, Clone)]
pub struct HostKv {
    pub(crate) k: Vec<Vec<f32>>,
    pub(crate) v: Vec<Vec<f32>>,
    pub(crate) kv_heads: usize,
    pub(crate) head_dim: usize,
    pub(crate) capacity: usize,
}

impl HostKv {
    pub fn new(layers: usize, kv_heads: usize, head_dim: usize, capacity: usize) -> Self {
        let size = kv_heads * capacity * head_dim;
        Self { k: vec![vec![0.0; size]; layers], v: vec![vec![0.0; size]; layers], kv_heads, head_dim, capacity }
    }

    /// Grows every layer to `capacity` positions, keeping the first `len`.
    pub fn grow(&mut self, capacity: usize, len: usize) {
        let (h, d, old) = (self.kv_heads, self.head_dim, self.capacity);
        for buf in self.k.iter_mut().chain(self.v.iter_mut()) {
            let mut new = vec![0.0; h * capacity * d];
            for head in 0..h {
                new[head * capacity * d..][..len * d].copy_from_slice(&buf[head * old * d..][..len * d]);
            }
            *buf = new;
        }
        self.capacity = capacity;
    }

    /// Writes `[n, kv_heads, head_dim]` rows at positions `start..start+n` of `layer`.
    pub fn write(&mut self, layer: usize, start: usize, k: &[f32], v: &[f32]) {
        let (h, d, cap) = (self.kv_heads, self.head_dim, self.capacity);
        let n = k.len() / (h * d);
        for (dst, src) in [(&mut self.k[layer], k), (&mut self.v[layer], v)] {
            for i in 0..n {
                for head in 0..h {
                    dst[(head * cap + start + i) * d..][..d].copy_from_slice(&src[(i * h + head) * d..][..d]);
                }
            }
        }
    }

    /// Moves the entries at `from` (increasing) to positions `to..to+from.len()`.
    pub fn compact(&mut self, to: usize, from: &[usize]) {
        let (h, d, cap) = (self.kv_heads, self.head_dim, self.capacity);
        for buf in self.k.iter_mut().chain(self.v.iter_mut()) {
            for head in 0..h {
                for (i, &src) in from.iter().enumerate() {
                    let (s, t) = ((head * cap + src) * d, (head * cap + to + i) * d);
                    buf.copy_within(s..s + d, t);
                }
            }
        }
    }
}

/// Dot product with a fixed 8-lane accumulation pattern: its rounding depends only on the
/// length (and on whether this machine has AVX2+FMA, which is fixed for a process).
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        static FMA: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        if *FMA.get_or_init(|| is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")) {
            // SAFETY: the CPU supports AVX2 and FMA (checked above).
            return unsafe { dot_avx2(a, b) };
        }
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

/// Applies rotate-half RoPE in place to `x` (`[n, heads, head_dim]`) with per-row `cos`/`sin`
/// (`[n, head_dim]`).
pub fn rope_in_place(x: &mut [f32], heads: usize, head_dim: usize, cos: &[f32], sin: &[f32]) {
    let half = head_dim / 2;
    for (row, chunk) in x.chunks_mut(heads * head_dim).enumerate() {
        let (c, s) = (&cos[row * head_dim..][..head_dim], &sin[row * head_dim..][..head_dim]);
        for v in chunk.chunks_mut(head_dim) {
            for i in 0..half {
                let (a, b) = (v[i], v[i + half]);
                v[i] = a * c[i] - b * s[i];
                v[i + half] = b * c[i + half] + a * s[i + half];
            }
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
    fn keys(&self, row: usize, out: &mut Vec<usize>) {
        out.clear();
        match self {
            Self::Causal { cached } => out.extend(0..=cached + row),
            Self::Mask { mask, total } => out.extend((0..*total).filter(|&j| mask[row * total + j])),
        }
    }
}

/// Softmax attention of `q` (`[n, heads, head_dim]`) over the cached keys/values of one layer
/// (`[kv_heads, capacity, head_dim]`), grouped-query; returns `[n, heads, head_dim]`.
#[allow(clippy::too_many_arguments)]
pub fn attend(q: &[f32], keys: &[f32], values: &[f32], capacity: usize, heads: usize, kv_heads: usize, head_dim: usize, visibility: &Visibility<'_>) -> Vec<f32> {
    let n = q.len() / (heads * head_dim);
    let group = heads / kv_heads;
    let scale = 1.0 / (head_dim as f32).sqrt();
    let mut out = vec![0.0f32; q.len()];
    let row = |(idx, o): (usize, &mut [f32])| {
        let (i, h) = (idx / heads, idx % heads);
        let g = h / group;
        let qv = &q[(i * heads + h) * head_dim..][..head_dim];
        let mut visible = Vec::new();
        visibility.keys(i, &mut visible);
        let kbase = g * capacity * head_dim;
        let scores: Vec<f32> = visible.iter().map(|&j| dot(qv, &keys[kbase + j * head_dim..][..head_dim]) * scale).collect();
        let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0f32;
        for (&j, &s) in visible.iter().zip(&scores) {
            let p = (s - max).exp();
            sum += p;
            let v = &values[kbase + j * head_dim..][..head_dim];
            for (acc, &x) in o.iter_mut().zip(v) {
                *acc += p * x;
            }
        }
        let inv = 1.0 / sum;
        o.iter_mut().for_each(|x| *x *= inv);
    };
    let work = n * heads * capacity.min(4096);
    if work >= 1 << 14 {
        out.par_chunks_mut(head_dim).enumerate().for_each(row);
    } else {
        out.chunks_mut(head_dim).enumerate().for_each(row);
    }
    out
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
    fn dot_paths_agree() {
        let a: Vec<f32> = (0..67).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..67).map(|i| (i as f32 * 0.11).cos()).collect();
        let exact: f64 = a.iter().zip(&b).map(|(x, y)| *x as f64 * *y as f64).sum();
        assert!((dot(&a, &b) as f64 - exact).abs() < 1e-5);
        assert!((dot_portable(&a, &b) as f64 - exact).abs() < 1e-5);
    }

    #[test]
    fn rope_rotates_half_pairs() {
        let mut x = vec![1.0, 2.0, 3.0, 4.0];
        let (c, s) = ([0.0f32; 4], [1.0f32; 4]);
        rope_in_place(&mut x, 1, 4, &c, &s);
        assert_eq!(x, vec![-3.0, -4.0, 1.0, 2.0], "a 90° rotation of each (x_i, x_i+d/2) pair");
    }

    #[test]
    fn write_grow_compact_keep_rows() {
        let mut kv = HostKv::new(1, 2, 2, 2);
        kv.write(0, 0, &[1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0], &[0.0; 8]);
        kv.grow(4, 2);
        kv.write(0, 2, &[5.0, 5.0, 6.0, 6.0], &[0.0; 4]);
        // head 0 rows: 1, 3, 5; head 1 rows: 2, 4, 6.
        assert_eq!(&kv.k[0][..6], &[1.0, 1.0, 3.0, 3.0, 5.0, 5.0]);
        kv.compact(1, &[2]);
        assert_eq!(&kv.k[0][2..4], &[5.0, 5.0]);
        assert_eq!(&kv.k[0][8 + 2..8 + 4], &[6.0, 6.0]);
    }
}
