//! The lossless check on backends whose kernels are not batch-invariant.
//!
//! On the CPU path a token gets bit-identical logits whether it is decoded alone or verified
//! inside a tree, so every method's output must equal `ar`'s exactly ([`LosslessCheck::Exact`]).
//! burn's dense kernels (CUDA, wgpu, and the CPU with `--weights dense`) reduce in an order that depends on the batch shape, so the
//! same token's logits differ in the last bits between the two passes, and where `ar`'s top two
//! logits are nearly tied the greedy choice can flip. [`LosslessCheck::NearTie`] measures that
//! drift on the backend itself and sorts every first mismatch:
//!
//! - the drift δ = max |Δlogit| between decoding a continuation token by token and running it
//!   as one multi-token pass (the shape a verification has), over a few of the eval's prompts;
//! - a flip needs the top-2 margin to be below 2δ (each logit moves by at most δ); the bound is
//!   [`NEAR_TIE_FACTOR`]·δ, twice that, because δ is a maximum over a sample, not a proof;
//! - a mismatch where `ar`'s own margin at that position is below the bound is a near-tie
//!   (counted and reported); any other is a real mismatch and fails the run.

use burn::tensor::backend::Backend;
use draftsmith_model::{host_f32, AttentionMask, KvCache, LogitsSelect, Model};
use serde::{Deserialize, Serialize};

use crate::error::EvalError;
use crate::prompts::EncodedPrompt;
use crate::summary::Summary;

/// The near-tie bound in units of the measured drift δ (see the module docs).
pub const NEAR_TIE_FACTOR: f32 = 4.0;
/// Continuation tokens compared per prompt when measuring the drift.
pub const DRIFT_TOKENS: usize = 16;
/// Prompts the drift is measured on.
pub const DRIFT_PROMPTS: usize = 4;

/// How outputs are compared with `ar`'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LosslessCheck {
    /// Token for token, every difference fails (batch-invariant kernels: the CPU path).
    #[default]
    Exact,
    /// Differences at `ar`'s near-ties are counted, not failed (GPU backends).
    NearTie,
}

impl LosslessCheck {
    /// Exact where the engine is batch-invariant ([`Model::batch_invariant`]), near-tie aware
    /// elsewhere (burn's dense kernels: CUDA, wgpu, and the CPU with `--weights dense`).
    pub fn for_model<B: Backend>(model: &Model<B>) -> Self {
        if model.batch_invariant() {
            LosslessCheck::Exact
        } else {
            LosslessCheck::NearTie
        }
    }
}

/// The measured drift and the bound derived from it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct NearTieBound {
    /// Max |Δlogit| between sequential decoding and one multi-token pass.
    pub drift: f32,
    /// Margins below this are near-ties: [`NEAR_TIE_FACTOR`] · `drift`.
    pub bound: f32,
    /// Logit rows compared.
    pub rows: usize,
}

/// Measures the drift on up to [`DRIFT_PROMPTS`] prompts, each followed by its first
/// [`DRIFT_TOKENS`] continuation tokens (`continuation(prompt)`, normally `ar`'s output).
pub fn measure_bound<B: Backend>(
    model: &Model<B>,
    prompts: &[EncodedPrompt],
    continuation: &dyn Fn(&EncodedPrompt) -> Option<Vec<u32>>,
) -> Result<NearTieBound, EvalError> {
    let (mut drift, mut rows) = (0.0f32, 0);
    for p in prompts.iter().take(DRIFT_PROMPTS) {
        let Some(mut tail) = continuation(p) else { continue };
        tail.truncate(DRIFT_TOKENS);
        if tail.is_empty() {
            continue;
        }
        let err = |e| EvalError::Prompt { id: p.id.clone(), source: Box::new(e) };
        let capacity = p.ids.len() + tail.len();
        let prefill = |cache: &mut KvCache<B>| {
            model.forward_hidden(&p.ids, &(0..p.ids.len()).collect::<Vec<_>>(), &AttentionMask::Causal, cache)
        };
        let positions: Vec<usize> = (p.ids.len()..capacity).collect();

        let mut cache = model.new_cache(capacity);
        prefill(&mut cache).map_err(err)?;
        let mut sequential = Vec::new();
        for (t, &pos) in tail.iter().zip(&positions) {
            let out =
                model.forward(&[*t], &[pos], &AttentionMask::Causal, LogitsSelect::All, &mut cache).map_err(err)?;
            sequential.extend(host_f32(out.logits));
        }
        let mut cache = model.new_cache(capacity);
        prefill(&mut cache).map_err(err)?;
        let out =
            model.forward(&tail, &positions, &AttentionMask::Causal, LogitsSelect::All, &mut cache).map_err(err)?;
        let batched = host_f32(out.logits);
        drift = sequential.iter().zip(&batched).map(|(a, b)| (a - b).abs()).fold(drift, f32::max);
        rows += tail.len();
    }
    Ok(NearTieBound { drift, bound: NEAR_TIE_FACTOR * drift, rows })
}

/// `ar`'s top-2 logit margin at output `position`: the prompt and the first `position` output
/// tokens run as one pass, the last row's two largest logits.
pub fn ar_margin<B: Backend>(
    model: &Model<B>,
    prompt: &EncodedPrompt,
    ar_output: &[u32],
    position: usize,
) -> Result<f32, EvalError> {
    let mut ids = prompt.ids.clone();
    ids.extend_from_slice(&ar_output[..position.min(ar_output.len())]);
    let mut cache = model.new_cache(ids.len());
    let positions: Vec<usize> = (0..ids.len()).collect();
    let out = model
        .forward(&ids, &positions, &AttentionMask::Causal, LogitsSelect::Last, &mut cache)
        .map_err(|e| EvalError::Prompt { id: prompt.id.clone(), source: Box::new(e) })?;
    Ok(top2_margin(&host_f32(out.logits)))
}

/// Largest minus second-largest value (infinite with fewer than two).
pub fn top2_margin(logits: &[f32]) -> f32 {
    let (mut first, mut second) = (f32::NEG_INFINITY, f32::NEG_INFINITY);
    for &x in logits {
        if x > first {
            second = first;
            first = x;
        } else if x > second {
            second = x;
        }
    }
    first - second
}

/// Marks each mismatch a near-tie or not (`margin(mismatch)` is `ar`'s margin there) and
/// recomputes every method's and the run's verdict: lossless unless a real mismatch remains.
pub fn classify(
    summary: &mut Summary,
    bound: NearTieBound,
    margin: &mut dyn FnMut(&crate::summary::Mismatch) -> Result<f32, EvalError>,
) -> Result<(), EvalError> {
    for m in summary.mismatches.iter_mut() {
        // A length difference (one output ended) has no competing token: never a near-tie.
        if m.ar_token.is_none() || m.method_token.is_none() {
            continue;
        }
        let value = margin(m)?;
        m.ar_margin = Some(value);
        m.near_tie = value < bound.bound;
    }
    for (name, s) in summary.methods.iter_mut() {
        let own = summary.mismatches.iter().filter(|m| m.method == *name);
        s.near_ties = own.clone().filter(|m| m.near_tie).count();
        s.lossless = s.compared_prompts == s.prompts && own.clone().all(|m| m.near_tie);
    }
    summary.lossless = summary.methods.values().all(|s| s.lossless);
    summary.near_tie_bound = Some(bound);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::tests::record;
    use crate::summary::summarize;
    use draftsmith_decode::Method;

    #[test]
    fn top2_margin_is_the_gap_between_the_two_largest() {
        assert_eq!(top2_margin(&[1.0, 5.0, 3.0, 4.5]), 0.5);
        assert_eq!(top2_margin(&[2.0, 2.0]), 0.0);
    }

    #[test]
    fn near_ties_pass_and_real_mismatches_fail() {
        let records = vec![
            record("p1", "ar", &[1, 2, 3], &[]),
            record("p2", "ar", &[1, 2, 3], &[]),
            record("p1", "prompt-lookup", &[1, 9, 3], &[(1, 2)]),
            record("p2", "prompt-lookup", &[1, 2, 3], &[(2, 3)]),
            record("p1", "ngram-trie", &[1, 2, 7], &[(1, 2)]),
            record("p2", "ngram-trie", &[1, 2, 3], &[(2, 3)]),
        ];
        let methods = [Method::Ar, Method::PromptLookup, Method::NgramTrie];
        let mut summary = summarize(&records, &methods);
        assert!(!summary.lossless);
        let bound = NearTieBound { drift: 0.01, bound: 0.04, rows: 16 };
        // pl's flip is at a margin of 0.01 (a near-tie), trie's at 3.0 (real).
        classify(&mut summary, bound, &mut |m| Ok(if m.method == Method::PromptLookup { 0.01 } else { 3.0 })).unwrap();
        assert!(
            summary.methods[&Method::PromptLookup].lossless && summary.methods[&Method::PromptLookup].near_ties == 1
        );
        assert!(!summary.methods[&Method::NgramTrie].lossless && summary.methods[&Method::NgramTrie].near_ties == 0);
        assert!(!summary.lossless);
        assert_eq!(summary.mismatches[0].ar_margin, Some(0.01));
        assert_eq!(summary.near_tie_bound, Some(bound));
    }
}
