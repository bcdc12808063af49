//! The King James text: unpack the Debian packages `bible-kjv` (the `bible`
//! program) and `bible-kjv-text` (its data) with `dpkg-deb -x`, then run
//! `bible -p <dir>/usr/lib -l0 <verses>`, which prints the text one verse
//! per line (`-l0`: no wrapping, so the output does not depend on `COLUMNS`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::assemble::{create, finish, remove_any};
use crate::download::{display, output_tail, run};
use crate::error::{FetchError, Result};
use crate::events::FetchEvent;

/// Runs `cmd`, returning its standard output or a [`FetchError::Command`].
fn checked(cmd: &mut Command) -> Result<Vec<u8>> {
    let command = display(cmd);
    let out = run(cmd).map_err(|e| FetchError::Command {
        command: command.clone(),
        status: "cannot start".into(),
        stderr_tail: e.to_string(),
    })?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(FetchError::Command { command, status: out.status.to_string(), stderr_tail: output_tail(&out) })
    }
}

/// Writes the text of `verses` to `temp`; returns its sha256.
pub(crate) fn build(
    debs: &[PathBuf],
    verses: &str,
    temp: &Path,
    progress: &mut dyn FnMut(FetchEvent),
) -> Result<String> {
    let mut work_name = temp.file_name().unwrap_or_default().to_os_string();
    work_name.push(".work");
    let work = temp.with_file_name(work_name);
    remove_any(&work);
    let result = unpack_and_run(debs, verses, &work, temp, progress);
    remove_any(&work);
    result
}

fn unpack_and_run(
    debs: &[PathBuf],
    verses: &str,
    work: &Path,
    temp: &Path,
    progress: &mut dyn FnMut(FetchEvent),
) -> Result<String> {
    std::fs::create_dir_all(work).map_err(|e| FetchError::io(work, "create directory", e))?;
    for deb in debs {
        progress(FetchEvent::Extracting { archive: deb.clone(), member: "(all files)".into() });
        checked(Command::new("dpkg-deb").arg("-x").arg(deb).arg(work))?;
    }
    let program = work.join("usr/bin/bible");
    let mut cmd = Command::new(&program);
    cmd.arg("-p").arg(work.join("usr/lib")).arg("-l0").arg(verses).env_remove("COLUMNS");
    let text = checked(&mut cmd)?;
    if text.is_empty() {
        return Err(FetchError::Command {
            command: display(&cmd),
            status: "success".into(),
            stderr_tail: "printed nothing".into(),
        });
    }
    let mut out = create(temp)?;
    out.write_all(&text).map_err(|e| FetchError::io(temp, "write", e))?;
    finish(out, temp)
}
