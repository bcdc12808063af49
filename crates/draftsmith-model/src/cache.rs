//! Key/value cache kept outside the model: append (by forward), truncate, and keep(indices) to
//! compact the accepted path of a verified draft tree.

use burn::tensor::{backend::Backend, Int, Tensor, TensorData};

use crate::config::ModelConfig;
use crate::error::ModelError;
use crate::host::{HostKv, KvFormat};

/// Keys and values of one layer: `[kv_heads, capacity, head_dim]` each.
#[derive(Debug, Clone)]
struct LayerKv<B: Backend> {
    k: Tensor<B, 3>,
    v: Tensor<B, 3>,
}

/// Per-layer key/value tensors for one sequence.
#[derive(Debug, Clone)]
pub struct KvCache<B: Backend> {
    layers: Vec<LayerKv<B>>,
    len: usize,
    capacity: usize,
    /// The model's context: committed positions never pass it ([`KvCache::ensure_capacity`]).
    context: usize,
    kv_heads: usize,
    head_dim: usize,
    device: B::Device,
    /// Host-memory keys/values used by the CPU path instead of `layers`.
    host: Option<HostKv>,
    /// When set, each forward leaves here, per layer, the rotated query of its last new token
    /// (`[num_heads × head_dim]`): KV selection methods score cached keys with it.
    queries: Option<Vec<Vec<f32>>>,
}

impl<B: Backend> KvCache<B> {
    /// An empty cache with room for `capacity` positions (it grows when needed).
    pub fn new(config: &ModelConfig, capacity: usize, device: &B::Device) -> Self {
        let capacity = capacity.max(16);
        let zeros = || Tensor::zeros([config.num_kv_heads, capacity, config.head_dim], device);
        Self {
            layers: (0..config.num_layers).map(|_| LayerKv { k: zeros(), v: zeros() }).collect(),
            len: 0,
            capacity,
            context: config.max_position_embeddings,
            kv_heads: config.num_kv_heads,
            head_dim: config.head_dim,
            device: device.clone(),
            host: None,
            queries: None,
        }
    }

    /// An empty cache whose keys and values live in host memory (the CPU path), in `format`.
    pub fn new_host(config: &ModelConfig, capacity: usize, format: KvFormat, device: &B::Device) -> Self {
        let capacity = capacity.max(16);
        Self {
            layers: Vec::new(),
            len: 0,
            capacity,
            context: config.max_position_embeddings,
            kv_heads: config.num_kv_heads,
            head_dim: config.head_dim,
            device: device.clone(),
            host: Some(HostKv::new(config.num_layers, config.num_kv_heads, config.head_dim, capacity, format)),
            queries: None,
        }
    }

    /// The host keys/values and the query store, borrowed together (the host path writes both).
    pub(crate) fn host_split(&mut self) -> Option<(&mut HostKv, &mut Option<Vec<Vec<f32>>>)> {
        Some((self.host.as_mut()?, &mut self.queries))
    }

    /// Number of cached positions.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Drops every entry at index `len` and beyond (rollback).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Keeps only the entries at `indices` (strictly increasing, each `< len`), in that order.
    /// Used to commit the accepted path of a tree: `keep(prefix ++ accepted nodes)`.
    pub fn keep(&mut self, indices: &[usize]) -> Result<(), ModelError> {
        if let Some(w) = indices.windows(2).find(|w| w[0] >= w[1]) {
            return Err(ModelError::Input(format!(
                "keep: indices must be strictly increasing ({} then {})",
                w[0], w[1]
            )));
        }
        if let Some(&last) = indices.last() {
            if last >= self.len {
                return Err(ModelError::Input(format!("keep: index {last} is beyond the cache length {}", self.len)));
            }
        }
        let start = indices.iter().enumerate().find(|(i, &x)| *i != x).map(|(i, _)| i).unwrap_or(indices.len());
        if let Some(host) = &mut self.host {
            host.compact(start, &indices[start..]);
        } else if start < indices.len() {
            let tail: Vec<i32> = indices[start..].iter().map(|&i| i as i32).collect();
            let count = tail.len();
            let idx = Tensor::<B, 1, Int>::from_data(TensorData::new(tail, [count]), &self.device);
            let (h, d) = (self.kv_heads, self.head_dim);
            for layer in &mut self.layers {
                let k = layer.k.clone().select(1, idx.clone());
                let v = layer.v.clone().select(1, idx.clone());
                layer.k = layer.k.clone().slice_assign([0..h, start..start + count, 0..d], k);
                layer.v = layer.v.clone().slice_assign([0..h, start..start + count, 0..d], v);
            }
        }
        self.len = indices.len();
        Ok(())
    }

    /// Makes room for `extra` more positions, doubling the capacity when it runs out.
    pub(crate) fn reserve(&mut self, extra: usize) {
        self.ensure_capacity(self.len + extra);
    }

    /// Grows to at least `needed` slots, keeping every slot's contents — also those past the
    /// length that [`KvCache::write_rows`] filled before a [`KvCache::set_len`]. It doubles up
    /// to the model's context. Past the context only a pass's slots beyond the committed
    /// positions are asked for (a tree verified near the end of a long generation), so it grows
    /// to the context plus twice those slots instead of doubling a whole context's cache (which
    /// took ~170 MB more at the end of a 6656-token TokenSwift run on SmolLM2's 8K context).
    fn ensure_capacity(&mut self, needed: usize) {
        if needed <= self.capacity {
            return;
        }
        let new_capacity = match needed <= self.context {
            true => needed.max((self.capacity * 2).min(self.context)),
            false => needed.max(self.context + 2 * needed.saturating_sub(self.len)),
        };
        if let Some(host) = &mut self.host {
            host.grow(new_capacity, self.capacity);
            self.capacity = new_capacity;
            return;
        }
        let grow = new_capacity - self.capacity;
        for layer in &mut self.layers {
            let pad = || Tensor::zeros([self.kv_heads, grow, self.head_dim], &self.device);
            layer.k = Tensor::cat(vec![layer.k.clone(), pad()], 1);
            layer.v = Tensor::cat(vec![layer.v.clone(), pad()], 1);
        }
        self.capacity = new_capacity;
    }

    /// Writes `[kv_heads, n, head_dim]` keys and values at positions `len..len+n` of `layer`
    /// and returns the keys and values of positions `0..len+n`.
    pub(crate) fn write(&mut self, layer: usize, k: Tensor<B, 3>, v: Tensor<B, 3>) -> (Tensor<B, 3>, Tensor<B, 3>) {
        let n = k.dims()[1];
        let (h, d, start) = (self.kv_heads, self.head_dim, self.len);
        let entry = &mut self.layers[layer];
        // Move the tensors out so the in-place write does not copy a shared buffer.
        let old_k = std::mem::replace(&mut entry.k, Tensor::empty([0, 0, 0], &self.device));
        let old_v = std::mem::replace(&mut entry.v, Tensor::empty([0, 0, 0], &self.device));
        entry.k = old_k.slice_assign([0..h, start..start + n, 0..d], k);
        entry.v = old_v.slice_assign([0..h, start..start + n, 0..d], v);
        let end = start + n;
        (entry.k.clone().slice([0..h, 0..end, 0..d]), entry.v.clone().slice([0..h, 0..end, 0..d]))
    }

    /// Commits `n` positions written by every layer.
    pub(crate) fn advance(&mut self, n: usize) {
        self.len += n;
    }

    /// Number of layers.
    pub fn num_layers(&self) -> usize {
        self.host.as_ref().map_or(self.layers.len(), |h| h.num_layers())
    }

    /// Starts (or stops) keeping each layer's last query, see [`KvCache::last_queries`].
    pub fn capture_queries(&mut self, on: bool) {
        self.queries = on.then(|| vec![Vec::new(); self.num_layers()]);
    }

    /// Per layer, the rotated query (`[num_heads × head_dim]`) of the last token of the last
    /// forward, when capture is on.
    pub fn last_queries(&self) -> Option<&[Vec<f32>]> {
        self.queries.as_deref()
    }

    pub(crate) fn store_query(&mut self, layer: usize, query: impl FnOnce() -> Vec<f32>) {
        if let Some(q) = self.queries.as_mut() {
            q[layer] = query();
        }
    }

    /// Keys and values of positions `start..start + count` of `layer` on the host,
    /// `[kv_heads, count, head_dim]` each (keys rotated, as cached).
    pub fn read_rows(&self, layer: usize, start: usize, count: usize) -> (Vec<f32>, Vec<f32>) {
        assert!(start + count <= self.len, "read_rows {start}+{count} beyond the cache length {}", self.len);
        let (h, d) = (self.kv_heads, self.head_dim);
        if let Some(host) = &self.host {
            return host.read_rows(layer, start, count);
        }
        let entry = &self.layers[layer];
        let read = |t: &Tensor<B, 3>| {
            t.clone()
                .slice([0..h, start..start + count, 0..d])
                .into_data()
                .convert::<f32>()
                .to_vec::<f32>()
                .expect("f32 cache")
        };
        (read(&entry.k), read(&entry.v))
    }

    /// Writes `[kv_heads, count, head_dim]` keys and values at slots `start..start + count` of
    /// `layer` (growing the cache when needed); the length becomes at least `start + count`
    /// once [`KvCache::set_len`] says so. Slots past the length are invisible until then.
    pub fn write_rows(&mut self, layer: usize, start: usize, k: &[f32], v: &[f32]) {
        let (h, d) = (self.kv_heads, self.head_dim);
        let count = k.len() / (h * d);
        assert_eq!(k.len(), count * h * d, "write_rows: keys are not [kv_heads, count, head_dim]");
        assert_eq!(v.len(), k.len(), "write_rows: values and keys differ in size");
        self.ensure_capacity(start + count);
        if let Some(host) = &mut self.host {
            host.write_rows(layer, start, k, v);
            return;
        }
        let device = self.device.clone();
        let entry = &mut self.layers[layer];
        let kt = Tensor::<B, 3>::from_data(TensorData::new(k.to_vec(), [h, count, d]), &device);
        let vt = Tensor::<B, 3>::from_data(TensorData::new(v.to_vec(), [h, count, d]), &device);
        entry.k = entry.k.clone().slice_assign([0..h, start..start + count, 0..d], kt);
        entry.v = entry.v.clone().slice_assign([0..h, start..start + count, 0..d], vt);
    }

    /// Sets the number of cached positions (after [`KvCache::write_rows`]); at most the capacity.
    pub fn set_len(&mut self, len: usize) {
        assert!(len <= self.capacity, "set_len {len} beyond the capacity {}", self.capacity);
        self.len = len;
    }
}
