//! Shared helpers for the engine tests: a tiny random model and logits comparison.
#![allow(dead_code)]

use std::path::PathBuf;

use burn::backend::Flex;
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use draftsmith_model::{
    build_model, Architecture, AttentionMask, LoadOptions, LoadedModel, LogitsSelect, MatmulWeights, MemorySource,
    Model, ModelConfig, RopeScaling,
};
use serde_json::Value;

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
    tiny_model_on::<B>(architecture, seed, &Default::default())
}

/// The same tiny random model (dense weights) on any backend.
pub fn tiny_model_on<Bk: Backend>(architecture: Architecture, seed: u64, device: &Bk::Device) -> Model<Bk> {
    let config = tiny_config(architecture);
    let source = MemorySource::random(&config, seed);
    build_model::<Bk>(&config, &source, LoadOptions::new(MatmulWeights::Dense), device).expect("tiny model builds")
}

pub fn to_vec(t: Tensor<B, 2>) -> Vec<f32> {
    host_vec(t)
}

/// A tensor of any backend read back as f32 values.
pub fn host_vec<Bk: Backend>(t: Tensor<Bk, 2>) -> Vec<f32> {
    draftsmith_model::host_f32(t)
}

pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// A random draft tree of `size` nodes over `vocab` (each node a root or below an earlier one).
pub fn random_tree(rng: &mut Lcg, size: usize, vocab: usize) -> draftsmith_core::DraftTree {
    let mut tree = draftsmith_core::DraftTree::new();
    for i in 0..size {
        let parent = if i == 0 || rng.next(4) == 0 { None } else { Some(rng.next(i)) };
        tree.push(rng.next(vocab) as u32, parent);
    }
    tree
}

/// Largest |Δlogit| over every node of `trials` random draft trees (up to `1 + max_extra`
/// nodes, below a 3–8 token random prefix): the node's logits when its tree is verified in one
/// pass against its branch run alone from scratch.
pub fn worst_tree_vs_alone<Bk: Backend>(model: &Model<Bk>, rng: &mut Lcg, trials: usize, max_extra: usize) -> f32 {
    let vocab = model.config().vocab_size;
    let run_alone = |tokens: &[u32]| {
        let mut cache = model.new_cache(tokens.len());
        let pos: Vec<usize> = (0..tokens.len()).collect();
        let all = host_vec(
            model.forward(tokens, &pos, &AttentionMask::Causal, LogitsSelect::All, &mut cache).unwrap().logits,
        );
        all[(tokens.len() - 1) * vocab..].to_vec()
    };
    let mut worst = 0.0f32;
    for _ in 0..trials {
        let prefix: Vec<u32> = (0..3 + rng.next(6)).map(|_| rng.next(vocab) as u32).collect();
        let size = 2 + rng.next(max_extra);
        let tree = random_tree(rng, size, vocab);
        let mut cache = model.new_cache(8);
        let pos: Vec<usize> = (0..prefix.len()).collect();
        model.forward_hidden(&prefix, &pos, &AttentionMask::Causal, &mut cache).unwrap();
        let mask = AttentionMask::Visible(tree.visibility(prefix.len()));
        let out = model
            .forward(tree.tokens(), &tree.positions(prefix.len() - 1), &mask, LogitsSelect::All, &mut cache)
            .unwrap();
        let in_tree = host_vec(out.logits);
        for node in 0..tree.len() {
            let mut seq = prefix.clone();
            seq.extend(tree.path_to(node).iter().map(|&i| tree.tokens()[i]));
            worst = worst.max(max_abs_diff(&run_alone(&seq), &in_tree[node * vocab..(node + 1) * vocab]));
        }
    }
    worst
}

/// Deterministic pseudo-random stream for tests.
pub struct Lcg(pub u64);
impl Lcg {
    pub fn next(&mut self, bound: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % bound
    }
}

// Golden logits of the fetched models (`tests/golden/`, made by `scripts/reference/make_golden.py`).

/// `tests/<dir>` of the repository (from `CARGO_MANIFEST_DIR` at run time when set, so a test
/// binary copied to another machine finds the checkout there).
pub fn repo_tests_dir(dir: &str) -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()))
        .join("../../tests")
        .join(dir)
}

/// The checked-in tiny models and their numpy references.
pub fn fixtures() -> PathBuf {
    repo_tests_dir("fixtures")
}

pub fn golden_dir(name: &str) -> PathBuf {
    repo_tests_dir("golden").join(name)
}

/// The fetched model file, or `None` (test skipped) unless `DRAFTSMITH_REQUIRE_MODELS=1`.
pub fn model_file(artifact: &str) -> Option<PathBuf> {
    let a = draftsmith_fetch::find(artifact).unwrap();
    let path = draftsmith_fetch::artifact_path(&draftsmith_fetch::data_dir(), a);
    if path.exists() {
        return Some(path);
    }
    if std::env::var("DRAFTSMITH_REQUIRE_MODELS").as_deref() == Ok("1") {
        panic!("{} is missing: run `draftsmith fetch {artifact}`", path.display());
    }
    eprintln!("skipped: {} not present (run `draftsmith fetch {artifact}`)", path.display());
    None
}

pub struct Golden {
    pub meta: Value,
    pub logits: Vec<f32>,
    pub vocab: usize,
}

pub fn read_golden(name: &str) -> Golden {
    let dir = golden_dir(name);
    let meta: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("golden.json")).unwrap()).unwrap();
    let bytes = std::fs::read(dir.join(meta["logits_file"].as_str().unwrap())).unwrap();
    let logits: Vec<f32> = bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    let vocab = meta["hparams"]["vocab_size"].as_u64().unwrap() as usize;
    Golden { meta, logits, vocab }
}

/// A numpy reference's logit rows (`[[number]]` in JSON) as one flat f32 vector.
pub fn reference_logits(rows: &Value) -> Vec<f32> {
    let rows = rows.as_array().unwrap().iter().map(|row| row.as_array().unwrap());
    rows.flat_map(|row| row.iter().map(|x| x.as_f64().unwrap() as f32)).collect()
}

pub fn ids(v: &Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

pub fn argmax(v: &[f32]) -> usize {
    (0..v.len()).fold(0, |b, i| if v[i] > v[b] { i } else { b })
}

/// Checks final-position logits and greedy continuations; returns the worst |Δlogit|.
pub fn check_model<Bk: Backend>(loaded: &LoadedModel<Bk>, golden: &Golden, tolerances: (f32, f64), label: &str) -> f32 {
    check_model_steps(loaded, golden, tolerances, label, usize::MAX)
}

/// [`check_model`] following at most `steps` of each prompt's greedy continuation (a software
/// GPU driver takes seconds a step).
pub fn check_model_steps<Bk: Backend>(
    loaded: &LoadedModel<Bk>,
    golden: &Golden,
    (tolerance, margin_needed): (f32, f64),
    label: &str,
    steps: usize,
) -> f32 {
    let model = &loaded.model;
    let mut worst = 0.0f32;
    for p in golden.meta["prompts"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap();
        let prompt = ids(&p["ids"]);
        let mut cache = model.new_cache(prompt.len() + 16);
        let pos: Vec<usize> = (0..prompt.len()).collect();
        let out = model.forward(&prompt, &pos, &AttentionMask::Causal, LogitsSelect::Last, &mut cache).unwrap();
        let ours = host_vec(out.logits);
        let index = p["logits_index"].as_u64().unwrap() as usize;
        let reference = &golden.logits[index * golden.vocab..(index + 1) * golden.vocab];
        let d = max_abs_diff(&ours, reference);
        worst = worst.max(d);
        assert!(d <= tolerance, "{label} {name}: max |Δlogit| {d} > {tolerance}");
        // Greedy continuation: follow the reference's tokens, compare our argmax at each
        // step whose reference margin is clear.
        let (greedy, margins) = (ids(&p["greedy_ids"]), p["greedy_margins"].as_array().unwrap());
        let mut logits = ours;
        let checked = greedy.len().min(margins.len()).min(steps);
        for (step, (&want, margin)) in greedy.iter().zip(margins).enumerate().take(checked) {
            if margin.as_f64().unwrap() > margin_needed {
                assert_eq!(argmax(&logits) as u32, want, "{label} {name}: greedy step {step} (margin {margin})");
            }
            if step + 1 == checked {
                // The next pass's logits would not be compared.
                break;
            }
            let position = prompt.len() + step;
            let out =
                model.forward(&[want], &[position], &AttentionMask::Causal, LogitsSelect::Last, &mut cache).unwrap();
            logits = host_vec(out.logits);
        }
    }
    eprintln!("{label}: worst max |Δlogit| = {worst:.4}");
    worst
}
