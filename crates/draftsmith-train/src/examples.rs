//! Teacher-forced training examples. For a context position `t` (the drafter sees the target's
//! hidden state there), draft step `i` (1-based) feeds one token through the RNN and predicts the
//! next:
//! - ground truth: input `x[t+i]`, label `x[t+1+i]`, counted where `x[t+1+i]` is a response token;
//! - teacher (distillation): with `c` the target's greedy continuation after `x[..=t]` (`c[0]` is
//!   the target's guaranteed token), input `c[i-1]`, label `c[i]`, counted where `x[t+1]` is a
//!   response token.

use serde::{Deserialize, Serialize};

/// Marks a teacher token that was not computed.
pub const NO_TOKEN: u32 = u32::MAX;

/// Where labels come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum LabelSource {
    /// The sequence's own next tokens (for self-distilled responses these are the target's).
    #[default]
    GroundTruth,
    /// The target's per-position greedy continuations (ReDrafter §3.5).
    Teacher,
}

/// One training sequence (a chat-templated conversation).
#[derive(Debug, Clone, PartialEq)]
pub struct Sequence {
    pub tokens: Vec<u32>,
    /// `true` = response token (trained on).
    pub loss_mask: Vec<bool>,
    /// Flattened `[tokens.len() × teacher_len]` greedy continuations, [`NO_TOKEN`] where absent.
    pub teacher: Option<Vec<u32>>,
    pub teacher_len: usize,
}

/// A context position in a sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Example {
    pub seq: u32,
    pub pos: u32,
}

/// One draft step of one example.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepTarget {
    pub input: u32,
    pub label: u32,
    /// 1 = counted, 0 = padding.
    pub weight: f32,
}

const PAD: StepTarget = StepTarget { input: 0, label: 0, weight: 0.0 };

/// The `horizon` steps of the example at `pos` (padded with zero-weight steps).
pub fn example_steps(seq: &Sequence, pos: usize, horizon: usize, labels: LabelSource) -> Vec<StepTarget> {
    let n = seq.tokens.len();
    (1..=horizon)
        .map(|i| match labels {
            LabelSource::GroundTruth => {
                let j = pos + 1 + i;
                if j < n && seq.loss_mask[j] {
                    StepTarget { input: seq.tokens[pos + i], label: seq.tokens[j], weight: 1.0 }
                } else {
                    PAD
                }
            }
            LabelSource::Teacher => {
                let t = seq.teacher_len;
                let Some(teacher) = &seq.teacher else { return PAD };
                if i >= t || pos + 1 >= n || !seq.loss_mask[pos + 1] {
                    return PAD;
                }
                let c = &teacher[pos * t..(pos + 1) * t];
                if c[i - 1] == NO_TOKEN || c[i] == NO_TOKEN {
                    PAD
                } else {
                    StepTarget { input: c[i - 1], label: c[i], weight: 1.0 }
                }
            }
        })
        .collect()
}

/// Every context position with at least one counted step.
pub fn build_examples(seqs: &[Sequence], horizon: usize, labels: LabelSource) -> Vec<Example> {
    let mut out = Vec::new();
    for (s, seq) in seqs.iter().enumerate() {
        for pos in 0..seq.tokens.len() {
            if example_steps(seq, pos, horizon, labels).iter().any(|st| st.weight > 0.0) {
                out.push(Example { seq: s as u32, pos: pos as u32 });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq() -> Sequence {
        // prompt 10 11 | response 20 21 22 23
        Sequence {
            tokens: vec![10, 11, 20, 21, 22, 23],
            loss_mask: vec![false, false, true, true, true, true],
            teacher: None,
            teacher_len: 0,
        }
    }

    #[test]
    fn ground_truth_steps_feed_the_next_token_and_predict_the_one_after() {
        let s = seq();
        let steps = example_steps(&s, 1, 3, LabelSource::GroundTruth);
        // context position 1 (token 11): g0 = 20; step 1 feeds 20 → 21, step 2 feeds 21 → 22, …
        assert_eq!(
            steps.iter().map(|s| (s.input, s.label, s.weight)).collect::<Vec<_>>(),
            vec![(20, 21, 1.0), (21, 22, 1.0), (22, 23, 1.0)]
        );
        let tail = example_steps(&s, 3, 3, LabelSource::GroundTruth);
        assert_eq!(
            tail.iter().map(|s| s.weight).collect::<Vec<_>>(),
            vec![1.0, 0.0, 0.0],
            "labels past the end are padding"
        );
        // Position 0: step 1 predicts x[2] = 20 (a response token) from input x[1].
        assert_eq!(
            example_steps(&s, 0, 1, LabelSource::GroundTruth)[0],
            StepTarget { input: 11, label: 20, weight: 1.0 }
        );
        assert_eq!(build_examples(&[s], 3, LabelSource::GroundTruth).len(), 4, "positions 0..=3 have a counted label");
    }

    #[test]
    fn teacher_steps_follow_the_continuation_and_need_a_response_start() {
        let mut s = seq();
        let t = 3;
        let mut teacher = vec![NO_TOKEN; s.tokens.len() * t];
        teacher[t..2 * t].copy_from_slice(&[20, 30, 31]); // after x[..=1]
        teacher[2 * t..3 * t].copy_from_slice(&[21, 40, NO_TOKEN]);
        s.teacher = Some(teacher);
        s.teacher_len = t;
        let steps = example_steps(&s, 1, 4, LabelSource::Teacher);
        assert_eq!(
            steps.iter().map(|s| (s.input, s.label, s.weight)).collect::<Vec<_>>(),
            vec![(20, 30, 1.0), (30, 31, 1.0), (0, 0, 0.0), (0, 0, 0.0)]
        );
        assert_eq!(example_steps(&s, 2, 4, LabelSource::Teacher)[1].weight, 0.0, "missing teacher token");
        assert!(
            example_steps(&s, 0, 4, LabelSource::Teacher).iter().all(|s| s.weight == 0.0),
            "x[1] is a prompt token"
        );
    }
}
