//! The drafters a run names, loaded and checked against the target: a draft model must share
//! the target's tokenizer; a trained drafter directory is loaded as the kind its `config.json`
//! names (ReDrafter or TokenSwift) and must have been trained for this target.

use std::path::Path;

use burn::tensor::backend::Backend;
use draftsmith_heads::{DrafterKind, TargetIdentity};
use draftsmith_model::LoadedModel;

use crate::error::DecodeError;
use crate::methods::{check_tokenizers, LoadedReDrafter, LoadedTokenSwift};
use crate::registry::Drafters;

/// Drafters loaded for a run (the owners of what [`Drafters`] borrows).
pub struct LoadedDrafters<B: Backend> {
    pub draft_model: Option<LoadedModel<B>>,
    pub redrafter: Option<LoadedReDrafter<B>>,
    pub tokenswift: Option<LoadedTokenSwift<B>>,
}

impl<B: Backend> LoadedDrafters<B> {
    /// No drafters.
    pub fn none() -> Self {
        Self { draft_model: None, redrafter: None, tokenswift: None }
    }

    /// Checks `draft_model` (already loaded) against the target's tokenizer and loads the
    /// trained drafter in `drafter`, dispatched on its kind and checked to fit the target.
    pub fn load(
        target: &LoadedModel<B>,
        draft_model: Option<LoadedModel<B>>,
        drafter: Option<&Path>,
        device: &B::Device,
    ) -> Result<Self, DecodeError> {
        if let Some(d) = &draft_model {
            check_tokenizers(&target.tokenizer, &d.tokenizer)?;
        }
        let mut loaded = Self { draft_model, ..Self::none() };
        if let Some(dir) = drafter {
            loaded.load_trained(dir, &target_identity(target)?, device)?;
        }
        Ok(loaded)
    }

    /// Loads the trained drafter in `dir` as the kind its `config.json` names.
    pub fn load_trained(&mut self, dir: &Path, target: &TargetIdentity, device: &B::Device) -> Result<(), DecodeError> {
        match draftsmith_heads::drafter_kind(dir)? {
            DrafterKind::ReDrafter => self.redrafter = Some(LoadedReDrafter::load(dir, target, device)?),
            DrafterKind::TokenSwift => self.tokenswift = Some(LoadedTokenSwift::load(dir, target, device)?),
        }
        Ok(())
    }

    /// The drafters, borrowed for the proposers.
    pub fn as_drafters(&self) -> Drafters<'_, B> {
        Drafters {
            draft_model: self.draft_model.as_ref().map(|d| &d.model),
            redrafter: self.redrafter.as_ref(),
            tokenswift: self.tokenswift.as_ref(),
        }
    }
}

/// The identity drafters are checked against: file name, weights fingerprint and shape.
pub fn target_identity<B: Backend>(loaded: &LoadedModel<B>) -> Result<TargetIdentity, DecodeError> {
    let c = loaded.model.config();
    let name =
        loaded.path.file_name().map_or_else(|| loaded.path.display().to_string(), |n| n.to_string_lossy().into_owned());
    Ok(TargetIdentity {
        name,
        sha256: draftsmith_model::weights_sha256(&loaded.path)?,
        vocab_size: c.vocab_size,
        hidden_size: c.hidden_size,
    })
}

#[cfg(test)]
mod tests {
    use burn::backend::Flex;

    use super::*;

    #[test]
    fn a_drafter_of_an_unknown_kind_is_refused_by_name() {
        let dir = std::env::temp_dir().join(format!("draftsmith-drafters-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.json"), r#"{"drafter": "medusa"}"#).unwrap();
        let target = TargetIdentity { name: "t".into(), sha256: "0".into(), vocab_size: 48, hidden_size: 32 };
        let mut loaded = LoadedDrafters::<Flex>::none();
        let err = loaded.load_trained(&dir, &target, &Default::default()).unwrap_err().to_string();
        assert!(err.contains("unknown drafter kind `medusa`"), "{err}");
        let drafters = loaded.as_drafters();
        assert!(drafters.draft_model.is_none() && drafters.redrafter.is_none() && drafters.tokenswift.is_none());
    }
}
