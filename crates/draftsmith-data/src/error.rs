//! Typed errors for reading conversation datasets and writing or reading distilled shards.
//!
//! Every [`DataError`] names the file (or directory) it concerns and what was wrong with it, so a
//! message alone is enough to find and fix the problem.

use std::path::{Path, PathBuf};

/// An error raised while reading input conversations or a distilled dataset.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DataError {
    /// A file or directory could not be opened, read, written, renamed or removed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying I/O error.
        source: std::io::Error,
    },

    /// A long-text source (a book file or directory) is unusable, or the book split is.
    #[error("{path}: {problem}")]
    Books {
        /// The file or directory (empty when the problem is the split itself).
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },

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
    #[error("{path}: {problem}; delete it and rerun distill to redo it")]
    CorruptShard {
        /// The shard file.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },

    /// A shard listed in the manifest does not exist.
    #[error("{path}: shard listed in the manifest is missing; delete the dataset directory and rerun distill")]
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
    #[error("{path}: {problem}; delete the cache directory and rerun `draftsmith hidden`, or train with --online")]
    CorruptHidden {
        /// The shard or manifest.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
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
