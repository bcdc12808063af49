//! Writing a file so that a reader (or a resumed run) sees either the old contents or the new,
//! never a torn file: the one atomic-write helper of the workspace.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The temporary file [`write_atomic`] writes before renaming it to `path` (`<name>.tmp`
/// beside it; stages that clean up after a killed run remove `*.tmp`).
pub fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Writes `bytes` to `path` through [`temp_path`]: write, fsync, rename over `path`, then a
/// best-effort fsync of the directory. The error carries the path it concerns.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), (PathBuf, io::Error)> {
    let tmp = temp_path(path);
    let write = || -> io::Result<()> {
        let mut file = File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()
    };
    write().map_err(|e| (tmp.clone(), e))?;
    std::fs::rename(&tmp, path).map_err(|e| (path.to_path_buf(), e))?;
    sync_dir(path.parent().unwrap_or(Path::new(".")));
    Ok(())
}

/// Flushes a directory entry (a rename) to disk. Best effort: not every platform can open a
/// directory, and the data itself was already synced.
pub fn sync_dir(dir: &Path) {
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let _ = File::open(dir).and_then(|d| d.sync_all());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_file_and_leaves_no_temporary() {
        let dir = std::env::temp_dir().join(format!("draftsmith-core-fsio-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("summary.json");
        assert_eq!(temp_path(&path), dir.join("summary.json.tmp"));
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert!(!temp_path(&path).exists());
        let (at, _) = write_atomic(&dir.join("missing").join("x.json"), b"x").unwrap_err();
        assert_eq!(at, dir.join("missing").join("x.json.tmp"), "the error names the file");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
