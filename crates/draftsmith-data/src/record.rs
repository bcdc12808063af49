//! One distilled training record and its consistency rules.

use serde::{Deserialize, Serialize};

/// Where a record's response tokens came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordSource {
    /// The target model generated the response (self-distillation).
    SelfDistilled,
    /// The dataset's own reference answer.
    GroundTruth,
}

impl RecordSource {
    /// The name stored in the `source` column.
    pub fn as_str(self) -> &'static str {
        match self {
            RecordSource::SelfDistilled => "self_distilled",
            RecordSource::GroundTruth => "ground_truth",
        }
    }

    /// Parses a name written by [`RecordSource::as_str`].
    pub fn parse(name: &str) -> Option<RecordSource> {
        match name {
            "self_distilled" => Some(RecordSource::SelfDistilled),
            "ground_truth" => Some(RecordSource::GroundTruth),
            _ => None,
        }
    }
}

/// Marks a teacher token that was not computed.
pub const NO_TOKEN: u32 = u32::MAX;

/// One training sequence produced from an input conversation.
#[derive(Clone, Debug, PartialEq)]
pub struct DistillRecord {
    /// The input conversation's id.
    pub id: String,
    /// The full token sequence: chat-templated prompt followed by the response.
    pub tokens: Vec<u32>,
    /// One flag per token; `true` marks a response (assistant) token that is trained on.
    pub loss_mask: Vec<bool>,
    /// Where the response came from.
    pub source: RecordSource,
    /// Target greedy continuations, flattened `[tokens.len() × teacher_len]`:
    /// `teacher[t * T + i]` is the target's greedy token at position `t + 1 + i` given
    /// `tokens[..=t]`, or [`NO_TOKEN`] where not computed.
    pub teacher: Option<Vec<u32>>,
    /// The target's top-k next-token ids, flattened `[tokens.len() × topk]`.
    pub teacher_topk_ids: Option<Vec<u32>>,
    /// Log-probabilities of [`DistillRecord::teacher_topk_ids`], same shape.
    pub teacher_topk_logprobs: Option<Vec<f32>>,
}

impl DistillRecord {
    /// Checks that every per-token array has the length implied by `tokens` and the dataset's
    /// `teacher_len` and `topk`; returns what is wrong otherwise.
    pub fn check(&self, teacher_len: Option<usize>, topk: Option<usize>) -> Result<(), String> {
        let n = self.tokens.len();
        if self.loss_mask.len() != n {
            return Err(format!("loss_mask has {} entries for {n} tokens", self.loss_mask.len()));
        }
        check_shape("teacher", self.teacher.as_ref().map(Vec::len), n, teacher_len, "teacher_len")?;
        let ids = self.teacher_topk_ids.as_ref().map(Vec::len);
        check_shape("teacher_topk_ids", ids, n, topk, "topk")?;
        let logprobs = self.teacher_topk_logprobs.as_ref().map(Vec::len);
        check_shape("teacher_topk_logprobs", logprobs, n, topk, "topk")?;
        if ids.is_some() != logprobs.is_some() {
            return Err("teacher_topk_ids and teacher_topk_logprobs must be both present or both absent".into());
        }
        Ok(())
    }
}

/// Checks that a flattened `[tokens × width]` column has `tokens * width` entries.
fn check_shape(
    column: &str,
    len: Option<usize>,
    tokens: usize,
    width: Option<usize>,
    width_name: &str,
) -> Result<(), String> {
    match (len, width) {
        (None, _) => Ok(()),
        (Some(_), None) => Err(format!("has {column} but the dataset parameters have no {width_name}")),
        (Some(len), Some(w)) if len != tokens * w => {
            Err(format!("{column} has {len} entries, expected {tokens} tokens × {width_name} {w} = {}", tokens * w))
        }
        _ => Ok(()),
    }
}
