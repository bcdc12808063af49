//! The checked-in tiny models (`scripts/reference/make_tiny_models.py`): the same weights as a
//! GGUF (llama.cpp layout, permuted q/k for llama) and as a Hugging Face directory (F32 for
//! llama, BF16 for qwen2) must both reproduce the numpy reference logits, and both tokenizers
//! must reproduce the reference ids. Bad inputs give errors naming the file and the problem.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use draftsmith_model::{load_model, AttentionMask, LoadOptions, LoadedModel, LogitsSelect, MatmulWeights, ModelError};
use serde_json::Value;

fn reference(arch: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixtures().join(format!("tiny-{arch}.reference.json"))).unwrap())
        .unwrap()
}

fn load(path: &Path, matmul: MatmulWeights) -> Result<LoadedModel<B>, ModelError> {
    load_model::<B>(path, LoadOptions::new(matmul), &Default::default())
}

fn check_against_reference(loaded: &LoadedModel<B>, reference: &Value, label: &str) {
    for seq in reference["sequences"].as_array().unwrap() {
        let tokens = ids(&seq["ids"]);
        let mut cache = loaded.model.new_cache(8);
        let pos: Vec<usize> = (0..tokens.len()).collect();
        let out = loaded.model.forward(&tokens, &pos, &AttentionMask::Causal, LogitsSelect::All, &mut cache).unwrap();
        let ours = to_vec(out.logits);
        let want = reference_logits(&seq["logits_gguf"]);
        let d = max_abs_diff(&ours, &want);
        assert!(d < 1e-4, "{label}, {} tokens: max |Δlogit| {d}", tokens.len());
    }
    for case in reference["tokenizer_cases"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        assert_eq!(loaded.tokenizer.encode(text).unwrap(), ids(&case["ids"]), "{label}: tokenizing {text:?}");
    }
}

#[test]
fn gguf_and_hf_directory_reproduce_the_reference() {
    for arch in ["llama", "qwen2"] {
        let reference = reference(arch);
        for matmul in [MatmulWeights::Dense, MatmulWeights::Quantized] {
            let gguf = load(&fixtures().join(format!("tiny-{arch}.gguf")), matmul).unwrap();
            check_against_reference(&gguf, &reference, &format!("{arch} gguf {matmul:?}"));
            let hf = load(&fixtures().join(format!("tiny-{arch}")), matmul).unwrap();
            check_against_reference(&hf, &reference, &format!("{arch} hf dir {matmul:?}"));
        }
    }
}

#[test]
fn chat_templates_come_from_both_sources() {
    let gguf = load(&fixtures().join("tiny-llama.gguf"), MatmulWeights::Dense).unwrap();
    let hf = load(&fixtures().join("tiny-llama"), MatmulWeights::Dense).unwrap();
    let messages = [draftsmith_model::ChatMessage::new("user", "hi")];
    let a = gguf.tokenizer.chat_template().expect("gguf template").render(&messages, true).unwrap();
    let b = hf.tokenizer.chat_template().expect("hf template").render(&messages, true).unwrap();
    assert_eq!(a, b);
    assert!(a.contains("<|im_start|>user\nhi<|im_end|>"), "{a}");
    assert_eq!(gguf.tokenizer.eos_ids(), hf.tokenizer.eos_ids());
}

/// A scratch copy of a fixture, unique per test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("draftsmith-model-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn expect_error(path: &Path, needle: &str) {
    let err = match load(path, MatmulWeights::Dense) {
        Ok(_) => panic!("{} loaded but should fail with {needle:?}", path.display()),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains(&path.display().to_string()) || err.contains(&path.parent().unwrap().display().to_string()),
        "error does not name the file: {err}"
    );
    assert!(err.contains(needle), "expected {needle:?} in: {err}");
}

fn replace_once(bytes: &mut [u8], from: &[u8], to: &[u8]) {
    assert_eq!(from.len(), to.len());
    let at = bytes.windows(from.len()).position(|w| w == from).expect("pattern present");
    bytes[at..at + from.len()].copy_from_slice(to);
}

#[test]
fn corrupt_gguf_files_are_reported() {
    let dir = scratch("gguf");
    let original = std::fs::read(fixtures().join("tiny-llama.gguf")).unwrap();
    let truncated = dir.join("truncated.gguf");
    std::fs::write(&truncated, &original[..original.len() * 2 / 3]).unwrap();
    expect_error(&truncated, "");
    let magic = dir.join("magic.gguf");
    let mut bytes = original.clone();
    bytes[..4].copy_from_slice(b"GGML");
    std::fs::write(&magic, &bytes).unwrap();
    expect_error(&magic, "not a GGUF file");
    let arch = dir.join("arch.gguf");
    let mut bytes = original.clone();
    replace_once(&mut bytes, b"\x05\0\0\0\0\0\0\0llama", b"\x05\0\0\0\0\0\0\0gemmx");
    std::fs::write(&arch, &bytes).unwrap();
    expect_error(&arch, "unknown architecture `gemmx`");
    let pre = dir.join("pre.gguf");
    let mut bytes = original;
    replace_once(&mut bytes, b"smollm", b"smolxx");
    std::fs::write(&pre, &bytes).unwrap();
    expect_error(&pre, "pre-tokenizer `smolxx` is not supported");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

fn edit_config(dir: &Path, edit: impl FnOnce(&mut Value)) {
    let path = dir.join("config.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut config);
    std::fs::write(&path, serde_json::to_string(&config).unwrap()).unwrap();
}

#[test]
fn bad_hf_directories_are_reported() {
    let base = scratch("hf");
    // A tensor missing from model.safetensors.
    let missing = base.join("missing");
    copy_dir(&fixtures().join("tiny-llama"), &missing);
    let st = missing.join("model.safetensors");
    let bytes = std::fs::read(&st).unwrap();
    let tensors = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let kept: Vec<(String, safetensors::tensor::TensorView)> =
        tensors.tensors().into_iter().filter(|(n, _)| n != "model.layers.1.mlp.up_proj.weight").collect();
    let out = safetensors::serialize(kept, &None).unwrap();
    std::fs::write(&st, out).unwrap();
    expect_error(&missing, "expected tensor(s) not found: model.layers.1.mlp.up_proj.weight");
    // Tokenizer larger than the model's vocabulary.
    let vocab = base.join("vocab");
    copy_dir(&fixtures().join("tiny-llama"), &vocab);
    edit_config(&vocab, |c| c["vocab_size"] = 200.into());
    expect_error(&vocab, "tokenizer has 300 tokens but the model's vocabulary has 200 rows");
    // Unknown architecture.
    let arch = base.join("arch");
    copy_dir(&fixtures().join("tiny-llama"), &arch);
    edit_config(&arch, |c| c["model_type"] = "gpt_neox".into());
    expect_error(&arch, "unknown architecture `gpt_neox`");
    // A qwen2 checkpoint declared as llama: its biases are found and not used.
    let unused = base.join("unused");
    copy_dir(&fixtures().join("tiny-qwen2"), &unused);
    edit_config(&unused, |c| c["model_type"] = "llama".into());
    expect_error(&unused, "found but not used by the llama architecture");
    // Not a model at all.
    let empty = base.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    expect_error(&empty, "expected a .gguf file or a directory with config.json");
}
