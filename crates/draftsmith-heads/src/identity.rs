//! Which target a drafter belongs to: exported drafters carry it and importers check it.

use serde::{Deserialize, Serialize};

/// Names the target model a drafter was trained on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetIdentity {
    /// Human-readable name (file name or hub id).
    pub name: String,
    /// sha256 of the target's weights file (GGUF or the safetensors index), hex.
    pub sha256: String,
    pub vocab_size: usize,
    pub hidden_size: usize,
}

impl TargetIdentity {
    /// Whether `other` is the same target (the name may differ: a renamed file is the same model).
    pub fn matches(&self, other: &TargetIdentity) -> bool {
        self.sha256 == other.sha256 && self.vocab_size == other.vocab_size && self.hidden_size == other.hidden_size
    }
}
