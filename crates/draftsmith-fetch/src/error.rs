//! The crate's error type. Every message names the file, package or command
//! concerned and what went wrong with it.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong while fetching, assembling or verifying an artifact.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The name given is not in the catalog.
    #[error("unknown artifact `{name}`; known artifacts: {known}")]
    UnknownArtifact {
        /// The name asked for.
        name: String,
        /// The catalog's names, comma separated.
        known: String,
    },

    /// A file (or directory digest) does not have the expected sha256.
    #[error("{}: sha256 mismatch: expected {expected}, got {actual}", path.display())]
    ShaMismatch {
        /// The file or directory checked.
        path: PathBuf,
        /// The sha256 the catalog records.
        expected: String,
        /// The sha256 computed.
        actual: String,
    },

    /// The program needed to download a package could not be started.
    #[error("cannot run `{tool}` to download {package}: {source} (install it, or set {hint})")]
    ToolMissing {
        /// The program, e.g. `python3` or `apt-get`.
        tool: String,
        /// The package it was to download.
        package: String,
        /// What to install or which variable to set.
        hint: &'static str,
        /// The spawn error.
        #[source]
        source: io::Error,
    },

    /// A download command ran but failed.
    #[error("downloading {package} failed: `{command}` exited with {status}: {stderr_tail}")]
    DownloadFailed {
        /// The package being downloaded.
        package: String,
        /// The command line run.
        command: String,
        /// Its exit status.
        status: String,
        /// The last lines of its standard error (and output).
        stderr_tail: String,
    },

    /// A download command succeeded but the expected file is not there.
    #[error("downloading {package}: `{command}` succeeded but no file matching `{expected}` appeared in {}", dir.display())]
    DownloadMissing {
        /// The package downloaded.
        package: String,
        /// The command line run.
        command: String,
        /// The file name (or pattern) expected.
        expected: String,
        /// The download directory.
        dir: PathBuf,
    },

    /// A member named in the catalog is not inside the downloaded archive.
    #[error("{}: archive has no member matching `{member}` (delete the archive to re-download it)", archive.display())]
    MemberMissing {
        /// The archive searched.
        archive: PathBuf,
        /// The member name or pattern.
        member: String,
    },

    /// A zip (wheel) archive cannot be read.
    #[error("{}: cannot read zip archive (delete it to re-download): {source}", archive.display())]
    Zip {
        /// The archive.
        archive: PathBuf,
        /// The zip error.
        #[source]
        source: zip::result::ZipError,
    },

    /// A helper command (dpkg-deb, bible) failed.
    #[error("`{command}` failed with {status}: {stderr_tail}")]
    Command {
        /// The command line run.
        command: String,
        /// Its exit status, or the spawn error.
        status: String,
        /// The last lines of its standard error.
        stderr_tail: String,
    },

    /// The catalog entry is inconsistent with the archives given (internal use).
    #[error("artifact {name}: {problem}")]
    Recipe {
        /// The artifact.
        name: String,
        /// What is wrong.
        problem: String,
    },

    /// The download directory's lock could not be taken (its directory or lock file).
    #[error(transparent)]
    Lock(#[from] draftsmith_core::fsio::LockError),

    /// Any file-system error, with the path and the action attempted.
    #[error("{}: cannot {action}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done, e.g. "create", "read", "rename to ...".
        action: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

impl FetchError {
    /// Builds an [`FetchError::Io`] for `path`.
    pub(crate) fn io(path: impl Into<PathBuf>, action: impl Into<String>, source: io::Error) -> Self {
        FetchError::Io { path: path.into(), action: action.into(), source }
    }
}

impl From<draftsmith_core::stamp::StatError> for FetchError {
    fn from(e: draftsmith_core::stamp::StatError) -> Self {
        FetchError::io(e.path, e.action, e.source)
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = FetchError> = std::result::Result<T, E>;

/// The last `max_lines` non-empty lines of a command's output, joined by " | ".
pub(crate) fn tail(bytes: &[u8], max_lines: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let start = lines.len().saturating_sub(max_lines);
    if lines.is_empty() {
        "(no output)".to_string()
    } else {
        lines[start..].join(" | ")
    }
}
