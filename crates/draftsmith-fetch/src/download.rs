//! Downloading packages with the registries' ordinary clients: `pip download`
//! for PyPI and `apt-get download` for Debian. Downloads are kept in the
//! downloads directory, so a package already there is never fetched again.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::catalog::PipPackage;
use crate::error::{tail, FetchError, Result};

/// Environment variable overriding the pip command line (default `python3 -m pip`).
pub const PIP_ENV: &str = "DRAFTSMITH_PIP";

/// How many lines of a failing command's output an error quotes.
const TAIL_LINES: usize = 6;

/// The pip command line: `$DRAFTSMITH_PIP` split on whitespace, else `python3 -m pip`.
pub(crate) fn pip_command() -> Vec<String> {
    let configured = std::env::var(PIP_ENV).unwrap_or_default();
    let words: Vec<String> = configured.split_whitespace().map(str::to_string).collect();
    if words.is_empty() {
        vec!["python3".into(), "-m".into(), "pip".into()]
    } else {
        words
    }
}

/// The command line as one string, for messages.
pub(crate) fn display(cmd: &Command) -> String {
    std::iter::once(cmd.get_program()).chain(cmd.get_args()).map(OsStr::to_string_lossy).collect::<Vec<_>>().join(" ")
}

/// Runs `cmd` with no input, capturing its output. A spawn failure is
/// returned as is for the caller to word.
pub(crate) fn run(cmd: &mut Command) -> std::io::Result<Output> {
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).output()
}

/// stderr, or stdout when stderr is empty, as a short tail.
pub(crate) fn output_tail(out: &Output) -> String {
    if out.stderr.iter().any(|b| !b.is_ascii_whitespace()) {
        tail(&out.stderr, TAIL_LINES)
    } else {
        tail(&out.stdout, TAIL_LINES)
    }
}

/// Downloads one PyPI distribution into `downloads` unless its archive is
/// already there; returns the archive's path.
pub(crate) fn pip_download(pkg: &PipPackage, downloads: &Path) -> Result<PathBuf> {
    pip_download_with(&pip_command(), pkg, downloads)
}

/// [`pip_download`] with an explicit pip command line (`words`, non-empty).
pub(crate) fn pip_download_with(words: &[String], pkg: &PipPackage, downloads: &Path) -> Result<PathBuf> {
    let target = downloads.join(pkg.archive);
    if target.is_file() {
        return Ok(target);
    }
    let mut cmd = Command::new(&words[0]);
    cmd.args(&words[1..])
        .args(["download", "--no-deps", "--disable-pip-version-check", "--no-input"])
        .args(["--progress-bar", "off", "-d"])
        .arg(downloads);
    if pkg.is_sdist() {
        // Only the archive is wanted; pip still prepares its metadata, which
        // needs the default isolated build environment (setuptools, wheel).
        cmd.args(["--no-binary", ":all:"]);
    } else {
        cmd.args(["--only-binary", ":all:", "--no-build-isolation"]);
    }
    cmd.arg(pkg.requirement());
    let out = run(&mut cmd).map_err(|source| FetchError::ToolMissing {
        tool: words.join(" "),
        package: pkg.requirement(),
        hint: "DRAFTSMITH_PIP, e.g. DRAFTSMITH_PIP=\"python3 -m pip\"",
        source,
    })?;
    if !out.status.success() {
        return Err(FetchError::DownloadFailed {
            package: pkg.requirement(),
            command: display(&cmd),
            status: out.status.to_string(),
            stderr_tail: output_tail(&out),
        });
    }
    if !target.is_file() {
        return Err(FetchError::DownloadMissing {
            package: pkg.requirement(),
            command: display(&cmd),
            expected: pkg.archive.to_string(),
            dir: downloads.to_path_buf(),
        });
    }
    Ok(target)
}

/// The newest-named `<name>_*.deb` in `dir`, if any.
pub(crate) fn find_deb(name: &str, dir: &Path) -> Option<PathBuf> {
    let prefix = format!("{name}_");
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with(&prefix) && n.ends_with(".deb")
        })
        .map(|e| e.path())
        .collect();
    found.sort();
    found.pop()
}

/// Runs an apt-get command in `dir`, mapping failures to errors about `package`.
fn apt_get(args: &[&str], dir: &Path, package: &str) -> Result<()> {
    let mut cmd = Command::new("apt-get");
    cmd.args(args).current_dir(dir);
    let out = run(&mut cmd).map_err(|source| FetchError::ToolMissing {
        tool: "apt-get".into(),
        package: package.into(),
        hint: "nothing: a Debian or Ubuntu system with apt-get is needed",
        source,
    })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(FetchError::DownloadFailed {
            package: package.into(),
            command: display(&cmd),
            status: out.status.to_string(),
            stderr_tail: output_tail(&out),
        })
    }
}

/// Downloads one Debian package into `downloads` unless a `.deb` of it is
/// already there (running `apt-get update` once if apt does not know the
/// package yet); returns the `.deb`'s path.
pub(crate) fn apt_download(name: &str, downloads: &Path) -> Result<PathBuf> {
    if let Some(deb) = find_deb(name, downloads) {
        return Ok(deb);
    }
    if apt_get(&["download", name], downloads, name).is_err() {
        apt_get(&["update"], downloads, name)?;
        apt_get(&["download", name], downloads, name)?;
    }
    find_deb(name, downloads).ok_or_else(|| FetchError::DownloadMissing {
        package: name.into(),
        command: format!("apt-get download {name}"),
        expected: format!("{name}_*.deb"),
        dir: downloads.to_path_buf(),
    })
}
