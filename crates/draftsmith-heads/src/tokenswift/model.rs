//! The heads: `h_i = h_{i-1} + W_i·RMSNorm_in,i(h_{i-1})` from `h_0` (the target's last layer
//! output before its final norm), `logits_i = lm_head(RMSNorm_post,i(h_i))` with the target's
//! frozen LM head. `W_i` is bias-free, with no activation.

use burn::module::Module;
use burn::nn::{Linear, RmsNorm};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

/// One head (reference module `medusa_layers.{i}`).
#[derive(Module, Debug)]
pub struct TokenSwiftHead<B: Backend> {
    /// `input_layernorm`.
    pub input_norm: RmsNorm<B>,
    /// `linear`: `[in, out]` burn layout, `H × H`, no bias.
    pub linear: Linear<B>,
    /// `post_layernorm`.
    pub post_norm: RmsNorm<B>,
}

/// The chained heads.
#[derive(Module, Debug)]
pub struct TokenSwiftHeads<B: Backend> {
    pub heads: Vec<TokenSwiftHead<B>>,
}

impl<B: Backend> TokenSwiftHeads<B> {
    /// For pre-norm hidden states `h0` (`[rows, hidden]`), each head's normalised state
    /// (`RMSNorm_post,i(h_i)`, `[rows, hidden]`), ready for the target's LM head.
    pub fn states(&self, h0: Tensor<B, 2>) -> Vec<Tensor<B, 2>> {
        let mut h = h0;
        let mut out = Vec::with_capacity(self.heads.len());
        for head in &self.heads {
            h = h.clone() + head.linear.forward(head.input_norm.forward(h));
            out.push(head.post_norm.forward(h.clone()));
        }
        out
    }

    /// Each head's logits through `lm_head` (`[hidden, vocab]`, the target's LM head as a matrix).
    pub fn logits(&self, h0: Tensor<B, 2>, lm_head: &Tensor<B, 2>) -> Vec<Tensor<B, 2>> {
        self.states(h0).into_iter().map(|s| s.matmul(lm_head.clone())).collect()
    }
}
