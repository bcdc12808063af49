//! A distilled dataset (`draftsmith distill`) as ReDrafter training sequences, checked to have
//! been distilled from the target being trained for, and to hold the labels asked for.

use std::path::Path;

use crate::error::TrainError;
use crate::examples::{LabelSource, Sequence};

/// Sequences longer than this are cut unless told otherwise (`train redrafter` and `hidden`
/// read a dataset alike, so that a cache fits the training run).
pub const DEFAULT_MAX_SEQ_LEN: usize = 1024;

/// The training sequences of a distilled dataset and what identifies them for a resume.
#[derive(Debug, Clone, PartialEq)]
pub struct DistilledSequences {
    pub sequences: Vec<Sequence>,
    /// The shards' hashes, the distillation settings, `limit` and `max_len`: a run resumes
    /// only over the same data.
    pub fingerprint: serde_json::Value,
    /// Sequences of each of the dataset's shards, in the fingerprint's order (before `limit`):
    /// what a hidden-state cache of an earlier state of the dataset can keep.
    pub shard_sequences: Vec<usize>,
}

impl DistilledSequences {
    /// Tokens over every sequence.
    pub fn tokens(&self) -> usize {
        self.sequences.iter().map(|s| s.tokens.len()).sum()
    }
}

/// Reads the dataset in `dir` as training sequences of at most `max_len` tokens (the first
/// `limit` sequences when given). Refuses a dataset distilled from another target than
/// `target_sha` (the weights' SHA-256), and `labels` teacher on a dataset without teacher
/// continuations; an incomplete dataset (an interrupted distill) is used with a warning.
pub fn read_sequences(
    dir: &Path,
    target_sha: &str,
    labels: LabelSource,
    limit: Option<usize>,
    max_len: usize,
) -> Result<DistilledSequences, TrainError> {
    let (manifest, records) = draftsmith_data::read_records(dir)?;
    if manifest.target.sha256 != target_sha {
        return Err(TrainError::WrongTarget {
            dir: dir.to_path_buf(),
            name: manifest.target.name,
            sha256: manifest.target.sha256,
            target_sha: target_sha.to_string(),
        });
    }
    if !manifest.complete {
        tracing::warn!(dir = %dir.display(), "the distilled dataset is incomplete (distill was interrupted); training on the finished shards");
    }
    let teacher_len = manifest.params.teacher_len.unwrap_or(0);
    let mut sequences: Vec<Sequence> = records
        .into_iter()
        .map(|r| {
            let n = r.tokens.len().min(max_len);
            Sequence {
                tokens: r.tokens[..n].to_vec(),
                loss_mask: r.loss_mask[..n].to_vec(),
                teacher: r.teacher.map(|t| t[..n * teacher_len].to_vec()),
                teacher_len,
            }
        })
        .collect();
    if let Some(k) = limit {
        sequences.truncate(k);
    }
    if labels == LabelSource::Teacher && sequences.iter().all(|s| s.teacher.is_none()) {
        return Err(TrainError::NoTeacher { dir: dir.to_path_buf() });
    }
    let fingerprint = serde_json::json!({
        "shards": manifest.shards.iter().map(|s| s.sha256.clone()).collect::<Vec<_>>(),
        "params": manifest.params.settings,
        "limit": limit,
        "max_seq_len": max_len,
    });
    let shard_sequences = manifest.shards.iter().map(|s| s.records).collect();
    Ok(DistilledSequences { sequences, fingerprint, shard_sequences })
}

#[cfg(test)]
mod tests {
    use draftsmith_data::{DistillParams, DistillRecord, RecordSource, ShardWriter, TargetId};

    use super::*;

    /// A dataset of three records (5, 6 and 7 tokens) distilled from target `abc`.
    fn dataset(name: &str, teacher_len: Option<usize>) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("draftsmith-distilled-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let target = TargetId { name: "tiny.gguf".into(), sha256: "abc".into() };
        let params = DistillParams { settings: serde_json::json!({"k": 1}), teacher_len, topk: None };
        let mut writer = ShardWriter::open(&dir, target, params, 2).unwrap();
        for len in 5..8 {
            writer
                .push_input(vec![DistillRecord {
                    id: format!("c{len}"),
                    tokens: (0..len as u32).collect(),
                    loss_mask: (0..len).map(|i| i >= 2).collect(),
                    source: RecordSource::SelfDistilled,
                    teacher: teacher_len.map(|t| vec![1; len * t]),
                    teacher_topk_ids: None,
                    teacher_topk_logprobs: None,
                }])
                .unwrap();
        }
        writer.finish().unwrap();
        dir
    }

    #[test]
    fn sequences_are_cut_limited_and_fingerprinted() {
        let dir = dataset("ok", Some(2));
        let read = read_sequences(&dir, "abc", LabelSource::Teacher, Some(2), 6).unwrap();
        let lens: Vec<usize> = read.sequences.iter().map(|s| s.tokens.len()).collect();
        assert_eq!(lens, vec![5, 6], "the first two, cut to 6 tokens");
        assert_eq!(read.sequences[1].teacher.as_ref().map(Vec::len), Some(12), "teacher rows cut alike");
        assert_eq!(
            (read.tokens(), read.fingerprint["limit"].as_u64(), read.fingerprint["max_seq_len"].as_u64()),
            (11, Some(2), Some(6))
        );
        assert_eq!(read.fingerprint["shards"].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn another_targets_dataset_and_missing_teacher_labels_are_refused() {
        let dir = dataset("refused", None);
        let err = read_sequences(&dir, "def", LabelSource::GroundTruth, None, 16).unwrap_err().to_string();
        assert!(err.contains("distilled from `tiny.gguf` (sha256 abc)") && err.contains("(sha256 def)"), "{err}");
        let err = read_sequences(&dir, "abc", LabelSource::Teacher, None, 16).unwrap_err().to_string();
        assert!(err.contains("--labels teacher needs teacher continuations"), "{err}");
        assert_eq!(read_sequences(&dir, "abc", LabelSource::GroundTruth, None, 16).unwrap().sequences.len(), 3);
    }
}
