//! What a resumed stage may delete in its directory, and what it must refuse to touch.
//!
//! Both shard writers ([`crate::ShardWriter`], [`crate::hidden::HiddenWriter`]) write their
//! manifest **before** their first shard, then each shard as `<shard>.tmp` (write, fsync), renamed
//! to `<prefix>NNNNN<suffix>`, and only then list it in the manifest. So an interrupted run of the
//! job always leaves a manifest, and the only files it can leave that the manifest does not
//! account for are:
//!
//! - temporaries named `<prefix>NNNNN<suffix>.tmp` and `<manifest>.tmp`;
//! - the shard right after the listed ones (`<prefix>{listed}<suffix>`: renamed into place, killed
//!   before the manifest was updated).
//!
//! The rule: those, and only those, are removed (with a warning) when a run resumes. Files named
//! like shards in a directory **without** a manifest, or unlisted shards other than the next one,
//! were not left by an interrupted run of this job (a copied dataset whose manifest was lost,
//! another tool's output, a manifest replaced by an older one…): the run refuses
//! ([`DataError::UnknownFiles`]), naming the directory and the files, and deletes nothing. Files
//! with other names are never looked at.

use std::ops::Range;
use std::path::Path;

use crate::error::DataError;

/// The ranges a resumed writer still has to fill, in the order it takes them: those of the
/// listed shards whose files are missing (`missing`, in order; adjacent ones merged), then
/// `tail` (after the listed shards) unless it is empty.
pub(crate) fn todo_ranges(missing: impl IntoIterator<Item = Range<usize>>, tail: Range<usize>) -> Vec<Range<usize>> {
    let mut todo: Vec<Range<usize>> = Vec::new();
    for range in missing {
        match todo.last_mut() {
            Some(last) if last.end == range.start => last.end = range.end,
            _ => todo.push(range),
        }
    }
    if !tail.is_empty() {
        todo.push(tail);
    }
    todo
}

/// Warns that the listed shard `file` of `dir`, holding `items`, is missing and will be redone.
pub(crate) fn warn_missing(dir: &Path, layout: &Layout, file: &str, items: Range<usize>) {
    tracing::warn!(
        file = %dir.join(file).display(),
        items = ?items,
        "shard listed in {} is missing; its {} will be redone",
        layout.manifest,
        layout.redone
    );
}

/// How a stage names its files in its directory.
pub(crate) struct Layout {
    /// Shard files are `{prefix}NNNNN{suffix}` (five or more digits).
    pub prefix: &'static str,
    pub suffix: &'static str,
    /// The manifest's file name.
    pub manifest: &'static str,
    /// The command that writes the directory, for messages: `` `draftsmith distill` ``.
    pub command: &'static str,
    /// What a removed leftover's rerun redoes, for the warning: `inputs`, `sequences`.
    pub redone: &'static str,
}

impl Layout {
    /// The index of a file named like one of this layout's shards.
    fn shard_index(&self, name: &str) -> Option<usize> {
        let digits = name.strip_prefix(self.prefix)?.strip_suffix(self.suffix)?;
        if digits.len() < 5 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok()
    }

    /// Whether `name` is one of this layout's temporaries: a shard's or the manifest's `*.tmp`.
    fn is_temporary(&self, name: &str) -> bool {
        name.strip_suffix(".tmp").is_some_and(|base| base == self.manifest || self.shard_index(base).is_some())
    }
}

/// The file names in `dir`, sorted (names that are not UTF-8 are skipped: never ours).
fn file_names(dir: &Path) -> Result<Vec<String>, DataError> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(DataError::io(dir))? {
        let entry = entry.map_err(DataError::io(dir))?;
        if let Some(name) = entry.file_name().to_str() {
            if !entry.path().is_dir() {
                names.push(name.to_string());
            }
        }
    }
    names.sort();
    Ok(names)
}

/// For a directory about to get a fresh manifest: refuses when it already holds files named like
/// shards or their temporaries, which no interrupted run of this job can have left (it writes
/// the manifest first). Deletes nothing.
pub(crate) fn refuse_unmanifested_shards(dir: &Path, layout: &Layout) -> Result<(), DataError> {
    let files: Vec<String> = file_names(dir)?
        .into_iter()
        .filter(|n| {
            layout.shard_index(n).is_some() || (layout.is_temporary(n) && n != &format!("{}.tmp", layout.manifest))
        })
        .collect();
    if files.is_empty() {
        return Ok(());
    }
    Err(DataError::UnknownFiles {
        dir: dir.to_path_buf(),
        problem: format!(
            "holds files named like its shards but no {manifest}, so no interrupted {command} left them \
             ({command} writes {manifest} before its first shard)",
            manifest = layout.manifest,
            command = layout.command,
        ),
        files,
        command: layout.command,
    })
}

/// For a directory whose manifest lists `listed` (shard file names, in order): removes, with a
/// warning, what an interrupted run of the job left (see the module docs); refuses, deleting
/// nothing, when it also holds unlisted shard files that run cannot have written.
pub(crate) fn remove_leftovers(dir: &Path, layout: &Layout, listed: &[&str]) -> Result<(), DataError> {
    let next = listed.len();
    let (mut remove, mut unknown) = (Vec::new(), Vec::new());
    for name in file_names(dir)? {
        if layout.is_temporary(&name) {
            remove.push(name);
        } else if let Some(index) = layout.shard_index(&name) {
            if listed.contains(&name.as_str()) {
                continue;
            }
            if index == next {
                remove.push(name);
            } else {
                unknown.push(name);
            }
        }
    }
    if !unknown.is_empty() {
        return Err(DataError::UnknownFiles {
            dir: dir.to_path_buf(),
            problem: format!(
                "{manifest} lists {next} shard(s), and these files named like shards are neither listed \
                 nor the next shard an interrupted {command} could have left",
                manifest = layout.manifest,
                command = layout.command,
            ),
            files: unknown,
            command: layout.command,
        });
    }
    for name in remove {
        let path = dir.join(&name);
        tracing::warn!(
            file = %path.display(),
            "removing leftover from an interrupted run; its {} will be redone",
            layout.redone
        );
        std::fs::remove_file(&path).map_err(DataError::io(&path))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAYOUT: Layout = Layout {
        prefix: "shard-",
        suffix: ".parquet",
        manifest: "manifest.json",
        command: "`draftsmith distill`",
        redone: "inputs",
    };

    fn dir_with(name: &str, files: &[&str]) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("draftsmith-leftovers-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for f in files {
            std::fs::write(dir.join(f), b"x").unwrap();
        }
        dir
    }

    fn names(dir: &Path) -> Vec<String> {
        file_names(dir).unwrap()
    }

    #[test]
    fn names_are_recognised_exactly() {
        assert_eq!(LAYOUT.shard_index("shard-00012.parquet"), Some(12));
        assert_eq!(LAYOUT.shard_index("shard-123456.parquet"), Some(123456));
        for other in ["shard-1.parquet", "shard-0001a.parquet", "shard-00001.parquet.bak", "xshard-00001.parquet"] {
            assert_eq!(LAYOUT.shard_index(other), None, "{other}");
        }
        assert!(LAYOUT.is_temporary("shard-00003.parquet.tmp") && LAYOUT.is_temporary("manifest.json.tmp"));
        assert!(!LAYOUT.is_temporary("notes.tmp") && !LAYOUT.is_temporary("shard-x.parquet.tmp"));
    }

    #[test]
    fn without_a_manifest_shard_files_are_refused_and_kept() {
        let dir = dir_with("nomanifest", &["shard-00000.parquet", "shard-00001.parquet.tmp", "notes.tmp"]);
        let err = refuse_unmanifested_shards(&dir, &LAYOUT).unwrap_err().to_string();
        assert!(err.contains(&dir.display().to_string()), "{err}");
        assert!(
            err.contains("shard-00000.parquet, shard-00001.parquet.tmp") && err.contains("no manifest.json"),
            "{err}"
        );
        assert!(err.contains("nothing was deleted") && err.contains("rerun `draftsmith distill`"), "{err}");
        assert_eq!(names(&dir), ["notes.tmp", "shard-00000.parquet", "shard-00001.parquet.tmp"]);
        // Unrelated files (and a torn first manifest write) are no obstacle.
        let dir = dir_with("unrelated", &["notes.tmp", "README.md", "shard-a.parquet", "manifest.json.tmp"]);
        refuse_unmanifested_shards(&dir, &LAYOUT).unwrap();
    }

    #[test]
    fn with_a_manifest_only_its_own_leftovers_go() {
        let files = ["shard-00000.parquet", "shard-00001.parquet", "shard-00001.parquet.tmp", "manifest.json.tmp"];
        let dir = dir_with("own", &[&files[..], &["notes.tmp", "shard-old.parquet"]].concat());
        remove_leftovers(&dir, &LAYOUT, &["shard-00000.parquet"]).unwrap();
        assert_eq!(names(&dir), ["notes.tmp", "shard-00000.parquet", "shard-old.parquet"]);

        let dir = dir_with("foreign", &["shard-00000.parquet", "shard-00001.parquet.tmp", "shard-00005.parquet"]);
        let err = remove_leftovers(&dir, &LAYOUT, &[]).unwrap_err().to_string();
        assert!(err.contains("shard-00005.parquet") && !err.contains("shard-00000"), "{err}");
        assert!(err.contains("nothing was deleted"), "{err}");
        assert_eq!(names(&dir), ["shard-00000.parquet", "shard-00001.parquet.tmp", "shard-00005.parquet"]);
    }
}
