//! `redrafter` (ReDrafter, apple/ml-recurrent-drafter semantics): beam search with the RNN
//! drafter from the target's hidden state and its guaranteed token, beams packed into a prefix
//! tree (dynamic tree attention) or verified as independent chains (`tree_attention = false`).

use std::path::Path;
use std::sync::{Arc, OnceLock};

use burn::tensor::{backend::Backend, Int, Tensor, TensorData};
use draftsmith_core::beams::{beam_search, pack_beams, BeamDrafter, BeamSearchConfig, Beams};
use draftsmith_core::DraftTree;
use draftsmith_heads::redrafter::{load_redrafter, DrafterFile, HeadKind, ReDrafter};
use draftsmith_heads::TargetIdentity;
use draftsmith_model::layers::Linear;
use draftsmith_model::{Activations, Model};

use super::redrafter_host::{HostReDrafter, DRAFTER_WEIGHTS};
use crate::error::DecodeError;
use crate::method::Method;
use crate::spec::{probability_class, DepthStop, DraftContext, DraftCost, HiddenState, Proposer};

/// A ReDrafter drafter loaded for one target.
#[derive(Debug, Clone)]
pub struct LoadedReDrafter<B: Backend> {
    pub drafter: ReDrafter<B>,
    pub file: DrafterFile,
    /// The drafter's layers for host drafting, quantized on first use (shared by clones);
    /// `None` when they cannot be (a layer width not a multiple of 32).
    host: Arc<OnceLock<Option<Arc<HostReDrafter<B>>>>>,
}

impl<B: Backend> LoadedReDrafter<B> {
    /// Loads `dir` (`drafter.safetensors` + `config.json`), refusing a drafter trained for
    /// another target.
    pub fn load(dir: &Path, target: &TargetIdentity, device: &B::Device) -> Result<Self, DecodeError> {
        let (drafter, file) = load_redrafter::<B>(dir, Some(target), device)?;
        Ok(Self::new(drafter, file))
    }

    /// A drafter already in memory.
    pub fn new(drafter: ReDrafter<B>, file: DrafterFile) -> Self {
        Self { drafter, file, host: Arc::default() }
    }

    /// The host-kernel form of the drafter (built once).
    fn host(&self) -> Option<Arc<HostReDrafter<B>>> {
        self.host.get_or_init(|| HostReDrafter::new(&self.drafter).ok().map(Arc::new)).clone()
    }
}

/// Beam-search settings of the `redrafter` method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReDrafterSettings {
    pub beam_width: usize,
    /// Counts the target's guaranteed token: `beam_length − 1` tokens are drafted per beam.
    pub beam_length: usize,
    /// Pack shared beam prefixes into one tree (dynamic tree attention); `false` verifies every
    /// beam as its own chain (the ablation).
    pub tree_attention: bool,
}

/// Statistics for the tree-attention compression figure.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PackingStats {
    pub steps: usize,
    /// Σ beam_width × beam_length.
    pub unpacked_tokens: usize,
    /// Σ 1 + packed tree nodes.
    pub packed_tokens: usize,
}

/// The `redrafter` proposer.
pub struct ReDrafterProposer<B: Backend> {
    drafter: ReDrafter<B>,
    /// Drafting on the target's host kernels, with its activation mode, when the target runs
    /// the quantized CPU path.
    host: Option<(Arc<HostReDrafter<B>>, Activations)>,
    target: Model<B>,
    head: HeadKind,
    /// The drafter's draft vocabulary, if it has one.
    draft_vocab: Option<DraftVocab<B>>,
    settings: ReDrafterSettings,
    pub packing: PackingStats,
    last_cost: DraftCost,
    /// A draft policy's limit on the next proposal's drafted tokens per beam
    /// ([`Proposer::limit_depth`]).
    depth_limit: Option<usize>,
    /// A draft policy's rule for stopping the next proposal's search early
    /// ([`Proposer::set_depth_stop`]).
    depth_stop: Option<DepthStop>,
    /// The node class of every node of the last tree: the drafter's probability of the token
    /// ([`probability_class`]).
    classes: Vec<usize>,
}

/// Refuses a `beam_width` above the number of tokens `loaded` drafts from (its draft vocabulary,
/// or the whole vocabulary without one): each beam starts from its own token of the first
/// step's top entries. [`check_drafters`](crate::check_drafters) runs it too, so an eval or a
/// recipe's dry run refuses before decoding.
pub(crate) fn check_beam_width<B: Backend>(loaded: &LoadedReDrafter<B>, beam_width: usize) -> Result<(), DecodeError> {
    let tokens = loaded.file.draft_vocab.as_ref().map_or(loaded.file.vocab_size, |ids| ids.len());
    if beam_width <= tokens {
        return Ok(());
    }
    Err(DecodeError::InvalidParam {
        method: Method::ReDrafter.to_string(),
        param: "beam_width",
        value: beam_width.to_string(),
        problem: format!(
            "at most the size of the drafter's draft vocabulary, {tokens}: each beam starts from its own token"
        ),
    })
}

impl<B: Backend> ReDrafterProposer<B> {
    /// Whether drafting runs on the target's host kernels (the target runs the quantized CPU
    /// path) rather than through burn.
    pub fn drafts_on_host(&self) -> bool {
        self.host.is_some()
    }

    pub fn new(
        target: &Model<B>,
        loaded: &LoadedReDrafter<B>,
        settings: ReDrafterSettings,
    ) -> Result<Self, DecodeError> {
        let bad = |param: &'static str, value: usize, problem: &str| DecodeError::InvalidParam {
            method: Method::ReDrafter.to_string(),
            param,
            value: value.to_string(),
            problem: problem.into(),
        };
        if settings.beam_width == 0 {
            return Err(bad("beam_width", 0, "must be at least 1"));
        }
        if settings.beam_length < 2 {
            return Err(bad(
                "beam_length",
                settings.beam_length,
                "must be at least 2 (it counts the target's guaranteed token)",
            ));
        }
        let c = target.config();
        if loaded.file.vocab_size != c.vocab_size || loaded.file.hidden_size != c.hidden_size {
            return Err(DecodeError::Drafter(format!(
                "drafter vocab {} / hidden {} do not fit the target (vocab {} / hidden {})",
                loaded.file.vocab_size, loaded.file.hidden_size, c.vocab_size, c.hidden_size
            )));
        }
        let draft_vocab = match &loaded.file.draft_vocab {
            None => None,
            Some(ids) => Some(DraftVocab {
                ids: ids.as_slice().into(),
                rows: match loaded.file.head {
                    HeadKind::Tied => Some(
                        target
                            .lm_head_rows(ids, DRAFTER_WEIGHTS)
                            .map_err(|e| DecodeError::Drafter(format!("draft vocabulary: {e}")))?,
                    ),
                    HeadKind::Full => None,
                },
            }),
        };
        check_beam_width(loaded, settings.beam_width)?;
        // The quantized CPU path always has a quantized LM head, so the draft vocabulary's rows
        // (`lm_head_rows`) and the tied projection run on the host kernels too.
        let host = target.activations().and_then(|mode| loaded.host().map(|h| (h, mode)));
        Ok(Self {
            drafter: loaded.drafter.clone(),
            host,
            target: target.clone(),
            head: loaded.file.head,
            draft_vocab,
            settings,
            packing: PackingStats::default(),
            last_cost: DraftCost::default(),
            depth_limit: None,
            depth_stop: None,
            classes: Vec::new(),
        })
    }
}

/// The tokens a drafter may propose (strictly increasing, as the drafter file guarantees),
/// and for a tied head the target's LM head rows of just those tokens (so drafting multiplies
/// by them alone, not by the whole vocabulary). The beam search ranks these entries alone
/// ([`BeamDrafter::vocabulary`]): no full-vocabulary row is built or scanned.
#[derive(Debug, Clone)]
struct DraftVocab<B: Backend> {
    ids: Arc<[u32]>,
    rows: Option<Linear<B>>,
}

impl<B: Backend> DraftVocab<B> {
    /// Logit rows over `ids` from the drafter's output: `out` is `[n, hidden]` for a tied head
    /// (projected onto the vocabulary's rows) or already `[n, vocab]` logits for a full head.
    fn logits(&self, out: Tensor<B, 2>, vocab: usize) -> Vec<Vec<f32>> {
        match &self.rows {
            Some(rows) => self.split(draftsmith_model::host_f32(rows.forward(out))),
            None => self.select(&draftsmith_model::host_f32(out), vocab),
        }
    }

    /// [`DraftVocab::logits`] on host rows (`n` of them), the rows' layer run with `mode`.
    fn logits_host(&self, mode: Activations, out: &[f32], n: usize, vocab: usize) -> Vec<Vec<f32>> {
        match &self.rows {
            Some(rows) => {
                self.split(rows.forward_host(mode, out, n).expect("a quantized target's LM head rows are quantized"))
            }
            None => self.select(out, vocab),
        }
    }

    /// The vocabulary's columns of full logit rows, in `ids` order.
    fn select(&self, logits: &[f32], vocab: usize) -> Vec<Vec<f32>> {
        logits.chunks(vocab).map(|row| self.ids.iter().map(|&t| row[t as usize]).collect()).collect()
    }

    /// `[n, ids.len()]` logits as rows.
    fn split(&self, kept: Vec<f32>) -> Vec<Vec<f32>> {
        kept.chunks(self.ids.len()).map(<[f32]>::to_vec).collect()
    }
}

/// One beam search's drafter state: the context row and the RNN state of every live beam,
/// as burn tensors or on the host.
enum SearchState<B: Backend> {
    /// `context` `[1, hidden]`, `state` `[beams, hidden]`.
    Burn { context: Tensor<B, 2>, state: Tensor<B, 2> },
    /// The same rows in host memory, for the host-kernel drafter.
    Host { drafter: Arc<HostReDrafter<B>>, mode: Activations, context: Vec<f32>, state: Vec<f32> },
}

/// One beam search's drafter.
struct Search<'a, B: Backend> {
    p: &'a ReDrafterProposer<B>,
    state: SearchState<B>,
    /// Where to stop: asked with the node classes of the best beam so far.
    stop: Option<DepthStop>,
}

impl<B: Backend> Search<'_, B> {
    fn logits(&mut self, parents: &[usize], tokens: &[u32]) -> Vec<Vec<f32>> {
        let n = tokens.len();
        let vocab = self.p.target.config().vocab_size;
        match &mut self.state {
            SearchState::Host { drafter, mode, context, state } => {
                let hidden = context.len();
                let prev: Vec<f32> =
                    parents.iter().flat_map(|&p| &state[p * hidden..(p + 1) * hidden]).copied().collect();
                *state = drafter.next_state(*mode, &prev, &self.p.target.embed_tokens_host(tokens), n);
                let out = drafter.head(*mode, context, state, n);
                if let Some(draft_vocab) = &self.p.draft_vocab {
                    return draft_vocab.logits_host(*mode, &out, n, vocab);
                }
                let logits = match self.p.head {
                    HeadKind::Full => out,
                    HeadKind::Tied => {
                        self.p.target.project_to_vocab_host(&out, n).expect("the host path has a quantized LM head")
                    }
                };
                logits.chunks(vocab).map(<[f32]>::to_vec).collect()
            }
            SearchState::Burn { context, state } => {
                let device = context.device();
                let ids = |v: Vec<i32>| Tensor::<B, 1, Int>::from_data(TensorData::new(v, [n]), &device);
                let prev = state.clone().select(0, ids(parents.iter().map(|&p| p as i32).collect()));
                *state = self.p.drafter.next_state(prev, self.p.target.embed_tokens(tokens));
                let context = context.clone().expand([n, context.dims()[1]]);
                let out = self.p.drafter.head(context, state.clone());
                if let Some(draft_vocab) = &self.p.draft_vocab {
                    // A drafter trained on a draft vocabulary proposes nothing outside it.
                    return draft_vocab.logits(out, vocab);
                }
                let logits = match self.p.head {
                    HeadKind::Full => out,
                    HeadKind::Tied => self.p.target.project_to_vocab(out),
                };
                draftsmith_model::host_f32(logits).chunks(vocab).map(<[f32]>::to_vec).collect()
            }
        }
    }
}

impl<B: Backend> BeamDrafter for Search<'_, B> {
    fn start(&mut self, g0: u32) -> Vec<f32> {
        self.logits(&[0], &[g0]).pop().expect("one row")
    }

    fn step(&mut self, parents: &[usize], tokens: &[u32]) -> Vec<Vec<f32>> {
        self.logits(parents, tokens)
    }

    fn vocabulary(&self) -> Option<Arc<[u32]>> {
        self.p.draft_vocab.as_ref().map(|v| v.ids.clone())
    }

    fn keep_going(&mut self, live: &Beams) -> bool {
        self.stop.as_ref().is_none_or(|rule| rule.more(&node_classes(&live.log_probs[0]).collect::<Vec<_>>()))
    }
}

impl<B: Backend> Proposer for ReDrafterProposer<B> {
    fn name(&self) -> &str {
        Method::ReDrafter.name()
    }

    fn draft_len(&self) -> Option<usize> {
        Some(self.settings.beam_length - 1)
    }

    fn depth_range(&self) -> Option<usize> {
        // One drafter step per drafted token of a beam.
        Some(self.settings.beam_length - 1)
    }

    fn limit_depth(&mut self, depth: usize) {
        self.depth_limit = Some(depth.max(1));
    }

    fn set_depth_stop(&mut self, rule: DepthStop) -> bool {
        self.depth_stop = Some(rule);
        true
    }

    fn wants_hidden(&self) -> Option<HiddenState> {
        Some(HiddenState::Final)
    }

    fn last_cost(&self) -> Option<DraftCost> {
        Some(self.last_cost)
    }

    /// The drafter's probability of each node's token, as a class.
    fn node_classes(&self, tree: &DraftTree) -> Option<Vec<usize>> {
        (tree.len() == self.classes.len()).then(|| self.classes.clone())
    }

    fn pruned(&mut self, keep: &[usize]) {
        self.classes = keep.iter().map(|&i| self.classes[i]).collect();
    }

    fn propose(&mut self, ctx: &DraftContext<'_>) -> Result<DraftTree, crate::DecodeError> {
        self.last_cost = DraftCost::default();
        let Some(hidden) = ctx.hidden else {
            return Err(crate::DecodeError::Drafter("ReDrafter was given no target hidden state".into()));
        };
        let device = self.target.device().clone();
        let h = hidden.len();
        let g0 = *ctx.tokens.last().expect("a context has at least one token");
        // The reference warps to the top 50 tokens; wider beams widen the warp so that every
        // beam can hold a distinct candidate.
        let top_k = BeamSearchConfig::DEFAULT_TOP_K.max(self.settings.beam_width);
        let length = self.settings.beam_length.min(self.depth_limit.take().map_or(usize::MAX, |d| d + 1));
        let cfg = BeamSearchConfig { width: self.settings.beam_width, length, top_k };
        let beams = {
            let state = match &self.host {
                Some((drafter, mode)) => SearchState::Host {
                    drafter: drafter.clone(),
                    mode: *mode,
                    context: hidden.to_vec(),
                    state: vec![0.0; h],
                },
                None => SearchState::Burn {
                    context: Tensor::from_data(TensorData::new(hidden.to_vec(), [1, h]), &device),
                    state: Tensor::zeros([1, h], &device),
                },
            };
            let stop = self.depth_stop.take();
            let mut search = Search { p: self, state, stop };
            beam_search(&mut search, g0, &cfg)
        };
        // The search may have stopped before `cfg.length` (the depth stop).
        let length = beams.beams[0].len();
        let (beams, log_probs) = (beams.beams, beams.log_probs);
        let tree = if self.settings.tree_attention {
            let packed = pack_beams(&beams);
            self.classes = vec![0; packed.tree.len()];
            for (nodes, lps) in packed.node.iter().zip(&log_probs) {
                for (&n, k) in nodes.iter().zip(node_classes(lps)) {
                    self.classes[n] = k;
                }
            }
            packed.tree
        } else {
            let mut tree = DraftTree::new();
            self.classes.clear();
            for (beam, lps) in beams.iter().zip(&log_probs) {
                let mut parent = None;
                for (&t, k) in beam[1..].iter().zip(node_classes(lps)) {
                    parent = Some(tree.push(t, parent));
                    self.classes.push(k);
                }
            }
            tree
        };
        self.packing.steps += 1;
        self.packing.unpacked_tokens += beams.len() * length;
        self.packing.packed_tokens += 1 + tree.len();
        // One drafter call for g0 and one per further beam step (beam_length counts g0).
        self.last_cost = DraftCost { calls: length - 1, generated: tree.len() };
        Ok(tree)
    }
}

/// The node class of each drafted token of a beam, from its warped log-prob.
fn node_classes(log_probs: &[f32]) -> impl Iterator<Item = usize> + '_ {
    log_probs.iter().map(|&lp| probability_class(f64::from(lp).exp()))
}
