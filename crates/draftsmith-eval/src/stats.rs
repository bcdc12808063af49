//! `generate --stats-out`: a JSON line of running statistics every so many generated tokens and
//! one at the end, with the eval summaries' definitions of τ, α and Distinct-n
//! ([`crate::summary`]).

use std::io::Write;

use draftsmith_decode::{Proposer, StepRecord};
use serde_json::json;

use crate::error::EvalError;
use crate::summary::{alpha, distinct_n, tokens_per_step};

/// Peak resident memory of this process in MiB (`VmHWM`; Linux only).
pub fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// The statistics every `--stats-out` line starts with: tokens, seconds, tokens/s, target
/// steps after the first token and τ (tokens per target call).
fn common_stats(output: &[u32], steps: usize, elapsed: std::time::Duration) -> serde_json::Value {
    let secs = elapsed.as_secs_f64();
    json!({
        "tokens": output.len(),
        "seconds": secs,
        "tokens_per_s": output.len().saturating_sub(1) as f64 / secs.max(1e-9),
        "steps": steps,
        "tokens_per_step": tokens_per_step(output.len(), steps + 1),
    })
}

/// The cheap statistics of a speculative generation so far (the progress bar's): the common
/// ones, α and the method's extras, as one JSON object.
pub fn rate_stats(
    output: &[u32],
    steps: &[StepRecord],
    elapsed: std::time::Duration,
    proposer: &dyn Proposer,
) -> serde_json::Value {
    let accepted: usize = steps.iter().map(|s| s.accepted).sum();
    let mut v = common_stats(output, steps.len(), elapsed);
    v["alpha"] = json!(proposer.draft_len().and_then(|d| alpha(accepted, d, steps.len())));
    for (k, x) in proposer.extra_stats() {
        v[k] = json!(x);
    }
    v
}

/// Adds Distinct-1..4 of the whole output and the peak RSS (`--stats-out` lines).
fn with_output_stats(mut v: serde_json::Value, output: &[u32]) -> serde_json::Value {
    v["distinct_n"] = json!((1..=4).map(|n| distinct_n(output, n)).collect::<Vec<_>>());
    v["peak_rss_mb"] = json!(peak_rss_mb());
    v
}

/// A `--stats-out` line of a speculative generation.
pub fn spec_stats(
    output: &[u32],
    steps: &[StepRecord],
    elapsed: std::time::Duration,
    proposer: &dyn Proposer,
) -> serde_json::Value {
    with_output_stats(rate_stats(output, steps, elapsed, proposer), output)
}

/// A `--stats-out` line of plain decoding: one target call per token.
pub fn ar_stats(output: &[u32], elapsed: std::time::Duration) -> serde_json::Value {
    with_output_stats(common_stats(output, output.len().saturating_sub(1), elapsed), output)
}

/// `--stats-out`: a JSON line every `every` generated tokens (flushed), and one at the end. A
/// failed write (a full disk) stops the lines and is reported by [`StatsLog::finish`].
pub struct StatsLog {
    file: Option<(std::path::PathBuf, std::fs::File)>,
    every: usize,
    next: usize,
    failed: Option<std::io::Error>,
}

impl StatsLog {
    pub fn open(path: Option<&std::path::Path>, every: usize) -> Result<Self, EvalError> {
        let file = match path {
            Some(p) => Some((
                p.to_path_buf(),
                std::fs::OpenOptions::new().create(true).append(true).open(p).map_err(EvalError::io(p))?,
            )),
            None => None,
        };
        Ok(Self { file, every: every.max(1), next: every.max(1), failed: None })
    }

    fn write(&mut self, value: serde_json::Value) {
        if let (Some((_, f)), None) = (&mut self.file, &self.failed) {
            if let Err(e) = writeln!(f, "{value}").and_then(|()| f.flush()) {
                self.failed = Some(e);
            }
        }
    }

    /// Writes `line()` once `tokens` reaches the next multiple of `every` (the line is only
    /// built then).
    pub fn maybe_write(&mut self, tokens: usize, line: impl FnOnce() -> serde_json::Value) {
        if self.file.is_some() && tokens >= self.next {
            self.write(line());
            while self.next <= tokens {
                self.next += self.every;
            }
        }
    }

    /// The last line, marked `"final": true`; `Err` naming the file when a line could not be
    /// written.
    pub fn finish(&mut self, line: impl FnOnce() -> serde_json::Value) -> Result<(), EvalError> {
        if self.file.is_some() {
            let mut v = line();
            v["final"] = json!(true);
            self.write(v);
        }
        match (&self.file, self.failed.take()) {
            (Some((path, _)), Some(e)) => Err(EvalError::io(path)(e)),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ar_line_has_tau_one_and_the_summary_definitions() {
        let line = ar_stats(&[1, 2, 3, 1, 2], std::time::Duration::from_secs(2));
        assert_eq!(line["tokens"], 5);
        assert_eq!(line["steps"], 4);
        assert_eq!(line["tokens_per_step"], 1.0, "one target call per token");
        assert_eq!(line["tokens_per_s"], 2.0, "tokens after the first ÷ seconds");
        assert_eq!(line["distinct_n"][0], 0.6);
        assert!(line.get("alpha").is_none(), "no drafts, no α");
        assert_eq!(alpha(6, 4, 3), Some(0.5));
        assert_eq!(alpha(0, 4, 0), None);
    }
}
