//! Corrupt model metadata: copies of the checked-in tiny models with one value edited must fail
//! at load, fast, with an error that names the file and the key or tensor at fault, instead of
//! hanging, panicking or generating garbage.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use common::*;
use draftsmith_gguf::{GgmlType, GgufFile, MetadataValue, TensorInfo};
use draftsmith_model::{
    build_model, load_model, Architecture, LoadOptions, LoadedModel, MatmulWeights, MemorySource, ModelConfig,
    ModelError, RopeScaling,
};
use serde_json::Value;

fn load(path: &Path) -> Result<LoadedModel<B>, ModelError> {
    load_model::<B>(path, LoadOptions::new(MatmulWeights::Dense), &Default::default())
}

/// A fresh scratch directory, unique per test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("draftsmith-model-metadata-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Loads `path` on another thread and returns the error message; fails the test if loading
/// succeeds, or takes more than 60 s (a corrupt count must not make the loader hang).
fn load_error(path: &Path) -> String {
    let (send, receive) = mpsc::channel();
    let owned = path.to_path_buf();
    std::thread::spawn(move || {
        let _ = send.send(load(&owned).err().map(|e| e.to_string()));
    });
    match receive.recv_timeout(Duration::from_secs(60)) {
        Ok(Some(message)) => message,
        Ok(None) => panic!("{} loaded but should fail", path.display()),
        Err(_) => panic!("loading {} did not finish within 60 s", path.display()),
    }
}

/// Asserts loading `path` fails with a message that names the file and contains every needle.
fn expect_error(path: &Path, needles: &[&str]) {
    let err = load_error(path);
    eprintln!("{err}");
    let shown = path.display().to_string();
    let parent = path.parent().unwrap().display().to_string();
    assert!(err.contains(&shown) || err.contains(&parent), "error does not name the file: {err}");
    for needle in needles {
        assert!(err.contains(needle), "expected {needle:?} in: {err}");
    }
}

// A GGUF rewriter: the fixture's metadata and tensor table, edited, followed by its data
// section byte for byte (tensor offsets are relative to the data section, so they stay valid).

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u64(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

fn type_id(value: &MetadataValue) -> u32 {
    match value {
        MetadataValue::U8(_) => 0,
        MetadataValue::I8(_) => 1,
        MetadataValue::U16(_) => 2,
        MetadataValue::I16(_) => 3,
        MetadataValue::U32(_) => 4,
        MetadataValue::I32(_) => 5,
        MetadataValue::F32(_) => 6,
        MetadataValue::Bool(_) => 7,
        MetadataValue::String(_) => 8,
        MetadataValue::Array(_) => 9,
        MetadataValue::U64(_) => 10,
        MetadataValue::I64(_) => 11,
        MetadataValue::F64(_) => 12,
    }
}

fn put_value(out: &mut Vec<u8>, value: &MetadataValue) {
    match value {
        MetadataValue::U8(v) => out.push(*v),
        MetadataValue::I8(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetadataValue::U16(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetadataValue::I16(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetadataValue::U32(v) => put_u32(out, *v),
        MetadataValue::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetadataValue::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetadataValue::Bool(v) => out.push(u8::from(*v)),
        MetadataValue::String(s) => put_str(out, s),
        MetadataValue::Array(items) => {
            put_u32(out, items.first().map_or(8, type_id));
            put_u64(out, items.len() as u64);
            items.iter().for_each(|item| put_value(out, item));
        }
        MetadataValue::U64(v) => put_u64(out, *v),
        MetadataValue::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetadataValue::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
    }
}

/// Writes `tests/fixtures/{fixture}` to `dir/{name}.gguf` with its metadata and tensor infos
/// passed through `edit` first; returns the new file's path.
fn edited_gguf(
    dir: &Path,
    fixture: &str,
    name: &str,
    edit: impl FnOnce(&mut BTreeMap<String, MetadataValue>, &mut Vec<TensorInfo>),
) -> PathBuf {
    edited_copy(&fixtures().join(fixture), dir, name, edit)
}

/// Writes the GGUF file `source` to `dir/{name}.gguf`, edited as [`edited_gguf`] does.
fn edited_copy(
    source: &Path,
    dir: &Path,
    name: &str,
    edit: impl FnOnce(&mut BTreeMap<String, MetadataValue>, &mut Vec<TensorInfo>),
) -> PathBuf {
    let file = GgufFile::open(source).unwrap();
    let mut metadata = file.metadata().clone();
    let mut tensors = file.tensors().to_vec();
    edit(&mut metadata, &mut tensors);
    let mut out = b"GGUF".to_vec();
    put_u32(&mut out, 3);
    put_u64(&mut out, tensors.len() as u64);
    put_u64(&mut out, metadata.len() as u64);
    for (key, value) in &metadata {
        put_str(&mut out, key);
        put_u32(&mut out, type_id(value));
        put_value(&mut out, value);
    }
    for t in &tensors {
        put_str(&mut out, &t.name);
        put_u32(&mut out, t.dims.len() as u32);
        t.dims.iter().for_each(|&d| put_u64(&mut out, d));
        put_u32(&mut out, t.dtype.id());
        put_u64(&mut out, t.offset);
    }
    out.resize((out.len() as u64).next_multiple_of(file.alignment()) as usize, 0);
    let bytes = std::fs::read(source).unwrap();
    out.extend_from_slice(&bytes[file.data_offset() as usize..]);
    let path = dir.join(format!("{name}.gguf"));
    std::fs::write(&path, out).unwrap();
    path
}

/// The tiny llama GGUF with metadata `key` set to `value`.
fn with_key(dir: &Path, name: &str, key: &str, value: MetadataValue) -> PathBuf {
    edited_gguf(dir, "tiny-llama.gguf", name, |metadata, _| {
        metadata.insert(key.to_string(), value);
    })
}

fn tensor<'a>(tensors: &'a mut [TensorInfo], name: &str) -> &'a mut TensorInfo {
    tensors.iter_mut().find(|t| t.name == name).unwrap()
}

#[test]
fn an_unedited_copy_loads() {
    let dir = scratch("copy");
    let copy = edited_gguf(&dir, "tiny-llama.gguf", "copy", |_, _| {});
    load(&copy).unwrap();
    let copy = edited_gguf(&dir, "tiny-qwen2.gguf", "copy-qwen2", |_, _| {});
    load(&copy).unwrap();
}

#[test]
fn a_block_count_that_does_not_match_the_tensors_is_rejected_fast() {
    let dir = scratch("blocks");
    for (name, count) in [("huge", u32::MAX), ("large", 100_000), ("three", 3)] {
        let path = with_key(&dir, name, "llama.block_count", MetadataValue::U32(count));
        expect_error(
            &path,
            &["llama.block_count", &format!("is {count}"), "tensors for 2 layers (blk.0 … blk.1)", "corrupt"],
        );
    }
    let path = with_key(&dir, "one", "llama.block_count", MetadataValue::U32(1));
    expect_error(&path, &["llama.block_count is 1", "2 layers"]);
    let path = with_key(&dir, "u64", "llama.block_count", MetadataValue::U64(u64::MAX));
    expect_error(&path, &["llama.block_count", "2 layers"]);
}

#[test]
fn non_finite_or_non_positive_floats_are_rejected() {
    let dir = scratch("floats");
    let eps = "llama.attention.layer_norm_rms_epsilon";
    for (name, v) in [("eps-nan", f32::NAN), ("eps-zero", 0.0), ("eps-neg", -1e-5), ("eps-inf", f32::INFINITY)] {
        let path = with_key(&dir, name, eps, MetadataValue::F32(v));
        expect_error(&path, &[eps, "finite and positive"]);
    }
    let base = "llama.rope.freq_base";
    for (name, v) in [("base-nan", f32::NAN), ("base-zero", 0.0), ("base-neg", -10.0)] {
        let path = with_key(&dir, name, base, MetadataValue::F32(v));
        expect_error(&path, &[base, "finite and positive"]);
    }
    let path = with_key(&dir, "base-one", base, MetadataValue::F32(1.0));
    expect_error(&path, &[base, "greater than 1"]);
    let path = with_key(&dir, "base-f64-nan", base, MetadataValue::F64(f64::NAN));
    expect_error(&path, &[base, "NaN"]);
    // Optional keys that are present must have the right type rather than fall back to defaults.
    let path = with_key(&dir, "base-str", base, MetadataValue::String("10000".into()));
    expect_error(&path, &[base, "wrong type"]);
    let path = with_key(&dir, "factor", "llama.rope.scaling.factor", MetadataValue::F32(f32::NAN));
    let path2 = edited_gguf(&dir, "tiny-llama.gguf", "linear-nan", |m, _| {
        m.insert("llama.rope.scaling.type".into(), MetadataValue::String("linear".into()));
        m.insert("llama.rope.scaling.factor".into(), MetadataValue::F32(f32::NAN));
    });
    // A factor of an unused scaling type is not read.
    load(&path).unwrap();
    expect_error(&path2, &["llama.rope.scaling.factor", "finite and positive"]);
}

#[test]
fn zero_sizes_are_rejected_naming_the_key() {
    let dir = scratch("zeros");
    for key in [
        "llama.context_length",
        "llama.embedding_length",
        "llama.feed_forward_length",
        "llama.attention.head_count",
        "llama.attention.head_count_kv",
        "llama.attention.key_length",
    ] {
        let path = with_key(&dir, key, key, MetadataValue::U32(0));
        expect_error(&path, &[&format!("{key} is 0"), "must be positive"]);
    }
    let path = edited_gguf(&dir, "tiny-llama.gguf", "vocab", |m, t| {
        m.remove("llama.vocab_size");
        tensor(t, "token_embd.weight").dims = vec![16, 0];
    });
    expect_error(&path, &["row count of token_embd.weight is 0"]);
}

#[test]
fn metadata_that_contradicts_the_tensors_is_rejected() {
    let dir = scratch("contradict");
    let path = with_key(&dir, "vocab", "llama.vocab_size", MetadataValue::U32(299));
    expect_error(&path, &["llama.vocab_size is 299 but token_embd.weight has 300 rows"]);
    let path = with_key(&dir, "rot", "llama.rope.dimension_count", MetadataValue::U32(2));
    expect_error(&path, &["llama.rope.dimension_count is 2", "partial RoPE"]);
    let path = with_key(&dir, "kv", "llama.attention.head_count_kv", MetadataValue::U32(3));
    expect_error(&path, &["llama.attention.head_count (4)", "multiple of llama.attention.head_count_kv (3)"]);
}

#[test]
fn special_token_ids_outside_the_vocabulary_are_rejected() {
    let dir = scratch("ids");
    for key in ["eos", "bos", "eot"] {
        let key = format!("tokenizer.ggml.{key}_token_id");
        let path = with_key(&dir, &key, &key, MetadataValue::U32(300));
        expect_error(&path, &[&key, "is 300", "outside the vocabulary of 300 tokens"]);
    }
    // Ids the engine never reads are left alone, as llama.cpp does.
    for key in ["padding", "unknown"] {
        let key = format!("tokenizer.ggml.{key}_token_id");
        let path = with_key(&dir, &key, &key, MetadataValue::U32(300));
        assert!(load(&path).is_ok(), "{key} out of range is ignored");
    }
    let key = "tokenizer.ggml.eos_token_id";
    let path = with_key(&dir, "huge", key, MetadataValue::U64(1 << 40));
    expect_error(&path, &[key, "outside the vocabulary"]);
    let path = with_key(&dir, "negative", key, MetadataValue::I32(-1));
    expect_error(&path, &[key, "wrong type"]);
    // The last id is inside.
    let path = with_key(&dir, "last", key, MetadataValue::U32(299));
    assert_eq!(load(&path).unwrap().tokenizer.eos_ids(), [299]);
}

#[test]
fn tensors_declared_with_a_wrong_type_are_rejected() {
    let dir = scratch("types");
    // An F16 matrix declared F32: its bytes run into the next tensor's.
    let path = edited_gguf(&dir, "tiny-llama.gguf", "q-f32", |_, t| {
        tensor(t, "blk.0.attn_q.weight").dtype = GgmlType::F32;
    });
    expect_error(&path, &["\"blk.0.attn_q.weight\" (F32", "overlaps tensor \"blk.0.attn_k.weight\" (F16"]);
    // The F16 embedding declared F32: twice its size, past the end of this small file.
    let path = edited_gguf(&dir, "tiny-llama.gguf", "embd-f32", |_, t| {
        tensor(t, "token_embd.weight").dtype = GgmlType::F32;
    });
    expect_error(&path, &["\"token_embd.weight\"", "past end of file"]);
    // A norm weight declared Q8_0 (32 values fit in its 64-byte slot).
    let path = edited_gguf(&dir, "tiny-llama.gguf", "norm-q8", |_, t| {
        let norm = tensor(t, "blk.0.attn_norm.weight");
        (norm.dtype, norm.dims) = (GgmlType::Q8_0, vec![32]);
    });
    expect_error(&path, &["blk.0.attn_norm.weight", "must be F32, F16 or BF16", "declared Q8_0"]);
}

#[test]
fn gguf_errors_name_gguf_tensors() {
    let dir = scratch("names");
    // The header's tensor count cut: the last tensors' infos are not read.
    let path = edited_gguf(&dir, "tiny-llama.gguf", "count", |_, _| {});
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[8..16].copy_from_slice(&17u64.to_le_bytes());
    std::fs::write(&path, bytes).unwrap();
    expect_error(
        &path,
        &["expected tensor(s) not found: output_norm.weight, blk.1.ffn_up.weight, blk.1.ffn_down.weight"],
    );
    assert!(!load_error(&path).contains("model.layers"));
    // A shape error names the GGUF tensor, dims in ggml order (the same number of values, so
    // the file's layout stays consistent and the model's check is the one that fires).
    let path = edited_gguf(&dir, "tiny-llama.gguf", "shape", |_, t| {
        tensor(t, "blk.0.attn_k.weight").dims = vec![32, 4];
    });
    expect_error(&path, &["tensor `blk.0.attn_k.weight` has shape [32, 4], expected [16, 8]"]);
    // Fewer values than were written: the GGUF layer sees the unused bytes after the tensor.
    let path = edited_gguf(&dir, "tiny-llama.gguf", "shrunk", |_, t| {
        tensor(t, "blk.0.attn_k.weight").dims = vec![16, 4];
    });
    expect_error(&path, &["\"blk.0.attn_k.weight\"", "unused bytes", "wrong type or shape"]);
    // Tensors of an architecture that does not use them: qwen2's biases declared llama.
    let path = edited_gguf(&dir, "tiny-qwen2.gguf", "unused", |m, _| {
        let qwen2: Vec<(String, MetadataValue)> =
            m.iter().filter(|(k, _)| k.starts_with("qwen2.")).map(|(k, v)| (k.clone(), v.clone())).collect();
        for (k, v) in qwen2 {
            m.remove(&k);
            m.insert(k.replacen("qwen2.", "llama.", 1), v);
        }
        m.insert("general.architecture".into(), MetadataValue::String("llama".into()));
    });
    expect_error(&path, &["not used by the llama architecture: blk.0.attn_k.bias"]);
}

/// The audit's edits of the real SmolLM2-135M Q4_1 file (skipped when it is not fetched).
#[test]
fn corrupt_copies_of_smollm2_are_rejected() {
    let Some(model) = model_file("smollm2-135m") else { return };
    let dir = scratch("smollm2");
    let edit = |name: &str, key: &str, value: MetadataValue| {
        edited_copy(&model, &dir, name, |m, _| {
            m.insert(key.to_string(), value);
        })
    };
    let path = edit("blocks", "llama.block_count", MetadataValue::U32(u32::MAX));
    expect_error(&path, &["llama.block_count is 4294967295", "tensors for 30 layers (blk.0 … blk.29)"]);
    std::fs::remove_file(&path).unwrap();
    let eps = "llama.attention.layer_norm_rms_epsilon";
    let path = edit("eps", eps, MetadataValue::F32(f32::NAN));
    expect_error(&path, &[eps, "is NaN"]);
    std::fs::remove_file(&path).unwrap();
    let path = edit("eos", "tokenizer.ggml.eos_token_id", MetadataValue::U32(49152));
    expect_error(&path, &["tokenizer.ggml.eos_token_id is 49152", "outside the vocabulary of 49152 tokens"]);
    std::fs::remove_file(&path).unwrap();
    let path = edit("context", "llama.context_length", MetadataValue::U32(0));
    expect_error(&path, &["llama.context_length is 0"]);
    std::fs::remove_file(&path).unwrap();
    let path = edited_copy(&model, &dir, "embd-f16", |_, t| tensor(t, "token_embd.weight").dtype = GgmlType::F16);
    expect_error(&path, &["\"token_embd.weight\" (F16", "overlaps tensor"]);
    std::fs::remove_file(&path).unwrap();
    let path = edited_copy(&model, &dir, "norm-q8", |_, t| tensor(t, "blk.3.ffn_norm.weight").dtype = GgmlType::Q8_0);
    // 576 F32 values declared Q8_0: 612 of their 2304 bytes are read, the rest left as a gap.
    expect_error(&path, &["\"blk.3.ffn_norm.weight\" (Q8_0", "unused bytes", "wrong type or shape"]);
    std::fs::remove_file(&path).unwrap();
}

// Hugging Face directories get the same checks, naming config.json's fields.

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// A copy of the tiny llama directory with `config.json` edited.
fn edited_hf(base: &Path, name: &str, edit: impl FnOnce(&mut Value)) -> PathBuf {
    let dir = base.join(name);
    copy_dir(&fixtures().join("tiny-llama"), &dir);
    let path = dir.join("config.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut config);
    std::fs::write(&path, serde_json::to_string(&config).unwrap()).unwrap();
    dir
}

#[test]
fn bad_hf_configs_are_rejected_naming_the_field() {
    let base = scratch("hf");
    let dir = edited_hf(&base, "layers", |c| c["num_hidden_layers"] = 4_000_000_000u64.into());
    expect_error(&dir, &["num_hidden_layers", "tensors for 2 layers (model.layers.0 … model.layers.1)"]);
    let dir = edited_hf(&base, "eps", |c| c["rms_norm_eps"] = 0.0.into());
    expect_error(&dir, &["config.json", "rms_norm_eps is 0", "finite and positive"]);
    let dir = edited_hf(&base, "context", |c| c["max_position_embeddings"] = 0.into());
    expect_error(&dir, &["max_position_embeddings is 0"]);
    let dir = edited_hf(&base, "heads", |c| c["num_attention_heads"] = 0.into());
    expect_error(&dir, &["num_attention_heads is 0"]);
    let dir = edited_hf(&base, "eos", |c| c["eos_token_id"] = 300.into());
    expect_error(&dir, &["eos_token_id 300 is outside the vocabulary of 300 tokens"]);
    let dir = edited_hf(&base, "eos-list", |c| c["eos_token_id"] = serde_json::json!([299, -1]));
    expect_error(&dir, &["eos_token_id -1 is not a token id"]);
    let dir = edited_hf(&base, "yarn", |c| {
        c["rope_scaling"] = serde_json::json!({"rope_type": "yarn", "factor": -2.0});
    });
    expect_error(&dir, &["rope_scaling.factor is -2", "finite and positive"]);
    let dir = edited_hf(&base, "gelu", |c| c["hidden_act"] = "gelu".into());
    expect_error(&dir, &["config.json", "hidden_act `gelu`", "SiLU (SwiGLU) only"]);
    // A text file in place of the weights.
    let dir = edited_hf(&base, "weights", |_| {});
    std::fs::write(dir.join("model.safetensors"), "not weights at all\n").unwrap();
    expect_error(&dir, &["model.safetensors", "not a readable safetensors file"]);
}

#[test]
fn a_sliding_window_limits_the_context() {
    let config = |edit: fn(&mut Value)| {
        let mut c: Value =
            serde_json::from_str(&std::fs::read_to_string(fixtures().join("tiny-llama/config.json")).unwrap()).unwrap();
        c["max_position_embeddings"] = 2048.into();
        edit(&mut c);
        serde_json::from_value::<draftsmith_model::HfConfig>(c).unwrap().into_config(Path::new("config.json"))
    };
    let context = |edit| config(edit).unwrap().max_position_embeddings;
    assert_eq!(context(|c| c["sliding_window"] = 64.into()), 2048, "llama has no window");
    assert_eq!(context(|c| c["model_type"] = "mistral".into()), 2048, "mistral without a window");
    assert_eq!(
        context(|c| {
            c["model_type"] = "mistral".into();
            c["sliding_window"] = 64.into();
        }),
        64
    );
    assert_eq!(context(|c| c["sliding_window"] = 4096.into()), 2048);
    assert_eq!(
        context(|c| {
            c["model_type"] = "qwen2".into();
            c["sliding_window"] = 64.into();
            c["use_sliding_window"] = false.into();
        }),
        2048,
        "Qwen2.5's configs name a window they do not use"
    );
    assert_eq!(
        context(|c| {
            c["model_type"] = "qwen2".into();
            c["sliding_window"] = 64.into();
            c["use_sliding_window"] = true.into();
        }),
        64
    );
    let err = config(|c| {
        c["model_type"] = "mistral".into();
        c["sliding_window"] = 0.into();
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("sliding_window is 0"), "{err}");
}

#[test]
fn build_model_checks_the_config_and_the_layer_count() {
    let config = ModelConfig::tiny(Architecture::Llama);
    let source = MemorySource::random(&config, 1);
    let build = |config: &ModelConfig| {
        build_model::<B>(config, &source, LoadOptions::new(MatmulWeights::Dense), &Default::default())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let err = build(&ModelConfig { num_layers: usize::MAX, ..config.clone() });
    assert!(err.contains("<random model>") && err.contains("num_layers is 18446744073709551615"), "{err}");
    let err = build(&ModelConfig { rms_norm_eps: f32::NAN, ..config.clone() });
    assert!(err.contains("rms_norm_eps is NaN"), "{err}");
    let err = build(&ModelConfig { rope_scaling: RopeScaling::PerFrequency { factors: vec![1.0] }, ..config });
    assert!(err.contains("rope_scaling.factors has 1 values, expected 4"), "{err}");
}
