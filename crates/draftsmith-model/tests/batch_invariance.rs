//! On the CPU path (quantized kernels + host attention) a token's logits are bit-identical
//! whether it is decoded alone or verified inside a batch or a draft tree with other branches,
//! so greedy speculative decoding is exactly lossless, not just within a tolerance.

mod common;

use common::*;
use draftsmith_core::DraftTree;
use draftsmith_model::{
    build_model, Activations, Architecture, AttentionMask, KvKeys, LoadOptions, LogitsSelect, MatmulWeights,
    MemorySource, Model, ModelConfig,
};

fn cpu_model(arch: Architecture, activations: Activations, kv_keys: KvKeys) -> Model<B> {
    // 32-wide rows so every projection uses the quantized kernels (and the host attention path);
    // Q8_0 keys need heads of a whole block of 32.
    let head_dim = if kv_keys == KvKeys::Q8_0 { 32 } else { 8 };
    let config = ModelConfig { vocab_size: 64, hidden_size: 32, intermediate_size: 64, head_dim, ..tiny_config(arch) };
    let options = LoadOptions::new(MatmulWeights::Quantized).with_activations(activations).with_kv_keys(kv_keys);
    build_model::<B>(&config, &MemorySource::random(&config, 21), options, &Default::default()).unwrap()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn tree_rows_are_bit_identical_to_sequential_decoding() {
    for (arch, activations, kv_keys) in [Architecture::Llama, Architecture::Qwen2].into_iter().flat_map(|a| {
        [
            (a, Activations::Int8, KvKeys::Float),
            (a, Activations::F32, KvKeys::Float),
            (a, Activations::Int8, KvKeys::Q8_0),
        ]
    }) {
        let model = cpu_model(arch, activations, kv_keys);
        let vocab = model.config().vocab_size;
        let mut rng = Lcg(3);
        for _ in 0..5 {
            let prefix: Vec<u32> = (0..6 + rng.next(10)).map(|_| rng.next(vocab) as u32).collect();
            let mut tree = DraftTree::new();
            for i in 0..12 {
                let parent = if i == 0 || rng.next(3) == 0 { None } else { Some(rng.next(i)) };
                tree.push(rng.next(vocab) as u32, parent);
            }
            let mut cache = model.new_cache(8);
            let pos: Vec<usize> = (0..prefix.len()).collect();
            model.forward_hidden(&prefix, &pos, &AttentionMask::Causal, &mut cache).unwrap();
            let base = cache.clone();
            let mask = AttentionMask::Visible(tree.visibility(prefix.len()));
            let out = model
                .forward(tree.tokens(), &tree.positions(prefix.len() - 1), &mask, LogitsSelect::All, &mut cache)
                .unwrap();
            let tree_logits = to_vec(out.logits);
            for node in 0..tree.len() {
                let mut seq_cache = base.clone();
                let mut logits = Vec::new();
                for (depth, &i) in tree.path_to(node).iter().enumerate() {
                    let out = model
                        .forward(
                            &[tree.tokens()[i]],
                            &[prefix.len() + depth],
                            &AttentionMask::Causal,
                            LogitsSelect::All,
                            &mut seq_cache,
                        )
                        .unwrap();
                    logits = to_vec(out.logits);
                }
                assert_eq!(
                    bits(&logits),
                    bits(&tree_logits[node * vocab..(node + 1) * vocab]),
                    "{arch:?} {activations:?} {kv_keys:?} node {node}"
                );
            }
        }
    }
}
