//! Spot checks on the real default model (SmolLM2-135M-Instruct, Q4_1/Q8_0/F32) against values
//! computed with gguf-py, plus an optional Qwen2.5-Coder-1.5B (Q4_K) check when that model has
//! been fetched. Missing models skip the test unless `DRAFTSMITH_REQUIRE_MODELS=1`.

// Exact f32 values (as gguf-py prints them) are spelled out in full on purpose.
#![allow(clippy::excessive_precision)]

use std::path::PathBuf;

use draftsmith_gguf::{GgmlType, GgufFile};

/// `$DRAFTSMITH_HOME`, else `$HOME/.cache/draftsmith`.
fn draftsmith_home() -> PathBuf {
    match std::env::var_os("DRAFTSMITH_HOME") {
        Some(home) => PathBuf::from(home),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/draftsmith"),
    }
}

fn models_required() -> bool {
    std::env::var("DRAFTSMITH_REQUIRE_MODELS").is_ok_and(|v| v == "1")
}

/// The default model, or `None` (after a notice) when it is absent and not required.
fn smollm2() -> Option<GgufFile> {
    let path = draftsmith_home().join("models/smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf");
    if !path.is_file() {
        if models_required() {
            panic!(
                "{} is missing and DRAFTSMITH_REQUIRE_MODELS=1: run `draftsmith fetch smollm2-135m`",
                path.display()
            );
        }
        eprintln!("skipping: {} not found (run `draftsmith fetch smollm2-135m`)", path.display());
        return None;
    }
    Some(GgufFile::open(&path).unwrap())
}

/// Mean and (population) standard deviation, accumulated in f64.
fn mean_std(values: &[f32]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
    let var = values.iter().map(|&v| (f64::from(v) - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}

fn assert_close(what: &str, got: f64, expected: f64, tol: f64) {
    assert!((got - expected).abs() <= tol, "{what}: got {got}, expected {expected} ± {tol}");
}

#[test]
fn smollm2_metadata() {
    let Some(gguf) = smollm2() else { return };
    assert_eq!(gguf.version(), 3);
    assert_eq!(gguf.get_str("general.architecture").unwrap(), "llama");
    assert_eq!(gguf.get_u64("llama.block_count").unwrap(), 30);
    assert_eq!(gguf.get_u64("llama.embedding_length").unwrap(), 576);
    assert_eq!(gguf.get_u64("llama.attention.head_count").unwrap(), 9);
    assert_eq!(gguf.get_u64("llama.attention.head_count_kv").unwrap(), 3);
    assert_eq!(gguf.get_str("tokenizer.ggml.model").unwrap(), "gpt2");
    let tokens = gguf.get_str_array("tokenizer.ggml.tokens").unwrap();
    assert_eq!(tokens.len(), 49152);
    assert_eq!(gguf.get_u64("tokenizer.ggml.eos_token_id").unwrap(), 2);
    assert_eq!(tokens[2], "<|im_end|>");
    assert!(gguf.get_f32("llama.attention.layer_norm_rms_epsilon").unwrap() > 0.0);
    assert_eq!(gguf.get_i64_array("tokenizer.ggml.token_type").unwrap().len(), 49152);
    assert_eq!(gguf.tensors().len(), 272);
    let err = gguf.get_u64("general.architecture").unwrap_err().to_string();
    assert!(err.contains("SmolLM2-135M-Instruct.Q4_1.gguf") && err.contains("wrong type"), "{err}");
}

#[test]
fn smollm2_token_embd_q8_0() {
    let Some(gguf) = smollm2() else { return };
    let info = gguf.tensor("token_embd.weight").unwrap();
    assert_eq!((info.dtype, info.dims.as_slice()), (GgmlType::Q8_0, &[576u64, 49152][..]));
    let w = gguf.dequantize("token_embd.weight").unwrap();
    assert_eq!(w.len(), 576 * 49152);
    let (mean, std) = mean_std(&w);
    assert_close("mean", mean, -0.000542, 5e-7);
    assert_close("std", std, 0.135578, 5e-7);
    // gguf-py's exact values (f64 sums differ only in rounding order).
    assert_close("mean (gguf-py)", mean, -0.0005422890449153783, 1e-12);
    assert_close("std (gguf-py)", std, 0.13557820779584165, 1e-12);
    assert_eq!(
        w[..6],
        [
            -0.10654449462890625,
            0.032978057861328125,
            0.048198699951171875,
            -0.022830963134765625,
            -0.06849288940429688,
            -0.04566192626953125
        ]
    );
    assert_eq!(w[576..580], [-0.0238037109375, -0.015869140625, -0.0396728515625, 0.015869140625]);
    assert_eq!(*w.last().unwrap(), -0.0417022705078125);
}

#[test]
fn smollm2_attn_q_q4_1() {
    let Some(gguf) = smollm2() else { return };
    let w = gguf.dequantize("blk.0.attn_q.weight").unwrap();
    assert_eq!(gguf.tensor("blk.0.attn_q.weight").unwrap().dtype, GgmlType::Q4_1);
    let (mean, std) = mean_std(&w);
    assert_close("std", std, 0.283946, 5e-7);
    assert_close("mean (gguf-py)", mean, 0.00017850363144168146, 1e-12);
    assert_close("std (gguf-py)", std, 0.28394606853848364, 1e-12);
    let expected = [-0.09631, 0.15735, -0.09631, -0.73047];
    for (i, (&got, want)) in w.iter().zip(expected).enumerate() {
        assert_close(&format!("row 0 [{i}]"), got.into(), want, 5e-6);
    }
    assert_eq!(w[576..580], [-0.1173095703125, -0.1173095703125, -0.19281005859375, 0.26019287109375]);
}

#[test]
fn smollm2_every_tensor_dequantizes() {
    let Some(gguf) = smollm2() else { return };
    gguf.check_all_supported().unwrap();
    let start = std::time::Instant::now();
    let mut total = 0usize;
    for info in gguf.tensors() {
        let w = gguf.dequantize(&info.name).unwrap();
        assert_eq!(w.len() as u64, info.n_elements(), "{}", info.name);
        assert!(w.iter().all(|v| v.is_finite()), "{} has non-finite values", info.name);
        total += w.len();
    }
    eprintln!("dequantized {total} values in {:?}", start.elapsed());
    let (_, std) = mean_std(&gguf.dequantize("blk.29.ffn_down.weight").unwrap());
    assert_close("blk.29.ffn_down std (gguf-py)", std, 0.18311777125933074, 1e-12);
    let norm = gguf.dequantize("output_norm.weight").unwrap();
    assert_eq!(norm[..4], [1.7578125, 1.8203125, 1.78125, 1.6015625]);
}

/// Qwen2.5-Coder-1.5B (Q4_K) spot check on a GGUF under `$DRAFTSMITH_HOME/models/*/` (found by
/// its metadata, not its name).
#[test]
#[ignore = "needs `draftsmith fetch qwen2.5-coder-1.5b`; run with --ignored"]
fn qwen_1_5b_attn_q_q4_k() {
    let path = find_qwen_1_5b().unwrap_or_else(|| {
        panic!(
            "no Qwen2.5-1.5B GGUF under {}: run `draftsmith fetch qwen2.5-coder-1.5b`",
            draftsmith_home().join("models").display()
        )
    });
    let gguf = GgufFile::open(&path).unwrap();
    let info = gguf.tensor("blk.0.attn_q.weight").unwrap();
    assert_eq!(info.dtype, GgmlType::Q4_K);
    let w = gguf.dequantize("blk.0.attn_q.weight").unwrap();
    let (_, std) = mean_std(&w);
    assert_close("std", std, 0.025016, 5e-7);
    let expected = [-0.00141, 0.00102, 0.00102, -0.00627];
    for (i, (&got, want)) in w.iter().zip(expected).enumerate() {
        assert_close(&format!("row 0 [{i}]"), got.into(), want, 5e-6);
    }
}

/// A `*.gguf` under the models dir whose metadata says qwen2 with hidden size 1536.
fn find_qwen_1_5b() -> Option<PathBuf> {
    let dirs = std::fs::read_dir(draftsmith_home().join("models")).ok()?;
    let files = dirs.flatten().filter_map(|d| std::fs::read_dir(d.path()).ok()).flatten().flatten();
    files.map(|f| f.path()).filter(|p| p.extension().is_some_and(|e| e == "gguf")).find(|p| {
        GgufFile::open(p).is_ok_and(|g| {
            g.get_str("general.architecture").is_ok_and(|a| a == "qwen2")
                && g.get_u64("qwen2.embedding_length").is_ok_and(|n| n == 1536)
        })
    })
}
