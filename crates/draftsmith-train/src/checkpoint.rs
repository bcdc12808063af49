//! Checkpoints hold the drafter (in the export layout), the optimiser state and the loop
//! position; never the target. Written to `checkpoint.tmp/` and renamed over `checkpoint/`,
//! so a kill mid-write leaves the previous checkpoint intact.

use std::path::{Path, PathBuf};

use burn::module::AutodiffModule;
use burn::optim::Optimizer;
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder, Recorder};
use burn::tensor::backend::AutodiffBackend;
use serde::{Deserialize, Serialize};

use draftsmith_heads::redrafter::WEIGHTS_FILE;

use crate::error::TrainError;

/// Where the loop stood.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoopState {
    /// Optimiser steps done.
    pub step: usize,
    pub total_steps: usize,
    /// The training config and data fingerprint the run was started with (must match on resume).
    pub fingerprint: serde_json::Value,
    /// sha256 of each file of the checkpoint, by name, filled in when it is written and checked
    /// on resume (absent in checkpoints written before session 82: not checked).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub files: std::collections::BTreeMap<String, String>,
}

pub const STATE_FILE: &str = "state.json";
pub const OPTIMIZER_FILE: &str = "optimizer";
/// The drafter as a burn record (keeps the parameter ids the optimiser state is keyed by).
pub const MODULE_FILE: &str = "module";

pub fn checkpoint_dir(run: &Path) -> PathBuf {
    run.join("checkpoint")
}

/// The file burn's recorder writes for record `name` in `dir` (it adds its extension).
fn record_file(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.mpk"))
}

/// Reads the loop state of the last checkpoint, if any.
pub fn read_state(run: &Path) -> Result<Option<LoopState>, TrainError> {
    let dir = checkpoint_dir(run);
    let old = run.join("checkpoint.old");
    if !dir.exists() && old.exists() {
        // Killed between the two renames of `write_checkpoint`: the previous checkpoint is whole.
        std::fs::rename(&old, &dir).map_err(TrainError::io(&old))?;
    }
    let path = dir.join(STATE_FILE);
    if !path.exists() {
        // Checkpoints are written whole (a temporary directory renamed into place): one without
        // its state was damaged, and restarting would replace what it holds.
        if dir.is_dir() {
            let problem = format!(
                "missing, so the checkpoint cannot be resumed: restore it, or delete {} to restart the run from step 0",
                dir.display()
            );
            return Err(TrainError::Checkpoint { path, problem });
        }
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path).map_err(TrainError::io(&path))?;
    serde_json::from_str(&text).map(Some).map_err(|e| TrainError::Checkpoint { path, problem: e.to_string() })
}

/// Calls `write(tmp_dir)` to fill a fresh temporary directory, adds the state file, then
/// replaces the checkpoint directory with it.
pub fn write_checkpoint(
    run: &Path,
    state: &LoopState,
    write: impl FnOnce(&Path) -> Result<(), TrainError>,
) -> Result<(), TrainError> {
    let tmp = run.join("checkpoint.tmp");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(TrainError::io(&tmp))?;
    write(&tmp)?;
    let mut state = state.clone();
    state.files = checksums(&tmp)?;
    let state_path = tmp.join(STATE_FILE);
    std::fs::write(&state_path, serde_json::to_string_pretty(&state).expect("serializable"))
        .map_err(TrainError::io(&state_path))?;
    let dir = checkpoint_dir(run);
    let old = run.join("checkpoint.old");
    let _ = std::fs::remove_dir_all(&old);
    if dir.exists() {
        std::fs::rename(&dir, &old).map_err(TrainError::io(&dir))?;
    }
    std::fs::rename(&tmp, &dir).map_err(TrainError::io(&tmp))?;
    let _ = std::fs::remove_dir_all(&old);
    Ok(())
}

/// Where training starts: `fresh` and `optim` as given (step 0), or both restored from the run's
/// checkpoint when it has one. `check_export(dir)` loads the checkpoint's exported drafter (so a
/// drafter for another target fails early, naming the file); the burn records — not the export
/// — restore the parameters with the ids the optimiser state is keyed by.
pub fn resume<AB, M, O>(
    run: &Path,
    fingerprint: &serde_json::Value,
    fresh: M,
    optim: O,
    device: &AB::Device,
    check_export: impl FnOnce(&Path) -> Result<(), TrainError>,
) -> Result<(M, O, usize), TrainError>
where
    AB: AutodiffBackend,
    M: AutodiffModule<AB>,
    O: Optimizer<M, AB>,
{
    let Some(state) = read_state(run)? else {
        nothing_to_replace(run)?;
        return Ok((fresh, optim, 0));
    };
    let dir = checkpoint_dir(run);
    same_run(&dir, &state.fingerprint, fingerprint)?;
    verify_checksums(&dir, &state)?;
    check_export(&dir)?;
    let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
    let bad = |file: &str, e: burn::record::RecorderError| TrainError::Checkpoint {
        path: record_file(&dir, file),
        problem: format!(
            "{} (truncated or damaged: restore it, or delete {} to restart the run)",
            unreadable_record(&e),
            dir.display()
        ),
    };
    let module = fresh.load_record(recorder.load(dir.join(MODULE_FILE), device).map_err(|e| bad(MODULE_FILE, e))?);
    let optim = optim.load_record(recorder.load(dir.join(OPTIMIZER_FILE), device).map_err(|e| bad(OPTIMIZER_FILE, e))?);
    Ok((module, optim, state.step))
}

/// sha256 of every file in a checkpoint directory being written, by name.
fn checksums(dir: &Path) -> Result<std::collections::BTreeMap<String, String>, TrainError> {
    let mut files = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir(dir).map_err(TrainError::io(dir))? {
        let path = entry.map_err(TrainError::io(dir))?.path();
        if path.is_file() {
            let sha = draftsmith_core::digest::sha256_file(&path).map_err(TrainError::io(&path))?;
            files.insert(path.file_name().expect("a listed file has a name").to_string_lossy().into_owned(), sha);
        }
    }
    Ok(files)
}

/// Checks `run`'s last checkpoint against its `state.json` (there, readable, and every file it
/// lists with the sha256 it records) before its drafter is taken elsewhere (`export` of a run
/// that has not finished): a file changed since it was saved is refused, naming it.
pub fn verify_checkpoint(run: &Path) -> Result<(), TrainError> {
    let dir = checkpoint_dir(run);
    match read_state(run)? {
        Some(state) => verify_checksums(&dir, &state),
        None => Err(TrainError::Checkpoint {
            path: dir.join(STATE_FILE),
            problem: "missing: the checkpoint cannot be checked (restore it)".into(),
        }),
    }
}

/// Checks the files `state` lists against their sha256 (a record changed in place would resume
/// into a different run, or fail deep inside burn's decoder).
fn verify_checksums(dir: &Path, state: &LoopState) -> Result<(), TrainError> {
    for (name, expected) in &state.files {
        let path = dir.join(name);
        let problem = |what: String| TrainError::Checkpoint {
            path: path.clone(),
            problem: format!(
                "{what} (changed or damaged since it was saved): restore it, or delete {} to restart the run",
                dir.display()
            ),
        };
        if !path.is_file() {
            return Err(problem("missing".into()));
        }
        let found = draftsmith_core::digest::sha256_file(&path).map_err(TrainError::io(&path))?;
        if &found != expected {
            return Err(problem(format!("sha256 is {found}, state.json records {expected}")));
        }
    }
    Ok(())
}

/// Refuses to go on in `run` when its checkpoint was written by a run with another fingerprint
/// (training config, data, target or length), naming what differs; fine when there is no
/// checkpoint. The trainers ask before their costly set-up (the target's hidden states), and
/// [`resume`] again.
pub fn check_resumable(run: &Path, fingerprint: &serde_json::Value) -> Result<(), TrainError> {
    match read_state(run)? {
        Some(state) => same_run(&checkpoint_dir(run), &state.fingerprint, fingerprint),
        None => nothing_to_replace(run),
    }
}

/// A run starting afresh writes its drafter into `run`: refused when `run` already holds one
/// without a checkpoint to resume (an exported or copied drafter), which it would replace.
fn nothing_to_replace(run: &Path) -> Result<(), TrainError> {
    // What a run writes at its end (a run killed earlier leaves only `metrics.csv` and its
    // checkpoint): found without a checkpoint, they are someone else's.
    const FINAL_FILES: [&str; 5] = [WEIGHTS_FILE, "config.json", "summary.json", "split.json", "eval-prompts.jsonl"];
    let found: Vec<&str> = FINAL_FILES.into_iter().filter(|f| run.join(f).exists()).collect();
    let them = if found.len() == 1 { "it" } else { "them" };
    match found.is_empty() {
        false => Err(TrainError::Dir {
            path: run.to_path_buf(),
            problem: format!(
                "holds {} but no training checkpoint to resume, and a fresh run would replace {them}; use a new \
                 run directory or move {them}",
                found.join(", ")
            ),
        }),
        true => Ok(()),
    }
}

/// The fingerprint key naming the kind of drafter a run trains (`DrafterKind`'s name).
pub const KIND: &str = "kind";

/// `Err` naming the kind of drafter when the checkpoint's fingerprint `theirs` is another
/// kind's, else the first few settings in which it differs from this run's `ours`.
fn same_run(dir: &Path, theirs: &serde_json::Value, ours: &serde_json::Value) -> Result<(), TrainError> {
    let kind = |fingerprint: &serde_json::Value| fingerprint.get(KIND).and_then(|k| k.as_str()).map(str::to_string);
    let ours = match (kind(theirs), kind(ours)) {
        (Some(a), Some(b)) if a != b => {
            return Err(TrainError::ResumeMismatch {
                path: dir.to_path_buf(),
                problem: format!("it was written by `train {a}`, not `train {b}`: use another run directory"),
            })
        }
        // A checkpoint from before the kind was recorded: compared on the rest.
        (None, Some(_)) => {
            let mut ours = ours.clone();
            if let Some(fields) = ours.as_object_mut() {
                fields.remove(KIND);
            }
            ours
        }
        _ => ours.clone(),
    };
    if *theirs == ours {
        return Ok(());
    }
    let mut found = Vec::new();
    draftsmith_core::jsondiff::differences("", theirs, &ours, &mut found);
    const SHOWN: usize = 4;
    let more = found.len().saturating_sub(SHOWN);
    found.truncate(SHOWN);
    if more > 0 {
        found.push(format!("{more} more"));
    }
    Err(TrainError::ResumeMismatch {
        path: dir.to_path_buf(),
        problem: format!(
            "it was written by a run with other settings ({}; the checkpoint's value first)",
            found.join("; ")
        ),
    })
}

/// A record that could not be read, in burn's words up to its advice on records saved by burn
/// 0.14 and older (which checkpoints written by this crate never are).
fn unreadable_record(e: &burn::record::RecorderError) -> String {
    // burn prints the advice inside a debug-formatted `Unknown("…")`, its newline escaped.
    let text = e.to_string();
    let first = text.split("The internal data format has changed").next().unwrap_or(&text);
    let first = first.trim_end().trim_end_matches("\\n").trim_end_matches('\n');
    match first.strip_prefix("Unknown(\"") {
        Some(inner) => inner.strip_suffix("\")").unwrap_or(inner).trim().to_string(),
        None => first.trim().to_string(),
    }
}

/// Writes a checkpoint: `export(dir)` (the drafter in its export layout), then the burn records of
/// the module and the optimiser, then the loop state, replacing the previous checkpoint at once.
pub fn save_checkpoint<AB, M, O>(
    run: &Path,
    state: &LoopState,
    module: &M,
    optim: &O,
    export: impl FnOnce(&Path) -> Result<(), TrainError>,
) -> Result<(), TrainError>
where
    AB: AutodiffBackend,
    M: AutodiffModule<AB>,
    O: Optimizer<M, AB>,
{
    let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
    write_checkpoint(run, state, |dir| {
        export(dir)?;
        let bad = |file: &str, e: burn::record::RecorderError| TrainError::Checkpoint {
            path: record_file(dir, file),
            problem: e.to_string(),
        };
        recorder.record(module.clone().into_record(), dir.join(MODULE_FILE)).map_err(|e| bad(MODULE_FILE, e))?;
        recorder.record(optim.to_record(), dir.join(OPTIMIZER_FILE)).map_err(|e| bad(OPTIMIZER_FILE, e))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_kinds_checkpoint_is_named_and_one_without_a_kind_compares_the_rest() {
        let dir = Path::new("run/checkpoint");
        let redrafter = serde_json::json!({ KIND: "redrafter", "train": { "lr": 0.001 } });
        let tokenswift = serde_json::json!({ KIND: "tokenswift", "train": { "lr": 0.001 } });
        let err = same_run(dir, &redrafter, &tokenswift).unwrap_err().to_string();
        assert!(err.contains("written by `train redrafter`, not `train tokenswift`"), "{err}");
        same_run(dir, &redrafter, &redrafter).unwrap();
        // Written before the kind was recorded: the same settings resume, others are listed.
        let old = serde_json::json!({ "train": { "lr": 0.001 } });
        same_run(dir, &old, &redrafter).unwrap();
        let other = serde_json::json!({ KIND: "redrafter", "train": { "lr": 0.01 } });
        let err = same_run(dir, &old, &other).unwrap_err().to_string();
        assert!(err.contains("train.lr: 0.001 vs 0.01"), "{err}");
    }
}
