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
