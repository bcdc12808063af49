//! The ReDrafter module. One draft step, for a batch of rows:
//! `s_i = SiLU(W·E(x_i) + U·s_{i-1} + b_U)` (`s_0 = 0`), `z = ResBlocks([h ; s_i])`, then
//! logits = `Linear(z)` (full head) or `E · Linear(z)` (tied head, `E` the frozen embeddings).

use burn::module::Module;
use burn::nn::Linear;
use burn::tensor::{activation, backend::Backend, Tensor};

/// `x + SiLU(Linear(x))`.
#[derive(Module, Debug)]
pub struct ResBlock<B: Backend> {
    pub linear: Linear<B>,
}

impl<B: Backend> ResBlock<B> {
    pub fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        x.clone() + activation::silu(self.linear.forward(x))
    }
}

/// The trainable part of a ReDrafter drafter (the target's embeddings are passed in).
#[derive(Module, Debug)]
pub struct ReDrafter<B: Backend> {
    /// `W`, on the embedding of the last token (`rnn_w`, no bias).
    pub rnn_w: Option<Linear<B>>,
    /// `U`, on the previous state (`rnn_u`, with bias).
    pub rnn_u: Option<Linear<B>>,
    /// `lm_head.{0..N-1}`.
    pub blocks: Vec<ResBlock<B>>,
    /// `lm_head.{N}`: to the vocabulary (full) or to the hidden size (tied).
    pub out: Linear<B>,
}

/// The frozen map from the drafter's output to vocabulary logits.
#[derive(Debug, Clone)]
pub enum VocabProjection<B: Backend> {
    /// Full head: the output already is logits.
    None,
    /// Tied head: `[hidden, vocab]`, the transposed target embeddings (a contiguous copy).
    Embeddings(Tensor<B, 2>),
}

impl<B: Backend> VocabProjection<B> {
    /// The tied projection from the target's `[vocab, hidden]` embeddings.
    pub fn tied(embeddings: &Tensor<B, 2>) -> Self {
        // A contiguous copy: multiplying by a transposed view is much slower on CPU backends.
        let t = embeddings.clone().transpose();
        let data = t.to_data();
        Self::Embeddings(Tensor::from_data(data, &embeddings.device()))
    }

    pub fn apply(&self, out: Tensor<B, 2>) -> Tensor<B, 2> {
        match self {
            Self::None => out,
            Self::Embeddings(e) => out.matmul(e.clone()),
        }
    }
}

impl<B: Backend> ReDrafter<B> {
    /// The state before any drafted token: zeros `[rows, hidden]`.
    pub fn initial_state(&self, rows: usize, hidden: usize, device: &B::Device) -> Tensor<B, 2> {
        Tensor::zeros([rows, hidden], device)
    }

    /// Advances the recurrent state with the embeddings `[rows, hidden]` of the last tokens.
    pub fn next_state(&self, state: Tensor<B, 2>, token_embeddings: Tensor<B, 2>) -> Tensor<B, 2> {
        match (&self.rnn_w, &self.rnn_u) {
            (Some(w), Some(u)) => activation::silu(w.forward(token_embeddings) + u.forward(state)),
            // Without the RNN the reference sums the embeddings of the drafted tokens.
            _ => token_embeddings + state,
        }
    }

    /// The output layer's result for context hidden states `h` and states `s` (`[rows, hidden]`
    /// each): logits for a full head, a hidden-size vector for a tied head.
    pub fn head(&self, h: Tensor<B, 2>, s: Tensor<B, 2>) -> Tensor<B, 2> {
        let mut x = Tensor::cat(vec![h, s], 1);
        for block in &self.blocks {
            x = block.forward(x);
        }
        self.out.forward(x)
    }

    /// Logits `[rows, vocab]` for one step.
    pub fn logits(&self, h: Tensor<B, 2>, s: Tensor<B, 2>, vocab: &VocabProjection<B>) -> Tensor<B, 2> {
        vocab.apply(self.head(h, s))
    }
}
