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

/// The file that records the recipe settings a drafter is made with (`data` and its sha256 when
/// it is a file, `limit`, `distill`, `train`): written into its data directory before distilling
/// and into its run directory before training, so a rerun after the recipe changed is refused
/// rather than resuming or reusing what the old settings made.
pub const RECIPE_DRAFTER_FILE: &str = "recipe-drafter.json";

impl DrafterRecipe {
    /// Whether the drafter in `run` finished training (a rerun skips it).
    pub fn is_trained(run: &Path) -> bool {
        run.join("summary.json").is_file() && run.join("drafter.safetensors").is_file()
    }

    /// The settings [`RECIPE_DRAFTER_FILE`] records.
    fn settings(&self) -> Result<serde_json::Value, EvalError> {
        let data = Path::new(&self.data);
        let sha = match data.is_file() {
            true => Some(
                draftsmith_core::digest::sha256_file(data)
                    .map_err(|source| EvalError::Io { path: data.to_path_buf(), source })?,
            ),
            false => None,
        };
        // The distillation settings its data depend on (not the batch and shard sizes), as a
        // resumed `distill` compares them.
        let distill = without_input(&self.distill.params(serde_json::Value::Null).settings);
        Ok(serde_json::json!({
            "data": self.data, "data_sha256": sha, "limit": self.limit, "distill": distill, "train": self.train
        }))
    }

    /// Refuses what the recipe made of this drafter under other settings than it now has, naming
    /// them, and returns the settings (for [`RecipeSettings::record`]): distilled data (its directory's [`RECIPE_DRAFTER_FILE`], compared on everything but
    /// `train`) and a training run begun or finished (its run directory's, compared on
    /// everything). A run trained before the file existed is compared on what its checkpoint
    /// recorded (the training and distillation settings, not `data` and `limit`). A data file
    /// gone since is not compared by its hash.
    pub fn check_made(&self, data: &Path, run: &Path) -> Result<RecipeSettings, EvalError> {
        let ours = self.settings()?;
        let refuse = |dir: &Path, differences: Vec<String>, fix: String| EvalError::MadeOtherwise {
            drafter: self.name.clone(),
            dir: dir.to_path_buf(),
            differences,
            fix,
        };
        if data.join(draftsmith_data::MANIFEST_FILE).exists() {
            if let Some(theirs) = read_json(&data.join(RECIPE_DRAFTER_FILE))? {
                let differences = differ(&theirs, &ours, &["train"]);
                if !differences.is_empty() {
                    let fix = format!("delete it and {} to make the drafter with these", run.display());
                    return Err(refuse(data, differences, fix));
                }
            }
        }
        let checkpoint = draftsmith_train::checkpoint::checkpoint_dir(run);
        if !Self::is_trained(run) && !checkpoint.exists() {
            return Ok(RecipeSettings(ours));
        }
        let (theirs, compared) = if let Some(recorded) = read_json(&run.join(RECIPE_DRAFTER_FILE))? {
            (recorded, ours.clone())
        } else if let Some(state) = read_json(&checkpoint.join(draftsmith_train::checkpoint::STATE_FILE))? {
            // The distillation settings as the training data's fingerprint holds them.
            let fingerprint = &state["fingerprint"];
            (
                serde_json::json!({
                    "distill": without_input(&fingerprint["data"]["params"]), "train": fingerprint["train"]
                }),
                serde_json::json!({ "distill": ours["distill"], "train": ours["train"] }),
            )
        } else {
            return Ok(RecipeSettings(ours));
        };
        let differences = differ(&theirs, &compared, &[]);
        if differences.is_empty() {
            return Ok(RecipeSettings(ours));
        }
        let fix = format!(
            "delete it (and {}, if a distillation setting changed) to make the drafter with these",
            data.display()
        );
        Err(refuse(run, differences, fix))
    }
}

/// A drafter's recipe settings as [`RECIPE_DRAFTER_FILE`] records them ([`DrafterRecipe::check_made`]
/// computes them once, hashing the data file once).
#[derive(Debug, Clone)]
pub struct RecipeSettings(serde_json::Value);

impl RecipeSettings {
    /// Records them in `dir` (created if need be) before a stage writes there.
    pub fn record(&self, dir: &Path) -> Result<(), EvalError> {
        let text = serde_json::to_vec_pretty(&self.0).expect("settings always serialize");
        std::fs::create_dir_all(dir).map_err(|source| EvalError::Io { path: dir.to_path_buf(), source })?;
        draftsmith_core::fsio::write_atomic(&dir.join(RECIPE_DRAFTER_FILE), &text)
            .map_err(|(path, source)| EvalError::Io { path, source })
    }
}

/// Distillation settings without their `input` (the input file, recorded apart).
fn without_input(settings: &serde_json::Value) -> serde_json::Value {
    let mut settings = settings.clone();
    if let Some(map) = settings.as_object_mut() {
        map.remove("input");
    }
    settings
}

/// A JSON file, `None` when it does not exist.
fn read_json(path: &Path) -> Result<Option<serde_json::Value>, EvalError> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| EvalError::Manifest { path: path.to_path_buf(), problem: e.to_string() }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(EvalError::Io { path: path.to_path_buf(), source }),
    }
}

/// The differences between recorded settings `theirs` and `ours`, leaving out the keys `skip`
/// (and the data file's hash where it is gone now).
fn differ(theirs: &serde_json::Value, ours: &serde_json::Value, skip: &[&str]) -> Vec<String> {
    let gone = ours.get("data_sha256").is_some_and(|v| v.is_null());
    let (mut theirs, mut ours) = (theirs.clone(), ours.clone());
    for v in [&mut theirs, &mut ours] {
        if let Some(map) = v.as_object_mut() {
            for key in skip.iter().copied().chain(gone.then_some("data_sha256")) {
                map.remove(key);
            }
        }
    }
    let mut differences = Vec::new();
    draftsmith_core::jsondiff::differences("", &theirs, &ours, &mut differences);
    differences
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
        let data = d.data_dir(&recipe.name);
        let settings = d.check_made(&data, &run)?;
        if DrafterRecipe::is_trained(&run) {
            on_event(RecipeEvent::Trained { drafter: &d.name, run: &run });
            continue;
        }
        on_event(RecipeEvent::Distilling { drafter: d, data: &data });
        settings.record(&data)?;
        stages.distill(d, &data)?;
        on_event(RecipeEvent::Training { drafter: &d.name, run: &run });
        settings.record(&run)?;
        stages.train(d, &data, &run)?;
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
