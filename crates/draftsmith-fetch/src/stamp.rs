//! Verification stamps: `<artifact>.sha256` beside a verified artifact records
//! its sha256 with the size and mtime of every file, so that a later check of
//! an unchanged artifact need not hash it again.

use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};

use crate::error::{FetchError, Result};

/// Size and modification time of one file of an artifact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct FileStat {
    /// Name inside the directory artifact; empty for a single-file artifact.
    name: String,
    size: u64,
    mtime_ns: u128,
}

/// What a stamp file holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Stamp {
    sha256: String,
    files: Vec<FileStat>,
}

/// `<path>.sha256`, the stamp of the artifact at `path`.
pub(crate) fn stamp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".sha256");
    path.with_file_name(name)
}

fn stat(path: &Path, name: String) -> Result<FileStat> {
    let meta = std::fs::metadata(path).map_err(|e| FetchError::io(path, "stat", e))?;
    let mtime_ns = meta.modified().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos());
    Ok(FileStat { name, size: meta.len(), mtime_ns })
}

/// The current sizes and mtimes of the artifact's files.
fn snapshot(path: &Path) -> Result<Vec<FileStat>> {
    if !path.is_dir() {
        return Ok(vec![stat(path, String::new())?]);
    }
    let mut files = Vec::new();
    let read = std::fs::read_dir(path).map_err(|e| FetchError::io(path, "list directory", e))?;
    for entry in read {
        let entry = entry.map_err(|e| FetchError::io(path, "list directory", e))?;
        files.push(stat(&entry.path(), entry.file_name().to_string_lossy().into_owned())?);
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(files)
}

impl Stamp {
    /// Takes the artifact's current sizes and mtimes, to be saved once `sha256` is confirmed.
    pub(crate) fn take(path: &Path, sha256: &str) -> Result<Stamp> {
        Ok(Stamp { sha256: sha256.to_string(), files: snapshot(path)? })
    }

    /// Writes the stamp beside the artifact. Failure only costs a re-hash
    /// next time, so it is logged, not returned.
    pub(crate) fn save(&self, path: &Path) {
        let stamp = stamp_path(path);
        let json = serde_json::to_string_pretty(self).unwrap_or_default();
        if let Err(e) = std::fs::write(&stamp, json) {
            tracing::debug!("cannot write stamp {}: {e}", stamp.display());
        }
    }
}

/// True when `<path>.sha256` records `expected` and the files still have the
/// sizes and mtimes it recorded.
pub(crate) fn is_fresh(path: &Path, expected: &str) -> bool {
    let Ok(text) = std::fs::read_to_string(stamp_path(path)) else {
        return false;
    };
    let Ok(stamp) = serde_json::from_str::<Stamp>(&text) else {
        return false;
    };
    stamp.sha256 == expected && snapshot(path).is_ok_and(|now| now == stamp.files)
}

/// Removes a stamp, ignoring a missing one.
pub(crate) fn remove(path: &Path) {
    let _ = std::fs::remove_file(stamp_path(path));
}
