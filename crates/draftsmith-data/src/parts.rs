//! A distillation split over processes or machines. `distill --shard I/N` distils part `I` of
//! `N` — a contiguous, deterministic range of the input conversations — into
//! `<out>/part-0000I-of-0000N/`, an ordinary dataset directory whose manifest names the part.
//! [`read_records`](crate::read_records) on `<out>` reads the `N` parts as one dataset, in
//! input order, so the merged records are the records a single process writes; it refuses a set
//! with a missing, unfinished or inconsistent part, naming it.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::DataError;
use crate::manifest::{manifest_path, resume_difference, DistillManifest, ShardInfo};
use crate::record::DistillRecord;

/// Part `index` of `count` (0-based: `0/2` and `1/2` are the two halves).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Part {
    pub index: usize,
    pub count: usize,
}

impl Part {
    /// Part `index` of `count`; `count ≥ 1` and `index < count`.
    pub fn new(index: usize, count: usize) -> Result<Self, String> {
        if count == 0 || index >= count {
            return Err(format!("part {index}/{count} does not exist: parts are 0/N … (N-1)/N with N ≥ 1"));
        }
        Ok(Self { index, count })
    }

    /// The inputs of this part out of `total`: contiguous, disjoint over the parts, covering all.
    pub fn range(self, total: usize) -> Range<usize> {
        total * self.index / self.count..total * (self.index + 1) / self.count
    }

    /// The part's directory name inside the dataset directory.
    pub fn dir_name(self) -> String {
        format!("part-{:05}-of-{:05}", self.index, self.count)
    }

    /// The part a directory name stands for, if it is one.
    fn from_dir_name(name: &str) -> Option<Self> {
        let (index, count) = name.strip_prefix("part-")?.split_once("-of-")?;
        Self::new(index.parse().ok()?, count.parse().ok()?).ok()
    }
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Part {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("`{s}` is not a part: expected I/N, e.g. 0/4 (0-based)");
        let (index, count) = s.split_once('/').ok_or_else(bad)?;
        let parse = |v: &str| v.trim().parse::<usize>().map_err(|_| bad());
        Self::new(parse(index)?, parse(count)?)
    }
}

/// What a part's manifest records about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartInfo {
    #[serde(flatten)]
    pub part: Part,
    /// Input conversations of the whole distillation (every part reads the same list).
    pub total_inputs: usize,
}

impl PartInfo {
    /// The inputs this part covers.
    pub fn range(&self) -> Range<usize> {
        self.part.range(self.total_inputs)
    }
}

/// The part directories inside `dir` (none when it is an ordinary dataset or empty).
pub(crate) fn part_dirs(dir: &Path) -> Result<Vec<(Part, PathBuf)>, DataError> {
    let mut parts = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(parts),
        Err(e) => return Err(DataError::Io { path: dir.to_path_buf(), source: e }),
    };
    for entry in entries {
        let entry = entry.map_err(DataError::io(dir))?;
        let name = entry.file_name();
        if let Some(part) = name.to_str().and_then(Part::from_dir_name) {
            if entry.path().is_dir() {
                parts.push((part, entry.path()));
            }
        }
    }
    parts.sort_by_key(|(p, _)| (p.count, p.index));
    Ok(parts)
}

/// Fails when `dir` already holds the other kind of dataset: `parts` = whether the caller writes
/// a part (into `dir/part-…`) rather than a single-process dataset (into `dir`).
pub(crate) fn check_kind(dir: &Path, parts: bool) -> Result<(), DataError> {
    let problem = if parts && manifest_path(dir).exists() {
        "holds a single-process dataset (manifest.json): write the parts of a sharded distillation into another directory"
    } else if !parts && !part_dirs(dir)?.is_empty() {
        "holds the parts of a sharded distillation (part-…-of-…): run with the same --shard I/N, or use another directory"
    } else {
        return Ok(());
    };
    Err(DataError::InvalidArgument { path: dir.to_path_buf(), problem: problem.into() })
}

/// Reads the parts of `dir` (as [`part_dirs`] lists them) as one dataset: every part of one
/// count present, finished, made from the same target with the same settings and the same
/// input list; records and shards in input order. `read_one` reads one part directory.
pub(crate) fn read_parts(
    dir: &Path,
    parts: Vec<(Part, PathBuf)>,
    read_one: impl Fn(&Path) -> Result<(DistillManifest, Vec<DistillRecord>), DataError>,
) -> Result<(DistillManifest, Vec<DistillRecord>), DataError> {
    let bad = |problem: String| DataError::Parts { dir: dir.to_path_buf(), problem };
    let count = parts[0].0.count;
    if let Some((other, path)) = parts.iter().find(|(p, _)| p.count != count) {
        return Err(bad(format!(
            "parts of different splits: {} is part {other}, {} is part {}",
            path.display(),
            parts[0].1.display(),
            parts[0].0
        )));
    }
    if let Some(missing) = (0..count).find(|&i| !parts.iter().any(|(p, _)| p.index == i)) {
        let part = Part { index: missing, count };
        return Err(bad(format!(
            "part {part} ({}) is missing: run `draftsmith distill --shard {part}` with the same arguments",
            part.dir_name()
        )));
    }
    let mut merged: Option<(DistillManifest, usize)> = None;
    let mut records = Vec::new();
    for (part, path) in &parts {
        let (manifest, part_records) = read_one(path)?;
        let info = manifest.part.ok_or_else(|| bad(format!("{}: manifest.json names no part", path.display())))?;
        if info.part != *part {
            return Err(bad(format!("{}: manifest.json says part {}", path.display(), info.part)));
        }
        if !manifest.complete {
            return Err(bad(format!(
                "part {part} ({}) is not finished: rerun `draftsmith distill --shard {part}` with the same arguments to complete it",
                path.display()
            )));
        }
        let shards = manifest.shards.iter().map(|s| in_part(s, *part));
        match &mut merged {
            None => {
                let shards = shards.collect();
                merged = Some((DistillManifest { shards, part: None, ..manifest }, info.total_inputs));
            }
            Some((all, total)) => {
                if let Some((field, ours, first)) = difference(all, &manifest) {
                    return Err(bad(format!(
                        "{}: {field} is {ours} but {first} in part {}: the parts are not one distillation",
                        path.display(),
                        parts[0].0
                    )));
                }
                if info.total_inputs != *total {
                    return Err(bad(format!(
                        "{}: part of a distillation over {} inputs, the others over {total}",
                        path.display(),
                        info.total_inputs
                    )));
                }
                all.shards.extend(shards);
            }
        }
        records.extend(part_records);
    }
    Ok(merged.map(|(manifest, _)| (manifest, records)).expect("at least one part"))
}

/// Where part manifest `ours` and the `first` part's differ, compared as a resume compares them
/// ([`resume_difference`]: only the differing settings keys; a part written before the input's
/// sha256 was recorded matches one written after on the input's name and size, either way
/// round): (field, ours, first's).
fn difference(first: &DistillManifest, ours: &DistillManifest) -> Option<(&'static str, String, String)> {
    let (field, firsts, theirs) = resume_difference(first, &ours.target, &ours.params)?;
    resume_difference(ours, &first.target, &first.params)?;
    Some((field, theirs, firsts))
}

/// A part's shard as listed in the merged manifest (its file under the part's directory).
fn in_part(shard: &ShardInfo, part: Part) -> ShardInfo {
    ShardInfo { file: format!("{}/{}", part.dir_name(), shard.file), ..shard.clone() }
}
