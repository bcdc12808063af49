//! Running a recipe (`draftsmith reproduce`): its drafters distilled and trained unless they
//! are already, one eval per grid point (each resumable, so finished points are skipped), then
//! `<results>/<name>/table.md` across the points. Loading models and showing progress is the
//! caller's, through [`RecipeStages`].

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::error::EvalError;
use crate::evaluate::SUMMARY_FILE;
use crate::recipe::{DrafterRecipe, GridPoint, Recipe};
use crate::records::RECORDS_FILE;
use crate::summary::{interval_text, Summary};

/// The stages a recipe drives, each a resumable run of its own.
pub trait RecipeStages {
    type Error: From<EvalError>;
    /// Distils `drafter.data` into `data`.
    fn distill(&mut self, drafter: &DrafterRecipe, data: &Path) -> Result<(), Self::Error>;
    /// Trains a ReDrafter on `data` into `run`.
    fn train(&mut self, drafter: &DrafterRecipe, data: &Path, run: &Path) -> Result<(), Self::Error>;
    /// Evaluates the recipe's methods at `point` into `out`, reusing the `ar` records of
    /// `reuse_ar_from` when given.
    fn eval(&mut self, point: &GridPoint, out: &Path, reuse_ar_from: Option<&Path>) -> Result<(), Self::Error>;
}

/// What a recipe run reports while it works.
#[derive(Debug, Clone, Copy)]
pub enum RecipeEvent<'a> {
    /// A drafter is trained already (its run directory holds a summary and the drafter).
    Trained {
        drafter: &'a str,
        run: &'a Path,
    },
    Distilling {
        drafter: &'a DrafterRecipe,
        data: &'a Path,
    },
    Training {
        drafter: &'a str,
        run: &'a Path,
    },
    /// Grid point `index` (from 1) of `total` starts.
    Point {
        index: usize,
        total: usize,
        label: &'a str,
    },
}

/// The file in a recipe-trained drafter's run directory that records the recipe settings it was
/// distilled and trained with (`data`, `limit`, `distill`, `train`), so a rerun after the recipe
/// changed is refused rather than reusing the drafter.
pub const RECIPE_DRAFTER_FILE: &str = "recipe-drafter.json";

impl DrafterRecipe {
    /// Whether the drafter in `run` finished training (a rerun skips it).
    pub fn is_trained(run: &Path) -> bool {
        run.join("summary.json").is_file() && run.join("drafter.safetensors").is_file()
    }

    /// The settings [`RECIPE_DRAFTER_FILE`] records.
    fn settings(&self) -> serde_json::Value {
        serde_json::json!({ "data": self.data, "limit": self.limit, "distill": self.distill, "train": self.train })
    }

    /// Refuses the trained drafter in `run` when it was distilled or trained with other settings
    /// than this recipe's, naming them. A drafter trained before [`RECIPE_DRAFTER_FILE`] existed is
    /// compared on what its checkpoint recorded (the training and distillation settings; not
    /// `data` and `limit`).
    pub fn check_trained(&self, recipe: &str, run: &Path) -> Result<(), EvalError> {
        let read = |path: &Path| -> Result<Option<serde_json::Value>, EvalError> {
            match std::fs::read_to_string(path) {
                Ok(text) => serde_json::from_str(&text)
                    .map(Some)
                    .map_err(|e| EvalError::Manifest { path: path.to_path_buf(), problem: e.to_string() }),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(source) => Err(EvalError::Io { path: path.to_path_buf(), source }),
            }
        };
        let ours = self.settings();
        let (theirs, ours) = if let Some(recorded) = read(&run.join(RECIPE_DRAFTER_FILE))? {
            (recorded, ours)
        } else if let Some(state) = read(&run.join("checkpoint").join("state.json"))? {
            // The distillation settings as the training data's fingerprint holds them (the
            // input file described apart).
            let distill = |settings: &serde_json::Value| {
                let mut settings = settings.clone();
                if let Some(map) = settings.as_object_mut() {
                    map.remove("input");
                }
                settings
            };
            let fingerprint = &state["fingerprint"];
            (
                serde_json::json!({ "distill": distill(&fingerprint["data"]["params"]), "train": fingerprint["train"] }),
                serde_json::json!({
                    "distill": distill(&self.distill.params(serde_json::Value::Null).settings),
                    "train": ours["train"]
                }),
            )
        } else {
            return Ok(());
        };
        let mut differences = Vec::new();
        draftsmith_core::jsondiff::differences("", &theirs, &ours, &mut differences);
        if differences.is_empty() {
            return Ok(());
        }
        Err(EvalError::TrainedOtherwise {
            drafter: self.name.clone(),
            run: run.to_path_buf(),
            data: self.data_dir(recipe),
            differences,
        })
    }

    /// Records this drafter's settings in `run` once it is trained ([`RECIPE_DRAFTER_FILE`]).
    pub fn record_trained(&self, run: &Path) -> Result<(), EvalError> {
        let text = serde_json::to_vec_pretty(&self.settings()).expect("settings always serialize");
        draftsmith_core::fsio::write_atomic(&run.join(RECIPE_DRAFTER_FILE), &text)
            .map_err(|(path, source)| EvalError::Io { path, source })
    }
}

/// Runs the recipe read from `recipe_path` with results under `results`; returns the table's path.
pub fn run_recipe<S: RecipeStages>(
    recipe: &Recipe,
    recipe_path: &Path,
    points: &[GridPoint],
    results: &Path,
    stages: &mut S,
    on_event: &mut dyn FnMut(RecipeEvent<'_>),
) -> Result<PathBuf, S::Error> {
    for d in recipe.drafters.iter().filter(|d| d.path.is_none()) {
        let run = d.run_dir(&recipe.name);
        if DrafterRecipe::is_trained(&run) {
            d.check_trained(&recipe.name, &run)?;
            on_event(RecipeEvent::Trained { drafter: &d.name, run: &run });
            continue;
        }
        let data = d.data_dir(&recipe.name);
        on_event(RecipeEvent::Distilling { drafter: d, data: &data });
        stages.distill(d, &data)?;
        on_event(RecipeEvent::Training { drafter: &d.name, run: &run });
        stages.train(d, &data, &run)?;
        d.record_trained(&run)?;
    }
    // Every point decodes the same prompts with the same baseline: unless the recipe says
    // otherwise, `ar` runs once, at the first point.
    let first_records = points.first().map(|p| recipe.point_dir(results, p).join(RECORDS_FILE));
    for (i, point) in points.iter().enumerate() {
        on_event(RecipeEvent::Point { index: i + 1, total: points.len(), label: &point.label });
        let reuse = if i == 0 || !recipe.share_ar { None } else { first_records.as_deref() };
        stages.eval(point, &recipe.point_dir(results, point), reuse)?;
    }
    let table = combined_table(recipe, recipe_path, results, points)?;
    let path = results.join(&recipe.name).join("table.md");
    std::fs::write(&path, table).map_err(EvalError::io(&path))?;
    Ok(path)
}

/// One row per (grid point, method) with τ, speedup and the lossless check, from each point's
/// `summary.json`.
pub fn combined_table(
    recipe: &Recipe,
    recipe_path: &Path,
    results: &Path,
    points: &[GridPoint],
) -> Result<String, EvalError> {
    let mut t = format!(
        "# {}\n\n{}\n\nCommand: `draftsmith reproduce {}`\n\n",
        recipe.name,
        recipe.description,
        recipe_path.display()
    );
    t.push_str("| grid point | method | τ (tokens/step) | acceptance % | MAT | Util % | draft calls/token | verify tokens/step (packed) | unpacked W×L | speedup vs ar (95 % interval) | speedup with prefill | draft ms/step | verify ms/step | lossless |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for point in points {
        let path = recipe.point_dir(results, point).join(SUMMARY_FILE);
        let text = std::fs::read_to_string(&path).map_err(EvalError::io(&path))?;
        let summary: Summary = serde_json::from_str(&text)
            .map_err(|e| EvalError::Summary { path: path.clone(), problem: e.to_string() })?;
        let opt = |v: Option<f64>, digits: usize| v.map_or("–".to_string(), |v| format!("{v:.digits$}"));
        for (name, m) in summary.iter() {
            let unpacked = if name == draftsmith_decode::Method::ReDrafter {
                (point.params.beam_width * point.params.beam_length).to_string()
            } else {
                "–".into()
            };
            writeln!(
                t,
                "| {} | {name} | {:.3} | {} | {} | {} | {} | {} | {unpacked} | {:.2}×{} | {:.2}× | {} | {} | {} |",
                point.label,
                m.tokens_per_step,
                opt(m.acceptance_pct, 1),
                opt(m.mean_accepted, 2),
                opt(m.utilization.map(|u| 100.0 * u), 1),
                if m.draft_calls > 0 { opt(m.draft_calls_per_token, 2) } else { "–".into() },
                opt(m.mean_tree_size.map(|s| 1.0 + s), 1),
                m.speedup.unwrap_or(f64::NAN),
                m.speedup_interval.map_or(String::new(), |v| format!(" ({})", interval_text(v, 2))),
                m.speedup_with_prefill.unwrap_or(f64::NAN),
                opt(m.mean_draft_ms, 2),
                opt(m.mean_verify_ms, 2),
                if m.lossless { "yes" } else { "**no**" }
            )
            .expect("writing to a String");
        }
    }
    Ok(t)
}

#[cfg(test)]
mod tests;
