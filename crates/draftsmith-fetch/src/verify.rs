//! Checking an artifact in place against the catalog's sha256, with the
//! stamp cache so that an unchanged artifact is not hashed twice.

use std::path::Path;

use crate::catalog::Artifact;
use crate::error::{FetchError, Result};
use crate::events::FetchEvent;
use crate::hash::sha256_path;
use crate::stamp::{self, Stamp};

/// Checks that `path` holds `a` (its sha256, or directory digest, matches the
/// catalog). A fresh `<path>.sha256` stamp (same sizes and mtimes) answers at
/// once; otherwise the artifact is hashed and, when it matches, stamped.
pub fn verify(a: &Artifact, path: &Path) -> Result<()> {
    verify_with(a, path, &mut |_| {})
}

/// [`verify`], reporting [`FetchEvent::Verifying`] before it hashes.
pub(crate) fn verify_with(a: &Artifact, path: &Path, progress: &mut dyn FnMut(FetchEvent)) -> Result<()> {
    std::fs::metadata(path).map_err(|e| FetchError::io(path, "verify", e))?;
    if stamp::is_fresh(path, a.sha256) {
        return Ok(());
    }
    progress(FetchEvent::Verifying { path: path.to_path_buf() });
    // Sizes and mtimes are taken before hashing, so a change made while
    // hashing leaves a stale stamp rather than a wrong one.
    let before = Stamp::take(path, a.sha256)?;
    let actual = sha256_path(path)?;
    if actual != a.sha256 {
        stamp::remove(path);
        return Err(FetchError::ShaMismatch { path: path.to_path_buf(), expected: a.sha256.to_string(), actual });
    }
    before.save(path);
    Ok(())
}
