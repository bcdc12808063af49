//! Every decoding method ([`Method`]) built from one set of method parameters.

use serde::{Deserialize, Serialize};

use crate::error::DecodeError;
use crate::method::{Method, Needs};
use burn::tensor::backend::Backend;
use draftsmith_model::{Model, QFormat};

use crate::methods::{
    CopyContext, DraftModel, DraftModelConfig, KvMode, LoadedReDrafter, LoadedTokenSwift, NgramTrie, NgramTrieConfig,
    PreCutConfig, PromptLookup, ReDrafterProposer, ReDrafterSettings, TokenCache, TokenCacheConfig, TokenSwiftProposer,
    TokenSwiftSettings, WithCopy, AUTO_NGRAM_KEY, AUTO_NGRAM_N,
};
use crate::spec::{Auto, CostModel, DraftPolicy, Proposer};

/// Method parameters. Field names are the recipe keys; the command-line flags (with the `clap`
/// feature, which derives them from this struct) are the same names in kebab case
/// (`draft_len` → `--draft-len`). A method ignores the fields it has no use for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[cfg_attr(feature = "clap", command(next_help_heading = "Method parameters"))]
#[serde(deny_unknown_fields, default)]
pub struct MethodParams {
    /// Draft length of chain methods (prompt-lookup) and λ of the draft-model methods.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = MethodParams::default().draft_len))]
    pub draft_len: usize,
    /// Longest n-gram prompt lookup tries to match (down to 1).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = MethodParams::default().lookup_ngram))]
    pub lookup_ngram: usize,
    /// N-gram trie: sliding-window length n (the paper's best: 13).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = MethodParams::default().ngram_n))]
    pub ngram_n: usize,
    /// N-gram trie: maximum prefix length L_p (the paper's best: 3).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = MethodParams::default().ngram_lp))]
    pub ngram_lp: usize,
    /// N-gram trie: most draft nodes per step (bounded heap).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = MethodParams::default().num_draft))]
    pub num_draft: usize,
    /// N-gram trie: also index the generated tokens (`false`: the prompt only, as the paper).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = MethodParams::default().ngram_update_output, action = clap::ArgAction::Set))]
    pub ngram_update_output: bool,
    /// Drafter for `draft-model`, `precut`, the `post-use` methods and `token-cache`: a model
    /// with the target's tokenizer (a .gguf, HF directory, hf:id or fetch name, e.g.
    /// qwen2.5-coder-0.5b).
    #[cfg_attr(feature = "clap", arg(long))]
    pub draft_model: Option<String>,
    /// Draft vocabulary of the `--draft-model` methods: the drafter computes logits for the
    /// first N token ids only (byte-pair vocabularies list tokens in merge order, roughly by
    /// frequency), which shrinks its LM head; unset: the whole vocabulary. Lossless either way.
    #[cfg_attr(feature = "clap", arg(long, value_name = "N"))]
    pub draft_vocab: Option<usize>,
    /// Weights of the `--draft-model`: `q4_0` (default), `q4_1` or `q8_0` re-quantizes every
    /// matrix stored in more bytes per weight (the draft vocabulary's head included) at load;
    /// `keep` multiplies them in the file's formats (with `--activations f32`, which has no fast
    /// Q4_0 kernel, `q4_0` means `q4_1`). A drafter call reads every weight, so fewer
    /// bytes make it cheaper; the coarser rounding may lower acceptance a little. Lossless
    /// either way (Qwen2.5-Coder 0.5B → 1.5B: 1.69 / 1.76× with q4_0 against 1.54 / 1.57×
    /// kept, eval/results/session32-zen4-avx512).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = MethodParams::default().draft_weights))]
    pub draft_weights: DraftWeights,
    /// How `draft-model` and `precut` pick each draft token when the generation samples
    /// (`--temperature` > 0): `sample` draws it from the drafter's distribution, processed as
    /// the target's is, and the verifier accepts it with probability min(1, p/q) (speculative
    /// sampling); `argmax` drafts the drafter's likeliest token, accepted with probability p.
    /// Greedy generation, the post-use methods and `--copy-context true` always draft `argmax`.
    /// The output keeps the target's distribution either way.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = MethodParams::default().draft_tokens))]
    pub draft_tokens: DraftTokens,
    /// Trained drafter directory for `redrafter` or `tokenswift` (`drafter.safetensors` +
    /// `config.json`, as written by `draftsmith train redrafter|tokenswift` / `draftsmith export`).
    #[cfg_attr(feature = "clap", arg(long))]
    pub drafter: Option<String>,
    /// ReDrafter: beams per step.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = MethodParams::default().beam_width))]
    pub beam_width: usize,
    /// ReDrafter: tokens per beam, counting the target's guaranteed token.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = MethodParams::default().beam_length))]
    pub beam_length: usize,
    /// ReDrafter: pack beams into a prefix tree (dynamic tree attention). On the command line
    /// `--no-tree-attention` verifies every beam as its own chain (the ablation).
    #[cfg_attr(feature = "clap", arg(long = "no-tree-attention", action = clap::ArgAction::SetFalse))]
    pub tree_attention: bool,
    /// ReDrafter and the draft-model methods: also draft the context's prompt-lookup
    /// continuation (`--lookup-ngram`, `--draft-len` tokens) beside the drafter's tokens, as
    /// copied nodes the draft policy learns apart from the drafter's. Default: on for
    /// ReDrafter under the `auto` draft policy; off under `fixed` (the papers' drafters alone)
    /// and for the draft-model methods.
    #[cfg_attr(feature = "clap", arg(long, value_name = "BOOL", action = clap::ArgAction::Set))]
    pub copy_context: Option<bool>,
    /// TokenSwift: candidates per depth, p0's first, comma separated (default `1,3,3,3`; also
    /// `3,3,3,3`, `1,9,9,9`).
    #[cfg_attr(
        feature = "clap",
        arg(long, value_delimiter = ',', default_values_t = MethodParams::default().tree, hide_default_value = true)
    )]
    pub tree: Vec<usize>,
    /// TokenSwift: n-gram continuations added per step (0 = no token reutilization).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = MethodParams::default().ngram_topk))]
    pub ngram_topk: usize,
    /// TokenSwift: the draft forward's KV cache: full, partial-static or dynamic (the paper's);
    /// or verify-pass: no draft forward, the heads read the verification pass's own state (one
    /// target pass per step instead of two, the tree one level shallower), and under `auto` the
    /// n-gram continuations are longer and looked up after the last three tokens. Default:
    /// verify-pass under the `auto` draft policy, dynamic under `fixed`.
    #[cfg_attr(feature = "clap", arg(long))]
    pub kv_mode: Option<KvMode>,
    /// TokenSwift: draft KV budget B in tokens (partial modes).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = MethodParams::default().kv_budget))]
    pub kv_budget: usize,
    /// TokenSwift: sink tokens S always kept in the draft cache.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = MethodParams::default().kv_sinks))]
    pub kv_sinks: usize,
    /// Contextual / repetition penalty θ of the target's greedy decoding, for every method, `ar`
    /// included (1 = off): part of its greedy decoding, so outputs stay comparable token for token.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = MethodParams::default().penalty))]
    pub penalty: f64,
    /// The penalty looks at the last W tokens (0 = the whole context).
    #[cfg_attr(feature = "clap", arg(long, value_name = "W", default_value_t = MethodParams::default().penalty_window))]
    pub penalty_window: usize,
    /// `auto`: each step verifies only the part of the draft with the best expected tokens per
    /// second (cost model calibrated on this machine, acceptance learned online); `fixed`: the
    /// method's own draft settings, as a paper's table ran them.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = MethodParams::default().draft_policy))]
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
            draft_vocab: None,
            draft_weights: DraftWeights::Q4_0,
            draft_tokens: DraftTokens::Sample,
            drafter: None,
            beam_width: 1,
            beam_length: 5,
            tree_attention: true,
            copy_context: None,
            tree: ts.tree,
            ngram_topk: ts.ngram_topk,
            kv_mode: None,
            kv_budget: ts.kv_budget,
            kv_sinks: ts.kv_sinks,
            penalty: 1.0,
            penalty_window: 0,
            draft_policy: DraftPolicy::Auto,
        }
    }
}

/// The [`MethodParams`] fields (recipe keys) `method` reads; it ignores the others. Every method
/// reads the target's penalty, every drafting method the draft policy.
pub fn params_read(method: Method) -> Vec<&'static str> {
    const PENALTY: [&str; 2] = ["penalty", "penalty_window"];
    const DRAFT_MODEL: [&str; 4] = ["draft_model", "draft_vocab", "draft_weights", "draft_len"];
    // The context's continuation beside a drafting model's tokens ([`copy_context`]).
    const COPY: [&str; 3] = ["copy_context", "lookup_ngram", "draft_len"];
    let own: &[&str] = match method {
        Method::Ar => &[],
        Method::PromptLookup => &["lookup_ngram", "draft_len"],
        Method::NgramTrie => &["ngram_n", "ngram_lp", "num_draft", "ngram_update_output"],
        Method::DraftModel | Method::PreCut => &["draft_tokens"],
        // The token cache wraps prompt lookup when no draft model is given.
        Method::TokenCache | Method::PostUseDraft | Method::PostUse | Method::PostUsePreCut => &[],
        Method::ReDrafter => &["drafter", "beam_width", "beam_length", "tree_attention"],
        Method::TokenSwift => &["drafter", "tree", "ngram_topk", "kv_mode", "kv_budget", "kv_sinks"],
    };
    let mut read: Vec<&'static str> = PENALTY.into_iter().chain(own.iter().copied()).collect();
    if method.uses_draft_model() || method == Method::TokenCache {
        read.extend(DRAFT_MODEL);
    }
    if method.uses_draft_model() || method == Method::TokenCache || method == Method::ReDrafter {
        read.extend(COPY);
    }
    if !method.is_ar() {
        read.push("draft_policy");
    }
    read.sort_unstable();
    read.dedup();
    read
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

/// Checks that `method`'s parameters are valid, without building it.
pub fn validate_method(method: Method, params: &MethodParams) -> Result<(), DecodeError> {
    let invalid = |param: &'static str, value: String, problem: &str| {
        Err(DecodeError::InvalidParam { method: method.to_string(), param, value, problem: problem.into() })
    };
    // The penalty shapes every method's target logits, `ar`'s too.
    params.sampling().validate()?;
    if method.uses_draft_len() && params.draft_len > MAX_DRAFT_LEN {
        let problem = format!("at most {MAX_DRAFT_LEN} (a pass over that many draft tokens costs many steps)");
        return invalid("draft_len", params.draft_len.to_string(), &problem);
    }
    match method.needs() {
        Needs::TrainedDrafter if params.drafter.is_none() => {
            return invalid("drafter", "none".into(), "this method needs a trained drafter directory (--drafter)");
        }
        Needs::DraftModel if params.draft_model.is_none() => {
            return invalid("draft_model", "none".into(), "this method needs a drafter (--draft-model)");
        }
        _ => {}
    }
    match method {
        Method::TokenSwift => {
            if params.tree.is_empty() || params.tree.contains(&0) {
                return invalid("tree", format!("{:?}", params.tree), "needs one positive count per depth");
            }
            let nodes = tree_nodes(&params.tree);
            if nodes > MAX_TREE_NODES {
                let problem = format!(
                    "spans {nodes} nodes (each depth's count times the paths above it, summed); at most {MAX_TREE_NODES}"
                );
                return invalid("tree", format!("{:?}", params.tree), &problem);
            }
            if params.kv_budget <= params.kv_sinks {
                let problem = format!("must exceed kv_sinks ({})", params.kv_sinks);
                return invalid("kv_budget", params.kv_budget.to_string(), &problem);
            }
            Ok(())
        }
        Method::ReDrafter => {
            if params.beam_width == 0 {
                return invalid("beam_width", "0".into(), "must be at least 1");
            }
            if params.beam_length < 2 {
                let problem = "must be at least 2 (it counts the target's guaranteed token)";
                return invalid("beam_length", params.beam_length.to_string(), problem);
            }
            if params.beam_length > MAX_DRAFT_LEN + 1 {
                let problem = format!("at most {} ({MAX_DRAFT_LEN} draft tokens a beam)", MAX_DRAFT_LEN + 1);
                return invalid("beam_length", params.beam_length.to_string(), &problem);
            }
            let nodes = params.beam_width.saturating_mul(params.beam_length - 1);
            if nodes > MAX_TREE_NODES {
                let problem = format!(
                    "{} beams of {} draft tokens are {nodes} tokens to verify in a pass; at most {MAX_TREE_NODES}",
                    params.beam_width,
                    params.beam_length - 1
                );
                return invalid("beam_width", params.beam_width.to_string(), &problem);
            }
            Ok(())
        }
        m if m.uses_draft_model() => {
            if params.draft_len == 0 {
                return invalid("draft_len", "0".into(), "must be at least 1");
            }
            Ok(())
        }
        Method::TokenCache => build_proposer(Method::PromptLookup, params).map(|_| ()),
        m => build_proposer(m, params).map(|_| ()),
    }
}

/// Longest draft `draft_len` may ask for (prompt lookup, token cache, the draft-model methods).
pub const MAX_DRAFT_LEN: usize = 256;

/// Most nodes a TokenSwift candidate tree (`tree`) may span, and most draft tokens ReDrafter's
/// beams (`beam_width` × (`beam_length` − 1)) may hold.
pub const MAX_TREE_NODES: usize = 4096;

/// Nodes of a TokenSwift candidate tree with `counts` candidates per depth: the paths to each
/// depth, `Π counts[..=d]`, summed (saturating, for absurd counts).
fn tree_nodes(counts: &[usize]) -> usize {
    let mut paths = 1usize;
    counts.iter().fold(0usize, |sum, &c| {
        paths = paths.saturating_mul(c);
        sum.saturating_add(paths)
    })
}

/// Checks that `drafters` hold what `method` drafts with — TokenSwift heads, a ReDrafter (whose
/// draft vocabulary holds `beam_width` tokens), or a draft model — so a run can refuse a wrong
/// `--drafter` before it writes anything.
pub fn check_drafters<B: Backend>(
    method: Method,
    params: &MethodParams,
    drafters: Drafters<'_, B>,
) -> Result<(), DecodeError> {
    let invalid = |param: &'static str, value: Option<&String>, problem: &str| {
        Err(DecodeError::InvalidParam {
            method: method.to_string(),
            param,
            value: value.cloned().unwrap_or_else(|| "not loaded".into()),
            problem: problem.into(),
        })
    };
    match method {
        Method::TokenSwift if drafters.tokenswift.is_none() => invalid(
            "drafter",
            params.drafter.as_ref(),
            match drafters.redrafter {
                Some(_) => "holds a ReDrafter, not TokenSwift heads (train heads with `train tokenswift`)",
                None => "this method needs trained TokenSwift heads (--drafter)",
            },
        ),
        Method::ReDrafter => match drafters.redrafter {
            Some(loaded) => crate::methods::redrafter::check_beam_width(loaded, params.beam_width),
            None => invalid(
                "drafter",
                params.drafter.as_ref(),
                match drafters.tokenswift {
                    Some(_) => "holds TokenSwift heads, not a ReDrafter (train one with `train redrafter`)",
                    None => "this method needs a trained drafter (--drafter)",
                },
            ),
        },
        m if m.uses_draft_model() && drafters.draft_model.is_none() => {
            invalid("draft_model", None, "this method needs a drafter (--draft-model)")
        }
        _ => Ok(()),
    }
}

/// Builds the proposer of `method` for `target`, with the loaded drafters the method needs.
pub fn build_proposer_with<B: Backend>(
    method: Method,
    params: &MethodParams,
    target: &Model<B>,
    drafters: Drafters<'_, B>,
) -> Result<Option<Box<dyn Proposer>>, DecodeError> {
    let proposer = build_method(method, params, target, drafters)?;
    Ok(match (proposer, params.draft_policy) {
        (Some(p), DraftPolicy::Auto) => Some(Box::new(Auto::new(p, CostModel::calibrate(target)))),
        (p, _) => p,
    })
}

/// The method's own proposer, before any draft policy.
fn build_method<B: Backend>(
    method: Method,
    params: &MethodParams,
    target: &Model<B>,
    drafters: Drafters<'_, B>,
) -> Result<Option<Box<dyn Proposer>>, DecodeError> {
    validate_method(method, params)?;
    check_drafters(method, params, drafters)?;
    let drafter = drafters.draft_model;
    if let (Method::TokenSwift, Some(loaded)) = (method, drafters.tokenswift) {
        let auto = params.draft_policy == DraftPolicy::Auto;
        let kv_mode = params.kv_mode.unwrap_or(if auto { KvMode::VerifyPass } else { KvMode::Dynamic });
        // Under `auto` verify-pass offers long copies, which the policy prunes to what pays;
        // `fixed` keeps the paper's n = γ + 1 after p0's one token.
        let (ngram_n, ngram_key) = match kv_mode {
            KvMode::VerifyPass if auto => (AUTO_NGRAM_N.max(params.tree.len()), AUTO_NGRAM_KEY),
            _ => (params.tree.len(), 1),
        };
        let settings = TokenSwiftSettings {
            tree: params.tree.clone(),
            ngram_topk: params.ngram_topk,
            ngram_n,
            ngram_key,
            kv_mode,
            kv_budget: params.kv_budget,
            kv_sinks: params.kv_sinks,
            skip_heads_on_agreement: auto,
            ..TokenSwiftSettings::default()
        };
        return Ok(Some(Box::new(TokenSwiftProposer::new(target, loaded, settings)?)));
    }
    if let (Method::ReDrafter, Some(loaded)) = (method, drafters.redrafter) {
        let settings = ReDrafterSettings {
            beam_width: params.beam_width,
            beam_length: params.beam_length,
            tree_attention: params.tree_attention,
        };
        return Ok(Some(with_copy(method, params, Box::new(ReDrafterProposer::new(target, loaded, settings)?))));
    }
    // Drawn drafts reach the verifier only from a draft model verified alone.
    let sample = params.draft_tokens == DraftTokens::Sample
        && matches!(method, Method::DraftModel | Method::PreCut)
        && copy_context(method, params).is_none();
    let draft_model = |precut: bool, reuse: bool| -> Result<DraftModel<B>, DecodeError> {
        let model = drafter.expect("check_drafters: the draft-model methods have one");
        let config = DraftModelConfig {
            lambda: params.draft_len,
            precut: precut.then(PreCutConfig::default),
            reuse: reuse.then(TokenCacheConfig::default),
            vocab: params.draft_vocab,
            sample,
        };
        DraftModel::new(model.clone(), config)
    };
    let at_target = |inner: DraftModel<B>| -> Result<Option<Box<dyn Proposer>>, DecodeError> {
        Ok(Some(Box::new(TokenCache::new(inner, TokenCacheConfig::default())?)))
    };
    let with_model: Option<Box<dyn Proposer>> = match method {
        Method::DraftModel => Some(Box::new(draft_model(false, false)?)),
        Method::PreCut => Some(Box::new(draft_model(true, false)?)),
        Method::PostUseDraft => Some(Box::new(draft_model(false, true)?)),
        Method::PostUse => at_target(draft_model(false, true)?)?,
        Method::PostUsePreCut => at_target(draft_model(true, true)?)?,
        Method::TokenCache if drafter.is_some() => at_target(draft_model(false, false)?)?,
        Method::TokenCache => {
            let inner = PromptLookup::new(params.lookup_ngram, 1, params.draft_len);
            return Ok(Some(Box::new(TokenCache::new(inner, TokenCacheConfig::default())?)));
        }
        m => return build_proposer(m, params),
    };
    Ok(with_model.map(|p| with_copy(method, params, p)))
}

/// The context's continuation drafted beside a drafting model's tokens ([`WithCopy`]), as
/// `copy_context` asks; by default on for ReDrafter under `auto` (its beams and the copy fail
/// in different places: 1.23× → 1.65× `ar` on MT-Bench, session 46), off under `fixed` (the
/// paper's beams alone) and for the draft-model methods (a 0.5B drafter already predicts what
/// the copy would: 1.79× with it and without on HumanEval, session 47).
fn copy_context(method: Method, params: &MethodParams) -> Option<CopyContext> {
    let default = method == Method::ReDrafter && params.draft_policy == DraftPolicy::Auto;
    let copy = params.copy_context.unwrap_or(default);
    copy.then_some(CopyContext { max_ngram: params.lookup_ngram, len: params.draft_len })
}

/// `proposer` (of a method that drafts with a model) with the context's continuation beside
/// it where [`copy_context`] says so.
fn with_copy(method: Method, params: &MethodParams, proposer: Box<dyn Proposer>) -> Box<dyn Proposer> {
    debug_assert!(method.needs() != Needs::Nothing || method == Method::TokenCache);
    match copy_context(method, params) {
        Some(copy) => Box::new(WithCopy::new(proposer, copy)),
        None => proposer,
    }
}

/// How a draft model's weights are held ([`MethodParams::draft_weights`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DraftWeights {
    /// The file's formats, as for a target.
    Keep,
    /// Re-quantized to Q8_0 where stored wider (f16/f32 checkpoints).
    Q8_0,
    /// Re-quantized to Q4_1 where stored wider.
    Q4_1,
    /// Re-quantized to Q4_0 where stored wider.
    Q4_0,
}

impl DraftWeights {
    /// The block format to re-quantize to (`None`: keep).
    pub fn format(self) -> Option<QFormat> {
        match self {
            Self::Keep => None,
            Self::Q8_0 => Some(QFormat::Q8_0),
            Self::Q4_1 => Some(QFormat::Q4_1),
            Self::Q4_0 => Some(QFormat::Q4_0),
        }
    }
}

draftsmith_core::value_names!(DraftWeights, "draft weights", { Keep => "keep", Q8_0 => "q8_0", Q4_1 => "q4_1", Q4_0 => "q4_0" });

/// How a draft model picks its draft tokens when the generation samples
/// ([`MethodParams::draft_tokens`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DraftTokens {
    /// The drafter's likeliest token.
    Argmax,
    /// Drawn from the drafter's processed distribution (speculative sampling).
    Sample,
}

draftsmith_core::value_names!(DraftTokens, "draft tokens", { Argmax => "argmax", Sample => "sample" });

/// Builds the proposer of a method that needs no drafter; `ar` has none (`Ok(None)`).
pub fn build_proposer(method: Method, params: &MethodParams) -> Result<Option<Box<dyn Proposer>>, DecodeError> {
    let positive = |param: &'static str, value: usize| {
        if value == 0 {
            Err(DecodeError::InvalidParam {
                method: method.to_string(),
                param,
                value: value.to_string(),
                problem: "must be at least 1".into(),
            })
        } else {
            Ok(value)
        }
    };
    match method {
        Method::Ar => Ok(None),
        Method::PromptLookup => Ok(Some(Box::new(PromptLookup::new(
            positive("lookup_ngram", params.lookup_ngram)?,
            1,
            positive("draft_len", params.draft_len)?,
        )))),
        Method::NgramTrie => {
            let config = NgramTrieConfig {
                n: params.ngram_n,
                prefix_len: params.ngram_lp,
                num_draft: params.num_draft,
                update_with_output: params.ngram_update_output,
                ..NgramTrieConfig::default()
            };
            let trie = NgramTrie::new(config).map_err(|e| DecodeError::InvalidParam {
                method: method.to_string(),
                param: "ngram_n/ngram_lp/num_draft",
                value: format!("{}/{}/{}", params.ngram_n, params.ngram_lp, params.num_draft),
                problem: e.to_string(),
            })?;
            Ok(Some(Box::new(trie)))
        }
        m => Err(DecodeError::InvalidParam {
            method: m.to_string(),
            param: "drafter",
            value: "not loaded".into(),
            problem: "this method needs a drafter (--draft-model or --drafter)".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_parameter_is_read_by_some_method_and_every_name_read_is_a_parameter() {
        let json = serde_json::to_value(MethodParams::default()).unwrap();
        let fields: Vec<&str> = json.as_object().unwrap().keys().map(String::as_str).collect();
        let read: Vec<&str> = Method::ALL.into_iter().flat_map(params_read).collect();
        for name in &read {
            assert!(fields.contains(name), "`{name}` is not a MethodParams field");
        }
        for field in fields {
            assert!(read.contains(&field), "no method reads `{field}`");
        }
        assert_eq!(params_read(Method::Ar), ["penalty", "penalty_window"]);
        assert!(params_read(Method::TokenCache).contains(&"draft_model"), "a draft model when given");
        assert!(!params_read(Method::PromptLookup).contains(&"beam_width"));
    }

    #[test]
    fn redrafter_copies_the_context_under_auto_and_other_drafters_only_when_asked() {
        let copy = |method, draft_policy, copy_context| {
            let params = MethodParams { draft_policy, copy_context, draft_len: 7, ..MethodParams::default() };
            super::copy_context(method, &params)
        };
        let on = Some(CopyContext { max_ngram: MethodParams::default().lookup_ngram, len: 7 });
        assert_eq!(copy(Method::ReDrafter, DraftPolicy::Auto, None), on);
        assert_eq!(copy(Method::ReDrafter, DraftPolicy::Fixed, None), None);
        assert_eq!(copy(Method::ReDrafter, DraftPolicy::Fixed, Some(true)), on);
        assert_eq!(copy(Method::ReDrafter, DraftPolicy::Auto, Some(false)), None);
        for method in [Method::DraftModel, Method::PostUsePreCut] {
            assert_eq!(copy(method, DraftPolicy::Auto, None), None);
            assert_eq!(copy(method, DraftPolicy::Auto, Some(true)), on);
        }
    }

    #[test]
    fn every_method_without_a_drafter_builds_and_one_with_a_drafter_says_so() {
        let params = MethodParams::default();
        for method in Method::ALL.into_iter().filter(|m| m.needs() == Needs::Nothing && *m != Method::TokenCache) {
            let proposer = build_proposer(method, &params).unwrap();
            assert_eq!(proposer.is_none(), method.is_ar());
            if let Some(p) = proposer {
                assert_eq!(p.name(), method.name(), "records use the registry name");
            }
        }
        let err = build_proposer(Method::DraftModel, &params).err().unwrap().to_string();
        assert!(err.contains("draft-model") && err.contains("drafter"), "{err}");
        let err =
            build_proposer(Method::PromptLookup, &MethodParams { draft_len: 0, ..params }).err().unwrap().to_string();
        assert!(err.contains("draft_len"), "{err}");
    }

    #[test]
    fn a_method_without_the_drafter_it_drafts_with_is_refused_by_name() {
        let none = Drafters::<burn::backend::Flex>::none();
        let params = MethodParams { drafter: Some("ckpt".into()), ..MethodParams::default() };
        for (method, param, what) in [
            (Method::TokenSwift, "drafter", "TokenSwift heads"),
            (Method::ReDrafter, "drafter", "trained drafter"),
            (Method::DraftModel, "draft_model", "--draft-model"),
            (Method::PostUsePreCut, "draft_model", "--draft-model"),
        ] {
            let err = check_drafters(method, &params, none).unwrap_err().to_string();
            assert!(err.contains(param) && err.contains(what), "{method}: {err}");
        }
        for method in [Method::Ar, Method::PromptLookup, Method::NgramTrie, Method::TokenCache] {
            assert!(check_drafters(method, &params, none).is_ok(), "{method} drafts without one");
        }
    }

    #[test]
    fn drafts_and_trees_beyond_their_bounds_are_refused_by_name() {
        let long = MethodParams { draft_len: MAX_DRAFT_LEN + 1, draft_model: Some("d".into()), ..Default::default() };
        for method in [Method::PromptLookup, Method::TokenCache, Method::DraftModel, Method::PostUsePreCut] {
            let err = validate_method(method, &long).unwrap_err().to_string();
            assert!(err.contains("draft_len") && err.contains("at most 256"), "{method}: {err}");
            let ok = MethodParams { draft_len: MAX_DRAFT_LEN, ..long.clone() };
            assert!(validate_method(method, &ok).is_ok(), "{method}: 256 is allowed");
        }
        let ts = |tree: Vec<usize>| MethodParams { tree, drafter: Some("h".into()), ..Default::default() };
        let err = validate_method(Method::TokenSwift, &ts(vec![1, 300, 300, 300])).unwrap_err().to_string();
        assert!(err.contains("tree") && err.contains("27090301 nodes"), "{err}");
        let err = validate_method(Method::TokenSwift, &ts(vec![usize::MAX; 4])).unwrap_err().to_string();
        assert!(err.contains("at most 4096"), "{err}");
        assert!(validate_method(Method::TokenSwift, &ts(vec![1, 9, 9, 9])).is_ok(), "the recipes' largest tree");
        let rd = |beam_width: usize, beam_length: usize| MethodParams {
            beam_width,
            beam_length,
            drafter: Some("r".into()),
            ..Default::default()
        };
        let err = validate_method(Method::ReDrafter, &rd(1, 100_000)).unwrap_err().to_string();
        assert!(err.contains("beam_length") && err.contains("at most 257"), "{err}");
        let err = validate_method(Method::ReDrafter, &rd(usize::MAX, 5)).unwrap_err().to_string();
        assert!(err.contains("beam_width") && err.contains("at most 4096"), "{err}");
        assert!(validate_method(Method::ReDrafter, &rd(64, 5)).is_ok(), "the recipes' widest beams");
        for penalty in [-1.0, 0.0, f64::NAN, f64::INFINITY] {
            let bad = MethodParams { penalty, ..MethodParams::default() };
            let err = validate_method(Method::Ar, &bad).unwrap_err().to_string();
            assert!(err.contains("repetition_penalty"), "{penalty}: {err}");
        }
    }

    #[test]
    fn draft_weights_read_and_write_as_the_recipe_and_flag_values() {
        for (name, w, format) in [
            ("keep", DraftWeights::Keep, None),
            ("q8_0", DraftWeights::Q8_0, Some(QFormat::Q8_0)),
            ("q4_1", DraftWeights::Q4_1, Some(QFormat::Q4_1)),
            ("q4_0", DraftWeights::Q4_0, Some(QFormat::Q4_0)),
        ] {
            assert_eq!(name.parse::<DraftWeights>(), Ok(w));
            assert_eq!(w.to_string(), name);
            assert_eq!(w.format(), format);
            let params: MethodParams = serde_json::from_str(&format!(r#"{{"draft_weights": "{name}"}}"#)).unwrap();
            assert_eq!(params.draft_weights, w, "recipe key draft_weights = {name:?}");
        }
        assert_eq!(MethodParams::default().draft_weights, DraftWeights::Q4_0, "drafters at 4 bits unless asked");
        let err = "q5_0".parse::<DraftWeights>().unwrap_err();
        assert!(err.contains("q5_0") && err.contains("keep, q8_0, q4_1, q4_0"), "{err}");
    }

    #[test]
    fn setting_values_read_their_names_and_refuse_others_by_the_list() {
        use crate::methods::tokenswift::KvMode;
        use crate::spec::DraftPolicy;
        for (name, v) in [("auto", DraftPolicy::Auto), ("fixed", DraftPolicy::Fixed)] {
            assert_eq!((name.parse::<DraftPolicy>(), v.to_string()), (Ok(v), name.to_string()));
        }
        for (name, v) in [
            ("full", KvMode::Full),
            ("partial-static", KvMode::PartialStatic),
            ("dynamic", KvMode::Dynamic),
            ("verify-pass", KvMode::VerifyPass),
        ] {
            assert_eq!((name.parse::<KvMode>(), v.to_string()), (Ok(v), name.to_string()));
        }
        assert_eq!("partial".parse::<KvMode>(), Ok(KvMode::PartialStatic), "an alias reads, never written");
        assert_eq!("x".parse::<DraftPolicy>().unwrap_err(), "unknown draft policy `x` (auto, fixed)");
        assert_eq!("x".parse::<DraftWeights>().unwrap_err(), "unknown draft weights `x` (keep, q8_0, q4_1, q4_0)");
        assert_eq!("x".parse::<DraftTokens>().unwrap_err(), "unknown draft tokens `x` (argmax, sample)");
        assert_eq!(
            "x".parse::<KvMode>().unwrap_err(),
            "unknown KV mode `x` (full, partial-static, dynamic, verify-pass)"
        );
    }

    #[test]
    fn draft_tokens_read_and_write_as_the_recipe_and_flag_values() {
        for (name, t) in [("argmax", DraftTokens::Argmax), ("sample", DraftTokens::Sample)] {
            assert_eq!(name.parse::<DraftTokens>(), Ok(t));
            assert_eq!(t.to_string(), name);
            let params: MethodParams = serde_json::from_str(&format!(r#"{{"draft_tokens": "{name}"}}"#)).unwrap();
            assert_eq!(params.draft_tokens, t, "recipe key draft_tokens = {name:?}");
        }
        assert_eq!(MethodParams::default().draft_tokens, DraftTokens::Sample, "drafts drawn when sampling");
        let err = "top1".parse::<DraftTokens>().unwrap_err();
        assert!(err.contains("top1") && err.contains("argmax, sample"), "{err}");
    }
}
