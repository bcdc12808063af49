//! The decoding methods as a type. A method's name (`ar`, `prompt-lookup`, …) is what the command
//! line (`--method`, `--methods`), recipes and records use; everything else matches on
//! [`Method`], so adding a method is a new variant the compiler walks you through.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::DecodeError;

/// Every decoding method draftsmith runs.
///
/// The Post-use paper's ablation (its Table 3) adds one mechanism per row, and each row is a
/// method: [`DraftModel`](Method::DraftModel) (vanilla speculative decoding),
/// [`PostUseDraft`](Method::PostUseDraft) (+ the token cache at the draft model),
/// [`PostUse`](Method::PostUse) (+ the token cache at the target too),
/// [`PostUsePreCut`](Method::PostUsePreCut) (+ the Pre-cut controller: the paper's whole method).
/// [`TokenCache`](Method::TokenCache) (the cache at the target only) and
/// [`PreCut`](Method::PreCut) (the controller only) are the single mechanisms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Method {
    /// Autoregressive decoding: no proposer, one target call per token (the baseline).
    Ar,
    /// Prompt lookup decoding: drafts the continuation of the last n-gram's earlier occurrence.
    PromptLookup,
    /// Drafts from an n-gram trie of the context ("N-Gram Trie Speculative Decoding for Faster
    /// LLM In-Context Inference").
    NgramTrie,
    /// Speculative decoding with a smaller draft model (`--draft-model`).
    DraftModel,
    /// The draft model under the Pre-cut controller.
    PreCut,
    /// The token cache at the target, around the draft model (or prompt lookup without one).
    TokenCache,
    /// The draft model with the token cache at the draft model.
    PostUseDraft,
    /// The token cache at the draft model and at the target.
    PostUse,
    /// Post-use with the Pre-cut controller: the Post-use paper's whole method.
    PostUsePreCut,
    /// A trained ReDrafter RNN head (`--drafter`).
    ReDrafter,
    /// Trained TokenSwift heads (`--drafter`).
    TokenSwift,
}

/// What a method needs loaded besides the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// Nothing: the method drafts from the context.
    Nothing,
    /// A smaller model with the target's tokenizer (`--draft-model`).
    DraftModel,
    /// A trained drafter directory (`--drafter`).
    TrainedDrafter,
}

impl Method {
    /// Every method, `ar` first.
    pub const ALL: [Method; 11] = [
        Method::Ar,
        Method::PromptLookup,
        Method::NgramTrie,
        Method::DraftModel,
        Method::PreCut,
        Method::TokenCache,
        Method::PostUseDraft,
        Method::PostUse,
        Method::PostUsePreCut,
        Method::ReDrafter,
        Method::TokenSwift,
    ];

    /// The method's name on the command line, in recipes and in records.
    pub const fn name(self) -> &'static str {
        match self {
            Method::Ar => "ar",
            Method::PromptLookup => "prompt-lookup",
            Method::NgramTrie => "ngram-trie",
            Method::DraftModel => "draft-model",
            Method::PreCut => "precut",
            Method::TokenCache => "token-cache",
            Method::PostUseDraft => "post-use-draft",
            Method::PostUse => "post-use",
            Method::PostUsePreCut => "post-use-precut",
            Method::ReDrafter => "redrafter",
            Method::TokenSwift => "tokenswift",
        }
    }

    /// Every method's name, `ar` first (for `--help` and error messages).
    pub fn names() -> Vec<&'static str> {
        Self::ALL.iter().map(|m| m.name()).collect()
    }

    /// What the method needs loaded. [`Method::TokenCache`] wraps a draft model when one is
    /// given and prompt lookup otherwise, so it needs nothing.
    pub const fn needs(self) -> Needs {
        match self {
            Method::DraftModel | Method::PreCut | Method::PostUseDraft | Method::PostUse | Method::PostUsePreCut => {
                Needs::DraftModel
            }
            Method::ReDrafter | Method::TokenSwift => Needs::TrainedDrafter,
            Method::Ar | Method::PromptLookup | Method::NgramTrie | Method::TokenCache => Needs::Nothing,
        }
    }

    /// Whether the method drafts from a smaller model (the draft-model family of the Post-use paper).
    pub const fn uses_draft_model(self) -> bool {
        matches!(self.needs(), Needs::DraftModel)
    }

    /// Whether the method's drafts are `draft_len` long at most (prompt lookup, the token
    /// cache, ReDrafter's copied continuation and the draft-model family).
    pub const fn uses_draft_len(self) -> bool {
        matches!(self, Method::PromptLookup | Method::TokenCache | Method::ReDrafter) || self.uses_draft_model()
    }

    /// Whether the method is the autoregressive baseline.
    pub const fn is_ar(self) -> bool {
        matches!(self, Method::Ar)
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

impl FromStr for Method {
    type Err = DecodeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| DecodeError::UnknownMethod { name: s.to_string(), known: Self::names() })
    }
}

impl Serialize for Method {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Method {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_list_the_known_ones() {
        for m in Method::ALL {
            assert_eq!(m.name().parse::<Method>().unwrap(), m);
            assert_eq!(serde_json::to_string(&m).unwrap(), format!("\"{}\"", m.name()));
            assert_eq!(serde_json::from_str::<Method>(&format!("\"{m}\"")).unwrap(), m);
        }
        let err = "medusa".parse::<Method>().unwrap_err().to_string();
        assert!(err.contains("medusa") && err.contains("prompt-lookup") && err.contains("tokenswift"), "{err}");
        let err = serde_json::from_str::<Method>("\"eagle\"").unwrap_err().to_string();
        assert!(err.contains("eagle") && err.contains("ar"), "{err}");
    }
}
