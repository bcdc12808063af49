//! The recipe runner with stages that only write what the real ones would: `ar` shared from
//! the first point, a trained drafter recognised, and the table built from the points' summaries.

use std::path::Path;

use super::*;
use crate::records::tests::record;
use crate::summary::summarize;

#[derive(Default)]
struct FakeStages {
    calls: Vec<String>,
}

impl RecipeStages for FakeStages {
    type Error = EvalError;

    fn distill(&mut self, drafter: &DrafterRecipe, _data: &Path) -> Result<(), EvalError> {
        self.calls.push(format!("distill {}", drafter.name));
        Ok(())
    }

    fn train(&mut self, drafter: &DrafterRecipe, _data: &Path, run: &Path) -> Result<(), EvalError> {
        self.calls.push(format!("train {}", drafter.name));
        std::fs::create_dir_all(run).unwrap();
        std::fs::write(run.join("summary.json"), "{}").unwrap();
        std::fs::write(run.join("drafter.safetensors"), "").unwrap();
        Ok(())
    }

    fn eval(&mut self, point: &GridPoint, out: &Path, reuse: Option<&Path>) -> Result<(), EvalError> {
        self.calls.push(format!("eval {} reuse={}", point.label, reuse.is_some()));
        let methods = [draftsmith_decode::Method::Ar, draftsmith_decode::Method::ReDrafter];
        let records = [record("p", "ar", &[1, 2, 3], &[]), record("p", "redrafter", &[1, 2, 3], &[(1, 2)])];
        std::fs::create_dir_all(out).unwrap();
        let summary = serde_json::to_string(&summarize(&records, &methods)).unwrap();
        std::fs::write(out.join(SUMMARY_FILE), summary).unwrap();
        Ok(())
    }
}

#[test]
fn ar_is_shared_from_the_first_point_and_the_table_has_a_row_per_point_and_method() {
    let root = std::env::temp_dir().join(format!("draftsmith-reproduce-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let text = "name = \"r\"\nprompts = \"p\"\nmethods = [\"ar\", \"redrafter\"]\n[params]\ndrafter = \"d\"\n[grid]\nbeam_width = [2, 4]\n";
    let recipe_path = root.join("r.toml");
    std::fs::write(&recipe_path, text).unwrap();
    let (mut recipe, points) = Recipe::read(&recipe_path).unwrap();
    let results = root.join("results");
    let mut stages = FakeStages::default();
    let table = run_recipe(&recipe, &recipe_path, &points, &results, &mut stages, &mut |_| {}).unwrap();
    assert_eq!(stages.calls, vec!["eval beam_width=2 reuse=false", "eval beam_width=4 reuse=true"]);
    let table = std::fs::read_to_string(table).unwrap();
    assert_eq!(table.lines().filter(|l| l.starts_with("| beam_width=")).count(), 4, "{table}");
    let unpacked = format!("| {} |", 4 * points[1].params.beam_length);
    assert!(table.lines().any(|l| l.starts_with("| beam_width=4 | redrafter |") && l.contains(&unpacked)), "{table}");
    recipe.share_ar = false;
    let mut stages = FakeStages::default();
    run_recipe(&recipe, &recipe_path, &points, &results, &mut stages, &mut |_| {}).unwrap();
    assert_eq!(stages.calls[1], "eval beam_width=4 reuse=false", "share_ar = false reruns ar at every point");
}

#[test]
fn a_trained_drafter_is_recognised_by_its_summary_and_weights() {
    // Named by the process id, which the system reuses: an earlier run's files must not count.
    let dir = std::env::temp_dir().join(format!("draftsmith-reproduce-trained-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    assert!(!DrafterRecipe::is_trained(&dir));
    let mut stages = FakeStages::default();
    let recipe: Recipe =
        toml::from_str("name = \"t\"\nprompts = \"p\"\nmethods = [\"ar\"]\n[[drafters]]\nname = \"d\"\n").unwrap();
    stages.train(&recipe.drafters[0], &dir, &dir).unwrap();
    assert!(DrafterRecipe::is_trained(&dir));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn what_a_drafter_was_made_with_under_other_recipe_settings_is_refused_naming_them() {
    let root = std::env::temp_dir().join(format!("draftsmith-reproduce-settings-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let (data, run) = (root.join("data"), root.join("run"));
    let read = |extra: &str| -> DrafterRecipe {
        let text = format!("name = \"t\"\nprompts = \"p\"\nmethods = [\"ar\"]\n[[drafters]]\nname = \"d\"\n{extra}");
        toml::from_str::<Recipe>(&text).unwrap().drafters.remove(0)
    };
    let made = read("limit = 4\ntrain = { horizon = 2 }\n");
    let other = read("limit = 8\ntrain = { horizon = 3 }\n");
    let retrained = read("limit = 4\ntrain = { horizon = 3 }\n");
    // Nothing made yet: nothing to compare, whatever was recorded.
    let settings = made.check_made(&data, &run).unwrap();
    settings.record(&data).unwrap();
    settings.record(&run).unwrap();
    other.check_made(&data, &run).unwrap();
    // Distilled data: compared on everything but the training settings.
    std::fs::write(data.join("manifest.json"), "{}").unwrap();
    let err = other.check_made(&data, &run).unwrap_err().to_string();
    assert!(err.contains("limit: 4 vs 8") && !err.contains("horizon") && err.contains("drafter `d`"), "{err}");
    assert!(err.contains(&format!("delete it and {}", run.display())), "{err}");
    retrained.check_made(&data, &run).unwrap();
    // A run begun or trained: compared on everything.
    std::fs::write(run.join("summary.json"), "{}").unwrap();
    std::fs::write(run.join("drafter.safetensors"), "").unwrap();
    made.check_made(&data, &run).unwrap();
    let err = retrained.check_made(&data, &run).unwrap_err().to_string();
    assert!(err.contains("train.horizon: 2 vs 3") && err.contains(&run.display().to_string()), "{err}");

    // A run trained before the settings were recorded: its checkpoint's fingerprint.
    std::fs::remove_file(run.join(RECIPE_DRAFTER_FILE)).unwrap();
    std::fs::create_dir_all(run.join("checkpoint")).unwrap();
    let mut distill = made.distill.params(serde_json::json!({ "file": "x.jsonl" })).settings;
    distill["max_new_tokens"] = serde_json::json!(7);
    let state = serde_json::json!({ "fingerprint": { "train": made.train, "data": { "params": distill } } });
    std::fs::write(run.join("checkpoint/state.json"), state.to_string()).unwrap();
    let err = made.check_made(&data, &run).unwrap_err().to_string();
    assert!(err.contains(&format!("distill.max_new_tokens: 7 vs {}", made.distill.max_new_tokens)), "{err}");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_drafters_data_file_is_recorded_by_its_hash() {
    let root = std::env::temp_dir().join(format!("draftsmith-reproduce-data-sha-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let (data, run, file) = (root.join("data"), root.join("run"), root.join("conversations.jsonl"));
    std::fs::write(&file, "{\"prompt\": \"a\"}\n").unwrap();
    let text = format!(
        "name = \"t\"\nprompts = \"p\"\nmethods = [\"ar\"]\n[[drafters]]\nname = \"d\"\ndata = {:?}\n",
        file.display().to_string()
    );
    let drafter = toml::from_str::<Recipe>(&text).unwrap().drafters.remove(0);
    drafter.check_made(&data, &run).unwrap().record(&data).unwrap();
    std::fs::write(data.join("manifest.json"), "{}").unwrap();
    drafter.check_made(&data, &run).unwrap();
    std::fs::write(&file, "{\"prompt\": \"b\"}\n").unwrap();
    let err = drafter.check_made(&data, &run).unwrap_err().to_string();
    assert!(err.contains("data_sha256"), "a file edited in place is found: {err}");
    std::fs::remove_file(&file).unwrap();
    drafter.check_made(&data, &run).unwrap();
    let _ = std::fs::remove_dir_all(&root);
}
