//! TokenSwift head hyper-parameters; `config.json` of exported heads mirrors them.

use burn::config::Config;
use burn::module::Param;
use burn::nn::{Linear, RmsNormConfig};
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::model::{TokenSwiftHead, TokenSwiftHeads};

/// Shape of the TokenSwift heads of one target.
#[derive(Config, Debug, PartialEq)]
pub struct TokenSwiftConfig {
    /// Target vocabulary size (of its LM head).
    pub vocab_size: usize,
    /// Target hidden size.
    pub hidden_size: usize,
    /// γ − 1 in the paper's notation: heads after the target's own (reference: 3).
    #[config(default = 3)]
    pub num_heads: usize,
    /// RMSNorm epsilon: the target's own (`rms_norm_eps`).
    #[config(default = 1e-6)]
    pub rms_norm_eps: f64,
}

impl TokenSwiftConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.vocab_size == 0 || self.hidden_size == 0 || self.num_heads == 0 {
            return Err("vocab_size, hidden_size and num_heads must be positive".into());
        }
        if self.rms_norm_eps.is_nan() || self.rms_norm_eps <= 0.0 {
            return Err(format!("rms_norm_eps must be positive, got {}", self.rms_norm_eps));
        }
        Ok(())
    }

    /// Trainable parameters: per head an `H × H` linear and two `H` norm weights.
    pub fn num_params(&self) -> usize {
        let h = self.hidden_size;
        self.num_heads * (h * h + 2 * h)
    }

    /// Fresh heads as the reference initialises them: linear weights from N(0, 0.02²) (the
    /// Hugging Face `initializer_range`), norm weights 1. A pure function of `seed`.
    pub fn init<B: Backend>(&self, device: &B::Device, seed: u64) -> TokenSwiftHeads<B> {
        self.init_with_post_norm(device, seed, None)
    }

    /// [`init`](Self::init), with every head's output norm starting from `post_norm` (the
    /// target's final-norm weight) instead of 1, so that, with its linear near zero, each head
    /// starts out as the target's own next-token distribution (Medusa's starting point) rather
    /// than the LM head read through a unit-weight norm. On SmolLM2 the latter starts every
    /// head at a cross-entropy of ~16 nats, above uniform, because the pre-norm hidden state
    /// has outlier channels that the final norm scales down.
    pub fn init_with_post_norm<B: Backend>(
        &self,
        device: &B::Device,
        seed: u64,
        post_norm: Option<Tensor<B, 1>>,
    ) -> TokenSwiftHeads<B> {
        let mut rng = StdRng::seed_from_u64(seed);
        let h = self.hidden_size;
        let heads = (0..self.num_heads)
            .map(|_| {
                let w: Vec<f32> = (0..h * h).map(|_| 0.02 * standard_normal(&mut rng)).collect();
                let weight = Tensor::<B, 2>::from_data(TensorData::new(w, [h, h]), device);
                TokenSwiftHead {
                    input_norm: RmsNormConfig::new(h).with_epsilon(self.rms_norm_eps).init(device),
                    linear: Linear { weight: Param::from_tensor(weight), bias: None },
                    post_norm: {
                        let mut norm = RmsNormConfig::new(h).with_epsilon(self.rms_norm_eps).init(device);
                        if let Some(w) = &post_norm {
                            norm.gamma = Param::from_tensor(w.clone());
                        }
                        norm
                    },
                }
            })
            .collect();
        TokenSwiftHeads { heads }
    }
}

/// One N(0, 1) draw (Box–Muller).
fn standard_normal(rng: &mut StdRng) -> f32 {
    let u1: f64 = rng.random_range(f64::MIN_POSITIVE..1.0);
    let u2: f64 = rng.random();
    ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
}
