//! `draftsmith distill` on the checked-in tiny model: shards, manifest, resume, mismatch refusal.

mod common;

use common::{bin, last_json};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn scratch(name: &str) -> std::path::PathBuf {
    common::scratch("cli-distill", name)
}

fn command(data: &Path, out: &Path, extra: &[&str]) -> Command {
    let model =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()))
            .join("../../tests/fixtures/tiny-llama.gguf");
    let mut cmd = bin();
    cmd.args(["distill", "--model"])
        .arg(model)
        .arg("--data")
        .arg(data)
        .arg("--out")
        .arg(out)
        .args(["--max-new-tokens", "8", "--teacher-len", "3", "--inputs-per-shard", "2", "--json"])
        .args(extra);
    cmd
}

fn distill(data: &Path, out: &Path, extra: &[&str]) -> Output {
    command(data, out, extra).output().unwrap()
}

#[test]
fn two_processes_distil_the_parts_of_the_single_process_dataset() {
    let dir = scratch("shards");
    let data = dir.join("prompts.jsonl");
    let prompts: String = ["the cat", "a dog", "the sea", "an old tree", "rain", "the moon and", "bread"]
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{{\"id\": \"p{i}\", \"prompt\": \"{p}\"}}\n"))
        .collect();
    std::fs::write(&data, prompts).unwrap();
    let single = dir.join("single");
    let done = distill(&data, &single, &["--temperature", "0.8"]);
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    // Two processes at once, as two machines of a job array would run them.
    let parts = dir.join("parts");
    let running: Vec<_> = ["0/2", "1/2"]
        .iter()
        .map(|part| {
            let mut cmd = command(&data, &parts, &["--temperature", "0.8", "--shard", part]);
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
        })
        .collect();
    for child in running {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let (_, want) = draftsmith_data::read_records(&single).unwrap();
    let (manifest, got) = draftsmith_data::read_records(&parts).unwrap();
    assert_eq!(want.len(), 7);
    assert_eq!(
        got, want,
        "the merged parts are the single-process dataset, record for record (sampled seeds included)"
    );
    assert!(manifest.complete);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn distill_writes_shards_and_resumes_without_redoing_work() {
    let dir = scratch("run");
    let data = dir.join("prompts.jsonl");
    std::fs::write(&data, "{\"id\": \"p1\", \"prompt\": \"the cat\"}\n{\"id\": \"p2\", \"prompt\": \"a dog\"}\n{\"id\": \"p3\", \"prompt\": \"the sea\"}\n").unwrap();
    let out = dir.join("distilled");
    let first = last_json(&distill(&data, &out, &["--limit", "2"]));
    assert_eq!(first["stats"]["inputs"], 2);
    assert_eq!(first["stats"]["self_distilled"], 2);
    assert!(first["stats"]["tokens_generated"].as_u64().unwrap() > 0);
    let rest = last_json(&distill(&data, &out, &[]));
    assert_eq!(
        (rest["stats"]["resumed_from"].as_u64(), rest["stats"]["inputs"].as_u64()),
        (Some(2), Some(1)),
        "the first shard is not redone"
    );
    let manifest: Value = serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["complete"], true);
    assert_eq!(manifest["params"]["teacher_len"], 3);
    let shards = manifest["shards"].as_array().unwrap();
    assert_eq!(shards.len(), 2, "3 inputs at 2 per shard");
    for s in shards {
        assert!(out.join(s["file"].as_str().unwrap()).is_file());
    }
    let modified = std::fs::metadata(out.join("shard-00000.parquet")).unwrap().modified().unwrap();

    let again = last_json(&distill(&data, &out, &[]));
    assert_eq!(again["stats"]["resumed_from"], 3, "nothing left to do");
    assert_eq!(again["stats"]["inputs"], 0);
    assert_eq!(again["total_records"], 3);
    assert_eq!(
        std::fs::metadata(out.join("shard-00000.parquet")).unwrap().modified().unwrap(),
        modified,
        "finished shards are kept"
    );

    // A file none of whose conversations is usable is refused, naming the first reason, before
    // anything is written.
    let roles = dir.join("roles.jsonl");
    std::fs::write(&roles, "{\"id\": \"r\", \"messages\": [{\"role\": \"human\", \"content\": \"hi\"}]}\n").unwrap();
    let unusable = distill(&roles, &dir.join("unusable"), &[]);
    let err = String::from_utf8_lossy(&unusable.stderr);
    assert!(
        !unusable.status.success()
            && err.contains("roles.jsonl: no usable conversation")
            && err.contains("role `human` is not one of system, user, assistant"),
        "{err}"
    );
    assert!(!dir.join("unusable").exists());
    // Usable conversations that all turn out to give no record: an error, not an empty dataset.
    let answers = dir.join("answers.jsonl");
    std::fs::write(&answers, "{\"id\": \"a\", \"messages\": [{\"role\": \"assistant\", \"content\": \"hi\"}]}\n")
        .unwrap();
    let empty = distill(&answers, &dir.join("empty"), &[]);
    let err = String::from_utf8_lossy(&empty.stderr);
    assert!(!empty.status.success() && err.contains("no records") && err.contains("1 no_user_message"), "{err}");

    // Another file of the same name and size is not resumed into the dataset.
    let same_size = dir.join("alt").join("prompts.jsonl");
    std::fs::create_dir_all(same_size.parent().unwrap()).unwrap();
    let text = std::fs::read_to_string(&data).unwrap().replace("the cat", "the owl");
    std::fs::write(&same_size, text).unwrap();
    let swapped = distill(&same_size, &out, &[]);
    let err = String::from_utf8_lossy(&swapped.stderr);
    assert!(!swapped.status.success() && err.contains("params.settings") && err.contains("input_sha256"), "{err}");

    let other = distill(&data, &out, &["--temperature", "0.5"]);
    assert!(!other.status.success());
    let err = String::from_utf8_lossy(&other.stderr);
    assert!(err.contains("params.settings") && err.contains(out.to_str().unwrap()), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
