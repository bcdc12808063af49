//! `manifest.json`: what an eval directory holds results of. A rerun into the same directory
//! resumes only when everything that shapes the records is the same.

use std::path::Path;

use draftsmith_decode::{DraftTokens, DraftWeights, Method, MethodParams, SamplingConfig};
use serde::{Deserialize, Serialize};

use crate::error::EvalError;
use crate::evaluate::{REPORT_FILE, SUMMARY_FILE};
use crate::plot::PLOT_FILE;
use crate::records::RECORDS_FILE;

/// File name of the manifest inside an eval directory.
pub const MANIFEST_FILE: &str = "manifest.json";

/// The files an eval writes beside its manifest.
const EVAL_FILES: [&str; 4] = [RECORDS_FILE, SUMMARY_FILE, REPORT_FILE, PLOT_FILE];
/// Bumped when records or the manifest change shape.
pub const SCHEMA_VERSION: u32 = 1;

/// Provenance of an eval directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub schema_version: u32,
    /// The resolved model path.
    pub model: String,
    /// Device and weight representation (timings depend on them).
    pub engine: String,
    /// Methods in run order, `ar` first.
    pub methods: Vec<Method>,
    pub params: MethodParams,
    pub max_new_tokens: usize,
    /// The resolved prompts file, its sha256, how many prompts were taken, chat template on/off.
    pub prompts: String,
    pub prompts_sha256: String,
    pub limit: Option<usize>,
    pub chat_template: bool,
    /// sha256 of the drafter's weights (`<drafter>/drafter.safetensors`) when the eval uses one:
    /// a retrained drafter at the same path is a different eval, not a resume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drafter_sha256: Option<String>,
    /// Generations ran to `max_new_tokens`, past the model's end-of-turn token.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ignore_eos: bool,
    /// The methods of each prompt ran side by side, taking turns every this many new tokens
    /// (`None`: one after another). Timings only; compared on resume all the same, so one
    /// directory never mixes the two.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_tokens: Option<usize>,
    /// Sampling, for every method and `ar` alike, each generation seeded with its seed (`None`:
    /// greedy, the penalty of `params`). Sampled outputs are not compared with `ar`'s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<SamplingConfig>,
    /// The command line that created the directory (informational: not compared on resume).
    pub command: String,
    /// The machine that created the directory: CPU model, threads, kernel path and the flags
    /// that matter ([`machine_line`]; informational: not compared on resume).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
}

/// This machine in one line: `AMD EPYC (2 threads; kernels avx512vnni; flags avx2 fma …)`.
pub fn machine_line() -> String {
    draftsmith_kernels::probe::CpuInfo::detect().to_string()
}

impl Manifest {
    /// Fields that differ from `other`, as `name: ours vs theirs` (the command is ignored).
    pub fn differences(&self, other: &Manifest) -> Vec<String> {
        let mut out = Vec::new();
        let mut check = |name: &str, a: String, b: String| {
            if a != b {
                out.push(format!("{name}: {a} vs {b}"));
            }
        };
        check("schema_version", self.schema_version.to_string(), other.schema_version.to_string());
        check("model", self.model.clone(), other.model.clone());
        check("engine", self.engine.clone(), other.engine.clone());
        check("methods", names(&self.methods), names(&other.methods));
        check("max_new_tokens", self.max_new_tokens.to_string(), other.max_new_tokens.to_string());
        check("prompts", self.prompts.clone(), other.prompts.clone());
        check("prompts_sha256", self.prompts_sha256.clone(), other.prompts_sha256.clone());
        check("limit", format!("{:?}", self.limit), format!("{:?}", other.limit));
        check("chat_template", self.chat_template.to_string(), other.chat_template.to_string());
        let sha = |s: &Option<String>| s.clone().unwrap_or_else(|| "(not recorded)".into());
        check("drafter_sha256", sha(&self.drafter_sha256), sha(&other.drafter_sha256));
        check("ignore_eos", self.ignore_eos.to_string(), other.ignore_eos.to_string());
        check("turn_tokens", format!("{:?}", self.turn_tokens), format!("{:?}", other.turn_tokens));
        let sampling = |s: &Option<SamplingConfig>| s.as_ref().map_or("greedy".into(), crate::report::sampling_label);
        check("sampling", sampling(&self.sampling), sampling(&other.sampling));
        // Field by field (`params.beam_width: 1 vs 4`), not as two whole structures.
        let json = |p: &MethodParams| serde_json::to_value(p).unwrap_or_default();
        draftsmith_core::jsondiff::differences("params", &json(&self.params), &json(&other.params), &mut out);
        out
    }

    /// What makes `ar` records of the eval `source` unfit to stand in for this eval's own
    /// (`--reuse-ar-from`): another model, engine, length, prompt form, decoding (sampling, the
    /// penalty) or way of timing. Empty when they fit.
    pub fn ar_differences(&self, source: &Manifest) -> Vec<String> {
        let pick = |m: &Manifest| Manifest {
            methods: vec![Method::Ar],
            params: MethodParams {
                penalty: m.params.penalty,
                penalty_window: m.params.penalty_window,
                ..MethodParams::default()
            },
            prompts: String::new(),
            prompts_sha256: String::new(),
            limit: None,
            drafter_sha256: None,
            ..m.clone()
        };
        pick(self).differences(&pick(source))
    }
}

/// Checks that the `ar` records in `records` (`--reuse-ar-from`) come from an eval that decoded
/// as `ours` does, by the manifest beside them; records without one are taken as they are.
pub fn check_ar_source(records: &Path, ours: &Manifest) -> Result<(), EvalError> {
    let path = records.parent().unwrap_or(Path::new(".")).join(MANIFEST_FILE);
    if !path.exists() {
        return Ok(());
    }
    let differences = ours.ar_differences(&read_manifest(&path)?);
    match differences.is_empty() {
        true => Ok(()),
        false => Err(EvalError::ArSourceMismatch { path, differences }),
    }
}

/// The methods' names joined by commas.
pub fn names(methods: &[Method]) -> String {
    methods.iter().map(|m| m.name()).collect::<Vec<_>>().join(",")
}

/// Normalises a method list: `ar` first (added when missing: it is the baseline), duplicates
/// dropped, every method's parameters checked with `params`.
pub fn resolve_methods(methods: &[Method], params: &MethodParams) -> Result<Vec<Method>, EvalError> {
    let mut out = vec![Method::Ar];
    for &m in methods {
        draftsmith_decode::validate_method(m, params)?;
        if !out.contains(&m) {
            out.push(m);
        }
    }
    Ok(out)
}

/// sha256 (hex) of the weights of the drafter directory `dir` (`drafter.safetensors`, or
/// `model.safetensors` in the reference layout).
pub fn drafter_sha256(dir: &Path) -> Result<String, EvalError> {
    let path = draftsmith_heads::weights_path(dir);
    draftsmith_core::digest::sha256_file(&path).map_err(EvalError::io(&path))
}

/// Makes `dir` an eval directory for `manifest`: creates it and writes the manifest, or checks
/// that the manifest already there describes the same eval. Returns whether it resumes.
pub fn prepare_dir(dir: &Path, manifest: &Manifest) -> Result<bool, EvalError> {
    let path = dir.join(MANIFEST_FILE);
    if path.exists() {
        let differences = manifest.differences(&read_manifest(&path)?);
        if !differences.is_empty() {
            return Err(EvalError::ManifestMismatch { path, differences });
        }
        return Ok(true);
    }
    // Without a manifest the directory is not an eval's: refuse to write over files of the names
    // an eval writes (another tool's, a drafter run's `summary.json`); others are left alone.
    if let Some(file) = EVAL_FILES.iter().map(|name| dir.join(name)).find(|file| file.exists()) {
        return Err(EvalError::NoManifest { dir: dir.to_path_buf(), file });
    }
    std::fs::create_dir_all(dir).map_err(EvalError::io(dir))?;
    write_atomic(&path, &serde_json::to_string_pretty(manifest).expect("manifest serializes"))?;
    Ok(false)
}

/// Reads and parses the manifest file at `path`, naming it in any error.
fn read_manifest(path: &Path) -> Result<Manifest, EvalError> {
    let text = std::fs::read_to_string(path).map_err(EvalError::io(path))?;
    parse_manifest(&text).map_err(|problem| EvalError::Manifest { path: path.to_path_buf(), problem })
}

/// Reads a manifest. One written before `draft_weights` existed ran its draft model in the
/// file's formats, so it reads as `keep`, not as today's default; one written before
/// `draft_tokens` existed drafted the draft model's argmax under sampling too, so it reads as
/// `argmax`.
pub fn parse_manifest(text: &str) -> Result<Manifest, String> {
    let mut value: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    if let Some(params) = value.get_mut("params").and_then(|p| p.as_object_mut()) {
        params.entry("draft_weights").or_insert_with(|| serde_json::json!(DraftWeights::Keep));
        params.entry("draft_tokens").or_insert_with(|| serde_json::json!(DraftTokens::Argmax));
    }
    serde_json::from_value(value).map_err(|e| e.to_string())
}

/// Writes `text` to `path` atomically ([`draftsmith_core::fsio::write_atomic`]).
pub fn write_atomic(path: &Path, text: &str) -> Result<(), EvalError> {
    draftsmith_core::fsio::write_atomic(path, text.as_bytes()).map_err(|(path, source)| EvalError::Io { path, source })
}

#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;

    pub fn manifest() -> Manifest {
        Manifest {
            schema_version: SCHEMA_VERSION,
            model: "m.gguf".into(),
            engine: "cpu/quantized".into(),
            methods: vec![Method::Ar, Method::PromptLookup],
            params: MethodParams::default(),
            max_new_tokens: 16,
            prompts: "p.jsonl".into(),
            prompts_sha256: "ab".into(),
            limit: None,
            chat_template: true,
            drafter_sha256: None,
            ignore_eos: false,
            turn_tokens: None,
            sampling: None,
            command: "draftsmith eval".into(),
            machine: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::manifest;
    use super::*;

    #[test]
    fn a_retrained_drafter_is_not_a_resume() {
        let dir = std::env::temp_dir().join(format!("draftsmith-manifest-drafter-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let drafter = dir.join("drafter");
        std::fs::create_dir_all(&drafter).unwrap();
        std::fs::write(drafter.join("drafter.safetensors"), b"weights v1").unwrap();
        let first = Manifest { drafter_sha256: Some(drafter_sha256(&drafter).unwrap()), ..manifest() };
        let out = dir.join("eval");
        assert!(!prepare_dir(&out, &first).unwrap());
        assert!(prepare_dir(&out, &first).unwrap(), "same drafter: resumes");
        std::fs::write(drafter.join("drafter.safetensors"), b"weights v2").unwrap();
        let second = Manifest { drafter_sha256: Some(drafter_sha256(&drafter).unwrap()), ..manifest() };
        match prepare_dir(&out, &second) {
            Err(EvalError::ManifestMismatch { differences, .. }) => {
                assert!(differences.iter().any(|d| d.starts_with("drafter_sha256")), "{differences:?}")
            }
            other => panic!("expected a mismatch, got {other:?}"),
        }
        assert!(drafter_sha256(&dir.join("missing")).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn methods_get_ar_first_without_duplicates_and_unknown_ones_fail() {
        let params = MethodParams::default();
        let got = resolve_methods(&[Method::PromptLookup, Method::Ar, Method::PromptLookup], &params).unwrap();
        assert_eq!(got, [Method::Ar, Method::PromptLookup]);
        let err = resolve_methods(&[Method::DraftModel], &params).unwrap_err().to_string();
        assert!(err.contains("draft-model") && err.contains("--draft-model"), "{err}");
        let err = serde_json::from_str::<Manifest>(
            &serde_json::to_string(&manifest()).unwrap().replace("prompt-lookup", "eagle"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("eagle") && err.contains("prompt-lookup"), "{err}");
    }

    #[test]
    fn ar_records_are_reused_only_from_an_eval_that_decoded_the_same_way() {
        let dir = std::env::temp_dir().join(format!("draftsmith-eval-{}-ar-source", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let m = manifest();
        let records = dir.join(RECORDS_FILE);
        assert!(check_ar_source(&records, &m).is_ok(), "records without a manifest are taken as they are");
        prepare_dir(&dir, &m).unwrap();
        let other_methods = Manifest {
            methods: vec![Method::Ar, Method::NgramTrie],
            params: MethodParams { draft_len: 3, ..m.params.clone() },
            limit: Some(4),
            ..m.clone()
        };
        assert!(check_ar_source(&records, &other_methods).is_ok(), "methods and their parameters do not matter");
        let sampled = Manifest {
            sampling: Some(draftsmith_decode::SamplingConfig { temperature: 0.7, ..Default::default() }),
            params: MethodParams { penalty: 1.2, ..m.params.clone() },
            ..m.clone()
        };
        let err = check_ar_source(&records, &sampled).unwrap_err().to_string();
        assert!(err.contains("manifest.json") && err.contains("sampling") && err.contains("penalty: 1.2"), "{err}");
    }

    #[test]
    fn a_directory_resumes_only_for_the_same_manifest() {
        let dir = std::env::temp_dir().join(format!("draftsmith-eval-{}-manifest", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let m = manifest();
        assert!(!prepare_dir(&dir, &m).unwrap());
        let text = std::fs::read_to_string(dir.join(MANIFEST_FILE)).unwrap();
        assert_eq!(serde_json::from_str::<Manifest>(&text).unwrap(), m, "round trip");
        assert!(
            prepare_dir(&dir, &Manifest { command: "other".into(), ..m.clone() }).unwrap(),
            "the command does not matter"
        );
        let other =
            Manifest { max_new_tokens: 32, params: MethodParams { draft_len: 3, ..m.params.clone() }, ..m.clone() };
        let err = prepare_dir(&dir, &other).unwrap_err().to_string();
        assert!(
            err.contains("max_new_tokens: 32 vs 16") && err.contains("draft_len: 3") && err.contains("--out"),
            "{err}"
        );
        let turns = Manifest { turn_tokens: Some(256), ignore_eos: true, ..m.clone() };
        let err = prepare_dir(&dir, &turns).unwrap_err().to_string();
        assert!(err.contains("turn_tokens: Some(256) vs None") && err.contains("ignore_eos: true vs false"), "{err}");
        let sampled = |seed| Manifest {
            sampling: Some(draftsmith_decode::SamplingConfig { temperature: 1.0, seed, ..Default::default() }),
            ..m.clone()
        };
        let err = prepare_dir(&dir, &sampled(3)).unwrap_err().to_string();
        assert!(err.contains("sampling: sampled (T = 1, seed 3) vs greedy"), "{err}");

        // A manifest from before `draft_weights` ran its drafter as stored, and one from before
        // `draft_tokens` drafted its argmax.
        let mut old: serde_json::Value = serde_json::from_str(&text).unwrap();
        old["params"].as_object_mut().unwrap().remove("draft_weights");
        old["params"].as_object_mut().unwrap().remove("draft_tokens");
        let old = parse_manifest(&old.to_string()).unwrap();
        assert_eq!((old.params.draft_weights, old.params.draft_tokens), (DraftWeights::Keep, DraftTokens::Argmax));
        assert_eq!((m.params.draft_weights, m.params.draft_tokens), (DraftWeights::Q4_0, DraftTokens::Sample));
        let differences = m.differences(&old);
        assert_eq!(
            differences,
            [r#"params.draft_tokens: "sample" vs "argmax""#, r#"params.draft_weights: "q4_0" vs "keep""#]
        );

        let bare = dir.join("bare");
        std::fs::create_dir_all(&bare).unwrap();
        std::fs::write(bare.join(RECORDS_FILE), "").unwrap();
        assert!(prepare_dir(&bare, &m).unwrap_err().to_string().contains("no manifest.json"));
        // A drafter run's directory (its own summary.json) is not written over either.
        let run = dir.join("run");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(run.join("summary.json"), "{\"steps\": 2292}").unwrap();
        std::fs::write(run.join("drafter.safetensors"), "weights").unwrap();
        let err = prepare_dir(&run, &m).unwrap_err().to_string();
        assert!(err.contains("summary.json") && err.contains("no manifest.json"), "{err}");
        assert_eq!(std::fs::read_to_string(run.join("summary.json")).unwrap(), "{\"steps\": 2292}");
        assert!(!run.join(MANIFEST_FILE).exists());
        // Other files alone do not stop an eval.
        let other = dir.join("other");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("notes.txt"), "mine").unwrap();
        assert!(!prepare_dir(&other, &m).unwrap());
    }
}
