//! The export stage: which drafter a run exports, the formats each drafter can be written in,
//! and refusals that name the file.

use burn::backend::Flex;
use burn::tensor::{Distribution, Tensor};
use draftsmith_heads::redrafter::{save_redrafter, HeadKind, ReDrafterConfig};
use draftsmith_heads::tokenswift::{save_tokenswift, TokenSwiftConfig};
use draftsmith_heads::{TargetIdentity, WeightDtype};
use draftsmith_train::checkpoint::{write_checkpoint, LoopState};
use draftsmith_train::{export_drafter, export_needs_target, run_drafter, ExportFormat, ExportOptions, ExportTarget};

type B = Flex;

fn target() -> TargetIdentity {
    TargetIdentity { name: "tiny".into(), sha256: "ef".repeat(32), vocab_size: 40, hidden_size: 8 }
}

fn tmpdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("draftsmith-export-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn reference() -> ExportOptions {
    ExportOptions { format: ExportFormat::Reference, ..Default::default() }
}

#[test]
fn a_run_exports_its_final_drafter_else_its_checkpoint_else_says_what_is_missing() {
    let run = tmpdir("run");
    std::fs::create_dir_all(&run).unwrap();
    let e = run_drafter(&run).unwrap_err().to_string();
    assert!(e.contains(run.to_str().unwrap()) && e.contains("no exported drafter"), "{e}");
    let cfg = ReDrafterConfig::for_target(40, 8, HeadKind::Tied);
    let d = cfg.init::<B>(&Default::default(), 1);
    let state = LoopState { step: 1, total_steps: 2, fingerprint: serde_json::json!({}), files: Default::default() };
    write_checkpoint(&run, &state, |tmp| {
        save_redrafter(tmp, &d, &cfg, &target(), None, serde_json::json!({})).map_err(Into::into)
    })
    .unwrap();
    assert_eq!(run_drafter(&run).unwrap(), run.join("checkpoint"));
    // A checkpoint file changed since it was saved, or its state.json gone, is refused.
    let weights = run.join("checkpoint").join("drafter.safetensors");
    let saved = std::fs::read(&weights).unwrap();
    let mut changed = saved.clone();
    *changed.last_mut().unwrap() ^= 1;
    std::fs::write(&weights, &changed).unwrap();
    let e = run_drafter(&run).unwrap_err().to_string();
    assert!(e.contains("drafter.safetensors") && e.contains("state.json records"), "{e}");
    std::fs::write(&weights, &saved).unwrap();
    let state_file = run.join("checkpoint").join("state.json");
    let kept = std::fs::read(&state_file).unwrap();
    std::fs::remove_file(&state_file).unwrap();
    let e = run_drafter(&run).unwrap_err().to_string();
    assert!(e.contains("state.json") && e.contains("missing"), "{e}");
    std::fs::write(&state_file, kept).unwrap();
    assert_eq!(run_drafter(&run).unwrap(), run.join("checkpoint"));
    // A killed run's checkpoint exports into the run's own directory, but no other drafter does:
    // it would replace the run's.
    let dev = Default::default();
    export_drafter::<B>(&run.join("checkpoint"), &run, ExportOptions::default(), None, &dev).unwrap();
    std::fs::remove_file(run.join("drafter.safetensors")).unwrap();
    let other = tmpdir("other-drafter");
    save_redrafter(&other, &d, &cfg, &target(), None, serde_json::json!({})).unwrap();
    let e = export_drafter::<B>(&other, &run, ExportOptions::default(), None, &dev).unwrap_err().to_string();
    assert!(e.contains("is another training run") && e.contains("choose another --out"), "{e}");
    // A weights file with no config beside it is someone's file, not an export to update.
    let lone = tmpdir("lone-weights");
    std::fs::create_dir_all(&lone).unwrap();
    std::fs::write(lone.join("drafter.safetensors"), b"precious").unwrap();
    let e = export_drafter::<B>(&other, &lone, ExportOptions::default(), None, &dev).unwrap_err().to_string();
    assert!(e.contains("drafter.safetensors with no config.json beside it"), "{e}");
    assert_eq!(std::fs::read(lone.join("drafter.safetensors")).unwrap(), b"precious");
    // An export stopped between its weights and its config is redone.
    std::fs::copy(other.join("drafter.safetensors"), lone.join("drafter.safetensors")).unwrap();
    export_drafter::<B>(&other, &lone, ExportOptions::default(), None, &dev).unwrap();
    assert!(lone.join("config.json").is_file());
    save_redrafter(&run, &d, &cfg, &target(), None, serde_json::json!({})).unwrap();
    assert_eq!(run_drafter(&run).unwrap(), run);
    assert!(export_needs_target(&run, ExportFormat::Reference).unwrap());
    assert!(!export_needs_target(&run, ExportFormat::Draftsmith).unwrap());
}

#[test]
fn a_reference_export_checks_the_target_and_tokenswift_has_none() {
    let dev = Default::default();
    let run = tmpdir("redrafter");
    let cfg = ReDrafterConfig::for_target(40, 8, HeadKind::Tied);
    save_redrafter(&run, &cfg.init::<B>(&dev, 1), &cfg, &target(), None, serde_json::json!({})).unwrap();
    let lm_head = Tensor::<B, 2>::random([40, 8], Distribution::Normal(0.0, 1.0), &dev);

    let e = export_drafter::<B>(&run, &run.join("a"), reference(), None, &dev).unwrap_err().to_string();
    assert!(e.contains("needs --model") && e.contains("LM head") && e.contains(run.to_str().unwrap()), "{e}");
    let other = TargetIdentity { sha256: "00".repeat(32), ..target() };
    let wrong = ExportTarget { identity: other, lm_head: lm_head.clone() };
    let e = export_drafter::<B>(&run, &run.join("b"), reference(), Some(&wrong), &dev).unwrap_err().to_string();
    assert!(e.contains("trained for target"), "{e}");
    let right = ExportTarget { identity: target(), lm_head };
    let options = ExportOptions { probe: true, dtype: WeightDtype::Bf16, ..reference() };
    let done = export_drafter::<B>(&run, &run.join("c"), options, Some(&right), &dev).unwrap();
    let names: Vec<_> = done.files.iter().map(|f| f.file_name().unwrap().to_str().unwrap().to_string()).collect();
    assert_eq!(names, ["model.safetensors", "config.json", "probe.safetensors"]);
    let e = export_drafter::<B>(
        &run,
        &run.join("d"),
        ExportOptions { dtype: WeightDtype::F16, ..Default::default() },
        None,
        &dev,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("--dtype f16 needs --format reference") && !e.contains("config.json"), "{e}");
    // The run's own directory holds its draftsmith-layout drafter: a reference export there
    // would replace its config.json, so it is refused and the run left as it was.
    let config = std::fs::read(run.join("config.json")).unwrap();
    let e = export_drafter::<B>(&run, &run, reference(), Some(&right), &dev).unwrap_err().to_string();
    assert!(e.contains("holds drafter.safetensors") && e.contains("choose another --out"), "{e}");
    assert_eq!(std::fs::read(run.join("config.json")).unwrap(), config);
    assert!(!run.join("model.safetensors").exists());
    // And the other way round: a draftsmith export over a reference export.
    let e = export_drafter::<B>(&run, &run.join("c"), ExportOptions::default(), None, &dev).unwrap_err().to_string();
    assert!(e.contains("holds model.safetensors"), "{e}");
    // Into its own directory in its own layout it only rewrites the same bytes.
    export_drafter::<B>(&run, &run, ExportOptions::default(), None, &dev).unwrap();
    assert_eq!(std::fs::read(run.join("config.json")).unwrap(), config);

    let ts = tmpdir("tokenswift");
    let cfg = TokenSwiftConfig::new(40, 8);
    save_tokenswift(&ts, &cfg.init::<B>(&dev, 1), &cfg, &target(), serde_json::json!({})).unwrap();
    let e = export_drafter::<B>(&ts, &ts.join("out"), reference(), None, &dev).unwrap_err().to_string();
    assert!(e.contains(ts.to_str().unwrap()) && e.contains("TokenSwift") && e.contains("--format draftsmith"), "{e}");
    let done = export_drafter::<B>(&ts, &ts.join("out"), ExportOptions::default(), None, &dev).unwrap();
    assert_eq!(std::fs::read(&done.files[0]).unwrap(), std::fs::read(ts.join("drafter.safetensors")).unwrap());

    // An export replaces `config.json` only where it is a config of the same kind of drafter:
    // not a model directory's, not another kind's.
    let model = tmpdir("model");
    std::fs::create_dir_all(&model).unwrap();
    std::fs::write(model.join("config.json"), r#"{"model_type": "llama"}"#).unwrap();
    let e = export_drafter::<B>(&ts, &model, ExportOptions::default(), None, &dev).unwrap_err().to_string();
    assert!(e.contains("a config.json that is not a drafter's") && e.contains(model.to_str().unwrap()), "{e}");
    assert_eq!(std::fs::read_to_string(model.join("config.json")).unwrap(), r#"{"model_type": "llama"}"#);
    let e = export_drafter::<B>(&ts, &run.join("c"), ExportOptions::default(), None, &dev).unwrap_err().to_string();
    assert!(e.contains("holds model.safetensors"), "{e}");
    let e = export_drafter::<B>(&run, &ts.join("out"), ExportOptions::default(), None, &dev).unwrap_err().to_string();
    assert!(e.contains("holds a tokenswift drafter's config.json, which a redrafter export would replace"), "{e}");
    // The same kind re-exported into an earlier export replaces it.
    export_drafter::<B>(&ts, &ts.join("out"), ExportOptions::default(), None, &dev).unwrap();
}
