//! ReDrafter drafting on the target's host kernels: when the target runs the quantized CPU path,
//! the drafter's layers are quantized once (to [`DRAFTER_WEIGHTS`]) and every draft step
//! multiplies them with the same kernels and activation mode as the target, on host buffers.
//! Through burn a draft step costs a dozen tensor ops of dispatch and copies (about 2 ms per
//! call at beam width 1 on SmolLM2-135M, a quarter of an `ar` step); here it is the few million
//! multiply-adds it is.
//!
//! The drafter's weights are rounded, so its proposals can differ from the f32 module's at
//! near-ties; the target verifies every draft, so outputs never change.

use burn::tensor::backend::Backend;
use draftsmith_heads::redrafter::ReDrafter;
use draftsmith_model::layers::Linear;
use draftsmith_model::{host_f32, Activations, QFormat};

use crate::error::DecodeError;

/// The block format of a host drafter's layers and of its draft vocabulary's LM head rows.
///
/// A draft step reads them all, after the target's pass has evicted them from the caches: on
/// SmolLM2-135M's demo drafter (4 M parameters, 7785-token draft vocabulary, 9 MB in Q8_0) a
/// call took ~0.38 ms in Q8_0, a tenth of an `ar` step, most of it streaming those bytes, and
/// ~0.29 ms in Q4_1 (Zen 4, session 21), for a point less of top-1 acceptance.
pub(crate) const DRAFTER_WEIGHTS: QFormat = QFormat::Q4_1;

/// A [`ReDrafter`] ready for host drafting.
#[derive(Debug, Clone)]
pub(crate) struct HostReDrafter<B: Backend> {
    /// `W` (embeddings) and `U` (state, with bias); `None` without the RNN.
    rnn: Option<(Linear<B>, Linear<B>)>,
    blocks: Vec<Linear<B>>,
    out: Linear<B>,
}

/// A burn `Linear` (`[in, out]` weight) as a quantized host layer.
fn host_layer<B: Backend>(l: &burn::nn::Linear<B>) -> Result<Linear<B>, DecodeError> {
    let w = l.weight.val();
    let ([input, out], device) = (w.dims(), w.device());
    let rows = host_f32(w.transpose());
    let bias = l.bias.as_ref().map(|b| host_f32(b.val()));
    Linear::quantized(&rows, (out, input), DRAFTER_WEIGHTS, bias, &device)
        .map_err(|e| DecodeError::Drafter(format!("ReDrafter on host kernels: {e}")))
}

/// `x ← SiLU(x)`.
fn silu(x: &mut [f32]) {
    x.iter_mut().for_each(|v| *v /= 1.0 + (-*v).exp());
}

impl<B: Backend> HostReDrafter<B> {
    /// The drafter's layers, quantized; an error when a layer's input width is not a multiple
    /// of 32 (the caller then drafts through burn).
    pub(crate) fn new(d: &ReDrafter<B>) -> Result<Self, DecodeError> {
        let rnn = match (&d.rnn_w, &d.rnn_u) {
            (Some(w), Some(u)) => Some((host_layer(w)?, host_layer(u)?)),
            _ => None,
        };
        let blocks = d.blocks.iter().map(|b| host_layer(&b.linear)).collect::<Result<_, _>>()?;
        Ok(Self { rnn, blocks, out: host_layer(&d.out)? })
    }

    fn apply(l: &Linear<B>, mode: Activations, x: &[f32], n: usize) -> Vec<f32> {
        l.forward_host(mode, x, n).expect("host layers are quantized")
    }

    /// [`ReDrafter::next_state`] on host rows with activations `mode`: `state` and `emb` are
    /// `[n, hidden]`.
    pub(crate) fn next_state(&self, mode: Activations, state: &[f32], emb: &[f32], n: usize) -> Vec<f32> {
        match &self.rnn {
            Some((w, u)) => {
                let mut s = Self::apply(w, mode, emb, n);
                if state.iter().all(|&v| v == 0.0) {
                    // A search's first step starts from the zero state: `U · 0 + b` is `b`
                    // (the kernel's product of a zero row is exactly zero), without reading `U`.
                    if let Some(b) = &u.bias_host {
                        s.chunks_mut(b.len()).for_each(|row| row.iter_mut().zip(b).for_each(|(a, b)| *a += b));
                    }
                } else {
                    s.iter_mut().zip(Self::apply(u, mode, state, n)).for_each(|(a, b)| *a += b);
                }
                silu(&mut s);
                s
            }
            None => emb.iter().zip(state).map(|(e, s)| e + s).collect(),
        }
    }

    /// [`ReDrafter::head`] for one context row `h` (`[hidden]`) and the states `s` (`[n,
    /// hidden]`), activations `mode`: `[n, out]`.
    pub(crate) fn head(&self, mode: Activations, h: &[f32], s: &[f32], n: usize) -> Vec<f32> {
        let hidden = h.len();
        let mut x: Vec<f32> = s.chunks(hidden).flat_map(|row| h.iter().chain(row).copied()).collect();
        for block in &self.blocks {
            let mut y = Self::apply(block, mode, &x, n);
            silu(&mut y);
            x.iter_mut().zip(y).for_each(|(a, b)| *a += b);
        }
        Self::apply(&self.out, mode, &x, n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;
    use burn::tensor::{Tensor, TensorData};
    use draftsmith_heads::redrafter::{HeadKind, ReDrafterConfig};

    type B = Flex;

    /// The host drafter follows the burn module to within its 8-bit weight rounding.
    #[test]
    fn host_steps_follow_the_burn_module() {
        let device = Default::default();
        let (hidden, n) = (64, 3);
        let d = ReDrafterConfig::for_target(100, hidden, HeadKind::Tied).init::<B>(&device, 7);
        let (host, mode) = (HostReDrafter::new(&d).unwrap(), Activations::F32);
        let f = |i: usize| ((i * 37 % 101) as f32 - 50.0) / 60.0;
        let state: Vec<f32> = (0..n * hidden).map(f).collect();
        let emb: Vec<f32> = (0..n * hidden).map(|i| f(i + 7)).collect();
        let h: Vec<f32> = (0..hidden).map(|i| f(i + 3)).collect();
        let t =
            |v: &[f32], rows: usize| Tensor::<B, 2>::from_data(TensorData::new(v.to_vec(), [rows, hidden]), &device);
        let s_burn = d.next_state(t(&state, n), t(&emb, n));
        let s_host = host.next_state(mode, &state, &emb, n);
        let out_burn = host_f32(d.head(t(&h, 1).expand([n, hidden]), s_burn.clone()));
        let out_host = host.head(mode, &h, &s_host, n);
        // The zero state (a search's first step) skips `U`, bit for bit the same rows.
        let zero = vec![0.0; n * hidden];
        let (w, u) = host.rnn.as_ref().expect("the config has the RNN");
        let mut full = HostReDrafter::<B>::apply(w, mode, &emb, n);
        full.iter_mut().zip(HostReDrafter::<B>::apply(u, mode, &zero, n)).for_each(|(a, b)| *a += b);
        silu(&mut full);
        assert_eq!(host.next_state(mode, &zero, &emb, n), full);
        for (name, a, b) in [("state", host_f32(s_burn), s_host), ("head", out_burn, out_host)] {
            assert_eq!(a.len(), b.len(), "{name}");
            let scale = a.iter().fold(0.0f32, |m, v| m.max(v.abs())).max(1e-3);
            let worst = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
            // Q8_0 rounds a weight to 1/254 of twice its block's amax, Q4_1 to 1/15 of its range.
            let rel = match DRAFTER_WEIGHTS {
                QFormat::Q8_0 => 0.02,
                QFormat::Q4_1 => 0.15,
                QFormat::Q4_0 | QFormat::Q5_0 | QFormat::Q4K | QFormat::Q5K | QFormat::Q6K => {
                    unreachable!("a drafter's layers are quantized from f32 (as Q8_0 or Q4_1)")
                }
            };
            assert!(worst <= rel * scale, "{name}: worst difference {worst} against magnitude {scale}");
        }
    }
}
