//! Shared helpers of the integration tests: a tiny random model, greedy AR, a small LCG.

#![allow(dead_code)]

use burn::backend::Flex;
use draftsmith_decode::{generate, Sampler, SamplingConfig};
use draftsmith_model::{
    build_model, Activations, Architecture, LoadOptions, MatmulWeights, MemorySource, Model, ModelConfig,
};

pub type B = Flex;

/// A tiny random model (vocab 48) of `arch` with weights drawn from `seed`, in the engine's
/// default activation mode.
pub fn tiny(arch: Architecture, seed: u64) -> Model<B> {
    tiny_with(arch, seed, draftsmith_model::DEFAULT_ACTIVATIONS)
}

/// [`tiny`] with the quantized path's activation mode `activations`.
pub fn tiny_with(arch: Architecture, seed: u64, activations: Activations) -> Model<B> {
    let config = ModelConfig::tiny(arch);
    // 32-wide rows: the quantized kernels are used, as on real models.
    let options = LoadOptions::new(MatmulWeights::Quantized).with_activations(activations);
    build_model::<B>(&config, &MemorySource::random(&config, seed), options, &Default::default()).unwrap()
}

/// [`tiny`] with heads of 32 (one Q8_0 block) and the key cache `kv_keys`, int8 activations.
pub fn tiny_keys(arch: Architecture, seed: u64, kv_keys: draftsmith_model::KvKeys) -> Model<B> {
    let config = ModelConfig { head_dim: 32, ..ModelConfig::tiny(arch) };
    let options = LoadOptions::new(MatmulWeights::Quantized).with_activations(Activations::Int8).with_kv_keys(kv_keys);
    build_model::<B>(&config, &MemorySource::random(&config, seed), options, &Default::default()).unwrap()
}

/// [`tiny`] with dense f32 weights on burn's path (no host kernels).
pub fn tiny_dense(arch: Architecture, seed: u64) -> Model<B> {
    let config = ModelConfig::tiny(arch);
    let options = LoadOptions::new(MatmulWeights::Dense);
    build_model::<B>(&config, &MemorySource::random(&config, seed), options, &Default::default()).unwrap()
}

/// A small deterministic generator.
pub struct Lcg(pub u64);
impl Lcg {
    pub fn next(&mut self, bound: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % bound
    }
}

/// Greedy autoregressive ids.
pub fn ar(model: &Model<B>, prompt: &[u32], n: usize) -> Vec<u32> {
    generate(model, prompt, n, &[], &mut Sampler::new(SamplingConfig::default()), &mut |_| true).unwrap().tokens
}

/// A prompt with repeats (so lookups and caches find matches).
pub fn repeating_prompt(rng: &mut Lcg, vocab: usize) -> Vec<u32> {
    let base: Vec<u32> = (0..4 + rng.next(8)).map(|_| rng.next(vocab) as u32).collect();
    base.iter().chain(&base).chain(&base[..base.len() / 2]).copied().collect()
}
