//! Building blocks of the decoder: linear layers (dense burn tensors or quantized CPU matrices),
//! RMSNorm and rotary embeddings with explicit position ids.

use std::sync::Arc;

use burn::tensor::{backend::Backend, Tensor, TensorData};
use draftsmith_kernels::QMatrix;

/// How a linear layer stores its weight.
#[derive(Debug, Clone)]
pub enum LinearWeight<B: Backend> {
    /// `[in, out]` burn tensor (transposed once at load so forward is a plain matmul).
    Dense(Tensor<B, 2>),
    /// GGUF-style quantized `[out, in]` blocks multiplied by the CPU kernels.
    Quant(Arc<QMatrix>),
}

/// `y = x·Wᵀ + b` over rows of `x`.
#[derive(Debug, Clone)]
pub struct Linear<B: Backend> {
    pub weight: LinearWeight<B>,
    pub bias: Option<Tensor<B, 1>>,
    pub out_features: usize,
}

impl<B: Backend> Linear<B> {
    /// `x`: `[n, in]` → `[n, out]`.
    pub fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let y = match &self.weight {
            LinearWeight::Dense(w) => x.matmul(w.clone()),
            LinearWeight::Quant(q) => quant_matmul(q, x),
        };
        match &self.bias {
            Some(b) => y + b.clone().unsqueeze_dim(0),
            None => y,
        }
    }
}

/// Runs the quantized CPU kernel on a burn tensor (host round trip of the activations only).
fn quant_matmul<B: Backend>(q: &QMatrix, x: Tensor<B, 2>) -> Tensor<B, 2> {
    let device = x.device();
    let [n, _] = x.dims();
    let input = x.into_data().convert::<f32>();
    let input = input.as_slice::<f32>().expect("f32 activations");
    let mut out = vec![0.0f32; n * q.rows()];
    q.matmul(input, n, &mut out);
    Tensor::from_data(TensorData::new(out, [n, q.rows()]), &device)
}

/// Root-mean-square layer norm: `x / sqrt(mean(x²) + eps) · w`.
#[derive(Debug, Clone)]
pub struct RmsNorm<B: Backend> {
    pub weight: Tensor<B, 1>,
    pub eps: f32,
}

impl<B: Backend> RmsNorm<B> {
    /// `x`: `[n, d]`.
    pub fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let inv = x.clone().square().mean_dim(1).add_scalar(self.eps).sqrt().recip();
        x * inv * self.weight.clone().unsqueeze_dim(0)
    }
}

/// Rotary embedding with explicit positions (rotate-half layout, as Hugging Face models use).
#[derive(Debug, Clone)]
pub struct Rope {
    inv_freq: Vec<f32>,
    mscale: f32,
    head_dim: usize,
}

impl Rope {
    pub fn new(inv_freq: Vec<f32>, mscale: f32) -> Self {
        let head_dim = inv_freq.len() * 2;
        Self { inv_freq, mscale, head_dim }
    }

    /// `(cos, sin)` as `[n, 1, head_dim]` tensors for the given positions.
    pub fn tables<B: Backend>(&self, positions: &[usize], device: &B::Device) -> (Tensor<B, 3>, Tensor<B, 3>) {
        let n = positions.len();
        let half = self.head_dim / 2;
        let mut cos = vec![0.0f32; n * self.head_dim];
        let mut sin = vec![0.0f32; n * self.head_dim];
        for (row, &p) in positions.iter().enumerate() {
            for (i, &f) in self.inv_freq.iter().enumerate() {
                let angle = p as f64 * f as f64;
                let (s, c) = angle.sin_cos();
                let (c, s) = ((c * self.mscale as f64) as f32, (s * self.mscale as f64) as f32);
                let base = row * self.head_dim;
                cos[base + i] = c;
                cos[base + i + half] = c;
                sin[base + i] = s;
                sin[base + i + half] = s;
            }
        }
        let shape = [n, 1, self.head_dim];
        (
            Tensor::from_data(TensorData::new(cos, shape), device),
            Tensor::from_data(TensorData::new(sin, shape), device),
        )
    }

    /// Rotates `x`: `[n, heads, head_dim]`.
    pub fn apply<B: Backend>(x: Tensor<B, 3>, cos: &Tensor<B, 3>, sin: &Tensor<B, 3>) -> Tensor<B, 3> {
        let [n, heads, d] = x.dims();
        let half = d / 2;
        let x1 = x.clone().slice([0..n, 0..heads, 0..half]);
        let x2 = x.clone().slice([0..n, 0..heads, half..d]);
        let rotated = Tensor::cat(vec![x2.neg(), x1], 2);
        x * cos.clone() + rotated * sin.clone()
    }
}
