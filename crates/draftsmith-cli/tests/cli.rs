//! The `draftsmith` binary end to end on the checked-in tiny model (no network, no real model).

mod common;

use common::{bin, fixture, last_json};
use std::path::Path;
use std::process::Output;

fn scratch(name: &str) -> std::path::PathBuf {
    common::scratch("cli-test", name)
}

/// The checked-in Hugging Face model directory's files, copied into `to`.
fn copy_tiny_llama(to: &Path) {
    for entry in std::fs::read_dir(fixture("tiny-llama")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

fn generate(model: &Path, extra: &[&str]) -> Output {
    bin().args(["generate", "--model"]).arg(model).args(["--prompt", "the cat", "--json"]).args(extra).output().unwrap()
}

#[test]
fn generate_json_contract_on_gguf_and_hf_directory() {
    let a = last_json(&generate(&fixture("tiny-llama.gguf"), &["--no-chat-template", "--max-new-tokens", "6"]));
    for key in ["prompt_ids", "output_ids", "text", "decode_tokens_per_s", "prefill_tokens_per_s"] {
        assert!(a.get(key).is_some(), "missing {key} in {a}");
    }
    assert_eq!(
        a["prompt_ids"],
        serde_json::json!([116, 257, 296]),
        "raw prompt as the reference tokenizer splits it, no BOS"
    );
    let b = last_json(&generate(&fixture("tiny-llama"), &["--no-chat-template", "--max-new-tokens", "6"]));
    assert_eq!(a["output_ids"], b["output_ids"], "same weights, same greedy output");
    let chat = last_json(&generate(&fixture("tiny-llama.gguf"), &[]));
    assert_eq!(chat["prompt_ids"][0], 298, "the chat template opens with <|im_start|>");
}

#[test]
fn seeded_sampling_is_reproducible() {
    let args = ["--no-chat-template", "--temperature", "1.0", "--top-p", "0.9", "--seed", "4"];
    let a = last_json(&generate(&fixture("tiny-qwen2.gguf"), &args));
    let b = last_json(&generate(&fixture("tiny-qwen2.gguf"), &args));
    assert_eq!(a["output_ids"], b["output_ids"]);
}

#[test]
fn hf_ids_use_a_prepopulated_cache_and_fail_fast_offline() {
    let home = scratch("hf");
    let snapshot = home.join("hub/models--tiny--llama/snapshots/0123456789abcdef");
    std::fs::create_dir_all(&snapshot).unwrap();
    copy_tiny_llama(&snapshot);
    std::fs::create_dir_all(home.join("hub/models--tiny--llama/refs")).unwrap();
    std::fs::write(home.join("hub/models--tiny--llama/refs/main"), "0123456789abcdef").unwrap();
    let out = bin()
        .env("HF_HOME", &home)
        .args([
            "generate",
            "--model",
            "hf:tiny/llama",
            "--prompt",
            "the cat",
            "--no-chat-template",
            "--max-new-tokens",
            "3",
            "--json",
        ])
        .output()
        .unwrap();
    let direct = last_json(&generate(&fixture("tiny-llama"), &["--no-chat-template", "--max-new-tokens", "3"]));
    assert_eq!(last_json(&out)["output_ids"], direct["output_ids"]);

    let out = bin()
        .env("HF_HOME", &home)
        .env("HF_HUB_OFFLINE", "1")
        .args(["generate", "--model", "hf:nobody/missing", "--prompt", "x"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("hf:nobody/missing") && err.contains("HF_HUB_OFFLINE"), "{err}");
}

#[test]
fn bad_arguments_are_clear_errors() {
    // Out-of-range sampling values are refused before the model is loaded, naming the value.
    for (flag, value, name) in
        [("--top-p", "2", "top_p"), ("--temperature", "-1", "temperature"), ("--min-p", "1.5", "min_p")]
    {
        let out = bin()
            .args(["generate", "--model", "/nonexistent/model.gguf", "--prompt", "x", &format!("{flag}={value}")])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(name) && err.contains(value), "{flag} {value}: {err}");
    }
    let out = bin().args(["fetch", "no-such-thing"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("smollm2-135m"), "lists the known names: {err}");
    let tiny = fixture("tiny-llama.gguf");
    let out = generate(&tiny, &["--no-chat-template", "--prompt", ""]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("the prompt is empty"), "{err}");
    // With the chat template too, and a blank prompt file is named.
    let out = generate(&tiny, &["--prompt", "  "]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--prompt: the prompt is empty (only whitespace)"), "{err}");
    let blank = std::env::temp_dir().join(format!("draftsmith-blank-prompt-{}.txt", std::process::id()));
    std::fs::write(&blank, "\n").unwrap();
    let out = bin().args(["generate", "--model"]).arg(&tiny).arg("--prompt-file").arg(&blank).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains(&format!("{}: the prompt is empty", blank.display())), "{err}");
    let out = bin().args(["generate", "--model", "/nonexistent/model.gguf", "--prompt", "x"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("/nonexistent/model.gguf"), "{err}");
    // Too few new tokens: refused before loading anything, not run as one token (generate,
    // eval) or timed over none (bench).
    let model = "/nonexistent/model.gguf";
    for (args, bound) in [
        (vec!["generate", "--model", model, "--prompt", "x", "--max-new-tokens", "0"], "at least 1"),
        (
            vec!["eval", "--model", model, "--methods", "ar", "--prompts", "mt-bench", "--max-new-tokens", "0"],
            "at least 1",
        ),
        (vec!["bench", "ar", "--model", model, "--max-new-tokens", "1"], "at least 2"),
    ] {
        let out = bin().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("--max-new-tokens") && err.contains(bound), "{args:?}: {err}");
    }
}

#[test]
fn a_nan_in_the_weights_is_refused_rather_than_decoded() {
    // A norm's scale and a quantized matrix are checked as they load (the int8 activations
    // would turn a NaN into finite numbers); a NaN in an f32 matrix shows in the prompt's logits.
    for (tensor, expected) in [
        ("model.norm.weight", "tensor `model.norm.weight`: value 0 is NaN"),
        ("model.layers.0.self_attn.q_proj.weight", "logits are not finite"),
    ] {
        let dir = scratch(&format!("nan-weights-{tensor}"));
        std::fs::create_dir_all(&dir).unwrap();
        copy_tiny_llama(&dir);
        // The tensor's first weight (F32) set to NaN, in place.
        let path = dir.join("model.safetensors");
        let mut bytes = std::fs::read(&path).unwrap();
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
        let start = header[tensor]["data_offsets"][0].as_u64().unwrap() as usize;
        bytes[8 + n + start..][..4].copy_from_slice(&f32::NAN.to_le_bytes());
        std::fs::write(&path, bytes).unwrap();
        let out = generate(&dir, &["--no-chat-template", "--max-new-tokens", "4"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(expected), "{tensor}: {err}");
    }
    // In a GGUF, a Q8_0 block's scale (`blk.0.ffn_down.weight`, one 34-byte block per row, at
    // 13312 in a data section of 18176 bytes ending the file): row 1's set to NaN.
    let path = scratch("nan-gguf").join("model.gguf");
    let mut bytes = std::fs::read(fixture("tiny-llama.gguf")).unwrap();
    let data = bytes.len() - 18176;
    bytes[data + 13312 + 34..][..2].copy_from_slice(&0x7E00u16.to_le_bytes());
    std::fs::write(&path, bytes).unwrap();
    let out = generate(&path, &["--no-chat-template", "--max-new-tokens", "4"]);
    let err = String::from_utf8_lossy(&out.stderr);
    let expected = "tensor `blk.0.ffn_down.weight`: row 1, block 0: its scale is NaN";
    assert!(!out.status.success() && err.contains(expected), "{err}");
}

#[test]
fn a_huge_max_new_tokens_runs_to_the_context_without_reserving_it() {
    // The cache is sized to what fits the context, not prompt + max_new_tokens (which would
    // ask for hundreds of GB here, or overflow).
    for max in ["1000000000", "18446744073709551615"] {
        let out = generate(&fixture("tiny-llama.gguf"), &["--no-chat-template", "--max-new-tokens", max]);
        let json = last_json(&out);
        assert_eq!(json["stop"], "context", "{max}: {json}");
    }
}

#[test]
fn a_misspelt_environment_setting_stops_the_run() {
    // Each would otherwise fall back to its default unseen; a kernel path the CPU lacks too
    // (`amx` only where the tiles are, so an unknown name stands in for it on every machine).
    for (var, value, expected) in [
        ("DRAFTSMITH_THREADS", "two", "positive number of threads"),
        ("DRAFTSMITH_THREADS", "0", "positive number of threads"),
        ("DRAFTSMITH_KERNEL_PATH", "avx512", "not a kernel path (scalar, avx2, avx512vnni, amx)"),
        ("DRAFTSMITH_HUGEPAGES", "off", "expected 0"),
    ] {
        let out = bin()
            .env(var, value)
            .args(["generate", "--model", &fixture("tiny-llama.gguf").to_string_lossy(), "--prompt", "x"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{var}={value} ran");
        assert!(err.contains(&format!("{var}={value}")) && err.contains(expected), "{var}={value}: {err}");
    }
    let out = bin()
        .env("DRAFTSMITH_THREADS", "1")
        .env("DRAFTSMITH_KERNEL_PATH", "scalar")
        .env("DRAFTSMITH_HUGEPAGES", "0")
        .args(["generate", "--model", &fixture("tiny-llama.gguf").to_string_lossy(), "--prompt", "x"])
        .args(["--max-new-tokens", "2"])
        .output()
        .unwrap();
    assert!(out.status.success(), "valid settings run: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn bench_ar_reports_the_contract_fields() {
    let out = bin()
        .args(["bench", "ar", "--model"])
        .arg(fixture("tiny-llama.gguf"))
        .args(["--prompts", "2", "--max-new-tokens", "4", "--tree-size", "8", "--json"])
        .output()
        .unwrap();
    let json = last_json(&out);
    for key in ["decode_tokens_per_s", "prefill_tokens_per_s", "tree64_over_step1_cost"] {
        assert!(json[key].as_f64().unwrap() > 0.0, "{key} in {json}");
    }
    // The verify cost curve: chains and trees at the contexts that fit (2048 does not here).
    let curve = json["verify_curve"].as_array().unwrap();
    assert!(curve.iter().any(|p| p["shape"] == "chain" && p["n"] == 64 && p["context"] == 64), "{json}");
    assert!(curve.iter().all(|p| p["ms"].as_f64().unwrap() > 0.0 && p["context"] == 64));
    assert!(json["machine"]["cpu_model"].as_str().is_some_and(|m| !m.is_empty()));
}

#[test]
fn bench_ar_probes_the_host_again_after_the_curve() {
    // The roofline (and its probes) belongs to the quantized CPU path, which the tiny fixtures
    // (dense) do not take: the default model, where the models are required (CI).
    if std::env::var("DRAFTSMITH_REQUIRE_MODELS").as_deref() != Ok("1") {
        return;
    }
    let out = bin()
        .args(["bench", "ar", "--model", "smollm2-135m", "--prompts", "1", "--max-new-tokens", "2"])
        .args(["--tree-size", "4", "--contexts", "64", "--curve-sizes", "1,2", "--curve-runs", "1", "--json"])
        .output()
        .unwrap();
    let json = last_json(&out);
    let machine = &json["machine"];
    let err = String::from_utf8_lossy(&out.stderr);
    if machine["instruction_peak_gmac_s"].as_f64().is_some_and(|p| p > 0.0) {
        assert!(machine["instruction_peak_after_gmac_s"].as_f64().is_some_and(|p| p > 0.0), "{machine}");
        let said = err.contains("instruction peak before / after the run")
            || err.contains("warning: the instruction peak moved");
        assert!(said, "{err}");
    } else {
        assert!(machine.get("instruction_peak_after_gmac_s").is_none(), "no peak, nothing to probe again: {machine}");
    }
}

#[test]
fn a_full_disk_on_stdout_is_an_error_and_a_closed_pipe_ends_quietly() {
    let model = fixture("tiny-llama.gguf");
    let args = ["generate", "--model", model.to_str().unwrap(), "--prompt", "the cat", "--no-chat-template"];
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let out = bin().args(args).stdout(full).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("cannot write to standard output"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // `draftsmith generate … | head -c 1`: the reader is gone before the first token.
    let mut child =
        bin().args(args).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !err.contains("panicked") && !err.contains("error"), "{err}");
    // A `--stats-out` that cannot be written is an error naming it, not lines lost unseen.
    let out = bin().args(args).args(["--stats-out", "/dev/full"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("/dev/full"), "{err}");
}

#[test]
fn a_chat_template_that_does_not_compile_leaves_raw_text_usable() {
    // `{% endfor %}` misspelt in place (same length): minijinja cannot compile the template.
    let bytes = std::fs::read(fixture("tiny-llama.gguf")).unwrap();
    let at = bytes.windows(6).position(|w| w == b"endfor").expect("the fixture's template loops");
    let mut broken = bytes.clone();
    broken[at..at + 6].copy_from_slice(b"enxfor");
    let path = scratch("broken-template").join("model.gguf");
    std::fs::write(&path, broken).unwrap();
    let out = generate(&path, &["--max-new-tokens", "2"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("model.gguf: chat template") && err.contains("--no-chat-template"),
        "{err}"
    );
    last_json(&generate(&path, &["--no-chat-template", "--max-new-tokens", "2"]));
}

#[test]
fn a_model_link_that_leads_nowhere_is_named() {
    let dir = scratch("dangling-link");
    let link = dir.join("model.gguf");
    std::os::unix::fs::symlink(dir.join("removed.gguf"), &link).unwrap();
    let out = generate(&link, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("a symbolic link that does not lead to a file"), "{err}");
}

#[test]
fn a_parameter_the_method_does_not_read_is_warned_about() {
    let out =
        generate(&fixture("tiny-llama.gguf"), &["--no-chat-template", "--max-new-tokens", "2", "--beam-width", "4"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && err.contains("warning: --beam-width is not read by `ar`"), "{err}");
    let out = generate(&fixture("tiny-llama.gguf"), &["--no-chat-template", "--max-new-tokens", "2", "--penalty", "1"]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("warning"), "every method reads the penalty");
}
