//! Key/value cache kept outside the model: append (by forward), truncate, and keep(indices) to
//! compact the accepted path of a verified draft tree.

use burn::tensor::{backend::Backend, Int, Tensor, TensorData};

use crate::config::ModelConfig;
use crate::error::ModelError;
use crate::host::HostKv;

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
    kv_heads: usize,
    head_dim: usize,
    device: B::Device,
    /// Host-memory keys/values used by the CPU path instead of `layers`.
    host: Option<HostKv>,
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
            kv_heads: config.num_kv_heads,
            head_dim: config.head_dim,
            device: device.clone(),
            host: None,
        }
    }

    /// An empty cache whose keys and values live in host memory (the CPU path).
    pub fn new_host(config: &ModelConfig, capacity: usize, device: &B::Device) -> Self {
        let capacity = capacity.max(16);
        Self {
            layers: Vec::new(),
            len: 0,
            capacity,
            kv_heads: config.num_kv_heads,
            head_dim: config.head_dim,
            device: device.clone(),
            host: Some(HostKv::new(config.num_layers, config.num_kv_heads, config.head_dim, capacity)),
        }
    }

    pub(crate) fn host_mut(&mut self) -> Option<&mut HostKv> {
        self.host.as_mut()
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
            return Err(ModelError::Input(format!("keep: indices must be strictly increasing ({} then {})", w[0], w[1])));
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
        let needed = self.len + extra;
        if needed <= self.capacity {
            return;
        }
        let new_capacity = needed.max(self.capacity * 2);
        if let Some(host) = &mut self.host {
            host.grow(new_capacity, self.len);
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
}
