//! `manifest.json`: what a distilled dataset was made from and which shards it holds.

use std::path::{Path, PathBuf};

use draftsmith_core::fsio::write_atomic;
use serde::{Deserialize, Serialize};

use crate::error::DataError;
use crate::parts::PartInfo;

/// The manifest format this crate writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// The manifest's file name inside a dataset directory.
pub const MANIFEST_FILE: &str = "manifest.json";

/// The target model the dataset was distilled from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetId {
    /// A human-readable name (e.g. the model repository).
    pub name: String,
    /// SHA-256 of the target's weights (or another content hash identifying it).
    pub sha256: String,
}

/// Distillation settings that must be identical for a run to resume a dataset.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DistillParams {
    /// Caller-defined settings (sampling, chat template, lengths…), compared as a whole.
    pub settings: serde_json::Value,
    /// Greedy continuation length stored per position in `teacher`, if stored.
    pub teacher_len: Option<usize>,
    /// Number of next-token candidates stored per position, if stored.
    pub topk: Option<usize>,
}

/// One finished shard.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardInfo {
    /// File name inside the dataset directory, e.g. `shard-00000.parquet`.
    pub file: String,
    /// Index of the first input item this shard covers.
    pub first_input: usize,
    /// Number of input items it covers (some may have produced no record).
    pub inputs: usize,
    /// Number of records in it.
    pub records: usize,
    /// Total number of tokens over its records.
    pub tokens: usize,
    /// SHA-256 of the file, lowercase hex.
    pub sha256: String,
}

/// The contents of `manifest.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DistillManifest {
    /// Always [`FORMAT_VERSION`].
    pub format_version: u32,
    /// The target model.
    pub target: TargetId,
    /// The settings the records were made with.
    pub params: DistillParams,
    /// Finished shards, in input order.
    pub shards: Vec<ShardInfo>,
    /// `true` once the run finished; `false` while it may still be resumed.
    pub complete: bool,
    /// The part of a sharded distillation this dataset is (`distill --shard I/N`); absent for
    /// a single-process dataset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<PartInfo>,
}

impl DistillManifest {
    /// Number of input items covered by the listed shards.
    pub fn inputs_done(&self) -> usize {
        self.shards.last().map_or(self.first_input(), |s| s.first_input + s.inputs)
    }

    /// The first input this dataset covers: 0, or the start of its part's range.
    pub fn first_input(&self) -> usize {
        self.part.map_or(0, |p| p.range().start)
    }

    /// Total number of records over all shards.
    pub fn records(&self) -> usize {
        self.shards.iter().map(|s| s.records).sum()
    }
}

/// Path of the manifest of the dataset in `dir`.
pub(crate) fn manifest_path(dir: &Path) -> PathBuf {
    dir.join(MANIFEST_FILE)
}

/// Reads and checks `dir/manifest.json` (format version, contiguous shard inputs).
pub fn read_manifest(dir: &Path) -> Result<DistillManifest, DataError> {
    let path = manifest_path(dir);
    let text = std::fs::read(&path).map_err(DataError::io(&path))?;
    let bad = |problem: String| DataError::BadManifest { path: path.clone(), problem };
    let manifest: DistillManifest = serde_json::from_slice(&text).map_err(|e| bad(e.to_string()))?;
    if manifest.format_version != FORMAT_VERSION {
        return Err(bad(format!("format_version is {}, this build reads {FORMAT_VERSION}", manifest.format_version)));
    }
    let mut next = manifest.first_input();
    for shard in &manifest.shards {
        if shard.first_input != next {
            return Err(bad(format!(
                "{} starts at input {}, expected {next} (shards must be contiguous)",
                shard.file, shard.first_input
            )));
        }
        if shard.file.contains(['/', '\\']) {
            return Err(bad(format!("shard file {:?} is not a plain file name", shard.file)));
        }
        next += shard.inputs;
    }
    Ok(manifest)
}

/// Writes `dir/manifest.json` atomically: a temporary file, fsync, then rename.
pub(crate) fn write_manifest(dir: &Path, manifest: &DistillManifest) -> Result<(), DataError> {
    let text = serde_json::to_vec_pretty(manifest).expect("a manifest always serializes");
    write_atomic(&manifest_path(dir), &text).map_err(|(path, source)| DataError::Io { path, source })
}

/// The settings key under which `distill` records its input file's sha256, so that a resumed run
/// cannot append records of another file of the same name and size.
pub const INPUT_SHA256: &str = "input_sha256";

/// Removes [`INPUT_SHA256`] from `given` wherever `existing` has no such key at the same place
/// (a manifest written before it was recorded).
fn drop_unrecorded_input_sha(given: &mut serde_json::Value, existing: &serde_json::Value) {
    let Some(map) = given.as_object_mut() else { return };
    if existing.get(INPUT_SHA256).is_none() {
        map.remove(INPUT_SHA256);
    }
    for (key, value) in map.iter_mut() {
        if let Some(theirs) = existing.get(key) {
            drop_unrecorded_input_sha(value, theirs);
        }
    }
}

/// Checks that a run with `target` and `params` may resume the dataset described by `existing`.
pub(crate) fn check_resume(
    dir: &Path,
    existing: &DistillManifest,
    target: &TargetId,
    params: &DistillParams,
) -> Result<(), DataError> {
    match resume_difference(existing, target, params) {
        None => Ok(()),
        Some((field, existing, given)) => {
            Err(DataError::ResumeMismatch { dir: dir.to_path_buf(), field, existing, given })
        }
    }
}

/// The first field where a run with `target` and `params` differs from the dataset `existing`
/// describes, as (field, existing value, given value); for the settings, only the keys that
/// differ, each under its dotted key. `None` when the run may resume it.
pub(crate) fn resume_difference(
    existing: &DistillManifest,
    target: &TargetId,
    params: &DistillParams,
) -> Option<(&'static str, String, String)> {
    fn differ<T: PartialEq + std::fmt::Debug>(
        field: &'static str,
        existing: &T,
        given: &T,
    ) -> Option<(&'static str, String, String)> {
        (existing != given).then(|| (field, format!("{existing:?}"), format!("{given:?}")))
    }
    let (old, new) = (&existing.params, params);
    let plain = differ("target.name", &existing.target.name, &target.name)
        .or_else(|| differ("target.sha256", &existing.target.sha256, &target.sha256))
        .or_else(|| differ("params.teacher_len", &old.teacher_len, &new.teacher_len))
        .or_else(|| differ("params.topk", &old.topk, &new.topk));
    if plain.is_some() {
        return plain;
    }
    // The input's sha256 is in the settings since session 82: a manifest without it resumes
    // on the input's name and size, as it was written.
    let mut given = new.settings.clone();
    drop_unrecorded_input_sha(&mut given, &old.settings);
    if old.settings == given {
        return None;
    }
    let (mut existing, mut ours) = (serde_json::Map::new(), serde_json::Map::new());
    for (key, a, b) in draftsmith_core::jsondiff::leaves("", &old.settings, &given) {
        existing.insert(key.clone(), a.clone());
        ours.insert(key, b.clone());
    }
    Some((
        "params.settings",
        serde_json::Value::Object(existing).to_string(),
        serde_json::Value::Object(ours).to_string(),
    ))
}
