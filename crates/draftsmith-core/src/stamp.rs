//! Verification stamps: `<artifact>.sha256` beside a hashed artifact (a file, or a directory of
//! them) records its sha256 with the size and mtime of every file, so that a later look at an
//! unchanged artifact need not hash it again. `fetch` stamps what it verified; a model's
//! fingerprint ([`sha256_file_stamped`]) reads and writes the same stamps, so a drafter, a
//! distilled dataset or a training run checked against a multi-gigabyte GGUF does not re-read
//! it on every command.

use std::io;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};

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
pub struct Stamp {
    sha256: String,
    files: Vec<FileStat>,
}

/// A failed look at an artifact's files: what was tried on which path, and what the system said.
#[derive(Debug, thiserror::Error)]
#[error("{}: cannot {action}: {source}", path.display())]
pub struct StatError {
    pub path: PathBuf,
    /// `stat` or `list directory`.
    pub action: &'static str,
    #[source]
    pub source: io::Error,
}

/// `<path>.sha256`, the stamp of the artifact at `path`.
pub fn stamp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".sha256");
    path.with_file_name(name)
}

fn stat(path: &Path, name: String) -> Result<FileStat, StatError> {
    let meta =
        std::fs::metadata(path).map_err(|source| StatError { path: path.to_path_buf(), action: "stat", source })?;
    let mtime_ns = meta.modified().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos());
    Ok(FileStat { name, size: meta.len(), mtime_ns })
}

/// The current sizes and mtimes of the artifact's files.
fn snapshot(path: &Path) -> Result<Vec<FileStat>, StatError> {
    if !path.is_dir() {
        return Ok(vec![stat(path, String::new())?]);
    }
    let list_error = |source| StatError { path: path.to_path_buf(), action: "list directory", source };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(path).map_err(list_error)? {
        let entry = entry.map_err(list_error)?;
        files.push(stat(&entry.path(), entry.file_name().to_string_lossy().into_owned())?);
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(files)
}

impl Stamp {
    /// Takes the artifact's current sizes and mtimes, to be saved once `sha256` is confirmed
    /// (taken before hashing, a change made while hashing leaves a stale stamp, not a wrong one).
    pub fn take(path: &Path, sha256: &str) -> Result<Stamp, StatError> {
        Ok(Stamp { sha256: sha256.to_string(), files: snapshot(path)? })
    }

    /// Writes the stamp beside the artifact. Failure (a read-only directory) only costs a
    /// re-hash next time, so it is logged, not returned.
    pub fn save(&self, path: &Path) {
        let stamp = stamp_path(path);
        let json = serde_json::to_string_pretty(self).unwrap_or_default();
        if let Err((at, e)) = crate::fsio::write_atomic(&stamp, json.as_bytes()) {
            tracing::debug!("cannot write stamp {}: {e}", at.display());
        }
    }
}

/// The sha256 that `<path>.sha256` records, when the artifact's files still have the sizes and
/// mtimes it recorded; `None` without a readable, fresh stamp.
pub fn recorded(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(stamp_path(path)).ok()?;
    let stamp = serde_json::from_str::<Stamp>(&text).ok()?;
    snapshot(path).is_ok_and(|now| now == stamp.files).then_some(stamp.sha256)
}

/// True when `<path>.sha256` records `expected` and is fresh ([`recorded`]).
pub fn is_fresh(path: &Path, expected: &str) -> bool {
    recorded(path).is_some_and(|sha| sha == expected)
}

/// Removes a stamp, ignoring a missing one.
pub fn remove(path: &Path) {
    let _ = std::fs::remove_file(stamp_path(path));
}

/// sha256 (hex) of the file at `path`: what its fresh stamp records, else hashed and stamped.
/// The caller names the path in its own error.
pub fn sha256_file_stamped(path: &Path) -> io::Result<String> {
    if let Some(sha) = recorded(path) {
        return Ok(sha);
    }
    // Taken before hashing, as [`Stamp::take`] is: a change while hashing leaves a stale stamp.
    let files = snapshot(path).map_err(|e| e.source)?;
    let sha = crate::digest::sha256_file(path)?;
    Stamp { sha256: sha.clone(), files }.save(path);
    Ok(sha)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::sha256_hex;

    #[test]
    fn a_fresh_stamp_answers_and_a_changed_file_is_hashed_again() {
        let dir = std::env::temp_dir().join(format!("draftsmith-core-stamp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("model.gguf");
        std::fs::write(&file, b"abc").unwrap();
        assert_eq!(recorded(&file), None);
        assert_eq!(sha256_file_stamped(&file).unwrap(), sha256_hex(b"abc"));
        assert!(stamp_path(&file).is_file());
        assert!(is_fresh(&file, &sha256_hex(b"abc")));
        // The stamp answers without reading the file: one that records another digest for the
        // same sizes and mtimes is believed.
        let text = std::fs::read_to_string(stamp_path(&file)).unwrap();
        std::fs::write(stamp_path(&file), text.replace(&sha256_hex(b"abc"), "feed")).unwrap();
        assert_eq!(sha256_file_stamped(&file).unwrap(), "feed");
        // Another size: hashed again, and stamped anew.
        std::fs::write(&file, b"abcd").unwrap();
        assert_eq!(sha256_file_stamped(&file).unwrap(), sha256_hex(b"abcd"));
        assert_eq!(recorded(&file), Some(sha256_hex(b"abcd")));
        // A damaged stamp is no stamp.
        std::fs::write(stamp_path(&file), "{").unwrap();
        assert_eq!(recorded(&file), None);
        assert_eq!(sha256_file_stamped(&file).unwrap(), sha256_hex(b"abcd"));
        remove(&file);
        assert!(!stamp_path(&file).exists());
        assert!(sha256_file_stamped(&dir.join("missing")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
