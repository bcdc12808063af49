//! Where artifacts live.

use std::path::{Path, PathBuf};

use crate::catalog::Artifact;

/// Environment variable naming the data directory.
pub const HOME_ENV: &str = "DRAFTSMITH_HOME";

/// The data directory: `$DRAFTSMITH_HOME` if set and non-empty, else
/// `$HOME/.cache/draftsmith` (`./.cache/draftsmith` without a `$HOME`).
pub fn data_dir() -> PathBuf {
    match std::env::var_os(HOME_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => {
            let home = std::env::var_os("HOME").filter(|h| !h.is_empty()).unwrap_or_else(|| ".".into());
            PathBuf::from(home).join(".cache").join("draftsmith")
        }
    }
}

/// The artifact's final path: `<data>/models/<name>/<output>` for models,
/// `<data>/datasets/<name>/<output>` for datasets (a directory for
/// directory artifacts).
pub fn artifact_path(data_dir: &Path, a: &Artifact) -> PathBuf {
    data_dir.join(a.kind.dir_name()).join(a.name).join(a.output)
}
