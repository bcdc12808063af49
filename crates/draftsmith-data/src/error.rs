//! Typed errors for reading conversation datasets and writing or reading distilled shards.
//!
//! Every [`DataError`] names the file (or directory) it concerns and what was wrong with it, so a
//! message alone is enough to find and fix the problem.

use std::path::{Path, PathBuf};

/// An error raised while reading input conversations or a distilled dataset.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DataError {
    /// Another run is writing the same directory.
    #[error(transparent)]
    Locked(#[from] draftsmith_core::fsio::LockError),

    /// A file or directory could not be opened, read, written, renamed or removed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying I/O error.
        source: std::io::Error,
    },

    /// A long-text source (a book file or directory) is unusable.
    #[error("{path}: {problem}")]
    Books {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },

    /// The split of the books into training and evaluation books is unusable.
    #[error("book split: {0}")]
    BookSplit(String),

    /// The input file is none of the supported conversation formats.
    #[error("{path}: unknown conversation format: {problem} (expected a ShareGPT JSON array, JSONL or Parquet)")]
    UnknownFormat {
        /// The file.
        path: PathBuf,
        /// What was found instead.
        problem: String,
    },

    /// One record of a JSON or JSONL conversation file is malformed.
    #[error("{path}: {location}: {problem}")]
    BadRecord {
        /// The file.
        path: PathBuf,
        /// Where in the file: `line 12` (JSONL), `record 3 at byte 4096` (JSON array).
        location: String,
        /// What is wrong with it.
        problem: String,
    },

    /// A Parquet conversation file lacks a column or has one of the wrong type.
    #[error("{path}: {problem}")]
    BadSchema {
        /// The file.
        path: PathBuf,
        /// Which column and what was expected.
        problem: String,
    },

    /// A Parquet file could not be decoded or encoded.
    #[error("{path}: parquet error: {source}")]
    Parquet {
        /// The file.
        path: PathBuf,
        /// The underlying Parquet error.
        source: parquet::errors::ParquetError,
    },

    /// A distilled shard is truncated, corrupt or does not match its manifest checksum.
    #[error("{path}: {problem}; delete it and rerun the same `draftsmith distill` command to redo just that shard")]
    CorruptShard {
        /// The shard file.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },

    /// A shard listed in the manifest does not exist (reading; a resumed run redoes it).
    #[error(
        "{path}: shard listed in the manifest is missing; rerun the same `draftsmith distill` command to redo just that shard"
    )]
    MissingShard {
        /// The shard file that should exist.
        path: PathBuf,
    },

    /// A distilled record is inconsistent (lengths disagree, teacher data without a teacher length…).
    #[error("{path}: record {id:?}: {problem}")]
    InvalidRecord {
        /// The shard file being read, or the dataset directory being written.
        path: PathBuf,
        /// The record's input conversation id.
        id: String,
        /// What is inconsistent.
        problem: String,
    },

    /// `manifest.json` cannot be parsed or is internally inconsistent.
    #[error("{path}: bad manifest: {problem}")]
    BadManifest {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },

    /// The parts of a sharded distillation do not make one dataset: one is missing, unfinished,
    /// or made with another target, other settings or another split.
    #[error("{dir}: {problem}")]
    Parts {
        /// The dataset directory holding the parts.
        dir: PathBuf,
        /// What is wrong, naming the part.
        problem: String,
    },

    /// Resuming a distilled dataset made with a different target or different parameters.
    #[error(
        "{dir}: cannot resume: manifest has {field} = {existing}, this run has {given}; \
         use another output directory or delete this one"
    )]
    ResumeMismatch {
        /// The dataset directory.
        dir: PathBuf,
        /// The differing manifest field, e.g. `params.teacher_len`.
        field: &'static str,
        /// The value in the existing manifest.
        existing: String,
        /// The value given for this run.
        given: String,
    },

    /// A hidden-state cache shard is missing, damaged or does not fit the dataset, or the cache
    /// does not hold the sequences asked for.
    #[error("{path}: {problem}; {remedy}, or train with --online")]
    CorruptHidden {
        /// The shard or manifest.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
        /// What to do about it, e.g. "delete it and rerun `draftsmith hidden` to redo just that shard".
        remedy: &'static str,
    },

    /// A stage's directory holds files named like its shards that its manifest does not account
    /// for, so no interrupted run of the job left them: the run refuses and deletes nothing (the
    /// rule is in the `leftovers` module's docs).
    #[error(
        "{dir}: {problem}: {}; nothing was deleted: move them elsewhere (or restore the manifest they belong to) \
         to keep them, or delete them to start over, then rerun {command}",
        list_files(files)
    )]
    UnknownFiles {
        /// The directory.
        dir: PathBuf,
        /// Why they cannot be the job's own.
        problem: String,
        /// The files' names inside `dir`.
        files: Vec<String>,
        /// The command that writes the directory.
        command: &'static str,
    },

    /// A directory read as a distilled dataset is none (or does not exist).
    #[error("{dir}: {problem}")]
    NotADataset {
        /// The directory.
        dir: PathBuf,
        /// What it is not.
        problem: &'static str,
    },

    /// An argument is out of range (e.g. zero inputs per shard).
    #[error("{path}: {problem}")]
    InvalidArgument {
        /// The file or directory the call concerns.
        path: PathBuf,
        /// Which argument and its bound.
        problem: String,
    },
}

/// Up to eight file names, then how many there are in all.
fn list_files(files: &[String]) -> String {
    const SHOWN: usize = 8;
    let mut text = files.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
    if files.len() > SHOWN {
        text.push_str(&format!(", … ({} files in all)", files.len()));
    }
    text
}

impl DataError {
    /// Returns a closure turning an I/O error into [`DataError::Io`] for `path`, for use as
    /// `.map_err(DataError::io(path))`.
    pub fn io(path: &Path) -> impl FnOnce(std::io::Error) -> DataError + '_ {
        move |source| DataError::Io { path: path.to_path_buf(), source }
    }

    /// Returns a closure turning a Parquet error into [`DataError::Parquet`] for `path`.
    pub fn parquet(path: &Path) -> impl FnOnce(parquet::errors::ParquetError) -> DataError + '_ {
        move |source| DataError::Parquet { path: path.to_path_buf(), source }
    }
}
