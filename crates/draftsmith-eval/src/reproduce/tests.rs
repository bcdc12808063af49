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
fn a_trained_drafter_with_other_recipe_settings_is_refused_naming_them() {
    let dir = std::env::temp_dir().join(format!("draftsmith-reproduce-settings-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let read = |extra: &str| -> DrafterRecipe {
        let text = format!("name = \"t\"\nprompts = \"p\"\nmethods = [\"ar\"]\n[[drafters]]\nname = \"d\"\n{extra}");
        toml::from_str::<Recipe>(&text).unwrap().drafters.remove(0)
    };
    let trained = read("limit = 4\ntrain = { horizon = 2 }\n");
    // Nothing recorded (not a recipe's run): nothing to compare.
    trained.check_trained("t", &dir).unwrap();
    trained.record_trained(&dir).unwrap();
    trained.check_trained("t", &dir).unwrap();
    let err = read("limit = 8\ntrain = { horizon = 3 }\n").check_trained("t", &dir).unwrap_err().to_string();
    assert!(err.contains("limit: 4 vs 8") && err.contains("train.horizon: 2 vs 3"), "{err}");
    assert!(err.contains("drafter `d`") && err.contains("data/distilled/t/d"), "{err}");

    // A run trained before the settings were recorded: its checkpoint's fingerprint.
    std::fs::remove_file(dir.join(RECIPE_DRAFTER_FILE)).unwrap();
    std::fs::create_dir_all(dir.join("checkpoint")).unwrap();
    let mut distill = trained.distill.params(serde_json::json!({ "file": "x.jsonl" })).settings;
    distill["max_new_tokens"] = serde_json::json!(7);
    let state = serde_json::json!({ "fingerprint": { "train": trained.train, "data": { "params": distill } } });
    std::fs::write(dir.join("checkpoint/state.json"), state.to_string()).unwrap();
    let err = trained.check_trained("t", &dir).unwrap_err().to_string();
    assert!(err.contains(&format!("distill.max_new_tokens: 7 vs {}", trained.distill.max_new_tokens)), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
