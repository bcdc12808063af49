//! Helpers shared by the integration tests.

use std::path::PathBuf;

/// A fresh, empty directory under the system temp dir, unique to this process and `name`.
pub fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("draftsmith-data-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
