//! Every decoding method by name, built from one set of method parameters. The names are the
//! ones used on the command line (`--methods`) and in recipes and records.

use serde::{Deserialize, Serialize};

use crate::error::DecodeError;
use burn::tensor::backend::Backend;
use draftsmith_model::Model;

use crate::methods::{
    DraftModel, DraftModelConfig, KvMode, LoadedReDrafter, LoadedTokenSwift, NgramTrie, NgramTrieConfig, PreCutConfig,
    PromptLookup, ReDrafterProposer, ReDrafterSettings, TokenCache, TokenCacheConfig, TokenSwiftProposer,
    TokenSwiftSettings,
};
use crate::spec::{Auto, CostModel, DraftPolicy, Proposer};

/// The autoregressive baseline: no proposer, one target call per token.
pub const AR: &str = "ar";

/// Every method [`build_proposer`] knows, `ar` first.
pub const METHODS: &[&str] = &[
    AR,
    "prompt-lookup",
    "ngram-trie",
    "draft-model",
    "precut",
    "token-cache",
    "post-use-draft",
    "post-use",
    "post-use-precut",
    "redrafter",
    "tokenswift",
];

/// Methods that need a trained drafter directory (`--drafter`).
pub const TRAINED_DRAFTER_METHODS: &[&str] = &["redrafter", "tokenswift"];

/// Methods that need a drafter model (`--draft-model`); `token-cache` wraps the drafter when
/// one is given and prompt lookup otherwise.
///
/// The Post-use paper's ablation (its Table 3) adds one mechanism per row; each row is a method:
/// `draft-model` (vanilla speculative decoding), `post-use-draft` (+ the token cache at the
/// draft model), `post-use` (+ the token cache at the target too), `post-use-precut` (+ the
/// Pre-cut controller: the paper's whole method). `token-cache` (cache at the target only) and
/// `precut` (controller only) are the single mechanisms.
pub const DRAFTER_METHODS: &[&str] = &["draft-model", "precut", "post-use-draft", "post-use", "post-use-precut"];

/// Method parameters. Field names are the recipe keys; the command-line flags are the same
/// names in kebab case (`draft_len` → `--draft-len`). A method ignores the fields it has no use for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// N-gram trie: also index the generated tokens (the paper indexes the context only).
    pub ngram_update_output: bool,
    /// Drafter model for `draft-model`, `precut` and `token-cache` (a path or fetch name).
    pub draft_model: Option<String>,
    /// Trained drafter directory (`drafter.safetensors` + `config.json`) for `redrafter`.
    pub drafter: Option<String>,
    /// ReDrafter: beams per step.
    pub beam_width: usize,
    /// ReDrafter: tokens per beam, counting the target's guaranteed token.
    pub beam_length: usize,
    /// ReDrafter: pack beams into a prefix tree (dynamic tree attention).
    pub tree_attention: bool,
    /// TokenSwift: candidates per depth, p0 first (`[1, 3, 3, 3]`).
    pub tree: Vec<usize>,
    /// TokenSwift: n-gram continuations added per step (0 = no token reutilization).
    pub ngram_topk: usize,
    /// TokenSwift: draft KV cache `full`, `partial-static` or `dynamic`.
    pub kv_mode: KvMode,
    /// TokenSwift: draft KV budget B (tokens).
    pub kv_budget: usize,
    /// TokenSwift: sink tokens S kept in the draft cache.
    pub kv_sinks: usize,
    /// The target's contextual (repetition) penalty θ for every method, `ar` included (1 =
    /// off): part of its greedy decoding, so outputs stay comparable token for token.
    pub penalty: f64,
    /// The penalty looks at the last `penalty_window` tokens (0 = the whole context).
    pub penalty_window: usize,
    /// `auto`: each step verifies only the part of the method's draft with the best expected
    /// tokens per second on this machine ([`crate::spec::policy`]); `fixed`: the method's own
    /// settings, as a paper's table ran them.
    pub draft_policy: DraftPolicy,
}

impl MethodParams {
    /// The target's logits processing these parameters ask for (greedy).
    pub fn sampling(&self) -> crate::sampling::SamplingConfig {
        crate::sampling::SamplingConfig {
            repetition_penalty: self.penalty as f32,
            penalty_window: self.penalty_window,
            ..Default::default()
        }
    }
}

impl Default for MethodParams {
    fn default() -> Self {
        let trie = NgramTrieConfig::default();
        let ts = TokenSwiftSettings::default();
        Self {
            draft_len: 10,
            lookup_ngram: 3,
            ngram_n: trie.n,
            ngram_lp: trie.prefix_len,
            num_draft: trie.num_draft,
            ngram_update_output: trie.update_with_output,
            draft_model: None,
            drafter: None,
            beam_width: 1,
            beam_length: 5,
            tree_attention: true,
            tree: ts.tree,
            ngram_topk: ts.ngram_topk,
            kv_mode: ts.kv_mode,
            kv_budget: ts.kv_budget,
            kv_sinks: ts.kv_sinks,
            penalty: 1.0,
            penalty_window: 0,
            draft_policy: DraftPolicy::Auto,
        }
    }
}

/// The drafters a run has loaded, for the methods that need one.
#[derive(Debug)]
pub struct Drafters<'a, B: Backend> {
    /// A smaller model with the target's tokenizer (`--draft-model`).
    pub draft_model: Option<&'a Model<B>>,
    /// A trained ReDrafter (`--drafter`).
    pub redrafter: Option<&'a LoadedReDrafter<B>>,
    /// Trained TokenSwift heads (`--drafter`).
    pub tokenswift: Option<&'a LoadedTokenSwift<B>>,
}

impl<B: Backend> Drafters<'_, B> {
    pub fn none() -> Self {
        Self { draft_model: None, redrafter: None, tokenswift: None }
    }
}

impl<B: Backend> Clone for Drafters<'_, B> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<B: Backend> Copy for Drafters<'_, B> {}

/// Checks that method `name` exists and its parameters are valid, without building it.
pub fn validate_method(name: &str, params: &MethodParams) -> Result<(), DecodeError> {
    if TRAINED_DRAFTER_METHODS.contains(&name) {
        if params.drafter.is_none() {
            return Err(DecodeError::InvalidParam {
                method: name.to_string(),
                param: "drafter",
                value: "none".into(),
                problem: "this method needs a trained drafter directory (--drafter)".into(),
            });
        }
        if name == "tokenswift" {
            if params.tree.is_empty() || params.tree.contains(&0) {
                return Err(DecodeError::InvalidParam {
                    method: name.to_string(),
                    param: "tree",
                    value: format!("{:?}", params.tree),
                    problem: "needs one positive count per depth".into(),
                });
            }
            if params.kv_budget <= params.kv_sinks {
                return Err(DecodeError::InvalidParam {
                    method: name.to_string(),
                    param: "kv_budget",
                    value: params.kv_budget.to_string(),
                    problem: format!("must exceed kv_sinks ({})", params.kv_sinks),
                });
            }
            return Ok(());
        }
        if params.beam_width == 0 {
            return Err(DecodeError::InvalidParam {
                method: name.to_string(),
                param: "beam_width",
                value: "0".into(),
                problem: "must be at least 1".into(),
            });
        }
        if params.beam_length < 2 {
            return Err(DecodeError::InvalidParam {
                method: name.to_string(),
                param: "beam_length",
                value: params.beam_length.to_string(),
                problem: "must be at least 2 (it counts the target's guaranteed token)".into(),
            });
        }
        return Ok(());
    }
    if DRAFTER_METHODS.contains(&name) {
        if params.draft_model.is_none() {
            return Err(DecodeError::InvalidParam {
                method: name.to_string(),
                param: "draft_model",
                value: "none".into(),
                problem: "this method needs a drafter (--draft-model)".into(),
            });
        }
        if params.draft_len == 0 {
            return Err(DecodeError::InvalidParam {
                method: name.to_string(),
                param: "draft_len",
                value: "0".into(),
                problem: "must be at least 1".into(),
            });
        }
        return Ok(());
    }
    build_proposer(if name == "token-cache" { "prompt-lookup" } else { name }, params).map(|_| ())
}

/// Builds the proposer of method `name` for `target`, with the loaded drafters the method needs.
pub fn build_proposer_with<B: Backend>(
    name: &str,
    params: &MethodParams,
    target: &Model<B>,
    drafters: Drafters<'_, B>,
) -> Result<Option<Box<dyn Proposer>>, DecodeError> {
    let proposer = build_method(name, params, target, drafters)?;
    Ok(match (proposer, params.draft_policy) {
        (Some(p), DraftPolicy::Auto) => Some(Box::new(Auto::new(p, CostModel::calibrate(target)))),
        (p, _) => p,
    })
}

/// The method's own proposer, before any draft policy.
fn build_method<B: Backend>(
    name: &str,
    params: &MethodParams,
    target: &Model<B>,
    drafters: Drafters<'_, B>,
) -> Result<Option<Box<dyn Proposer>>, DecodeError> {
    validate_method(name, params)?;
    let drafter = drafters.draft_model;
    if name == "tokenswift" {
        let loaded = drafters.tokenswift.ok_or_else(|| DecodeError::InvalidParam {
            method: name.to_string(),
            param: "drafter",
            value: "not loaded".into(),
            problem: "this method needs trained TokenSwift heads (--drafter)".into(),
        })?;
        let settings = TokenSwiftSettings {
            tree: params.tree.clone(),
            ngram_topk: params.ngram_topk,
            ngram_n: params.tree.len(),
            kv_mode: params.kv_mode,
            kv_budget: params.kv_budget,
            kv_sinks: params.kv_sinks,
            ..TokenSwiftSettings::default()
        };
        return Ok(Some(Box::new(TokenSwiftProposer::new(target, loaded, settings)?)));
    }
    if name == "redrafter" {
        let loaded = drafters.redrafter.ok_or_else(|| DecodeError::InvalidParam {
            method: name.to_string(),
            param: "drafter",
            value: "not loaded".into(),
            problem: "this method needs a trained drafter (--drafter)".into(),
        })?;
        let settings = ReDrafterSettings {
            beam_width: params.beam_width,
            beam_length: params.beam_length,
            tree_attention: params.tree_attention,
        };
        return Ok(Some(Box::new(ReDrafterProposer::new(target, loaded, settings)?)));
    }
    let draft_model = |precut: bool, reuse: bool| -> Result<DraftModel<B>, DecodeError> {
        let model = drafter.ok_or_else(|| DecodeError::InvalidParam {
            method: name.to_string(),
            param: "draft_model",
            value: "not loaded".into(),
            problem: "this method needs a drafter (--draft-model)".into(),
        })?;
        let config = DraftModelConfig {
            lambda: params.draft_len,
            precut: precut.then(PreCutConfig::default),
            reuse: reuse.then(TokenCacheConfig::default),
        };
        DraftModel::new(model.clone(), config)
    };
    let at_target = |inner: DraftModel<B>| -> Result<Option<Box<dyn Proposer>>, DecodeError> {
        Ok(Some(Box::new(TokenCache::new(inner, TokenCacheConfig::default())?)))
    };
    Ok(match name {
        "draft-model" => Some(Box::new(draft_model(false, false)?)),
        "precut" => Some(Box::new(draft_model(true, false)?)),
        "post-use-draft" => Some(Box::new(draft_model(false, true)?)),
        "post-use" => at_target(draft_model(false, true)?)?,
        "post-use-precut" => at_target(draft_model(true, true)?)?,
        "token-cache" if drafter.is_some() => at_target(draft_model(false, false)?)?,
        "token-cache" => {
            let inner = PromptLookup { max_ngram: params.lookup_ngram, min_ngram: 1, k: params.draft_len };
            Some(Box::new(TokenCache::new(inner, TokenCacheConfig::default())?))
        }
        _ => build_proposer(name, params)?,
    })
}

/// Builds the proposer of a method that needs no drafter; `ar` has none (`Ok(None)`).
pub fn build_proposer(name: &str, params: &MethodParams) -> Result<Option<Box<dyn Proposer>>, DecodeError> {
    let positive = |param: &'static str, value: usize| {
        if value == 0 {
            Err(DecodeError::InvalidParam {
                method: name.to_string(),
                param,
                value: value.to_string(),
                problem: "must be at least 1".into(),
            })
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
            let config = NgramTrieConfig {
                n: params.ngram_n,
                prefix_len: params.ngram_lp,
                num_draft: params.num_draft,
                update_with_output: params.ngram_update_output,
                ..NgramTrieConfig::default()
            };
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
        for name in METHODS
            .iter()
            .filter(|m| !DRAFTER_METHODS.contains(m) && !TRAINED_DRAFTER_METHODS.contains(m) && **m != "token-cache")
        {
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
