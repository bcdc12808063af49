//! TokenSwift end to end on the checked-in tiny model: train on a directory of books (one held
//! out), the split and eval prompts written, eval `ar,tokenswift` lossless with α and
//! Distinct-n in the JSON, long generation with periodic statistics, and bad input refused.

mod common;

use common::{bin, err, fixture, last_json, ok, scratch};

#[test]
fn train_eval_and_generate_tokenswift() {
    let dir = scratch("cli-tokenswift", "run");
    let books = common::books(&dir);
    let tiny = fixture("tiny-llama.gguf");
    let run = dir.join("tokenswift-run");
    let train = |extra: &[&str]| {
        bin()
            .args(["train", "tokenswift", "--model"])
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
                "12",
                "--warmup-steps",
                "2",
                "--checkpoint-every",
                "5",
                "--prompts-per-book",
                "2",
                "--prompt-tokens",
                "24",
            ])
            .args(extra)
            .output()
            .unwrap()
    };
    let stdout = ok(train(&[]));
    assert!(stdout.contains("heads exported"), "{stdout}");
    let split: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("split.json")).unwrap()).unwrap();
    assert_eq!(split["eval"], serde_json::json!(["gamma"]));
    assert_eq!(split["train"], serde_json::json!(["alpha", "beta"]), "the held-out book is never trained on");
    let prompts = std::fs::read_to_string(run.join("eval-prompts.jsonl")).unwrap();
    assert_eq!(prompts.lines().count(), 2);
    assert!(prompts.lines().all(|l| l.contains("\"gamma@")), "eval prompts come from held-out books only: {prompts}");
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("config.json")).unwrap()).unwrap();
    assert_eq!(config["drafter"], "tokenswift");
    // Changed settings into the same run directory are refused rather than mixed.
    assert!(err(train(&["--lr", "0.1"])).contains("cannot resume"));

    let out = dir.join("eval");
    let summary = last_json(
        &bin()
            .args(["eval", "--model"])
            .arg(&tiny)
            .args([
                "--methods",
                "ar,tokenswift",
                "--no-chat-template",
                "--max-new-tokens",
                "24",
                "--kv-budget",
                "20",
                "--kv-sinks",
                "4",
                "--json",
                "--drafter",
            ])
            .arg(&run)
            .arg("--prompts")
            .arg(run.join("eval-prompts.jsonl"))
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap(),
    );
    let ts = &summary["methods"]["tokenswift"];
    assert_eq!(ts["lossless"], true, "{summary}");
    assert!(ts["alpha"].as_f64().is_some_and(|a| (0.0..=1.0).contains(&a)), "{ts}");
    assert_eq!(ts["distinct_n"].as_array().map(Vec::len), Some(4), "{ts}");

    let stats = dir.join("stats.jsonl");
    let gen = last_json(
        &bin()
            .args(["generate", "--model"])
            .arg(&tiny)
            .args([
                "--method",
                "tokenswift",
                "--no-chat-template",
                "--max-new-tokens",
                "40",
                "--stats-every",
                "10",
                "--kv-budget",
                "16",
                "--kv-sinks",
                "2",
                "--json",
                "--drafter",
            ])
            .arg(&run)
            .args(["--prompt", "the cat sat on a mat and the dog ran to sea the cat"])
            .arg("--stats-out")
            .arg(&stats)
            .output()
            .unwrap(),
    );
    assert_eq!(gen["output_ids"].as_array().map(Vec::len), Some(40));
    assert!(gen["peak_rss_mb"].as_f64().is_some_and(|m| m > 0.0), "{gen}");
    let lines: Vec<serde_json::Value> =
        std::fs::read_to_string(&stats).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(lines.len() >= 4, "a line every 10 tokens and a final one: {lines:?}");
    assert!(lines.iter().all(|l| l.get("alpha").is_some() && l.get("beta").is_some() && l.get("distinct_n").is_some()));
    assert_eq!(lines.last().unwrap()["final"], true);
    assert_eq!(lines.last().unwrap()["tokens"], 40);

    // A ReDrafter directory is not TokenSwift heads: the kind is read from config.json.
    let wrong = dir.join("wrong");
    std::fs::create_dir_all(&wrong).unwrap();
    std::fs::write(wrong.join("config.json"), "{\"drafter\": \"medusa\"}").unwrap();
    let e = err(bin()
        .args(["generate", "--model"])
        .arg(&tiny)
        .args(["--method", "tokenswift", "--prompt", "hi", "--drafter"])
        .arg(&wrong)
        .output()
        .unwrap());
    assert!(e.contains("config.json") && e.contains("medusa"), "{e}");
}
