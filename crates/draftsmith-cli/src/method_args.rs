//! The method-parameter flags shared by `generate` and `eval` (the recipe keys), and the
//! drafters they name, loaded and checked against the target.

use anyhow::Result;
use burn::tensor::backend::Backend;
use clap::Args;
use draftsmith_decode::methods::KvMode;
use draftsmith_decode::{DraftPolicy, LoadedDrafters, MethodParams};
use draftsmith_model::LoadedModel;

use crate::model_arg::ModelArgs;

/// Method parameters: the recipe keys, in kebab case. Each method uses the ones it needs.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Method parameters")]
pub struct MethodParamArgs {
    /// Draft length of chain methods (prompt-lookup).
    #[arg(long, default_value_t = MethodParams::default().draft_len)]
    pub draft_len: usize,
    /// Longest n-gram prompt lookup tries to match (down to 1).
    #[arg(long, default_value_t = MethodParams::default().lookup_ngram)]
    pub lookup_ngram: usize,
    /// N-gram trie: sliding-window length n (the paper's best: 13).
    #[arg(long, default_value_t = MethodParams::default().ngram_n)]
    pub ngram_n: usize,
    /// N-gram trie: maximum prefix length L_p (the paper's best: 3).
    #[arg(long, default_value_t = MethodParams::default().ngram_lp)]
    pub ngram_lp: usize,
    /// N-gram trie: most draft nodes per step.
    #[arg(long, default_value_t = MethodParams::default().num_draft)]
    pub num_draft: usize,
    /// N-gram trie: also index the generated tokens (the paper indexes the prompt only).
    #[arg(long)]
    pub ngram_update_output: bool,
    /// Drafter for `draft-model`, `precut` and `token-cache`: a model with the target's
    /// tokenizer (a .gguf, HF directory, hf:id or fetch name, e.g. qwen2.5-coder-0.5b).
    #[arg(long)]
    pub draft_model: Option<String>,
    /// Trained drafter directory for `redrafter` or `tokenswift` (`drafter.safetensors` +
    /// `config.json`, as written by `draftsmith train redrafter|tokenswift` / `draftsmith export`).
    #[arg(long)]
    pub drafter: Option<String>,
    /// ReDrafter: beams per step.
    #[arg(long, default_value_t = MethodParams::default().beam_width)]
    pub beam_width: usize,
    /// ReDrafter: tokens per beam, counting the target's guaranteed token.
    #[arg(long, default_value_t = MethodParams::default().beam_length)]
    pub beam_length: usize,
    /// ReDrafter: verify every beam as its own chain instead of packing shared prefixes into a
    /// tree (the dynamic-tree-attention ablation).
    #[arg(long)]
    pub no_tree_attention: bool,
    /// TokenSwift: candidates per depth, p0's first (`1,3,3,3`; `3,3,3,3`, `1,9,9,9`).
    #[arg(long, value_delimiter = ',', default_values_t = MethodParams::default().tree)]
    pub tree: Vec<usize>,
    /// TokenSwift: n-gram continuations added per step (0 = no token reutilization).
    #[arg(long, default_value_t = MethodParams::default().ngram_topk)]
    pub ngram_topk: usize,
    /// TokenSwift: the draft forward's KV cache: full, partial-static or dynamic.
    #[arg(long, default_value_t = MethodParams::default().kv_mode)]
    pub kv_mode: KvMode,
    /// TokenSwift: draft KV budget B in tokens (partial modes).
    #[arg(long, default_value_t = MethodParams::default().kv_budget)]
    pub kv_budget: usize,
    /// TokenSwift: sink tokens S always kept in the draft cache.
    #[arg(long, default_value_t = MethodParams::default().kv_sinks)]
    pub kv_sinks: usize,
    /// Contextual / repetition penalty θ of the target's greedy decoding, for every method
    /// (1 = off).
    #[arg(long, default_value_t = MethodParams::default().penalty)]
    pub penalty: f64,
    /// The penalty looks at the last W tokens (0 = the whole context).
    #[arg(long, default_value_t = MethodParams::default().penalty_window)]
    pub penalty_window: usize,
    /// `auto`: each step verifies only the part of the draft with the best expected tokens per
    /// second (cost model calibrated on this machine, acceptance learned online); `fixed`: the
    /// method's own draft settings.
    #[arg(long, default_value_t = MethodParams::default().draft_policy)]
    pub draft_policy: DraftPolicy,
}

impl From<&MethodParams> for MethodParamArgs {
    fn from(p: &MethodParams) -> Self {
        Self {
            draft_len: p.draft_len,
            lookup_ngram: p.lookup_ngram,
            ngram_n: p.ngram_n,
            ngram_lp: p.ngram_lp,
            num_draft: p.num_draft,
            ngram_update_output: p.ngram_update_output,
            draft_model: p.draft_model.clone(),
            drafter: p.drafter.clone(),
            beam_width: p.beam_width,
            beam_length: p.beam_length,
            no_tree_attention: !p.tree_attention,
            tree: p.tree.clone(),
            ngram_topk: p.ngram_topk,
            kv_mode: p.kv_mode,
            kv_budget: p.kv_budget,
            kv_sinks: p.kv_sinks,
            penalty: p.penalty,
            penalty_window: p.penalty_window,
            draft_policy: p.draft_policy,
        }
    }
}

impl MethodParamArgs {
    pub fn params(&self) -> MethodParams {
        MethodParams {
            draft_len: self.draft_len,
            lookup_ngram: self.lookup_ngram,
            ngram_n: self.ngram_n,
            ngram_lp: self.ngram_lp,
            num_draft: self.num_draft,
            ngram_update_output: self.ngram_update_output,
            draft_model: self.draft_model.clone(),
            drafter: self.drafter.clone(),
            beam_width: self.beam_width,
            beam_length: self.beam_length,
            tree_attention: !self.no_tree_attention,
            tree: self.tree.clone(),
            ngram_topk: self.ngram_topk,
            kv_mode: self.kv_mode,
            kv_budget: self.kv_budget,
            kv_sinks: self.kv_sinks,
            penalty: self.penalty,
            penalty_window: self.penalty_window,
            draft_policy: self.draft_policy,
        }
    }

    /// Loads the drafters that are named: a draft model (checked to share the target's
    /// tokenizer) and a trained drafter (checked to be trained for this target; [`LoadedDrafters::load`]).
    pub fn load_drafters<B: Backend>(
        &self,
        target: &LoadedModel<B>,
        model: &ModelArgs,
        device: &B::Device,
    ) -> Result<LoadedDrafters<B>> {
        let draft_model = match &self.draft_model {
            Some(spec) => Some(ModelArgs { model: spec.clone(), ..model.clone() }.load::<B>(device)?),
            None => None,
        };
        Ok(LoadedDrafters::load(target, draft_model, self.drafter.as_deref().map(std::path::Path::new), device)?)
    }
}
