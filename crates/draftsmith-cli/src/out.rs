//! Standard output that reports its write errors instead of panicking as `println!` does: a full
//! disk is an error naming standard output; a closed pipe (`draftsmith … | head`) ends the run
//! quietly, as Unix tools do.

use std::io;

/// Writing to standard output failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot write to standard output: {0}")]
pub struct StdoutError(io::Error);

impl StdoutError {
    /// The reader of a pipe went away: nothing is wrong with the run.
    pub fn is_closed_pipe(&self) -> bool {
        self.0.kind() == io::ErrorKind::BrokenPipe
    }
}

impl From<io::Error> for StdoutError {
    fn from(e: io::Error) -> Self {
        Self(e)
    }
}

/// Writes `text` to standard output and flushes it.
pub fn print(text: &str) -> Result<(), StdoutError> {
    use io::Write;
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    Ok(out.flush()?)
}

/// `println!` returning [`StdoutError`].
macro_rules! outln {
    () => { $crate::out::print("\n") };
    ($($arg:tt)*) => { $crate::out::print(&format!("{}\n", format_args!($($arg)*))) };
}
pub(crate) use outln;
