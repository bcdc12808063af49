//! llama.cpp beside the engine: `scripts/bench_llamacpp.py` (llama-cpp-python, the script built
//! into the binary) on the same GGUF,
//! timing one prompt per request so the two engines alternate prompt by prompt.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde::Serialize;
use serde_json::{json, Value};

use super::BenchError;

/// A running `scripts/bench_llamacpp.py`.
pub struct LlamaCpp {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// Its first line: engine, threads and the build's SIMD flags.
    pub info: Value,
}

/// llama.cpp's timing of one prompt.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LlamaCppRun {
    pub prefill_s: f64,
    pub decode_s: f64,
    pub decoded: usize,
}

/// llama.cpp's totals over a benchmark (the `llamacpp` object of the result).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LlamaCppSummary {
    pub engine: Value,
    pub threads: Value,
    pub system_info: Value,
    pub decode_tokens_per_s: f64,
    pub ms_per_token: f64,
    pub prefill_tokens_per_s: f64,
}

/// The spread of the per-prompt speed ratios: quartiles, extremes and how many pairs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RatioSpread {
    pub min: f64,
    pub q1: f64,
    pub q3: f64,
    pub max: f64,
    pub pairs: usize,
}

impl RatioSpread {
    /// The median of `ratios` and their spread (`None` for no ratios).
    pub fn of(mut ratios: Vec<f64>) -> Option<(f64, Self)> {
        if ratios.is_empty() {
            return None;
        }
        ratios.sort_by(f64::total_cmp);
        let at = |q: f64| ratios[((ratios.len() - 1) as f64 * q).round() as usize];
        Some((at(0.5), Self { min: at(0.0), q1: at(0.25), q3: at(0.75), max: at(1.0), pairs: ratios.len() }))
    }
}

/// `scripts/bench_llamacpp.py`, built into the binary and run with `python3 -c`, so
/// `--vs-llamacpp` works wherever the binary runs, not only beside the source tree it was built
/// from (a binary that looked for the file there failed once the tree had moved).
const SCRIPT: &str = include_str!("../../../../scripts/bench_llamacpp.py");

impl LlamaCpp {
    /// Starts the script on the GGUF file `model` and reads its first line.
    pub fn start(model: &Path) -> Result<Self, BenchError> {
        if !model.is_file() {
            return Err(BenchError::NotGguf { path: model.to_path_buf() });
        }
        let mut child = Command::new("python3")
            .arg("-c")
            .arg(SCRIPT)
            .arg("--model")
            .arg(model)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|source| BenchError::Spawn { source })?;
        let stdin = child.stdin.take().ok_or(BenchError::Pipe { pipe: "stdin" })?;
        let stdout = BufReader::new(child.stdout.take().ok_or(BenchError::Pipe { pipe: "stdout" })?);
        let mut lc = Self { child, stdin, stdout, info: Value::Null };
        lc.info = lc.read_line().map_err(|source| BenchError::NotStarted { source: Box::new(source) })?;
        Ok(lc)
    }

    fn read_line(&mut self) -> Result<Value, BenchError> {
        let mut line = String::new();
        if self.stdout.read_line(&mut line)? == 0 {
            return Err(BenchError::EarlyExit);
        }
        Ok(serde_json::from_str(&line)?)
    }

    /// Greedy-decodes `n` tokens after the prompt `ids` (EOS ignored) and returns the timings.
    pub fn run(&mut self, ids: &[u32], n: usize) -> Result<LlamaCppRun, BenchError> {
        writeln!(self.stdin, "{}", json!({"ids": ids, "n": n}))?;
        self.stdin.flush()?;
        let v = self.read_line()?;
        let get = |key: &'static str| v[key].as_f64().ok_or_else(|| BenchError::MissingKey { key, line: v.clone() });
        Ok(LlamaCppRun { prefill_s: get("prefill_s")?, decode_s: get("decode_s")?, decoded: get("decoded")? as usize })
    }
}

impl Drop for LlamaCpp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spread_is_the_median_quartiles_and_extremes() {
        let (median, spread) = RatioSpread::of(vec![0.9, 1.3, 1.0, 1.1, 1.2]).unwrap();
        assert_eq!(median, 1.1);
        assert_eq!(spread, RatioSpread { min: 0.9, q1: 1.0, q3: 1.2, max: 1.3, pairs: 5 });
        assert!(RatioSpread::of(Vec::new()).is_none());
    }

    #[test]
    fn a_model_that_is_not_a_file_is_refused_before_python_starts() {
        let err = LlamaCpp::start(Path::new("/nonexistent/model-dir")).err().expect("refused");
        assert!(err.to_string().contains("needs a GGUF model file"), "{err}");
        let spawn = BenchError::Spawn { source: std::io::Error::other("no python3") };
        assert!(spawn.to_string().starts_with("cannot run scripts/bench_llamacpp.py"), "{spawn}");
        let started = BenchError::NotStarted { source: Box::new(BenchError::EarlyExit) };
        assert!(started.to_string().starts_with("scripts/bench_llamacpp.py"), "{started}");
        assert!(SCRIPT.contains("llama_cpp") && SCRIPT.contains("__main__"), "the script is built in");
    }
}
