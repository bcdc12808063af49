//! Shared helpers for the engine tests: a tiny random model and logits comparison.
#![allow(dead_code)]

use burn::backend::Flex;
use burn::tensor::Tensor;
use draftsmith_model::{build_model, Architecture, LoadOptions, MatmulWeights, MemorySource, Model, ModelConfig, RopeScaling};

pub type B = Flex;

/// A tiny Llama/Qwen2-shaped config (GQA 4:2, head_dim 4).
pub fn tiny_config(architecture: Architecture) -> ModelConfig {
    ModelConfig {
        architecture,
        vocab_size: 64,
        hidden_size: 16,
        intermediate_size: 32,
        num_layers: 2,
        num_heads: 4,
        num_kv_heads: 2,
        head_dim: 4,
        rms_norm_eps: 1e-5,
        rope_theta: 10_000.0,
        rope_scaling: RopeScaling::None,
        max_position_embeddings: 256,
        tie_word_embeddings: architecture == Architecture::Llama,
    }
}

pub fn tiny_model(architecture: Architecture, seed: u64) -> Model<B> {
    let config = tiny_config(architecture);
    let source = MemorySource::random(&config, seed);
    build_model::<B>(&config, &source, LoadOptions::new(MatmulWeights::Dense), &Default::default()).expect("tiny model builds")
}

pub fn to_vec(t: Tensor<B, 2>) -> Vec<f32> {
    t.into_data().to_vec::<f32>().unwrap()
}

pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// Deterministic pseudo-random stream for tests.
pub struct Lcg(pub u64);
impl Lcg {
    pub fn next(&mut self, bound: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % bound
    }
}
