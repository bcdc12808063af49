//! Building blocks of the decoder: linear layers (dense burn tensors or quantized CPU matrices),
//! RMSNorm and rotary embeddings with explicit position ids.

use std::sync::Arc;

use burn::tensor::{backend::Backend, Tensor, TensorData};
use draftsmith_kernels::{Activations, QFormat, QMatrix};

use crate::error::ModelError;

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
    /// Host copy of the bias for [`Linear::forward_host`].
    pub bias_host: Option<Vec<f32>>,
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

impl<B: Backend> Linear<B> {
    /// A quantized layer from a row-major `[out, in]` f32 weight (quantized to `format`, as
    /// llama.cpp rounds) and an optional bias on `device`: for small modules run beside a
    /// quantized target on the same kernels (a drafter's layers). `in` must be a multiple of 32.
    pub fn quantized(
        weight: &[f32],
        (out, input): (usize, usize),
        format: QFormat,
        bias: Option<Vec<f32>>,
        device: &B::Device,
    ) -> Result<Self, ModelError> {
        let q = QMatrix::quantize(format, weight, out, input)
            .map_err(|e| ModelError::Input(format!("quantized layer: {e}")))?;
        if let Some(b) = &bias {
            if b.len() != out {
                return Err(ModelError::Input(format!("quantized layer: bias has {} values, not {out}", b.len())));
            }
        }
        let bias_tensor = bias.as_ref().map(|b| Tensor::<B, 1>::from_data(TensorData::new(b.clone(), [out]), device));
        Ok(Self { weight: LinearWeight::Quant(Arc::new(q)), bias: bias_tensor, bias_host: bias, out_features: out })
    }

    /// Host-memory forward of a quantized layer with activations `mode`: `x` is `[n, in]`,
    /// returns `[n, out]`. `None` for dense layers.
    pub fn forward_host(&self, mode: Activations, x: &[f32], n: usize) -> Option<Vec<f32>> {
        let LinearWeight::Quant(q) = &self.weight else { return None };
        let mut out = vec![0.0f32; n * q.rows()];
        q.matmul_mode(mode, x, n, &mut out);
        if let Some(b) = &self.bias_host {
            for row in out.chunks_mut(q.rows()) {
                row.iter_mut().zip(b).for_each(|(y, b)| *y += b);
            }
        }
        Some(out)
    }

    pub fn is_quantized(&self) -> bool {
        matches!(self.weight, LinearWeight::Quant(_))
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

    /// Host `(cos, sin)` tables `[n, head_dim]` for the given positions.
    pub fn host_tables(&self, positions: &[usize]) -> (Vec<f32>, Vec<f32>) {
        let (n, d, half) = (positions.len(), self.head_dim, self.head_dim / 2);
        let mut cos = vec![0.0f32; n * d];
        let mut sin = vec![0.0f32; n * d];
        for (row, &p) in positions.iter().enumerate() {
            for (i, &f) in self.inv_freq.iter().enumerate() {
                let (s, c) = (p as f64 * f as f64).sin_cos();
                let (c, s) = ((c * self.mscale as f64) as f32, (s * self.mscale as f64) as f32);
                let base = row * d;
                (cos[base + i], cos[base + i + half]) = (c, c);
                (sin[base + i], sin[base + i + half]) = (s, s);
            }
        }
        (cos, sin)
    }

    /// Tables for the given positions, laid out at the full `[n, heads, head_dim]` shapes of
    /// the queries and keys so every op of `RopeTables::apply` is contiguous (broadcasting
    /// walks strided indices on the CPU backend and dominated multi-token forwards).
    pub fn tables<B: Backend>(
        &self,
        positions: &[usize],
        heads: usize,
        kv_heads: usize,
        device: &B::Device,
    ) -> RopeTables<B> {
        let (n, d, half) = (positions.len(), self.head_dim, self.head_dim / 2);
        let (cos, sin) = self.host_tables(positions);
        let spread = |table: &[f32], h: usize| -> Tensor<B, 3> {
            let mut out = Vec::with_capacity(n * h * d);
            for row in table.chunks(d) {
                for _ in 0..h {
                    out.extend_from_slice(row);
                }
            }
            Tensor::from_data(TensorData::new(out, [n, h, d]), device)
        };
        // rotate_half(x) = x · R with R[j+d/2][j] = −1 and R[j−d/2][j] = 1: exact, contiguous.
        let mut rot = vec![0.0f32; d * d];
        for j in 0..half {
            rot[(j + half) * d + j] = -1.0;
            rot[j * d + j + half] = 1.0;
        }
        RopeTables {
            q: (spread(&cos, heads), spread(&sin, heads)),
            k: (spread(&cos, kv_heads), spread(&sin, kv_heads)),
            rotate_half: Tensor::from_data(TensorData::new(rot, [d, d]), device),
        }
    }
}

/// Rotary tables for one forward pass.
#[derive(Debug, Clone)]
pub struct RopeTables<B: Backend> {
    q: (Tensor<B, 3>, Tensor<B, 3>),
    k: (Tensor<B, 3>, Tensor<B, 3>),
    rotate_half: Tensor<B, 2>,
}

impl<B: Backend> RopeTables<B> {
    /// Rotates queries `[n, heads, head_dim]`.
    pub fn apply_q(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        self.apply(x, &self.q)
    }

    /// Rotates keys `[n, kv_heads, head_dim]`.
    pub fn apply_k(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        self.apply(x, &self.k)
    }

    fn apply(&self, x: Tensor<B, 3>, (cos, sin): &(Tensor<B, 3>, Tensor<B, 3>)) -> Tensor<B, 3> {
        let [n, h, d] = x.dims();
        let rotated = x.clone().reshape([n * h, d]).matmul(self.rotate_half.clone()).reshape([n, h, d]);
        x * cos.clone() + rotated * sin.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;

    /// A quantized layer built from f32 rows gives the same result, bias included, through burn
    /// and on host buffers (the same kernel with f32 activations).
    #[test]
    fn quantized_layer_forward_matches_on_both_paths() {
        let (out, input, n) = (3, 64, 2);
        let w: Vec<f32> = (0..out * input).map(|i| ((i * 37 % 29) as f32 - 14.0) / 9.0).collect();
        let bias = vec![0.5, -1.0, 2.0];
        let device = Default::default();
        let x: Vec<f32> = (0..n * input).map(|i| ((i * 13 % 17) as f32 - 8.0) / 5.0).collect();
        for format in [QFormat::Q8_0, QFormat::Q4_1] {
            let l = Linear::<Flex>::quantized(&w, (out, input), format, Some(bias.clone()), &device).unwrap();
            let host = l.forward_host(Activations::F32, &x, n).unwrap();
            let burn = l.forward(Tensor::from_data(TensorData::new(x.clone(), [n, input]), &device));
            assert_eq!(crate::host_f32(burn), host, "{format:?}");
        }
        let err = Linear::<Flex>::quantized(&w, (out, input), QFormat::Q8_0, Some(vec![0.0; 2]), &device).unwrap_err();
        assert!(err.to_string().contains("bias has 2 values"), "{err}");
    }
}
