//! The dense engine's checks on a GPU backend, shared by `tests/wgpu.rs` and `tests/cuda.rs`
//! (each a thin list of `#[test]`s naming its backend and device). Stated tolerances, max
//! |Δlogit| over the vocabulary (the caller passes them):
//! - the tiny checked-in models against their numpy reference (f32 on the device in another
//!   reduction order than the CPU's 1e-4 bound);
//! - SmolLM2 against the float64 golden file, greedy tokens equal wherever the reference's top-2
//!   margin exceeds 0.5;
//! - a branch verified inside a flattened draft tree against the same branch run alone. Not
//!   bit-identical (GPU kernels are not batch-invariant): the eval's near-tie check exists for that.

use std::path::Path;

use burn::tensor::backend::Backend;
use draftsmith_model::{
    load_model, Architecture, AttentionMask, LoadOptions, LoadedModel, LogitsSelect, MatmulWeights, Model,
};
use serde_json::Value;

use crate::common::*;

/// Whether the backend's device answers; without it the tests are skipped, unless the
/// environment variable `require` is `1` (CI sets it for wgpu, with lavapipe installed).
pub fn have_device<G: Backend>(device: &G::Device, require: &str, fix: &str) -> bool {
    let probe = || burn::tensor::Tensor::<G, 1>::zeros([1], device).into_data();
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(probe)).is_ok() || no_device(&G::name(device), require, fix)
}

/// A missing device: the test is skipped (`false`), or fails when `require` is `1`.
pub fn no_device(backend: &str, require: &str, fix: &str) -> bool {
    assert!(std::env::var(require).as_deref() != Ok("1"), "no device for {backend}: {fix}");
    eprintln!("skipped: no device for {backend} ({fix})");
    false
}

fn load<G: Backend>(path: &Path, device: &G::Device) -> LoadedModel<G> {
    load_model::<G>(path, LoadOptions::new(MatmulWeights::Dense), device).unwrap()
}

fn all_logits<G: Backend>(model: &Model<G>, tokens: &[u32]) -> Vec<f32> {
    let mut cache = model.new_cache(tokens.len());
    let pos: Vec<usize> = (0..tokens.len()).collect();
    host_vec(model.forward(tokens, &pos, &AttentionMask::Causal, LogitsSelect::All, &mut cache).unwrap().logits)
}

/// The tiny Llama and Qwen2 models (GGUF and HF directory) against their numpy reference.
pub fn tiny_models_reproduce_the_reference<G: Backend>(device: &G::Device, tolerance: f32) {
    for arch in ["llama", "qwen2"] {
        let reference: Value = serde_json::from_str(
            &std::fs::read_to_string(fixtures().join(format!("tiny-{arch}.reference.json"))).unwrap(),
        )
        .unwrap();
        for path in [fixtures().join(format!("tiny-{arch}.gguf")), fixtures().join(format!("tiny-{arch}"))] {
            let loaded = load::<G>(&path, device);
            let mut worst = 0.0f32;
            for seq in reference["sequences"].as_array().unwrap() {
                let ours = all_logits(&loaded.model, &ids(&seq["ids"]));
                let want = reference_logits(&seq["logits_gguf"]);
                worst = worst.max(max_abs_diff(&ours, &want));
            }
            eprintln!("{}: {} max |Δlogit| {worst:.2e}", path.display(), G::name(device));
            assert!(worst <= tolerance, "{}: max |Δlogit| {worst} > {tolerance}", path.display());
        }
    }
}

/// SmolLM2 (fetched) against the float64 golden file: every prompt's last logits and the first
/// `greedy_steps` steps of its greedy continuation.
pub fn smollm2_logits_match_the_numpy_reference<G: Backend>(device: &G::Device, tolerance: f32, greedy_steps: usize) {
    let Some(path) = model_file("smollm2-135m") else { return };
    let golden = read_golden("smollm2-135m");
    let label = format!("{} dense f32", G::name(device));
    check_model_steps(&load::<G>(&path, device), &golden, (tolerance, 0.5), &label, greedy_steps);
}

/// A branch verified inside a random draft tree against the same branch run alone.
pub fn tree_branches_match_the_branch_run_alone<G: Backend>(device: &G::Device, tolerance: f32) {
    let worst = [Architecture::Llama, Architecture::Qwen2]
        .map(|arch| worst_tree_vs_alone(&tiny_model_on::<G>(arch, 11, device), &mut Lcg(5), 4, 10))
        .into_iter()
        .fold(0.0f32, f32::max);
    eprintln!("{} tree vs alone: max |Δlogit| {worst:.2e}", G::name(device));
    assert!(worst <= tolerance, "max |Δlogit| {worst} > {tolerance}");
}

/// One MT-Bench first turn per category, greedy on the GPU and on the dense CPU path, `max_new`
/// tokens each: the ids must agree up to the first position where the CPU's top-2 margin is a
/// near-tie (below `NEAR_TIE_FACTOR` × the largest |Δlogit| between the two backends on the
/// shared prefix). Prints the table recorded in `eval/results/wgpu/`.
pub fn smollm2_greedy_equals_the_dense_cpu_path_up_to_near_ties<G: Backend>(device: &G::Device, max_new: usize) {
    const NEAR_TIE_FACTOR: f32 = 4.0;
    let Some(path) = model_file("smollm2-135m") else { return };
    let questions =
        draftsmith_fetch::artifact_path(&draftsmith_fetch::data_dir(), draftsmith_fetch::find("mt-bench").unwrap());
    let questions = if questions.is_dir() { questions.join("question.jsonl") } else { questions };
    let gpu = load::<G>(&path, device);
    let cpu = load_model::<B>(&path, LoadOptions::new(MatmulWeights::Dense), &Default::default()).unwrap();
    let template = cpu.tokenizer.chat_template().expect("SmolLM2 has a chat template");
    let eos = cpu.tokenizer.eos_ids().to_vec();
    let mut rows = Vec::new();
    let mut drift = 0.0f32;
    for line in std::fs::read_to_string(&questions).unwrap().lines().step_by(10) {
        let q: Value = serde_json::from_str(line).unwrap();
        let turn = q["turns"][0].as_str().unwrap();
        let text = template
            .render(&[draftsmith_model::ChatMessage { role: "user".into(), content: turn.into() }], true)
            .unwrap();
        let prompt = cpu.tokenizer.encode(&text).unwrap();
        let (c, g) =
            (greedy_logits(&cpu.model, &prompt, max_new, &eos), greedy_logits(&gpu.model, &prompt, max_new, &eos));
        let mut first_diff = None;
        for (step, (rc, rg)) in c.iter().zip(&g).enumerate() {
            if argmax(rc) != argmax(rg) {
                first_diff = Some(step);
                break;
            }
            drift = drift.max(max_abs_diff(rc, rg));
        }
        let compared = first_diff.unwrap_or(c.len().min(g.len()));
        rows.push((
            q["question_id"].as_u64().unwrap(),
            q["category"].as_str().unwrap().to_string(),
            prompt.len(),
            compared,
            first_diff.map(|s| top2(&c[s])),
        ));
    }
    let bound = NEAR_TIE_FACTOR * drift;
    println!("| MT-Bench question | category | prompt tokens | greedy tokens equal | first difference: CPU top-2 margin | verdict |\n|---:|---|---:|---:|---:|---|");
    for (id, category, prompt, equal, margin) in &rows {
        let verdict = match margin {
            None => "identical".to_string(),
            Some(m) if *m < bound => "near-tie".to_string(),
            Some(_) => "**real mismatch**".to_string(),
        };
        println!(
            "| {id} | {category} | {prompt} | {equal} | {} | {verdict} |",
            margin.map_or("–".into(), |m| format!("{m:.2e}"))
        );
    }
    println!(
        "\nlargest |Δlogit| between {} and the dense CPU path on equal prefixes: {drift:.2e}; near-tie bound {bound:.2e} ({NEAR_TIE_FACTOR}×)",
        G::name(device)
    );
    assert!(rows.iter().all(|r| r.4.is_none_or(|m| m < bound)), "a difference away from a near-tie");
}

/// Greedy decoding of `prompt` for up to `max_new` tokens (stopping at `eos`): each step's logits.
fn greedy_logits<Bk: Backend>(model: &Model<Bk>, prompt: &[u32], max_new: usize, eos: &[u32]) -> Vec<Vec<f32>> {
    let mut cache = model.new_cache(prompt.len() + max_new);
    let pos: Vec<usize> = (0..prompt.len()).collect();
    let mut logits =
        host_vec(model.forward(prompt, &pos, &AttentionMask::Causal, LogitsSelect::Last, &mut cache).unwrap().logits);
    let mut rows = Vec::new();
    for step in 0..max_new {
        let next = argmax(&logits) as u32;
        rows.push(logits);
        if eos.contains(&next) || step + 1 == max_new {
            break;
        }
        logits = host_vec(
            model
                .forward(&[next], &[prompt.len() + step], &AttentionMask::Causal, LogitsSelect::Last, &mut cache)
                .unwrap()
                .logits,
        );
    }
    rows
}

fn top2(logits: &[f32]) -> f32 {
    let mut v = logits.to_vec();
    v.sort_by(|a, b| b.total_cmp(a));
    v[0] - v[1]
}
