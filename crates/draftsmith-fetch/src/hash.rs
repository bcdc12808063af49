//! sha256 of files, of directories, and of bytes as they are written.

use std::cell::Cell;
use std::io::{self, Write};
use std::path::Path;

use draftsmith_core::digest::{Digest, Sha256};

use crate::error::{FetchError, Result};

thread_local! {
    /// How many files this thread has hashed from disk (a test hook: the
    /// verification stamp must let a second check skip hashing).
    static FILES_HASHED: Cell<u64> = const { Cell::new(0) };
}

/// Number of files hashed from disk by the current thread so far.
#[cfg(test)]
pub(crate) fn files_hashed() -> u64 {
    FILES_HASHED.with(Cell::get)
}

pub(crate) use draftsmith_core::digest::hex;

/// sha256 (hex) of a file's contents ([`draftsmith_core::digest::sha256_file`], counted).
pub(crate) fn sha256_file(path: &Path) -> Result<String> {
    FILES_HASHED.with(|c| c.set(c.get() + 1));
    draftsmith_core::digest::sha256_file(path).map_err(|e| FetchError::io(path, "hash", e))
}

/// The digest of a directory listing: sha256 over `"<sha256>  <name>\n"`
/// lines sorted by name (the format of `sha256sum`), `entries` being
/// `(name, sha256)` pairs in any order.
pub(crate) fn directory_digest(entries: &[(String, String)]) -> String {
    let mut sorted: Vec<&(String, String)> = entries.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut hasher = Sha256::new();
    for (name, sha) in sorted {
        hasher.update(format!("{sha}  {name}\n").as_bytes());
    }
    hex(&hasher.finalize())
}

/// sha256 of a directory artifact: every entry hashed (a non-file entry
/// contributes `-  <name>/`, so it changes the digest).
pub(crate) fn sha256_dir(dir: &Path) -> Result<String> {
    let mut entries = Vec::new();
    let read = std::fs::read_dir(dir).map_err(|e| FetchError::io(dir, "list directory", e))?;
    for entry in read {
        let entry = entry.map_err(|e| FetchError::io(dir, "list directory", e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let file_type = entry.file_type().map_err(|e| FetchError::io(entry.path(), "stat", e))?;
        if file_type.is_file() {
            entries.push((name, sha256_file(&entry.path())?));
        } else {
            entries.push((format!("{name}/"), "-".to_string()));
        }
    }
    Ok(directory_digest(&entries))
}

/// sha256 of a file or, for a directory, its listing digest.
pub(crate) fn sha256_path(path: &Path) -> Result<String> {
    if path.is_dir() {
        sha256_dir(path)
    } else {
        sha256_file(path)
    }
}

/// A writer that hashes and counts everything written through it.
pub(crate) struct HashingWriter<W> {
    inner: W,
    hasher: Sha256,
    len: u64,
}

impl<W: Write> HashingWriter<W> {
    /// Wraps `inner`.
    pub(crate) fn new(inner: W) -> Self {
        HashingWriter { inner, hasher: Sha256::new(), len: 0 }
    }

    /// Flushes and returns the inner writer, the hex sha256 and the byte count.
    pub(crate) fn finish(mut self) -> io::Result<(W, String, u64)> {
        self.inner.flush()?;
        Ok((self.inner, hex(&self.hasher.finalize()), self.len))
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}
