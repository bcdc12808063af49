//! Which target a drafter belongs to: exported drafters carry it and importers check it.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::HeadsError;

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

/// Refuses a drafter (described by `config_path`) whose shape does not fit `given`, or that
/// was trained for another target.
pub fn check_target(
    config_path: &Path,
    vocab_size: usize,
    hidden_size: usize,
    trained: Option<&TargetIdentity>,
    given: &TargetIdentity,
) -> Result<(), HeadsError> {
    if vocab_size != given.vocab_size || hidden_size != given.hidden_size {
        return Err(HeadsError::Incompatible(format!(
            "{}: drafter has vocab {vocab_size} / hidden {hidden_size}, the target `{}` has vocab {} / hidden {}",
            config_path.display(),
            given.name,
            given.vocab_size,
            given.hidden_size
        )));
    }
    if let Some(trained) = trained {
        // The same weights file with other shapes: the `target` block itself was edited.
        if trained.sha256 == given.sha256 && !trained.matches(given) {
            return Err(HeadsError::Incompatible(format!(
                "{}: `target` records vocab {} / hidden {} for `{}` (sha256 {}), but that model has vocab {} / \
                 hidden {}: the file was edited or damaged",
                config_path.display(),
                trained.vocab_size,
                trained.hidden_size,
                trained.name,
                &trained.sha256[..trained.sha256.len().min(16)],
                given.vocab_size,
                given.hidden_size
            )));
        }
        if !trained.matches(given) {
            return Err(HeadsError::TargetMismatch {
                path: config_path.to_path_buf(),
                trained_name: trained.name.clone(),
                trained_sha: trained.sha256.clone(),
                given_name: given.name.clone(),
                given_sha: given.sha256.clone(),
            });
        }
    }
    Ok(())
}

/// The kinds of trained drafter, as the `drafter` field of an export's `config.json` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DrafterKind {
    ReDrafter,
    TokenSwift,
}

// The name in `config.json` (and of the decoding method).
draftsmith_core::value_names!(DrafterKind, "drafter kind", { ReDrafter => "redrafter", TokenSwift => "tokenswift" });

/// The kind a drafter's `config.json` declares: its `drafter` field, or for a checkpoint in
/// the reference ReDrafter layout (no `drafter` field), its `model_type`.
pub(crate) fn declared_kind(config: &serde_json::Value) -> Result<DrafterKind, String> {
    match config.get("drafter").and_then(|v| v.as_str()) {
        Some(name) => name.parse(),
        None if config.get("model_type").and_then(|v| v.as_str()) == Some(crate::redrafter::REFERENCE_MODEL_TYPE) => {
            Ok(DrafterKind::ReDrafter)
        }
        None => Err("no `drafter` field (expected `redrafter` or `tokenswift`) and no reference `model_type`".into()),
    }
}

/// The kind of drafter in `dir` (see `declared_kind`); an unknown or missing kind is an error
/// naming the file.
pub fn drafter_kind(dir: &Path) -> Result<DrafterKind, HeadsError> {
    let (path, value) = crate::tensors::read_config_value(dir)?;
    declared_kind(&value).map_err(|problem| HeadsError::Config { path, problem })
}
