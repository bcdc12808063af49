//! The whole product on a GPU backend, through the `draftsmith` binary on the checked-in tiny
//! model: shared by `tests/wgpu.rs` (run in CI on lavapipe) and `tests/cuda.rs` (an NVIDIA GPU).

use std::path::Path;

use crate::common::{self, bin, fixture, last_json, ok, scratch};
use serde_json::Value;

/// `loss` of `split`'s rows of `metrics.csv` at the first and the last step logged for it.
fn first_and_last_loss(run: &Path, split: &str) -> (f64, f64) {
    let text = std::fs::read_to_string(run.join("metrics.csv")).unwrap();
    let mut rows: Vec<(u64, f64)> = Vec::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        if f[2] == split {
            rows.push((f[0].parse().unwrap(), f[4].parse().unwrap()));
        }
    }
    let at = |step: u64| {
        let v: Vec<f64> = rows.iter().filter(|r| r.0 == step).map(|r| r.1).collect();
        v.iter().sum::<f64>() / v.len() as f64
    };
    (at(rows.first().expect("rows of that split").0), at(rows.last().unwrap().0))
}

fn prompts(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("prompts.jsonl");
    let lines: String = ["the cat", "a dog", "the sea", "blue sky", "red fox", "old tree"]
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{{\"id\": \"p{i}\", \"prompt\": \"{p}\"}}\n"))
        .collect();
    std::fs::write(&path, lines).unwrap();
    path
}

/// `generate --device <device> --weights dense` gives the dense CPU path's greedy ids.
pub fn generate_equals_the_dense_cpu_path(device: &str) {
    let tiny = fixture("tiny-llama.gguf");
    let run = |device: &str| {
        last_json(
            &bin()
                .args(["generate", "--model"])
                .arg(&tiny)
                .args([
                    "--device",
                    device,
                    "--weights",
                    "dense",
                    "--prompt",
                    "the cat sat",
                    "--max-new-tokens",
                    "24",
                    "--json",
                ])
                .output()
                .unwrap(),
        )
    };
    let (gpu, cpu) = (run(device), run("cpu"));
    assert_eq!(gpu["output_ids"], cpu["output_ids"], "{device} {gpu}\ncpu {cpu}");
}

/// distill → train ReDrafter (loss falls, a rerun resumes) → eval of every method against `ar`
/// with no real mismatch, all on `device`.
pub fn redrafter_pipeline_and_every_method(device: &str) {
    let dir = scratch(&format!("cli-{device}"), "pipeline");
    let prompts = prompts(&dir);
    let tiny = fixture("tiny-llama.gguf");
    let data = dir.join("distilled");
    ok(bin()
        .args(["distill", "--device", device, "--model"])
        .arg(&tiny)
        .arg("--data")
        .arg(&prompts)
        .arg("--out")
        .arg(&data)
        .args(["--max-new-tokens", "24"])
        .output()
        .unwrap());

    let run = dir.join("redrafter");
    let train = || {
        bin()
            .args(["train", "redrafter", "--device", device, "--model"])
            .arg(&tiny)
            .arg("--data")
            .arg(&data)
            .arg("--out")
            .arg(&run)
            .args(["--horizon", "3", "--epochs", "6", "--batch-size", "16", "--lr", "0.003", "--checkpoint-every", "4"])
            .output()
            .unwrap()
    };
    assert!(ok(train()).contains("drafter exported"));
    let (first, last) = first_and_last_loss(&run, "train");
    assert!(last < first, "ReDrafter loss on {device}: {first} → {last}");
    assert_resumes(train());

    let methods =
        "ar,prompt-lookup,ngram-trie,token-cache,draft-model,precut,post-use-draft,post-use,post-use-precut,redrafter";
    let out = dir.join("eval");
    let summary = last_json(
        &bin()
            .args(["eval", "--device", device, "--model"])
            .arg(&tiny)
            .arg("--prompts")
            .arg(&prompts)
            .arg("--out")
            .arg(&out)
            .args([
                "--methods",
                methods,
                "--max-new-tokens",
                "20",
                "--beam-width",
                "4",
                "--beam-length",
                "3",
                "--draft-len",
                "3",
                "--json",
                "--drafter",
            ])
            .arg(&run)
            .arg("--draft-model")
            .arg(fixture("tiny-llama"))
            .output()
            .unwrap(),
    );
    check_eval(&summary, methods, &out);
}

/// TokenSwift training (held-out loss falls, a rerun resumes) and its eval against `ar` on `device`.
pub fn tokenswift_trains_and_evaluates(device: &str) {
    let dir = scratch(&format!("cli-{device}"), "tokenswift");
    let books = common::books(&dir);
    let tiny = fixture("tiny-llama.gguf");
    let run = dir.join("run");
    let train = || {
        bin()
            .args(["train", "tokenswift", "--device", device, "--model"])
            .arg(&tiny)
            .arg("--books")
            .arg(&books)
            .arg("--out")
            .arg(&run)
            .args([
                "--eval-books",
                "gamma",
                "--seq-len",
                "32",
                "--batch-size",
                "4",
                "--steps",
                "8",
                "--warmup-steps",
                "1",
                "--lr",
                "0.003",
                "--checkpoint-every",
                "4",
                "--prompts-per-book",
                "2",
                "--prompt-tokens",
                "24",
            ])
            .output()
            .unwrap()
    };
    assert!(ok(train()).contains("heads exported"));
    // Training rows are logged once here; the held-out loss is logged at every checkpoint.
    let (first, last) = first_and_last_loss(&run, "val");
    assert!(last < first, "TokenSwift loss on {device}: {first} → {last}");
    assert_resumes(train());

    let out = dir.join("eval");
    let summary = last_json(
        &bin()
            .args(["eval", "--device", device, "--model"])
            .arg(&tiny)
            .args(["--methods", "ar,tokenswift", "--no-chat-template", "--max-new-tokens", "20", "--json", "--drafter"])
            .arg(&run)
            .arg("--prompts")
            .arg(run.join("eval-prompts.jsonl"))
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap(),
    );
    check_eval(&summary, "ar,tokenswift", &out);
}

/// A rerun of a finished run loads its last checkpoint (burn records onto the GPU device)
/// instead of training again.
fn assert_resumes(out: std::process::Output) {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    ok(out);
    assert!(stderr.contains("resuming at step"), "{stderr}");
}

/// Every method was run, none has a real mismatch (near-ties are counted), the report names the
/// backend's drift bound.
fn check_eval(summary: &Value, methods: &str, out: &Path) {
    for m in methods.split(',') {
        let s = &summary["methods"][m];
        assert_eq!(s["lossless"], true, "{m}: {summary}");
        assert!(s["near_ties"].as_u64().is_some(), "{m}: {s}");
    }
    let written: Value = serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert!(written["near_tie_bound"]["drift"].as_f64().is_some(), "the near-tie check ran: {written}");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("not batch-invariant") && report.contains("Near-ties:"), "{report}");
}
