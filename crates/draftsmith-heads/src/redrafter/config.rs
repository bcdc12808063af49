//! ReDrafter hyper-parameters; `config.json` of an exported drafter mirrors them.

use burn::config::Config;
use burn::tensor::backend::Backend;
use serde::{Deserialize, Serialize};

use burn::module::Param;
use burn::nn::Linear;
use burn::tensor::{Tensor, TensorData};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::model::{ReDrafter, ResBlock};

/// How the drafter turns its `exit_dim` features into vocabulary logits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum HeadKind {
    /// The reference head: `Linear(exit_dim → vocab)` (`lm_head.{N}.weight`). On a small
    /// target this is a large fraction of the target itself (SmolLM2-135M: 57M parameters).
    Full,
    /// `Linear(exit_dim → hidden)` (`lm_head.{N}.weight`, shape `[hidden, exit_dim]`) followed
    /// by the target's frozen, tied embedding matrix: `exit_dim × hidden` trained parameters.
    #[default]
    Tied,
}

/// Shape of a ReDrafter drafter.
#[derive(Config, Debug, PartialEq)]
pub struct ReDrafterConfig {
    /// Target vocabulary size.
    pub vocab_size: usize,
    /// Target hidden size (of its embeddings and final hidden state).
    pub hidden_size: usize,
    /// Width of the ResBlocks; `2 × hidden_size` in the reference (`[h ; s]`).
    pub exit_dim: usize,
    /// Number of ResBlocks before the output layer.
    #[config(default = 2)]
    pub num_draft_layers: usize,
    /// Recurrent state over drafted tokens (`false`: the state is the sum of the drafted tokens' embeddings).
    #[config(default = true)]
    pub rnn: bool,
    /// Output layer kind.
    #[config(default = "HeadKind::Tied")]
    pub head: HeadKind,
}

impl ReDrafterConfig {
    /// The reference shape for a target with this vocabulary and hidden size.
    pub fn for_target(vocab_size: usize, hidden_size: usize, head: HeadKind) -> Self {
        Self::new(vocab_size, hidden_size, 2 * hidden_size).with_head(head)
    }

    /// Output width of the last layer: the vocabulary (full head) or the hidden size (tied).
    pub fn out_dim(&self) -> usize {
        match self.head {
            HeadKind::Full => self.vocab_size,
            HeadKind::Tied => self.hidden_size,
        }
    }

    /// Checks the shape is one this implementation can build.
    pub fn validate(&self) -> Result<(), String> {
        if self.exit_dim != 2 * self.hidden_size {
            return Err(format!(
                "exit_dim {} must be 2 × hidden_size {} (no input projection is supported)",
                self.exit_dim, self.hidden_size
            ));
        }
        if self.vocab_size == 0 || self.hidden_size == 0 {
            return Err("vocab_size and hidden_size must be positive".into());
        }
        Ok(())
    }

    /// Trainable parameters.
    pub fn num_params(&self) -> usize {
        let h = self.hidden_size;
        let rnn = if self.rnn { 2 * h * h + h } else { 0 };
        rnn + self.num_draft_layers * (self.exit_dim * self.exit_dim + self.exit_dim) + self.exit_dim * self.out_dim()
    }

    /// A freshly initialised drafter (PyTorch's `Linear` default: `U(-1/√in, 1/√in)`), a pure
    /// function of `seed` so that runs are reproducible.
    pub fn init<B: Backend>(&self, device: &B::Device, seed: u64) -> ReDrafter<B> {
        let mut rng = StdRng::seed_from_u64(seed);
        let h = self.hidden_size;
        let (rnn_w, rnn_u) = if self.rnn {
            (Some(linear(&mut rng, h, h, false, device)), Some(linear(&mut rng, h, h, true, device)))
        } else {
            (None, None)
        };
        let blocks = (0..self.num_draft_layers)
            .map(|_| ResBlock { linear: linear(&mut rng, self.exit_dim, self.exit_dim, true, device) })
            .collect();
        let out = linear(&mut rng, self.exit_dim, self.out_dim(), false, device);
        ReDrafter { rnn_w, rnn_u, blocks, out }
    }
}

fn linear<B: Backend>(rng: &mut StdRng, d_in: usize, d_out: usize, bias: bool, device: &B::Device) -> Linear<B> {
    let k = 1.0 / (d_in as f32).sqrt();
    let mut draw = |n: usize| (0..n).map(|_| rng.random_range(-k..k)).collect::<Vec<f32>>();
    let weight = Tensor::<B, 2>::from_data(TensorData::new(draw(d_in * d_out), [d_in, d_out]), device);
    let bias =
        bias.then(|| Param::from_tensor(Tensor::<B, 1>::from_data(TensorData::new(draw(d_out), [d_out]), device)));
    Linear { weight: Param::from_tensor(weight), bias }
}
