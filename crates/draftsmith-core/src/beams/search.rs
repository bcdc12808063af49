//! Beam search over a recurrent drafter (reference: `Drafter.beam_search_candidates`).

use super::top_k_log_probs;
use std::cmp::Ordering;

/// A drafter that can grow many beams at once; the search owns beam bookkeeping, the drafter
/// owns its per-beam state (e.g. ReDrafter's RNN state).
pub trait BeamDrafter {
    /// Starts a search from the guaranteed token `g0`: returns raw logits (len vocab) for the
    /// token after it.
    fn start(&mut self, g0: u32) -> Vec<f32>;
    /// Advances every live beam: new beam `i` continues old beam `parents[i]` with `tokens[i]`;
    /// returns raw logits of the next token for each new beam (len = `parents.len()`).
    fn step(&mut self, parents: &[usize], tokens: &[u32]) -> Vec<Vec<f32>>;
    /// The token ids the logit rows cover, strictly increasing, for a drafter that scores only
    /// part of the vocabulary (entry `i` of a row is token `ids[i]`): the search then ranks
    /// those entries alone instead of a full-vocabulary row padded with −∞ — the same beams,
    /// without scanning the rest of the vocabulary. `None` (the default): rows cover every id.
    fn vocabulary(&self) -> Option<std::sync::Arc<[u32]>> {
        None
    }
    /// Asked before each [`BeamDrafter::step`] with the beams drafted so far: `false` ends the
    /// search there, with beams shorter than the configured length (a draft policy that stops
    /// drafting once the drafter is unsure: every further step costs a drafter call). The
    /// default always goes on.
    fn keep_going(&mut self, _live: &Beams) -> bool {
        true
    }
}

/// Shape and warp of one beam search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BeamSearchConfig {
    /// Beams kept after each step (≥ 1).
    pub width: usize,
    /// Tokens per beam, counting `g0` (≥ 1): `length − 1` tokens are drafted.
    pub length: usize,
    /// Top-k logit warp (≥ `width`); the reference uses 50.
    pub top_k: usize,
}

impl BeamSearchConfig {
    pub const DEFAULT_TOP_K: usize = 50;

    /// `width` × `length` beams with the reference's top-50 warp.
    pub fn new(width: usize, length: usize) -> Self {
        Self { width, length, top_k: Self::DEFAULT_TOP_K }
    }
}

/// The result of [`beam_search`], best beam first.
#[derive(Debug, Clone, PartialEq)]
pub struct Beams {
    /// `width` beams, each `length` tokens starting with `g0` (fewer when the drafter stopped
    /// the search early, [`BeamDrafter::keep_going`]; all beams have the same length).
    pub beams: Vec<Vec<u32>>,
    /// Summed warped log-probs of each beam's drafted tokens.
    pub scores: Vec<f32>,
    /// Per beam, per drafted token (`length − 1`), its warped log-prob.
    pub log_probs: Vec<Vec<f32>>,
}

/// One extension of a live beam.
struct Candidate {
    beam: usize,
    token: u32,
    log_prob: f32,
    score: f32,
}

/// Higher score first, then lower beam index, then lower token id.
fn candidate_order(a: &Candidate, b: &Candidate) -> Ordering {
    b.score.total_cmp(&a.score).then(a.beam.cmp(&b.beam)).then(a.token.cmp(&b.token))
}

/// Keeps the best `width` candidates, sorted.
fn keep_best(mut candidates: Vec<Candidate>, width: usize) -> Vec<Candidate> {
    if width < candidates.len() {
        candidates.select_nth_unstable_by(width - 1, candidate_order);
        candidates.truncate(width);
    }
    candidates.sort_unstable_by(candidate_order);
    candidates
}

/// Beam search from the guaranteed token `g0` (ReDrafter). Step 1 expands `g0` alone (the
/// reference's "only beam 0 live"), so its candidates are the top `width` tokens after `g0`;
/// each later step extends every kept beam by its top-k tokens (warped log-probs, see
/// [`top_k_log_probs`]), scores = beam score + log-prob, and keeps the best `width`
/// (ties: lower beam index, then lower token id). The drafter sees `start` once and `step`
/// `length − 2` times, each with only the kept beams; with `length == 1` it is not called.
/// Before each `step` the drafter may end the search ([`BeamDrafter::keep_going`]).
/// A kept token has a −∞ log-prob only if its logit was −∞ and too few finite ones existed.
pub fn beam_search(drafter: &mut dyn BeamDrafter, g0: u32, cfg: &BeamSearchConfig) -> Beams {
    let BeamSearchConfig { width, length, top_k } = *cfg;
    assert!(width >= 1 && length >= 1, "beam_search: width {width} and length {length} must be ≥ 1");
    assert!(
        top_k >= width,
        "beam_search: top_k ({top_k}) must be ≥ width ({width}): step 1 draws all beams from the \
         top-k tokens after g0"
    );
    if length == 1 {
        return Beams { beams: vec![vec![g0]; width], scores: vec![0.0; width], log_probs: vec![vec![]; width] };
    }
    let ids = drafter.vocabulary();
    debug_assert!(ids.as_deref().is_none_or(|ids| ids.windows(2).all(|w| w[0] < w[1])), "vocabulary ids increase");
    // Row entry → token id.
    let token_id = |t: u32| ids.as_deref().map_or(t, |ids| ids[t as usize]);
    let first = drafter.start(g0);
    let vocab = first.len();
    assert!(vocab >= width, "beam_search: vocab ({vocab}) must be ≥ width ({width})");
    // Live beams: the logits of the token after each, and their scores.
    let mut logits = vec![first];
    let mut live = Beams { beams: vec![vec![g0]], scores: vec![0.0], log_probs: vec![vec![]] };
    for step in 1..length {
        let candidates = logits
            .iter()
            .enumerate()
            .flat_map(|(beam, l)| {
                assert_eq!(l.len(), vocab, "beam_search: drafter logits of beam {beam} at step {step}");
                let score = live.scores[beam];
                top_k_log_probs(l, top_k).into_iter().map(move |(entry, log_prob)| Candidate {
                    beam,
                    token: token_id(entry),
                    log_prob,
                    score: score + log_prob,
                })
            })
            .collect();
        let kept = keep_best(candidates, width);
        live = Beams {
            beams: kept.iter().map(|c| extend(&live.beams[c.beam], c.token)).collect(),
            scores: kept.iter().map(|c| c.score).collect(),
            log_probs: kept.iter().map(|c| extend(&live.log_probs[c.beam], c.log_prob)).collect(),
        };
        if step + 1 < length {
            if !drafter.keep_going(&live) {
                break;
            }
            let parents: Vec<usize> = kept.iter().map(|c| c.beam).collect();
            let tokens: Vec<u32> = kept.iter().map(|c| c.token).collect();
            logits = drafter.step(&parents, &tokens);
            assert_eq!(logits.len(), width, "beam_search: drafter.step must return one row per beam");
        }
    }
    live
}

fn extend<T: Copy>(prefix: &[T], last: T) -> Vec<T> {
    let mut v = Vec::with_capacity(prefix.len() + 1);
    v.extend_from_slice(prefix);
    v.push(last);
    v
}

#[cfg(test)]
mod tests;
