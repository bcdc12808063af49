//! Raw results: one JSON line per (prompt, method) in `records.jsonl`, appended as each pair
//! finishes so an interrupted eval loses at most the pair in flight.

use std::collections::{BTreeMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use draftsmith_decode::{Method, StepRecord, StopReason};
use serde::{Deserialize, Serialize};

use crate::error::EvalError;

/// File name of the records inside an eval directory.
pub const RECORDS_FILE: &str = "records.jsonl";

/// Everything measured for one (prompt, method) pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    pub prompt_id: String,
    pub method: Method,
    pub prompt_ids: Vec<u32>,
    pub output_ids: Vec<u32>,
    pub stop: StopReason,
    /// Most draft tokens on one path, for methods with such a bound.
    pub draft_len: Option<usize>,
    pub prefill_ms: f64,
    /// From the first generated token (which prefill yields) to the end.
    pub decode_ms: f64,
    /// Target forward passes, prefill included (AR: one per output token).
    pub target_calls: usize,
    /// One record per draft–verify–commit step (empty for AR).
    pub steps: Vec<StepRecord>,
    /// The method's own statistics for this prompt (`Proposer::extra_stats`, e.g. TokenSwift's
    /// β and re-selections).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, f64>,
}

impl Record {
    /// The (prompt, method) pair this record answers.
    pub fn key(&self) -> (String, Method) {
        (self.prompt_id.clone(), self.method)
    }
}

/// Reads every record of `path` (none when it does not exist). A bad line is an error naming
/// the line, except an unterminated last line, which an interrupted write leaves: it is ignored.
pub fn read_records(path: &Path) -> Result<Vec<Record>, EvalError> {
    Ok(read_complete(path)?.0)
}

/// Records and the byte length of the complete lines.
fn read_complete(path: &Path) -> Result<(Vec<Record>, u64), EvalError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(e) => return Err(EvalError::Io { path: path.to_path_buf(), source: e }),
    };
    let complete = text.rfind('\n').map_or(0, |i| i + 1);
    let mut records = Vec::new();
    for (i, line) in text[..complete].lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let record = serde_json::from_str(line).map_err(|e| EvalError::RecordLine {
            path: path.to_path_buf(),
            line: i + 1,
            problem: e.to_string(),
        })?;
        records.push(record);
    }
    Ok((records, complete as u64))
}

/// `records.jsonl` opened for appending, after dropping a torn last line.
pub struct RecordLog {
    path: PathBuf,
    file: File,
}

impl RecordLog {
    /// Opens (or creates) `path` and returns the records it already holds.
    pub fn open(path: &Path) -> Result<(Self, Vec<Record>), EvalError> {
        let (records, complete) = read_complete(path)?;
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(path)
            .map_err(EvalError::io(path))?;
        let len = file.metadata().map_err(EvalError::io(path))?.len();
        if len != complete {
            tracing::warn!(path = %path.display(), bytes = len - complete, "dropping an unterminated last record (interrupted write)");
            file.set_len(complete).map_err(EvalError::io(path))?;
        }
        let mut file = file;
        std::io::Seek::seek(&mut file, std::io::SeekFrom::End(0)).map_err(EvalError::io(path))?;
        Ok((Self { path: path.to_path_buf(), file }, records))
    }

    /// Appends one record as one line and flushes it to disk.
    pub fn append(&mut self, record: &Record) -> Result<(), EvalError> {
        let mut line = serde_json::to_string(record).expect("records serialize");
        line.push('\n');
        self.file.write_all(line.as_bytes()).map_err(EvalError::io(&self.path))?;
        self.file.sync_data().map_err(EvalError::io(&self.path))
    }
}

/// Refuses records an eval of `prompt_ids` cannot have written (`path` names the file): a second
/// record of one prompt and method, or a record of a prompt the set does not hold (a line copied
/// in, or another eval's records appended). The summary would count them as prompts of their own.
pub fn check_records(path: &Path, records: &[Record], prompt_ids: &[&str]) -> Result<(), EvalError> {
    let bad = |problem: String| EvalError::Records { path: path.to_path_buf(), problem };
    let mut seen = HashSet::new();
    for r in records {
        if !prompt_ids.contains(&r.prompt_id.as_str()) {
            return Err(bad(format!(
                "holds a record of prompt `{}`, which this eval's prompt set does not hold; remove that line (or \
                 use another --out)",
                r.prompt_id
            )));
        }
        if !seen.insert(r.key()) {
            return Err(bad(format!(
                "holds two records of prompt `{}`, method `{}`, where an eval writes one; remove one of them",
                r.prompt_id, r.method
            )));
        }
    }
    Ok(())
}

/// The (prompt, method) pairs of `prompts` × `methods` not yet in `done`, prompt-major, in
/// method order (so `ar` runs before the methods of the same prompt).
pub fn pending_pairs<'a>(
    prompt_ids: &[&'a str],
    methods: &[Method],
    done: &HashSet<(String, Method)>,
) -> Vec<(&'a str, Method)> {
    prompt_ids
        .iter()
        .flat_map(|&p| methods.iter().map(move |&m| (p, m)))
        .filter(|&(p, m)| !done.contains(&(p.to_string(), m)))
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn record(prompt: &str, method: &str, output: &[u32], steps: &[(usize, usize)]) -> Record {
        let method: Method = method.parse().expect("a method name");
        Record {
            prompt_id: prompt.into(),
            method,
            prompt_ids: vec![1, 2, 3],
            output_ids: output.to_vec(),
            stop: StopReason::MaxTokens,
            draft_len: (!method.is_ar()).then_some(4),
            prefill_ms: 10.0,
            decode_ms: 0.0,
            target_calls: if method.is_ar() { output.len() } else { steps.len() + 1 },
            steps: steps
                .iter()
                .map(|&(accepted, emitted)| StepRecord {
                    tree_size: 4,
                    accepted,
                    draft_calls: 2,
                    drafted: 4,
                    emitted,
                    draft_ms: 0.5,
                    verify_ms: 20.0,
                    commit_ms: 1.0,
                })
                .collect(),
            extra: BTreeMap::new(),
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("draftsmith-eval-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn records_round_trip_and_a_torn_last_line_is_dropped() {
        let path = scratch("log").join(RECORDS_FILE);
        let a = record("p1", "ar", &[5, 6], &[]);
        let b = record("p1", "prompt-lookup", &[5, 6], &[(1, 2)]);
        let (mut log, existing) = RecordLog::open(&path).unwrap();
        assert!(existing.is_empty());
        log.append(&a).unwrap();
        log.append(&b).unwrap();
        drop(log);
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("{\"prompt_id\": \"p2\", \"meth");
        std::fs::write(&path, &text).unwrap();
        assert_eq!(read_records(&path).unwrap(), vec![a.clone(), b.clone()]);
        let (mut log, existing) = RecordLog::open(&path).unwrap();
        assert_eq!(existing.len(), 2);
        log.append(&a).unwrap();
        assert_eq!(read_records(&path).unwrap().len(), 3, "the torn line was cut before appending");

        std::fs::write(&path, "{\"x\": 1}\n").unwrap();
        let err = read_records(&path).unwrap_err().to_string();
        assert!(err.contains("records.jsonl:1: not a record"), "{err}");
    }

    #[test]
    fn a_repeated_or_foreign_record_is_refused_naming_it() {
        let path = Path::new("out/records.jsonl");
        let (a, b) = (record("p1", "ar", &[5], &[]), record("p1", "prompt-lookup", &[5], &[(1, 2)]));
        check_records(path, &[a.clone(), b.clone()], &["p1", "p2"]).unwrap();
        let err = check_records(path, &[a.clone(), b.clone(), b.clone()], &["p1"]).unwrap_err().to_string();
        assert!(
            err.contains("out/records.jsonl") && err.contains("two records of prompt `p1`, method `prompt-lookup`"),
            "{err}"
        );
        let err = check_records(path, &[a, record("zzz", "ar", &[5], &[])], &["p1"]).unwrap_err().to_string();
        assert!(err.contains("prompt `zzz`, which this eval's prompt set does not hold"), "{err}");
    }

    #[test]
    fn done_pairs_are_skipped() {
        let methods = [Method::Ar, Method::PromptLookup];
        let done: HashSet<_> =
            [record("p1", "ar", &[1], &[]), record("p1", "prompt-lookup", &[1], &[]), record("p2", "ar", &[1], &[])]
                .iter()
                .map(Record::key)
                .collect();
        let pending = pending_pairs(&["p1", "p2", "p3"], &methods, &done);
        assert_eq!(pending, [("p2", Method::PromptLookup), ("p3", Method::Ar), ("p3", Method::PromptLookup)]);
    }
}
