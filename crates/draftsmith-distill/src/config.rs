//! What a distillation run produces: [`DistillConfig`], read from recipes and set by CLI flags.

use draftsmith_data::DistillParams;
use serde::{Deserialize, Serialize};

use crate::error::DistillError;

/// Distillation settings. Every field is also a recipe key; defaults follow the field docs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DistillConfig {
    /// Write a self-distilled record per conversation: the target's own response to the first
    /// user message. Default true.
    pub responses: bool,
    /// Write a ground-truth record per conversation: the whole conversation, trained on its
    /// assistant turns. Default false.
    pub ground_truth: bool,
    /// Greedy teacher continuation length `T` stored per trained position (0 = none; the
    /// ReDrafter paper uses 5). Default 0.
    pub teacher_len: usize,
    /// Number of next-token candidates (ids and log-probs) stored per position (0 = none).
    pub topk: usize,
    /// Response length cap for self-distilled records. Default 256.
    pub max_new_tokens: usize,
    /// Prompts longer than this (in tokens) are skipped and counted. Default 512.
    pub max_prompt_tokens: usize,
    /// Ground-truth sequences are cut to this many tokens. Default 1024.
    pub max_seq_len: usize,
    /// Sampling temperature of self-distilled responses (0 = greedy). Default 0.
    pub temperature: f32,
    /// Base seed of sampled responses; input `i` uses a seed derived from it and `i`, so a
    /// resumed run produces what an uninterrupted one would.
    pub seed: u64,
    /// Apply the model's chat template (default true). Without it a prompt is the first user
    /// message as raw text, and ground-truth records are not available.
    pub chat_template: bool,
    /// Input conversations per Parquet shard (the resume granularity). Default 32.
    pub inputs_per_shard: usize,
    /// Responses generated together through one KV cache (continuous batching; 1 = one at a
    /// time). Changes the speed, not the output. Default 16.
    pub batch_size: usize,
}

/// Longest greedy teacher continuation stored per position (`teacher_len`; ReDrafter's paper
/// uses 5, and its drafters are trained at most 32 tokens ahead).
pub const MAX_TEACHER_LEN: usize = 32;

/// Most next-token candidates stored per position (`topk`).
pub const MAX_TOPK: usize = 256;

impl Default for DistillConfig {
    fn default() -> Self {
        Self {
            responses: true,
            ground_truth: false,
            teacher_len: 0,
            topk: 0,
            max_new_tokens: 256,
            max_prompt_tokens: 512,
            max_seq_len: 1024,
            temperature: 0.0,
            seed: 0,
            chat_template: true,
            inputs_per_shard: 32,
            batch_size: 16,
        }
    }
}

impl DistillConfig {
    /// Checks the settings against each other; the first problem names the key.
    pub fn validate(&self) -> Result<(), DistillError> {
        let bad = |key: &'static str, problem: String| Err(DistillError::Config { key, problem });
        if !self.responses && !self.ground_truth {
            return bad("responses", "neither responses nor ground_truth is enabled: nothing to write".into());
        }
        if self.ground_truth && !self.chat_template {
            return bad("ground_truth", "ground-truth records need the chat template (chat_template = false)".into());
        }
        if self.responses && self.max_new_tokens == 0 {
            return bad("max_new_tokens", "must be at least 1 when responses are generated".into());
        }
        if self.teacher_len > MAX_TEACHER_LEN {
            let problem = format!(
                "is {}, at most {MAX_TEACHER_LEN} (each trained position runs the target that many tokens ahead)",
                self.teacher_len
            );
            return bad("teacher_len", problem);
        }
        if self.topk > MAX_TOPK {
            let problem = format!("is {}, at most {MAX_TOPK} (stored for every trained position)", self.topk);
            return bad("topk", problem);
        }
        if self.max_prompt_tokens == 0 {
            return bad("max_prompt_tokens", "must be at least 1".into());
        }
        if self.max_seq_len < 2 {
            return bad("max_seq_len", format!("is {}, must be at least 2", self.max_seq_len));
        }
        if !self.temperature.is_finite() || self.temperature < 0.0 {
            return bad("temperature", format!("is {}, must be a finite number ≥ 0", self.temperature));
        }
        if self.inputs_per_shard == 0 {
            return bad("inputs_per_shard", "must be at least 1".into());
        }
        if self.batch_size == 0 {
            return bad("batch_size", "must be at least 1".into());
        }
        Ok(())
    }

    /// The dataset parameters a resumed run must match: every setting except the shard size and
    /// the batch size, plus `input` (the caller's description of the input data, e.g. its name and hash).
    pub fn params(&self, input: serde_json::Value) -> DistillParams {
        let mut settings = serde_json::to_value(self).expect("a config always serializes");
        let map = settings.as_object_mut().expect("a struct serializes to an object");
        map.remove("inputs_per_shard");
        map.remove("batch_size");
        map.insert("input".into(), input);
        DistillParams {
            settings,
            teacher_len: (self.teacher_len > 0).then_some(self.teacher_len),
            topk: (self.topk > 0).then_some(self.topk),
        }
    }

    /// The sampling seed of input `index` (see [`DistillConfig::seed`]).
    pub fn seed_for(&self, index: usize) -> u64 {
        self.seed ^ (index as u64).wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recipe_keys_round_trip_and_unknown_keys_fail() {
        let cfg: DistillConfig =
            serde_json::from_str(r#"{"teacher_len": 5, "ground_truth": true, "responses": false}"#).unwrap();
        assert_eq!(cfg.teacher_len, 5);
        assert_eq!(cfg.max_new_tokens, 256, "unset keys take defaults");
        let back: DistillConfig = serde_json::from_value(serde_json::to_value(&cfg).unwrap()).unwrap();
        assert_eq!(back, cfg);
        let err = serde_json::from_str::<DistillConfig>(r#"{"teacher_length": 5}"#).unwrap_err().to_string();
        assert!(err.contains("teacher_length"), "{err}");
    }

    #[test]
    fn validation_names_the_key() {
        let cfg = DistillConfig { responses: false, ..Default::default() };
        assert!(matches!(cfg.validate(), Err(DistillError::Config { key: "responses", .. })));
        let cfg = DistillConfig { temperature: -1.0, ..Default::default() };
        assert!(matches!(cfg.validate(), Err(DistillError::Config { key: "temperature", .. })));
        let cfg = DistillConfig { teacher_len: 1_000_000, ..Default::default() };
        assert!(matches!(cfg.validate(), Err(DistillError::Config { key: "teacher_len", .. })));
        let cfg = DistillConfig { topk: MAX_TOPK + 1, ..Default::default() };
        assert!(matches!(cfg.validate(), Err(DistillError::Config { key: "topk", .. })));
        DistillConfig { teacher_len: MAX_TEACHER_LEN, topk: MAX_TOPK, ..Default::default() }.validate().unwrap();
        DistillConfig::default().validate().unwrap();
    }

    #[test]
    fn params_ignore_the_shard_and_batch_sizes() {
        let a = DistillConfig { inputs_per_shard: 2, teacher_len: 3, ..Default::default() };
        let b = DistillConfig { inputs_per_shard: 7, batch_size: 3, ..a.clone() };
        let input = serde_json::json!({"name": "x"});
        assert_eq!(a.params(input.clone()), b.params(input.clone()));
        assert_eq!(a.params(input.clone()).teacher_len, Some(3));
        assert_eq!(a.params(input).topk, None);
    }
}
