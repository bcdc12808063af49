//! The drafter pipeline end to end on the checked-in tiny model: distill → train redrafter →
//! export → eval (lossless against ar), and the pairing checks between its stages.

mod common;

use common::{bin, err, fixture, ok};
use serde_json::Value;
use std::path::Path;
use std::process::Output;

fn train(model: &Path, data: &Path, run: &Path, labels: &str) -> Output {
    bin()
        .args(["train", "redrafter", "--model"])
        .arg(model)
        .arg("--data")
        .arg(data)
        .arg("--out")
        .arg(run)
        .args([
            "--labels",
            labels,
            "--horizon",
            "3",
            "--epochs",
            "15",
            "--batch-size",
            "32",
            "--lr",
            "0.003",
            "--checkpoint-every",
            "10",
        ])
        .output()
        .unwrap()
}

#[test]
fn distill_train_export_eval_is_lossless_and_stages_refuse_mismatched_inputs() {
    let dir = std::env::temp_dir().join(format!("draftsmith-cli-pipeline-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let prompts = dir.join("prompts.jsonl");
    let lines: String = ["the cat", "a dog", "the sea", "blue sky", "red fox", "old tree", "new moon", "big ship"]
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{{\"id\": \"p{i}\", \"prompt\": \"{p}\"}}\n"))
        .collect();
    std::fs::write(&prompts, lines).unwrap();
    let tiny = fixture("tiny-llama.gguf");
    let data = dir.join("distilled");
    ok(bin()
        .args(["distill", "--model"])
        .arg(&tiny)
        .arg("--data")
        .arg(&prompts)
        .arg("--out")
        .arg(&data)
        .args(["--max-new-tokens", "24", "--teacher-len", "4"])
        .output()
        .unwrap());

    let run = dir.join("run");
    let output = train(&tiny, &data, &run, "teacher");
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    let stdout = ok(output);
    assert!(stdout.contains("drafter exported"), "{stdout}");
    // Off a terminal the bars draw nothing: progress comes as lines, the last at the end, and
    // each checkpoint's validation is printed too.
    let finished = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("train: ")?.split_once(' ')?.0.split_once('/'))
        .any(|(done, total)| done == total);
    assert!(finished, "{stderr}");
    assert!(stderr.contains(": validation top-1 % per head"), "{stderr}");
    for f in ["drafter.safetensors", "config.json", "metrics.csv", "summary.json", "checkpoint/state.json"] {
        assert!(run.join(f).is_file(), "{f} missing");
    }
    let again = ok(train(&tiny, &data, &run, "teacher"));
    assert!(again.contains("drafter exported"), "a finished run reruns from its last checkpoint: {again}");

    // Offline mode: `hidden` writes the target's hidden states beside the dataset, `train` finds
    // them there and trains the same drafter without the target's passes.
    let hidden =
        |extra: &[&str]| bin().args(["hidden", "--model"]).arg(&tiny).arg("--data").arg(&data).args(extra).output();
    let stdout = ok(hidden(&["--sequences-per-shard", "3"]).unwrap());
    assert!(stdout.contains("sequences") && stdout.contains("hidden-states"), "{stdout}");
    assert!(data.join("hidden-states/hidden-manifest.json").is_file());
    let cached_run = dir.join("run-cached");
    let output = train(&tiny, &data, &cached_run, "teacher");
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    ok(output);
    assert!(stderr.contains("cached in") && stderr.contains("hidden-states"), "{stderr}");
    assert_eq!(
        std::fs::read(cached_run.join("drafter.safetensors")).unwrap(),
        std::fs::read(run.join("drafter.safetensors")).unwrap(),
        "the same drafter as online mode"
    );
    // A cache read with other settings does not fit the run.
    let short = dir.join("hidden-short");
    ok(hidden(&["--max-seq-len", "16", "--out", short.to_str().unwrap()]).unwrap());
    let e = err(bin()
        .args(["train", "redrafter", "--model"])
        .arg(&tiny)
        .arg("--data")
        .arg(&data)
        .arg("--out")
        .arg(dir.join("run-short"))
        .arg("--hidden")
        .arg(&short)
        .output()
        .unwrap());
    assert!(e.contains("hidden-manifest.json") && e.contains("other reading settings"), "{e}");

    let exported = dir.join("exported");
    ok(bin().arg("export").arg(&run).arg("--out").arg(&exported).output().unwrap());
    assert_eq!(
        std::fs::read(exported.join("drafter.safetensors")).unwrap(),
        std::fs::read(run.join("drafter.safetensors")).unwrap()
    );

    // The reference layout: refused without the target for a tied head, then written with it;
    // draftsmith decodes with it losslessly too.
    let reference = dir.join("reference");
    let export_reference = |extra: &[&str]| {
        bin().arg("export").arg(&run).arg("--out").arg(&reference).args(["--format", "reference"]).args(extra).output()
    };
    let e = err(export_reference(&[]).unwrap());
    assert!(e.contains("config.json") && e.contains("--model"), "{e}");
    let stdout = ok(export_reference(&["--probe", "--model", tiny.to_str().unwrap()]).unwrap());
    assert!(stdout.contains("reference layout"), "{stdout}");
    for f in ["model.safetensors", "config.json", "probe.safetensors"] {
        assert!(reference.join(f).is_file(), "{f} missing");
    }
    let e =
        err(bin().arg("export").arg(&run).args(["--dtype", "f16"]).arg("--out").arg(dir.join("x")).output().unwrap());
    assert!(e.contains("f32 only"), "{e}");

    let eval_out = dir.join("eval");
    let stdout = ok(bin()
        .args(["eval", "--model"])
        .arg(&tiny)
        .arg("--prompts")
        .arg(&prompts)
        .arg("--out")
        .arg(&eval_out)
        .args([
            "--methods",
            "ar,redrafter",
            "--max-new-tokens",
            "24",
            "--beam-width",
            "4",
            "--beam-length",
            "4",
            "--json",
            "--drafter",
        ])
        .arg(&exported)
        .output()
        .unwrap());
    let json: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(json["methods"]["redrafter"]["lossless"], true, "{json}");
    assert!(json["methods"]["redrafter"]["tokens_per_step"].as_f64().unwrap() >= 1.0);
    let stdout = ok(bin()
        .args(["eval", "--model"])
        .arg(&tiny)
        .arg("--prompts")
        .arg(&prompts)
        .arg("--out")
        .arg(dir.join("eval-reference"))
        .args(["--methods", "ar,redrafter", "--max-new-tokens", "24", "--beam-width", "4", "--json", "--drafter"])
        .arg(&reference)
        .output()
        .unwrap());
    let json: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(json["methods"]["redrafter"]["lossless"], true, "the reference export decodes losslessly: {json}");

    // Another target: the dataset and the drafter both name the one they belong to.
    let other = fixture("tiny-qwen2.gguf");
    let e = err(train(&other, &data, &dir.join("run2"), "ground-truth"));
    assert!(e.contains("distilled from") && e.contains("distill it again"), "{e}");
    let e = err(bin()
        .args(["eval", "--model"])
        .arg(&other)
        .arg("--prompts")
        .arg(&prompts)
        .arg("--out")
        .arg(dir.join("eval2"))
        .args(["--methods", "ar,redrafter", "--max-new-tokens", "8", "--drafter"])
        .arg(&exported)
        .output()
        .unwrap());
    assert!(e.contains("trained for target") || e.contains("does not fit"), "{e}");
    // `reproduce --dry-run` loads every drafter the grid names against the recipe's target
    // before any point runs, and writes nothing.
    let recipe = dir.join("grid.toml");
    let results = dir.join("results");
    for (model, fits) in [(&tiny, true), (&other, false)] {
        std::fs::write(
            &recipe,
            format!(
                "name = \"g\"\nmodel = {:?}\nprompts = {:?}\nmethods = [\"ar\", \"redrafter\"]\n[grid]\ndrafter = [{:?}, {:?}]\n",
                model.display().to_string(),
                prompts.display().to_string(),
                run.display().to_string(),
                exported.display().to_string()
            ),
        )
        .unwrap();
        let out = bin().arg("reproduce").arg(&recipe).arg("--dry-run").arg("--results").arg(&results).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.success(), fits, "{stderr}");
        if !fits {
            assert!(
                stderr.contains("grid point drafter=")
                    && (stderr.contains("trained for target") || stderr.contains("does not fit")),
                "{stderr}"
            );
        }
        assert!(!results.exists(), "a dry run writes nothing");
    }
    let e = err(bin()
        .args(["eval", "--model"])
        .arg(&tiny)
        .arg("--prompts")
        .arg(&prompts)
        .arg("--out")
        .arg(dir.join("eval3"))
        .args(["--methods", "ar,redrafter", "--max-new-tokens", "8"])
        .output()
        .unwrap());
    assert!(e.contains("--drafter"), "{e}");
}
