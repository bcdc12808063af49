//! Batched teacher continuations equal a per-position greedy decode, on a tiny random model.

use burn::backend::Flex;
use draftsmith_data::NO_TOKEN;
use draftsmith_decode::{generate, Sampler, SamplingConfig};
use draftsmith_distill::teacher::{teacher_columns, MAX_ROWS_PER_PASS};
use draftsmith_model::{build_model, Architecture, LoadOptions, MatmulWeights, MemorySource, Model, ModelConfig};

type B = Flex;

/// A tiny random model (vocab 48; 32-wide rows so the quantized kernels are used, as on real models).
fn tiny(arch: Architecture, seed: u64) -> Model<B> {
    let config = ModelConfig::tiny(arch);
    build_model::<B>(
        &config,
        &MemorySource::random(&config, seed),
        LoadOptions::new(MatmulWeights::Quantized),
        &Default::default(),
    )
    .unwrap()
}

fn greedy(model: &Model<B>, prefix: &[u32], n: usize) -> Vec<u32> {
    generate(model, prefix, n, &[], &mut Sampler::new(SamplingConfig::default()), &mut |_| true).unwrap().tokens
}

fn tokens(len: usize, seed: u64) -> Vec<u32> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 33) % 48) as u32
        })
        .collect()
}

/// Checks every position against a naive decode; returns how many were trained.
fn check(model: &Model<B>, tokens: &[u32], loss_mask: &[bool], t_len: usize) -> usize {
    let mut cache = model.new_cache(8);
    let cols = teacher_columns(model, &mut cache, tokens, loss_mask, t_len, 4).unwrap();
    assert_eq!(cache.len(), 0, "the cache is restored");
    let teacher = cols.teacher.unwrap();
    let ids = cols.topk_ids.unwrap();
    let logprobs = cols.topk_logprobs.unwrap();
    assert_eq!((teacher.len(), ids.len(), logprobs.len()), (tokens.len() * t_len, tokens.len() * 4, tokens.len() * 4));
    let mut trained = 0;
    for t in 0..tokens.len() {
        let row = &teacher[t * t_len..(t + 1) * t_len];
        let lp = &logprobs[t * 4..(t + 1) * 4];
        assert!(lp.windows(2).all(|w| w[0] >= w[1]) && lp[0] <= 0.0, "top-k sorted log-probs at {t}: {lp:?}");
        if t + 1 < tokens.len() && loss_mask[t + 1] {
            trained += 1;
            assert_eq!(row, greedy(model, &tokens[..=t], t_len).as_slice(), "position {t}");
            assert_eq!(ids[t * 4], row[0], "the top-1 id is the greedy token at {t}");
        } else {
            assert!(row.iter().all(|&x| x == NO_TOKEN), "untrained position {t} has {row:?}");
        }
    }
    trained
}

#[test]
fn batched_continuations_equal_per_position_greedy_decode() {
    for (arch, seed) in [(Architecture::Llama, 3), (Architecture::Qwen2, 8)] {
        let model = tiny(arch, seed);
        let seq = tokens(40, seed);
        let mask: Vec<bool> = (0..seq.len()).map(|i| i >= 12 && i != 30).collect();
        assert_eq!(check(&model, &seq, &mask, 5), 27);
    }
}

#[test]
fn chunked_passes_give_the_same_continuations() {
    let model = tiny(Architecture::Llama, 5);
    let len = MAX_ROWS_PER_PASS + 40;
    let seq = tokens(len, 11);
    let mask: Vec<bool> = (0..len).map(|i| i >= 10).collect();
    assert!(check(&model, &seq, &mask, 3) > MAX_ROWS_PER_PASS, "more trained positions than one pass holds");
}

#[test]
fn nothing_requested_runs_nothing() {
    let model = tiny(Architecture::Llama, 1);
    let mut cache = model.new_cache(8);
    let cols = teacher_columns(&model, &mut cache, &[1, 2, 3], &[false, true, true], 0, 0).unwrap();
    assert_eq!((cols.teacher, cols.topk_ids, cols.processed), (None, None, 0));
}
