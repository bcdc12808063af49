//! Writing a file so that a reader (or a resumed run) sees either the old contents or the new,
//! never a torn file: the one atomic-write helper of the workspace; and [`DirLock`], which keeps
//! a second run from writing into a directory a running stage is writing.

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

/// `create_dir_all`, but a file where the directory (or one above it) should be is said as such:
/// the operating system's own words are "File exists".
pub fn create_dir(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| match e.kind() {
        io::ErrorKind::AlreadyExists | io::ErrorKind::NotADirectory => {
            io::Error::new(e.kind(), "a file is in the way: not a directory")
        }
        _ => e,
    })
}

/// The file [`DirLock`] holds in the directory it guards.
pub const LOCK_FILE: &str = "draftsmith.lock";

/// Why [`DirLock::acquire`] failed.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another live process holds the directory's lock.
    #[error(
        "{} is being written by another run ({holder}): wait for it to finish or stop it; two runs \
         writing one directory would overwrite each other's files",
        dir.display()
    )]
    Busy { dir: PathBuf, holder: String },
    /// A reader found the directory claimed by a live writer ([`DirLock::check_not_written`]).
    #[error(
        "{} is still being written ({holder}): wait for it to finish, or stop it, before reading it",
        dir.display()
    )]
    BeingWritten { dir: PathBuf, holder: String },
    #[error("{}: cannot create the directory: {source}", dir.display())]
    CreateDir { dir: PathBuf, source: io::Error },
    #[error("cannot lock {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
}

/// An exclusive claim on an output directory for as long as a stage writes it, so that a second
/// `draftsmith` run into the same directory (a rerun while a killed run's shell still trains,
/// two terminals) stops at once with [`LockError::Busy`] instead of racing for its files; or,
/// through [`DirLock::wait`], waits its turn (fetches sharing a download directory).
///
/// The claim is an advisory lock on `<dir>/draftsmith.lock`, held through the open file: the
/// operating system drops it when the process ends, however it ends, so a killed run never
/// leaves a stale claim behind. The file names its holder (pid, stage) for the error message
/// and is removed when the lock is dropped. Where the file system cannot lock files, the claim
/// is skipped (the stage runs unguarded, as before).
#[derive(Debug)]
pub struct DirLock {
    path: PathBuf,
    /// `None` where the file system does not support locks.
    file: Option<File>,
}

impl DirLock {
    /// Creates `dir` if needed and claims it for `stage` (a name for the message, such as
    /// `train redrafter`); [`LockError::Busy`] while another process holds it.
    pub fn acquire(dir: &Path, stage: &str) -> Result<Self, LockError> {
        Self::claim(dir, stage, None).map(|(lock, _)| lock)
    }

    /// Like [`DirLock::acquire`], but waits for another holder to let go instead of refusing
    /// (one fetch at a time per download directory): `on_wait` is told the holder once, before
    /// the wait. Returns the lock and whether it waited.
    pub fn wait(dir: &Path, stage: &str, on_wait: &mut dyn FnMut(&str)) -> Result<(Self, bool), LockError> {
        Self::claim(dir, stage, Some(on_wait))
    }

    fn claim(dir: &Path, stage: &str, mut on_wait: Option<&mut dyn FnMut(&str)>) -> Result<(Self, bool), LockError> {
        let path = dir.join(LOCK_FILE);
        let io = |source| LockError::Io { path: path.clone(), source };
        create_dir(dir).map_err(|source| LockError::CreateDir { dir: dir.to_path_buf(), source })?;
        let mut waited = false;
        loop {
            let mut file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(io)?;
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => {
                    let holder = std::fs::read_to_string(&path).unwrap_or_default();
                    let holder = match holder.trim() {
                        "" => "a process that has not yet named itself".to_string(),
                        named => named.to_string(),
                    };
                    let Some(tell) = on_wait.as_mut() else {
                        return Err(LockError::Busy { dir: dir.to_path_buf(), holder });
                    };
                    if !waited {
                        tell(&holder);
                        waited = true;
                    }
                    file.lock().map_err(io)?;
                }
                Err(std::fs::TryLockError::Error(e)) if e.kind() == io::ErrorKind::Unsupported => {
                    return Ok((Self { path, file: None }, waited));
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(io(e)),
            }
            // The holder before us may have removed the file between our open and our lock (a
            // holder we waited for always has): then we hold a lock on a name no one else will
            // open, and must try again.
            if !same_file(&file, &path) {
                continue;
            }
            let holder = format!("pid {}, draftsmith {stage}", std::process::id());
            file.set_len(0).and_then(|()| file.write_all(holder.as_bytes())).map_err(io)?;
            return Ok((Self { path, file: Some(file) }, waited));
        }
    }
}

impl DirLock {
    /// For a reader: `Err(`[`LockError::BeingWritten`]`)` when a live process holds `dir`'s lock
    /// (a distillation still writing the dataset about to be read); creates nothing, and a file
    /// left by a killed run (which holds no lock) reads as free.
    pub fn check_not_written(dir: &Path) -> Result<(), LockError> {
        let path = dir.join(LOCK_FILE);
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(source) => return Err(LockError::Io { path, source }),
        };
        match file.try_lock_shared() {
            // Ours for a moment; released when `file` closes.
            Ok(()) => Ok(()),
            Err(std::fs::TryLockError::WouldBlock) => {
                let holder = std::fs::read_to_string(&path).unwrap_or_default().trim().to_string();
                Err(LockError::BeingWritten { dir: dir.to_path_buf(), holder })
            }
            Err(std::fs::TryLockError::Error(e)) if e.kind() == io::ErrorKind::Unsupported => Ok(()),
            Err(std::fs::TryLockError::Error(source)) => Err(LockError::Io { path, source }),
        }
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        // Removed while still locked, so no one can lock this file after we let it go.
        if self.file.is_some() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Whether the open `file` is still the file at `path`.
#[cfg(unix)]
fn same_file(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn same_file(_: &File, path: &Path) -> bool {
    path.exists()
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

    #[test]
    fn a_locked_directory_refuses_a_second_writer_until_the_first_is_done() {
        let dir = std::env::temp_dir().join(format!("draftsmith-core-lock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let first = DirLock::acquire(&dir, "train redrafter").unwrap();
        assert!(dir.join(LOCK_FILE).exists());
        match DirLock::acquire(&dir, "train redrafter") {
            Err(LockError::Busy { dir: at, holder }) => {
                assert_eq!(at, dir);
                assert_eq!(holder, format!("pid {}, draftsmith train redrafter", std::process::id()));
            }
            other => panic!("expected Busy, got {other:?}"),
        }
        match DirLock::check_not_written(&dir) {
            Err(LockError::BeingWritten { holder, .. }) => assert!(holder.contains("train redrafter"), "{holder}"),
            other => panic!("a reader sees the writer: {other:?}"),
        }
        drop(first);
        assert!(!dir.join(LOCK_FILE).exists(), "the lock file goes with the lock");
        DirLock::check_not_written(&dir).unwrap();
        // A file left by a killed run holds no lock: the next run takes it over.
        std::fs::write(dir.join(LOCK_FILE), "pid 1, draftsmith distill").unwrap();
        DirLock::check_not_written(&dir).unwrap();
        let again = DirLock::acquire(&dir, "distill").unwrap();
        drop(again);
        // A file where the directory should be: named, with what went wrong.
        let file = dir.join("not-a-dir");
        std::fs::write(&file, "").unwrap();
        let err = DirLock::acquire(&file, "eval").unwrap_err().to_string();
        assert!(err.starts_with(&format!("{}: cannot create the directory", file.display())), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_waiting_claim_is_told_the_holder_and_gets_the_lock_when_it_goes() {
        let dir = std::env::temp_dir().join(format!("draftsmith-core-wait-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (first, waited) = DirLock::wait(&dir, "fetch", &mut |_| panic!("nothing to wait for")).unwrap();
        assert!(!waited);
        let waiter = {
            let dir = dir.clone();
            std::thread::spawn(move || {
                let mut told = Vec::new();
                let (lock, waited) = DirLock::wait(&dir, "fetch", &mut |holder| told.push(holder.to_string())).unwrap();
                (lock, waited, told)
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(!waiter.is_finished(), "waits while the first holds the lock");
        drop(first);
        let (second, waited, told) = waiter.join().unwrap();
        assert!(waited);
        assert_eq!(told, [format!("pid {}, draftsmith fetch", std::process::id())], "told once, naming the holder");
        assert!(matches!(DirLock::acquire(&dir, "eval"), Err(LockError::Busy { .. })), "the waiter holds it now");
        drop(second);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
