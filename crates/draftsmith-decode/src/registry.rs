//! Every decoding method by name, built from one set of method parameters. The names are the
//! ones used on the command line (`--methods`) and in recipes and records.

use serde::{Deserialize, Serialize};

use crate::error::DecodeError;
use crate::methods::{NgramTrie, NgramTrieConfig, PromptLookup};
use crate::spec::Proposer;

/// The autoregressive baseline: no proposer, one target call per token.
pub const AR: &str = "ar";

/// Every method [`build_proposer`] knows, `ar` first.
pub const METHODS: &[&str] = &[AR, "prompt-lookup", "ngram-trie"];

/// Method parameters. Field names are the recipe keys; the command-line flags are the same
/// names in kebab case (`draft_len` → `--draft-len`). A method ignores the fields it has no use for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MethodParams {
    /// Draft length of chain methods (prompt-lookup).
    pub draft_len: usize,
    /// Longest n-gram prompt lookup tries to match (down to 1).
    pub lookup_ngram: usize,
    /// N-gram trie: sliding-window length n.
    pub ngram_n: usize,
    /// N-gram trie: maximum prefix length L_p.
    pub ngram_lp: usize,
    /// N-gram trie: most draft nodes per step (bounded heap).
    pub num_draft: usize,
}

impl Default for MethodParams {
    fn default() -> Self {
        let trie = NgramTrieConfig::default();
        Self { draft_len: 10, lookup_ngram: 3, ngram_n: trie.n, ngram_lp: trie.prefix_len, num_draft: trie.num_draft }
    }
}

/// Builds the proposer of method `name`; `ar` has none (`Ok(None)`).
pub fn build_proposer(name: &str, params: &MethodParams) -> Result<Option<Box<dyn Proposer>>, DecodeError> {
    let positive = |param: &'static str, value: usize| {
        if value == 0 {
            Err(DecodeError::InvalidParam { method: name.to_string(), param, value: value.to_string(), problem: "must be at least 1".into() })
        } else {
            Ok(value)
        }
    };
    match name {
        AR => Ok(None),
        "prompt-lookup" => Ok(Some(Box::new(PromptLookup {
            max_ngram: positive("lookup_ngram", params.lookup_ngram)?,
            min_ngram: 1,
            k: positive("draft_len", params.draft_len)?,
        }))),
        "ngram-trie" => {
            let config = NgramTrieConfig { n: params.ngram_n, prefix_len: params.ngram_lp, num_draft: params.num_draft, ..NgramTrieConfig::default() };
            let trie = NgramTrie::new(config).map_err(|e| DecodeError::InvalidParam {
                method: name.to_string(),
                param: "ngram_n/ngram_lp/num_draft",
                value: format!("{}/{}/{}", params.ngram_n, params.ngram_lp, params.num_draft),
                problem: e.to_string(),
            })?;
            Ok(Some(Box::new(trie)))
        }
        _ => Err(DecodeError::UnknownMethod { name: name.to_string(), known: METHODS.to_vec() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_method_builds_and_unknown_names_list_the_known_ones() {
        let params = MethodParams::default();
        for name in METHODS {
            let proposer = build_proposer(name, &params).unwrap();
            assert_eq!(proposer.is_none(), *name == AR);
            if let Some(p) = proposer {
                assert_eq!(p.name(), *name, "records use the registry name");
            }
        }
        let err = build_proposer("medusa", &params).err().unwrap().to_string();
        assert!(err.contains("medusa") && err.contains("prompt-lookup") && err.contains("ar"), "{err}");
        let err = build_proposer("prompt-lookup", &MethodParams { draft_len: 0, ..params }).err().unwrap().to_string();
        assert!(err.contains("draft_len"), "{err}");
    }
}
