//! `draftsmith eval` end to end on the checked-in tiny model: the JSON contract, the lossless
//! check, resuming, and errors that name what is wrong.

mod common;

use common::{bin, last_json};
use std::path::PathBuf;
use std::process::Output;

fn scratch(name: &str) -> std::path::PathBuf {
    common::scratch("eval-test", name)
}

fn eval(prompts: &PathBuf, out: &PathBuf, extra: &[&str]) -> Output {
    let model =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()))
            .join("../../tests/fixtures/tiny-llama.gguf");
    bin()
        .args(["eval", "--model"])
        .arg(model)
        .args(["--methods", "ar,prompt-lookup", "--prompts"])
        .arg(prompts)
        .arg("--out")
        .arg(out)
        .args(["--no-chat-template", "--json"])
        .args(extra)
        .output()
        .unwrap()
}

fn lines(path: PathBuf) -> usize {
    std::fs::read_to_string(path).unwrap().lines().count()
}

#[test]
fn eval_reports_the_contract_is_lossless_and_resumes() {
    let dir = scratch("contract");
    let prompts = dir.join("prompts.jsonl");
    std::fs::write(&prompts, "{\"id\": \"repeat\", \"prompt\": \"the cat sat on the mat and the cat sat\"}\n{\"id\": 7, \"turns\": [\"the dog\", \"second turn\"]}\n").unwrap();
    let out = dir.join("run");
    let first = eval(&prompts, &out, &["--max-new-tokens", "10"]);
    // stderr is no terminal here: progress comes as lines, the last at the end.
    assert!(
        String::from_utf8_lossy(&first.stderr).contains("eval: 4/4 ["),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let json = last_json(&first);
    for method in ["ar", "prompt-lookup"] {
        let m = &json["methods"][method];
        assert_eq!(m["lossless"], true, "{json}");
        for key in ["tokens_per_step", "speedup", "speedup_with_prefill", "mean_verify_ms"] {
            assert!(m.get(key).is_some(), "{method}: missing {key} in {json}");
        }
    }
    assert_eq!(json["methods"]["ar"]["tokens_per_step"], 1.0);
    assert!(json["methods"]["prompt-lookup"]["tokens_per_step"].as_f64().unwrap() >= 1.0);
    for file in ["manifest.json", "records.jsonl", "summary.json", "report.md", "plot.svg"] {
        assert!(out.join(file).is_file(), "{file}");
    }
    assert_eq!(lines(out.join("records.jsonl")), 4, "2 prompts × 2 methods");

    // An interrupted run: drop the last pair and tear the line before it; the rerun redoes both.
    let text = std::fs::read_to_string(out.join("records.jsonl")).unwrap();
    let kept: Vec<&str> = text.lines().take(2).collect();
    std::fs::write(out.join("records.jsonl"), format!("{}\n{}", kept.join("\n"), "{\"prompt_id\": \"7\", \"me"))
        .unwrap();
    let again = last_json(&eval(&prompts, &out, &["--max-new-tokens", "10"]));
    assert_eq!(lines(out.join("records.jsonl")), 4, "only the missing pairs ran");
    assert_eq!(again["methods"]["prompt-lookup"]["lossless"], true);
    let before = std::fs::read_to_string(out.join("records.jsonl")).unwrap();
    last_json(&eval(&prompts, &out, &["--max-new-tokens", "10"]));
    assert_eq!(std::fs::read_to_string(out.join("records.jsonl")).unwrap(), before, "a complete run reruns nothing");

    let changed = eval(&prompts, &out, &["--max-new-tokens", "11"]);
    let err = String::from_utf8_lossy(&changed.stderr);
    assert!(!changed.status.success() && err.contains("max_new_tokens: 11 vs 10"), "{err}");

    // `ar` reused from the finished run, named by its directory; a run that decodes otherwise
    // is refused before its own directory is written.
    let reused = dir.join("reused");
    let json =
        last_json(&eval(&prompts, &reused, &["--max-new-tokens", "10", "--reuse-ar-from", out.to_str().unwrap()]));
    assert_eq!(json["methods"]["prompt-lookup"]["lossless"], true);
    assert_eq!(lines(reused.join("records.jsonl")), 4);
    let other = dir.join("other");
    let refused = eval(&prompts, &other, &["--max-new-tokens", "11", "--reuse-ar-from", out.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && err.contains("decoded otherwise"), "{err}");
    assert!(!other.join("manifest.json").exists(), "nothing written");

    // A source holding two `ar` records of one prompt is refused, naming the file and prompt.
    let twice = dir.join("twice");
    std::fs::create_dir_all(&twice).unwrap();
    std::fs::copy(out.join("manifest.json"), twice.join("manifest.json")).unwrap();
    let text = std::fs::read_to_string(out.join("records.jsonl")).unwrap();
    let is_ar = |l: &&str| serde_json::from_str::<serde_json::Value>(l).unwrap()["method"] == "ar";
    let ar_line = text.lines().find(is_ar).unwrap();
    std::fs::write(twice.join("records.jsonl"), format!("{text}{ar_line}\n")).unwrap();
    let taker = dir.join("taker");
    let refused = eval(&prompts, &taker, &["--max-new-tokens", "10", "--reuse-ar-from", twice.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && err.contains("two `ar` records of prompt"), "{err}");
    assert!(err.contains("twice"), "names the file: {err}");
}

#[test]
fn methods_taking_turns_give_the_same_outputs_and_ignore_eos_runs_to_the_limit() {
    let dir = scratch("turns");
    let prompts = dir.join("prompts.jsonl");
    std::fs::write(&prompts, "{\"id\": \"a\", \"prompt\": \"the cat sat on the mat and the cat sat\"}\n{\"id\": \"b\", \"prompt\": \"one two three one two\"}\n").unwrap();
    let flags = ["--max-new-tokens", "24", "--ignore-eos"];
    let (plain, turns) = (dir.join("plain"), dir.join("turns"));
    let a = last_json(&eval(&prompts, &plain, &flags));
    let b = last_json(&eval(&prompts, &turns, &[&flags[..], &["--turn-tokens", "3"]].concat()));
    assert_eq!(a["lossless"], true, "{a}");
    assert_eq!(b["lossless"], true, "{b}");
    let outputs = |dir: &PathBuf| {
        let text = std::fs::read_to_string(dir.join("records.jsonl")).unwrap();
        let mut v: Vec<(String, String, Vec<u64>)> = text
            .lines()
            .map(|l| {
                let r: serde_json::Value = serde_json::from_str(l).unwrap();
                let ids = r["output_ids"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
                (r["prompt_id"].as_str().unwrap().to_string(), r["method"].as_str().unwrap().to_string(), ids)
            })
            .collect();
        v.sort();
        v
    };
    let (a, b) = (outputs(&plain), outputs(&turns));
    assert_eq!(a, b, "taking turns changes no output");
    assert!(a.iter().all(|r| r.2.len() == 24), "--ignore-eos generates exactly --max-new-tokens");
    let report = std::fs::read_to_string(turns.join("report.md")).unwrap();
    assert!(report.contains("taking turns on the machine every 3 new tokens"), "{report}");

    // Resuming with another turn setting would mix the timings of two ways of running.
    let other = eval(&prompts, &turns, &flags);
    let err = String::from_utf8_lossy(&other.stderr);
    assert!(!other.status.success() && err.contains("turn_tokens: None vs Some(3)"), "{err}");
    let zero = eval(&prompts, &dir.join("zero"), &["--turn-tokens", "0"]);
    assert!(!zero.status.success() && String::from_utf8_lossy(&zero.stderr).contains("--turn-tokens"));
}

#[test]
fn a_sampled_eval_times_every_method_without_comparing_tokens_and_is_seeded() {
    let dir = scratch("sampled");
    let prompts = dir.join("prompts.jsonl");
    std::fs::write(&prompts, "{\"id\": \"a\", \"prompt\": \"the cat sat on the mat and the cat sat\"}\n").unwrap();
    let flags =
        ["--max-new-tokens", "24", "--ignore-eos", "--temperature", "1", "--min-p", "0.05", "--turn-tokens", "4"];
    let ar_output = |dir: &PathBuf| {
        let text = std::fs::read_to_string(dir.join("records.jsonl")).unwrap();
        let ar =
            text.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()).find(|r| r["method"] == "ar");
        ar.unwrap()["output_ids"].clone()
    };
    let (one, two, other) = (dir.join("one"), dir.join("two"), dir.join("other"));
    let json = last_json(&eval(&prompts, &one, &[&flags[..], &["--seed", "5"]].concat()));
    assert_eq!(json["sampled"], true, "{json}");
    assert!(json["methods"]["prompt-lookup"]["speedup"].as_f64().is_some(), "{json}");
    let report = std::fs::read_to_string(one.join("report.md")).unwrap();
    assert!(
        report.contains("sampled (T = 1, min-p 0.05, seed 5)") && report.contains("not compared token for token"),
        "{report}"
    );
    last_json(&eval(&prompts, &two, &[&flags[..], &["--seed", "5"]].concat()));
    assert_eq!(ar_output(&one), ar_output(&two), "the same seed draws the same tokens");
    last_json(&eval(&prompts, &other, &[&flags[..], &["--seed", "6"]].concat()));
    assert_ne!(ar_output(&one), ar_output(&other), "another seed, other tokens");

    // A resume with other sampling settings is refused; so is a temperature out of range.
    let again = eval(&prompts, &one, &[&flags[..], &["--seed", "7"]].concat());
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(
        !again.status.success() && err.contains("sampling: sampled (") && err.contains("seed 7) vs sampled ("),
        "{err}"
    );
    let bad = eval(&prompts, &dir.join("bad"), &["--temperature=-1"]);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success() && err.contains("temperature"), "{err}");
}

#[test]
fn bad_inputs_are_named() {
    let dir = scratch("errors");
    let prompts = dir.join("prompts.jsonl");
    std::fs::write(&prompts, "{\"id\": \"ok\", \"prompt\": \"x\"}\n{\"id\": \"nothing\"}\n").unwrap();
    let out = eval(&prompts, &dir.join("a"), &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("prompts.jsonl:2:") && err.contains("`nothing`"), "{err}");

    std::fs::write(&prompts, format!("{{\"id\": \"huge\", \"prompt\": \"{}\"}}\n", "the cat ".repeat(300))).unwrap();
    let out = eval(&prompts, &dir.join("b"), &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("prompt `huge`") && err.contains("context"), "{err}");

    let out = bin().args(["eval", "--methods", "ar,eagle9", "--prompts"]).arg(&prompts).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("eagle9") && err.contains("prompt-lookup"), "{err}");
}

#[test]
fn drafter_methods_are_lossless_and_a_foreign_tokenizer_is_refused() {
    let dir = scratch("drafter");
    let prompts = dir.join("prompts.jsonl");
    std::fs::write(&prompts, "{\"id\": \"a\", \"prompt\": \"the cat sat on the mat\"}\n").unwrap();
    let fixtures =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()))
            .join("../../tests/fixtures");
    let run = |drafter: &str, out: &str| {
        bin()
            .args(["eval", "--model"])
            .arg(fixtures.join("tiny-llama.gguf"))
            .args(["--methods", "ar,draft-model,precut,token-cache", "--prompts"])
            .arg(&prompts)
            // `fixed`: this checks the methods' own drafting (on a model this tiny the auto policy
            // rightly finds the drafter not worth its time and drafts little).
            .arg("--out")
            .arg(dir.join(out))
            .args([
                "--no-chat-template",
                "--json",
                "--max-new-tokens",
                "12",
                "--draft-len",
                "3",
                "--draft-policy",
                "fixed",
                "--draft-model",
            ])
            .arg(fixtures.join(drafter))
            .output()
            .unwrap()
    };
    // The target drafting for itself (as a HF directory): every method lossless, drafts accepted.
    let json = last_json(&run("tiny-llama", "same"));
    for method in ["draft-model", "precut", "token-cache"] {
        assert_eq!(json["methods"][method]["lossless"], true, "{json}");
    }
    assert!(json["methods"]["draft-model"]["tokens_per_step"].as_f64().unwrap() > 2.0, "{json}");
    // A drafter with another vocabulary is refused before any decoding.
    let out = run("tiny-qwen2.gguf", "foreign");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("tiny-qwen2.gguf") && err.contains("tiny-llama.gguf"), "{err}");
    // A drafter method without a drafter is a clear error.
    let out = bin()
        .args(["eval", "--model"])
        .arg(fixtures.join("tiny-llama.gguf"))
        .args(["--methods", "ar,draft-model", "--prompts"])
        .arg(&prompts)
        .arg("--out")
        .arg(dir.join("none"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--draft-model"), "{err}");
}

#[test]
fn reproduce_runs_every_grid_point_and_tabulates_them() {
    let dir = scratch("recipe");
    let prompts = dir.join("prompts.jsonl");
    std::fs::write(&prompts, "{\"id\": \"a\", \"prompt\": \"the cat sat on the mat and the cat sat on the\"}\n")
        .unwrap();
    let model =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()))
            .join("../../tests/fixtures/tiny-llama.gguf");
    let recipe = dir.join("grid.toml");
    std::fs::write(&recipe, format!(
        "name = \"tiny-grid\"\nmodel = {:?}\nprompts = {:?}\nchat_template = false\nmax_new_tokens = 8\nmethods = [\"ar\", \"ngram-trie\"]\n[params]\nnum_draft = 4\n[grid]\nngram_n = [4, 6]\n",
        model.display().to_string(), prompts.display().to_string()
    )).unwrap();
    let results = dir.join("results");
    let out = bin().arg("reproduce").arg(&recipe).arg("--results").arg(&results).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = std::fs::read_to_string(results.join("tiny-grid/table.md")).unwrap();
    for point in ["ngram_n=4", "ngram_n=6"] {
        assert!(results.join("tiny-grid").join(point).join("summary.json").is_file(), "{point}");
        assert!(table.contains(&format!("| {point} | ngram-trie |")), "{table}");
    }
    assert!(!table.contains("**no**"), "lossless everywhere: {table}");
    // Unknown keys are refused before anything runs.
    std::fs::write(&recipe, "name = \"x\"\nprompts = \"p\"\nmethods = [\"ar\"]\nmax_tokens = 3\n").unwrap();
    let out = bin().arg("reproduce").arg(&recipe).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("max_tokens") && err.contains("grid.toml"), "{err}");
}

#[test]
fn an_eval_without_out_goes_to_the_ignored_runs_directory() {
    let dir = scratch("default-out");
    std::fs::write(dir.join("prompts.jsonl"), "{\"id\": \"a\", \"prompt\": \"the cat\"}\n").unwrap();
    let model =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()))
            .join("../../tests/fixtures/tiny-llama.gguf");
    let json = last_json(
        &bin()
            .current_dir(&dir)
            .args(["eval", "--model"])
            .arg(model)
            .args([
                "--methods",
                "ar",
                "--prompts",
                "prompts.jsonl",
                "--no-chat-template",
                "--json",
                "--max-new-tokens",
                "4",
            ])
            .output()
            .unwrap(),
    );
    let out = json["out"].as_str().unwrap();
    assert!(out.starts_with("eval/runs/"), "{out}");
    assert!(dir.join(out).join("summary.json").is_file());
    assert!(!dir.join("eval/results").exists(), "the tracked results directory is left alone");
}
