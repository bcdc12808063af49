//! Helpers shared by the CLI tests: the built binary, fixtures, scratch directories and output checks.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

/// The `draftsmith` binary under test, quiet: cargo's build of it, or `DRAFTSMITH_BIN` (a test
/// binary copied to another machine, e.g. a GPU host).
pub fn bin() -> Command {
    let path = std::env::var_os("DRAFTSMITH_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_draftsmith").into());
    let mut cmd = Command::new(path);
    cmd.env_remove("RUST_BACKTRACE").env("DRAFTSMITH_LOG", "error");
    cmd
}

/// A checked-in file of `tests/fixtures/`.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()))
        .join("../../tests/fixtures")
        .join(name)
}

/// A fresh, empty directory for one test (`group` keeps the test files apart).
pub fn scratch(group: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("draftsmith-{group}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Stdout of a run that must succeed (stderr shown otherwise).
pub fn ok(out: Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "failed: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    stdout
}

/// Stderr of a run that must fail.
pub fn err(out: Output) -> String {
    assert!(!out.status.success(), "expected a failure: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The JSON object on the last stdout line of a run that must succeed.
pub fn last_json(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "failed: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(stdout.lines().last().expect("some output")).expect("last line is JSON")
}

/// Three small Gutenberg-named books (`alpha`, `beta`, `gamma`) of repeating words in `dir/books`.
pub fn books(dir: &std::path::Path) -> PathBuf {
    let books = dir.join("books");
    std::fs::create_dir_all(&books).unwrap();
    let words = ["the", "cat", "sat", "on", "a", "mat", "and", "the", "dog", "ran", "to", "sea"];
    for (b, name) in ["alpha_gut.txt", "beta_gut.txt", "gamma_gut.txt"].iter().enumerate() {
        let text: Vec<&str> = (0..3000).map(|i| words[(i * (b + 2) + i / 7) % words.len()]).collect();
        std::fs::write(books.join(name), text.join(" ")).unwrap();
    }
    books
}
