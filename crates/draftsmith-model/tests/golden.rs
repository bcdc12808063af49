//! Logits of the default model against the committed golden file made by an independent numpy
//! implementation of the same GGUF (`scripts/reference/make_golden.py`, float64, llama.cpp's
//! own rotary convention). Tolerances (max |Δlogit| over the whole vocabulary at the final
//! position of every prompt):
//! - dense f32 weights and the quantized CPU path (GGUF blocks kept, f32 activations): ≤ 0.02
//!   (only f32 rounding separates them from the reference; measured 1e-4);
//! - Qwen, whose Q4_K blocks load as Q4_1 with f16-rounded sub-block scales, Q5_0 as Q8_0
//!   exactly and (f32 activations) Q6_K re-quantized to Q8_0: ≤ 0.1 (measured 0.056; 0.15 when
//!   Q4_K and Q5_0 were re-quantized to Q8_0 too). int8 activations, Q4_K and Q6_K kept in
//!   their own bits: measured 0.38 on the `fim` prompt, 0.20–0.31 on the others (0.27 with Q4_K
//!   as Q4_1, 0.31 with Q6_K re-quantized to Q8_0 too, 0.41 before Q4_K and Q5_0 were kept): the
//!   activations' 8-bit rounding decides it, not the weights' last bits.
//!
//! For scale: llama.cpp quantizes activations to 8 bits and differs from the same reference by
//! up to 1.8 on SmolLM2 (`scripts/reference/check_llamacpp.py`).
//!
//! Greedy tokens must agree wherever the reference's top-2 margin exceeds 0.5.

mod common;

use common::*;
use draftsmith_model::{load_model, Activations, KvKeys, LoadOptions, LoadedModel, MatmulWeights};

const MARGIN: f64 = 0.5;
/// int8 activations (each row quantized per 32 values, as llama.cpp does) move logits by up to
/// about what llama.cpp's own do against the same reference (1.8 on SmolLM2, 0.4 on Qwen,
/// `scripts/reference/check_llamacpp.py`); greedy steps are compared where the reference's
/// top-2 margin is clear of that.
const INT8_TOLERANCE: f32 = 1.5;
const INT8_MARGIN: f64 = 2.0;
/// With Q8_0 keys the queries are quantized too: measured 1.63 on SmolLM2 (`chatml_capital`)
/// against 1.30 with f16 keys; the bound is llama.cpp's own deviation from the reference.
const Q8_KEYS_TOLERANCE: f32 = 1.8;
/// Qwen2.5's keys (a biased projection) carry a few channels far larger than the rest, and a
/// 32-value block shares its scale with them: measured 2.67 on `code_python` (0.38 with f16
/// keys), so Q8_0 keys are not for this family; the bound records it.
const QWEN_Q8_KEYS_TOLERANCE: f32 = 3.0;

fn load(path: &std::path::Path, matmul: MatmulWeights) -> LoadedModel<B> {
    load_model::<B>(path, LoadOptions::new(matmul), &Default::default()).unwrap()
}

fn load_f32(path: &std::path::Path) -> LoadedModel<B> {
    load_model::<B>(
        path,
        LoadOptions::new(MatmulWeights::Quantized).with_activations(Activations::F32),
        &Default::default(),
    )
    .unwrap()
}

fn load_int8(path: &std::path::Path) -> LoadedModel<B> {
    load_model::<B>(
        path,
        LoadOptions::new(MatmulWeights::Quantized).with_activations(Activations::Int8),
        &Default::default(),
    )
    .unwrap()
}

fn load_q8_keys(path: &std::path::Path) -> LoadedModel<B> {
    let options = LoadOptions::new(MatmulWeights::Quantized).with_kv_keys(KvKeys::Q8_0);
    load_model::<B>(path, options, &Default::default()).unwrap()
}

#[test]
fn smollm2_logits_match_the_numpy_reference() {
    let Some(path) = model_file("smollm2-135m") else { return };
    let golden = read_golden("smollm2-135m");
    assert!(golden.meta["prompts"].as_array().unwrap().len() >= 8);
    check_model(&load(&path, MatmulWeights::Dense), &golden, (0.02, MARGIN), "dense f32");
    check_model(&load_f32(&path), &golden, (0.02, MARGIN), "quantized, f32 activations");
    check_model(&load_int8(&path), &golden, (INT8_TOLERANCE, INT8_MARGIN), "quantized, int8 activations");
    check_model(
        &load_q8_keys(&path),
        &golden,
        (Q8_KEYS_TOLERANCE, INT8_MARGIN),
        "quantized, int8 activations, Q8_0 keys",
    );
}

#[test]
fn smollm2_tokenizer_matches_the_reference_ids() {
    let Some(path) = model_file("smollm2-135m") else { return };
    let golden = read_golden("smollm2-135m");
    let loaded = load(&path, MatmulWeights::Quantized);
    for p in golden.meta["prompts"].as_array().unwrap() {
        let text = p["text"].as_str().unwrap();
        assert_eq!(loaded.tokenizer.encode(text).unwrap(), ids(&p["ids"]), "prompt {}", p["name"]);
        assert_eq!(loaded.tokenizer.decode(&ids(&p["ids"])).unwrap(), text);
    }
}

/// Qwen2.5-Coder-0.5B (qwen2: q/k/v biases, Q5_0/Q4_K/Q6_K/Q8_0): `cargo test -- --ignored`.
#[test]
#[ignore = "needs `draftsmith fetch qwen2.5-coder-0.5b` (491 MB); run with --ignored"]
fn qwen05_logits_match_the_numpy_reference() {
    let Some(path) = model_file("qwen2.5-coder-0.5b") else { return };
    let golden = read_golden("qwen2.5-coder-0.5b");
    check_model(&load(&path, MatmulWeights::Dense), &golden, (0.02, MARGIN), "qwen dense f32");
    check_model(
        &load_f32(&path),
        &golden,
        (0.1, MARGIN),
        "qwen quantized (Q4_K as Q4_1, Q5_0 as Q8_0, Q6_K re-quantized), f32 activations",
    );
    check_model(
        &load_int8(&path),
        &golden,
        (INT8_TOLERANCE, INT8_MARGIN),
        "qwen quantized (Q5_0, Q4_K and Q6_K kept), int8 activations",
    );
    check_model(
        &load_q8_keys(&path),
        &golden,
        (QWEN_Q8_KEYS_TOLERANCE, INT8_MARGIN),
        "qwen quantized, int8 activations, Q8_0 keys",
    );
}
