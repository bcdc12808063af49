//! Recipes: one TOML file per experiment (`recipes/*.toml`), typed with `deny_unknown_fields`.
//! A recipe names the model, the prompt set, the methods, base method parameters and a grid of
//! parameter values; `draftsmith reproduce` runs one eval per grid point and tabulates them.
//!
//! ```toml
//! name = "ngram-trie-table3-grid"
//! prompts = "data/context-tasks.jsonl"
//! methods = ["ar", "prompt-lookup", "ngram-trie"]
//! max_new_tokens = 128
//! [params]            # method parameters (the eval flags, snake_case)
//! num_draft = 8
//! [grid]              # every combination of these values is one eval
//! ngram_n = [8, 13, 16]
//! ngram_lp = [2, 3]
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use draftsmith_decode::{Method, MethodParams};
use serde::Deserialize;

use crate::error::EvalError;

/// A recipe file as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recipe {
    /// Results go to `eval/results/<name>/`.
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Target model (`--model`); the default model when absent.
    pub model: Option<String>,
    /// Prompt file or dataset name (`--prompts`).
    pub prompts: String,
    pub limit: Option<usize>,
    #[serde(default = "default_max_new_tokens")]
    pub max_new_tokens: usize,
    #[serde(default = "default_true")]
    pub chat_template: bool,
    pub methods: Vec<Method>,
    /// Decode `ar` once, at the first grid point, and reuse it at the others (the default).
    /// `false` reruns it at every point, interleaved prompt by prompt with the methods, so a
    /// point's speedups are measured side by side even if the machine's load changes between points.
    #[serde(default = "default_true")]
    pub share_ar: bool,
    #[serde(default)]
    pub params: MethodParams,
    /// Parameter name → values; the evals run over the cartesian product.
    #[serde(default)]
    pub grid: BTreeMap<String, Vec<serde_json::Value>>,
    /// Drafters this recipe trains (or reuses) before its evals. A `drafter` parameter equal
    /// to one of their names refers to it.
    #[serde(default)]
    pub drafters: Vec<DrafterRecipe>,
}

/// A ReDrafter a recipe distils and trains (`draftsmith distill` + `draftsmith train
/// redrafter`, both resumable), unless `path` names an existing one.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DrafterRecipe {
    pub name: String,
    /// An already trained drafter directory to use instead.
    pub path: Option<String>,
    /// Conversations to distil (a file or dataset name).
    #[serde(default = "default_data")]
    pub data: String,
    /// Conversations read from `data`.
    #[serde(default = "default_limit")]
    pub limit: usize,
    #[serde(default)]
    pub distill: draftsmith_distill::DistillConfig,
    #[serde(default)]
    pub train: draftsmith_train::ReDrafterTrainConfig,
}

fn default_data() -> String {
    "sharegpt".into()
}

fn default_limit() -> usize {
    400
}

impl DrafterRecipe {
    /// Where the recipe's distilled data go.
    pub fn data_dir(&self, recipe: &str) -> PathBuf {
        PathBuf::from("data/distilled").join(recipe).join(&self.name)
    }

    /// The drafter directory: `path`, or `checkpoints/<recipe>/<name>`.
    pub fn run_dir(&self, recipe: &str) -> PathBuf {
        self.path.as_ref().map_or_else(|| PathBuf::from("checkpoints").join(recipe).join(&self.name), PathBuf::from)
    }
}

fn default_max_new_tokens() -> usize {
    128
}

fn default_true() -> bool {
    true
}

/// One eval of a recipe: its label (`ngram_n=13,ngram_lp=3`, or `base`) and parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct GridPoint {
    pub label: String,
    pub params: MethodParams,
}

/// A grid value as it appears in a point's directory name: strings bare, lists joined with
/// `-` (`drafter=distilled`, `tree=1-3-3-3`), numbers and booleans as written. A path's
/// separators become `_` (`drafter=runs_a`), so every point's directory stays one level inside
/// the recipe's, whatever the value.
fn label_value(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.replace(['/', '\\'], "_"),
        serde_json::Value::Array(items) => items.iter().map(label_value).collect::<Vec<_>>().join("-"),
        other => other.to_string(),
    }
}

/// `None` when one of `methods` reads method parameter `key`; else, for a refusal, that none of
/// them does and which methods would.
fn read_by_none(methods: &[Method], key: &str) -> Option<String> {
    let read_by = |m: &Method| draftsmith_decode::params_read(*m).contains(&key);
    if methods.iter().any(read_by) {
        return None;
    }
    let names = |ms: Vec<&Method>| ms.into_iter().map(|m| m.name()).collect::<Vec<_>>().join(", ");
    let readers = names(Method::ALL.iter().filter(|m| read_by(m)).collect());
    Some(format!(
        "is read by none of the recipe's methods ({}; methods that read it: {})",
        names(methods.iter().collect()),
        if readers.is_empty() { "none" } else { &readers }
    ))
}

/// Whether `name` is one directory name (not empty, no separator, not `.` or `..`).
fn plain_name(name: &str) -> bool {
    !name.trim().is_empty() && name.trim() == name && !name.contains(['/', '\\']) && name != "." && name != ".."
}

/// The dotted key of the first `nan` or `inf` in a TOML value (`params.penalty`, `grid.eta[1]`).
fn non_finite(value: &toml::Value, key: &str) -> Option<String> {
    match value {
        toml::Value::Float(f) if !f.is_finite() => Some(key.to_string()),
        toml::Value::Array(items) => items.iter().enumerate().find_map(|(i, v)| non_finite(v, &format!("{key}[{i}]"))),
        toml::Value::Table(table) => table.iter().find_map(|(k, v)| {
            let key = if key.is_empty() { k.clone() } else { format!("{key}.{k}") };
            non_finite(v, &key)
        }),
        _ => None,
    }
}

impl Recipe {
    /// Reads and validates a recipe (unknown keys, unknown grid parameters and ill-typed values
    /// are errors naming the file).
    pub fn read(path: &Path) -> Result<(Self, Vec<GridPoint>), EvalError> {
        let bad = |problem: String| EvalError::Recipe { path: path.to_path_buf(), problem };
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let recipe: Recipe = toml::from_str(&text).map_err(|e| bad(e.to_string()))?;
        // The recipe as written, for what the typed one cannot tell (a key written or defaulted).
        let raw: toml::Value = toml::from_str(&text).map_err(|e| bad(e.to_string()))?;
        // TOML has `nan` and `inf`; a grid carries values as JSON, which has neither, so they
        // would surface as "invalid type: null". Name the key instead.
        if let Some(key) = non_finite(&raw, "") {
            return Err(bad(format!("`{key}` is not a finite number: recipe values must be finite")));
        }
        if !plain_name(&recipe.name) {
            return Err(bad(format!("`name` must be a plain directory name, got {:?}", recipe.name)));
        }
        // `[params]` as written (the typed struct holds every parameter, defaults included).
        let written: Vec<String> =
            raw.get("params").and_then(|p| p.as_table()).map(|t| t.keys().cloned().collect()).unwrap_or_default();
        // A drafter given by `path` is used as it is: settings to make one would be ignored.
        let drafters = raw.get("drafters").and_then(|d| d.as_array());
        for table in drafters.into_iter().flatten().filter_map(|d| d.as_table()) {
            let making: Vec<&str> =
                ["data", "limit", "distill", "train"].into_iter().filter(|k| table.contains_key(*k)).collect();
            if table.contains_key("path") && !making.is_empty() {
                let name = table.get("name").and_then(|n| n.as_str()).unwrap_or("?");
                return Err(bad(format!(
                    "drafter `{name}` has a `path` (an existing drafter, used as it is) and {}, which would make \
                     one: give one or the other",
                    making.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
                )));
            }
        }
        if let Some(key) = written.iter().find(|k| recipe.grid.contains_key(k.as_str())) {
            return Err(bad(format!(
                "`{key}` is set in both [params] and [grid]: the grid's values would override the base one; keep one"
            )));
        }
        for key in &written {
            if let Some(readers) = read_by_none(&recipe.methods, key) {
                return Err(bad(format!("`params.{key}` {readers}, so it would change nothing")));
            }
        }
        if recipe.max_new_tokens == 0 {
            return Err(bad("`max_new_tokens` must be at least 1".into()));
        }
        if recipe.limit == Some(0) {
            return Err(bad("`limit` must be at least 1".into()));
        }
        if recipe.methods.is_empty() {
            return Err(bad("`methods` is empty: name at least one method to evaluate".into()));
        }
        let mut points = recipe.points().map_err(bad)?;
        let mut labels: Vec<&str> = points.iter().map(|p| p.label.as_str()).collect();
        labels.sort_unstable();
        if let Some(w) = labels.windows(2).find(|w| w[0] == w[1]) {
            return Err(bad(format!(
                "grid point `{}` appears twice (a repeated grid value): one result directory",
                w[0]
            )));
        }
        for (i, d) in recipe.drafters.iter().enumerate() {
            let named = |problem: String| bad(format!("drafter `{}`: {problem}", d.name));
            // The name is a directory under `checkpoints/<recipe>/` and `data/distilled/<recipe>/`.
            if !plain_name(&d.name) {
                return Err(bad(format!("a drafter's `name` must be a plain directory name, got {:?}", d.name)));
            }
            if recipe.drafters[..i].iter().any(|other| other.name == d.name) {
                return Err(bad(format!(
                    "two [[drafters]] are named `{}`: each trains into its own directory, so names must differ",
                    d.name
                )));
            }
            d.distill.validate().map_err(|e| named(e.to_string()))?;
            d.train.validate().map_err(|e| named(e.to_string()))?;
            if d.path.is_some() {
                continue;
            }
            if d.limit == 0 {
                return Err(named("`limit` must be at least 1 (conversations to distil)".into()));
            }
            let horizon = d.train.horizon;
            if d.train.labels == draftsmith_train::LabelSource::Teacher && d.distill.teacher_len <= horizon {
                return Err(named(format!(
                    "`train.labels = \"teacher\"` with `train.horizon = {horizon}` needs teacher continuations of at \
                     least {} tokens (the first is the target's own next token): set `distill.teacher_len = {}` \
                     (it is {})",
                    horizon + 1,
                    horizon + 1,
                    d.distill.teacher_len
                )));
            }
        }
        for point in &mut points {
            if let Some(d) = recipe.drafters.iter().find(|d| point.params.drafter.as_deref() == Some(d.name.as_str())) {
                // A tied head's drafter proposes from its draft vocabulary only; each beam
                // starts from its own token.
                let vocab = d.train.draft_vocab;
                let tied = d.train.head == draftsmith_heads::redrafter::HeadKind::Tied;
                let beams = recipe.methods.contains(&Method::ReDrafter) && d.path.is_none();
                if beams && tied && vocab > 0 && point.params.beam_width > vocab {
                    return Err(bad(format!(
                        "{}: `beam_width` {} is more than drafter `{}`'s `train.draft_vocab` {vocab}: each beam \
                         starts from its own token",
                        point.label, point.params.beam_width, d.name
                    )));
                }
                point.params.drafter = Some(d.run_dir(&recipe.name).display().to_string());
            }
        }
        for point in &points {
            for &method in &recipe.methods {
                draftsmith_decode::validate_method(method, &point.params)
                    .map_err(|e| bad(format!("{}: {e}", point.label)))?;
            }
        }
        Ok((recipe, points))
    }

    /// The cartesian product of the grid over the base parameters.
    pub fn points(&self) -> Result<Vec<GridPoint>, String> {
        let base = serde_json::to_value(&self.params).map_err(|e| e.to_string())?;
        let known: Vec<String> = base.as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default();
        let mut points = vec![(Vec::<String>::new(), base)];
        for (key, values) in &self.grid {
            if !known.contains(key) {
                return Err(format!("grid parameter `{key}` is not a method parameter (known: {})", known.join(", ")));
            }
            if let Some(readers) = read_by_none(&self.methods, key) {
                return Err(format!("grid parameter `{key}` {readers}, so every grid point would run the same evals"));
            }
            if values.is_empty() {
                return Err(format!("grid parameter `{key}` has no values"));
            }
            points = points
                .into_iter()
                .flat_map(|(label, params)| {
                    values.iter().map(move |v| {
                        let mut params = params.clone();
                        params[key.as_str()] = v.clone();
                        let mut label = label.clone();
                        label.push(format!("{key}={}", label_value(v)));
                        (label, params)
                    })
                })
                .collect();
        }
        points
            .into_iter()
            .map(|(label, params)| {
                let label = if label.is_empty() { "base".to_string() } else { label.join(",") };
                let params: MethodParams = serde_json::from_value(params).map_err(|e| format!("{label}: {e}"))?;
                Ok(GridPoint { label, params })
            })
            .collect()
    }

    /// Files and directories the recipe names that must exist before it runs: each grid
    /// point's drafter directory unless the recipe trains it (`[[drafters]]` without `path`),
    /// and `prompts` where it is a path (ends in `.jsonl` or has a directory part) rather than a
    /// dataset name. Each as `(what, path)`.
    pub fn missing_inputs(&self, points: &[GridPoint]) -> Vec<(String, PathBuf)> {
        let trained: Vec<PathBuf> =
            self.drafters.iter().filter(|d| d.path.is_none()).map(|d| d.run_dir(&self.name)).collect();
        let mut missing = Vec::new();
        // A path (the file's extension, or a directory part) rather than a dataset or model name.
        let is_path = |p: &str, ext: &str| {
            p.ends_with(ext) || Path::new(p).parent().is_some_and(|parent| !parent.as_os_str().is_empty())
        };
        let prompts = Path::new(&self.prompts);
        if is_path(&self.prompts, ".jsonl") && !prompts.is_file() {
            missing.push(("`prompts`".to_string(), prompts.to_path_buf()));
        }
        for d in self.drafters.iter().filter(|d| d.path.is_none()) {
            let data = Path::new(&d.data);
            let trained = DrafterRecipe::is_trained(&d.run_dir(&self.name));
            if !trained && (is_path(&d.data, ".jsonl") || is_path(&d.data, ".json")) && !data.is_file() {
                missing.push((format!("`data` of drafter `{}`", d.name), data.to_path_buf()));
            }
        }
        if let Some(model) = self.model.as_deref().filter(|m| !m.starts_with("hf:") && is_path(m, ".gguf")) {
            if !Path::new(model).exists() {
                missing.push(("`model`".to_string(), PathBuf::from(model)));
            }
        }
        for point in points {
            let Some(dir) = point.params.drafter.as_deref().map(PathBuf::from) else { continue };
            if !trained.contains(&dir) && !dir.is_dir() && !missing.iter().any(|(_, p)| p == &dir) {
                missing.push((format!("`drafter` of grid point {}", point.label), dir));
            }
        }
        missing
    }

    /// Directory of one grid point's eval.
    pub fn point_dir(&self, results: &Path, point: &GridPoint) -> PathBuf {
        results.join(&self.name).join(&point.label)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_checked_in_recipe_reads_with_its_grid() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../recipes");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let (recipe, points) = Recipe::read(&path).unwrap_or_else(|e| panic!("{e}"));
                assert!(!points.is_empty(), "{}", path.display());
                for drafter in &recipe.drafters {
                    let _ = drafter.data_dir(&recipe.name);
                }
                n += 1;
            }
        }
        assert!(n >= 15, "only {n} recipes found in {}", dir.display());
    }

    fn write(name: &str, text: &str) -> PathBuf {
        let path = std::env::temp_dir().join(format!("draftsmith-recipe-{}-{name}.toml", std::process::id()));
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn grid_expands_to_the_cartesian_product() {
        let path = write("ok", "name = \"g\"\nprompts = \"mt-bench\"\nmethods = [\"ar\", \"ngram-trie\"]\n[params]\nnum_draft = 8\n[grid]\nngram_n = [8, 13]\nngram_lp = [2, 3, 4]\n");
        let (recipe, points) = Recipe::read(&path).unwrap();
        assert_eq!(points.len(), 6);
        assert_eq!(points[0].label, "ngram_lp=2,ngram_n=8");
        assert!(points.iter().all(|p| p.params.num_draft == 8));
        assert_eq!(points[5].params.ngram_n, 13);
        assert_eq!(points[5].params.ngram_lp, 4);
        assert_eq!(recipe.max_new_tokens, 128);
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_file() {
        let path = write("key", "name = \"g\"\nprompts = \"p\"\nmethods = [\"ar\"]\ntemprature = 1\n");
        let err = Recipe::read(&path).unwrap_err().to_string();
        assert!(err.contains(&path.display().to_string()) && err.contains("temprature"), "{err}");
        let path = write("grid", "name = \"g\"\nprompts = \"p\"\nmethods = [\"ar\"]\n[grid]\nngram_x = [1]\n");
        let err = Recipe::read(&path).unwrap_err().to_string();
        assert!(err.contains("ngram_x") && err.contains("ngram_n"), "{err}");
        let path = write(
            "value",
            "name = \"g\"\nprompts = \"p\"\nmethods = [\"ar\", \"ngram-trie\"]\n[grid]\nngram_lp = [20]\n",
        );
        let err = Recipe::read(&path).unwrap_err().to_string();
        assert!(err.contains("ngram_lp=20"), "an invalid grid point is named: {err}");
        let path = write("param", "name = \"g\"\nprompts = \"p\"\nmethods = [\"ar\"]\n[params]\ndraft_length = 3\n");
        let err = Recipe::read(&path).unwrap_err().to_string();
        assert!(err.contains("draft_length"), "{err}");
        let path = write(
            "unread",
            "name = \"g\"\nprompts = \"p\"\nmethods = [\"ar\", \"prompt-lookup\"]\n[grid]\nbeam_width = [1, 2]\n",
        );
        let err = Recipe::read(&path).unwrap_err().to_string();
        assert!(
            err.contains("`beam_width` is read by none of the recipe's methods (ar, prompt-lookup;")
                && err.contains("methods that read it: redrafter"),
            "{err}"
        );
        let path = write("none", "name = \"g\"\nprompts = \"p\"\nmethods = []\n");
        let err = Recipe::read(&path).unwrap_err().to_string();
        assert!(err.contains("`methods` is empty"), "{err}");
        let path = write("method", "name = \"g\"\nprompts = \"p\"\nmethods = [\"ar\", \"medusa\"]\n");
        let err = Recipe::read(&path).unwrap_err().to_string();
        assert!(
            err.contains(&path.display().to_string()) && err.contains("medusa") && err.contains("prompt-lookup"),
            "an unknown method names the file and the known methods: {err}"
        );
    }

    #[test]
    fn counts_of_zero_and_repeated_grid_values_are_refused() {
        let base = "name = \"g\"\nprompts = \"p\"\nmethods = [\"ar\", \"prompt-lookup\"]\n";
        for (name, extra, word) in [
            ("tokens", "max_new_tokens = 0\n", "max_new_tokens"),
            ("limit", "limit = 0\n", "limit"),
            ("twice", "[grid]\ndraft_len = [2, 2]\n", "draft_len=2"),
            // Refused when read, not when the run reaches the point.
            ("penalty", "[grid]\npenalty = [1.0, -1.0]\n", "penalty=-1.0: sampling"),
            // TOML's nan / inf would read as "invalid type: null" once in JSON.
            ("nan", "[params]\npenalty = nan\n", "`params.penalty` is not a finite number"),
            ("inf", "[grid]\npenalty = [1.2, -inf]\n", "`grid.penalty[1]` is not a finite number"),
        ] {
            let path = write(name, &format!("{base}{extra}"));
            let err = Recipe::read(&path).unwrap_err().to_string();
            assert!(err.contains(&path.display().to_string()) && err.contains(word), "{err}");
        }
    }

    #[test]
    fn inputs_that_must_exist_are_listed_when_missing() {
        let text = "name = \"m\"\nmodel = \"nowhere/m.gguf\"\nprompts = \"nowhere/p.jsonl\"\nmethods = [\"ar\", \"redrafter\"]\n[grid]\ndrafter = [\"trained\", \"nowhere/d\"]\n[[drafters]]\nname = \"trained\"\n";
        let (recipe, points) = Recipe::read(&write("missing", text)).unwrap();
        let missing: Vec<String> =
            recipe.missing_inputs(&points).into_iter().map(|(w, p)| format!("{w} {}", p.display())).collect();
        assert_eq!(
            missing,
            [
                "`prompts` nowhere/p.jsonl",
                "`model` nowhere/m.gguf",
                "`drafter` of grid point drafter=nowhere_d nowhere/d"
            ]
        );
        let named = "name = \"n\"\nprompts = \"mt-bench\"\nmethods = [\"ar\"]\n";
        let (recipe, points) = Recipe::read(&write("named", named)).unwrap();
        assert!(recipe.missing_inputs(&points).is_empty(), "a dataset name is fetched, not a path");
    }

    #[test]
    fn drafters_are_typed_and_grid_names_resolve_to_their_directories() {
        let text = "name = \"t4\"\nprompts = \"mt-bench\"\nmethods = [\"ar\", \"redrafter\"]\n[grid]\ndrafter = [\"gt\", \"other\"]\n[[drafters]]\nname = \"gt\"\ndistill = { responses = false, ground_truth = true }\ntrain = { horizon = 4 }\n[[drafters]]\nname = \"other\"\npath = \"somewhere/else\"\n";
        let (recipe, points) = Recipe::read(&write("drafters", text)).unwrap();
        assert_eq!(recipe.drafters[0].train.horizon, 4);
        assert!(recipe.drafters[0].distill.ground_truth);
        assert_eq!(points[0].label, "drafter=gt", "string values without quotes");
        let paths = "name = \"p\"\nprompts = \"mt-bench\"\nmethods = [\"redrafter\"]\n[grid]\ndrafter = [\"../../x\", \"/abs/y\"]\n";
        let (by_path, path_points) = Recipe::read(&write("drafter-paths", paths)).unwrap();
        let labels: Vec<&str> = path_points.iter().map(|p| p.label.as_str()).collect();
        assert_eq!(labels, ["drafter=.._.._x", "drafter=_abs_y"], "a path's separators do not nest directories");
        assert_eq!(path_points[0].params.drafter.as_deref(), Some("../../x"));
        let results = Path::new("r");
        assert_eq!(by_path.point_dir(results, &path_points[0]), results.join("p").join("drafter=.._.._x"));
        let dirs: Vec<String> = points.iter().map(|p| p.params.drafter.clone().unwrap()).collect();
        assert_eq!(dirs, vec!["checkpoints/t4/gt".to_string(), "somewhere/else".to_string()]);
        let bad = text.replace("horizon = 4", "horizon = 4, learning_rate = 1.0");
        let err = Recipe::read(&write("drafters-bad", &bad)).unwrap_err().to_string();
        assert!(err.contains("learning_rate") && err.contains("drafters-bad"), "{err}");
    }

    #[test]
    fn drafter_names_and_settings_that_cannot_work_together_are_refused_up_front() {
        let base = "name = \"g\"\nprompts = \"p\"\nmethods = [\"ar\", \"redrafter\"]\n";
        for (name, extra, word) in [
            ("escape", "[[drafters]]\nname = \"../x\"\n", "plain directory name"),
            ("dot", "[[drafters]]\nname = \"..\"\n", "plain directory name"),
            ("blank", "[[drafters]]\nname = \" \"\n", "plain directory name"),
            ("path", "[[drafters]]\nname = \"a\"\npath = \"x\"\nlimit = 3\n", "`path` (an existing drafter"),
            ("twice", "[[drafters]]\nname = \"a\"\n[[drafters]]\nname = \"a\"\nlimit = 3\n", "two [[drafters]]"),
            ("limit0", "[[drafters]]\nname = \"a\"\nlimit = 0\n", "`limit` must be at least 1"),
            (
                "teacher",
                "[[drafters]]\nname = \"a\"\ntrain = { horizon = 6, labels = \"teacher\" }\n",
                "teacher_len = 7",
            ),
            (
                "vocab",
                "[params]\ndrafter = \"a\"\nbeam_width = 16\n[[drafters]]\nname = \"a\"\ntrain = { draft_vocab = 8 }\n",
                "`train.draft_vocab` 8",
            ),
            ("unread", "[params]\nngram_n = 4\n", "`params.ngram_n` is read by none"),
            ("both", "[params]\nbeam_width = 2\n[grid]\nbeam_width = [1, 2]\n", "both [params] and [grid]"),
        ] {
            let path = write(&format!("drafters-{name}"), &format!("{base}{extra}"));
            let err = Recipe::read(&path).unwrap_err().to_string();
            assert!(err.contains(word), "{name}: {err}");
        }
        let ok = "[params]\ndrafter = \"a\"\n[[drafters]]\nname = \"a\"\ndistill = { teacher_len = 7 }\ntrain = { horizon = 6, labels = \"teacher\" }\n";
        Recipe::read(&write("drafters-ok", &format!("{base}{ok}"))).unwrap();
    }
}
