//! The cost of one target pass over `n` draft tokens on the running machine: what a draft is
//! worth verifying depends on it. `draftsmith bench ar` prints the curve; a draft policy can
//! calibrate from it.

use std::time::Instant;

use burn::tensor::backend::Backend;
use draftsmith_core::DraftTree;
use draftsmith_model::{set_profiling, take_profile, AttentionMask, LogitsSelect, Model, ModelError};

/// How the `n` tokens of a verify pass are arranged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DraftShape {
    /// One branch: token `i` follows token `i − 1` (prompt lookup, a draft model).
    Chain,
    /// A random tree: each token follows a random earlier one, or the root (beams, n-gram tries).
    Tree,
}

impl DraftShape {
    /// The tree of this shape with `n` nodes (seeded, so every run times the same tree).
    pub fn tree(self, n: usize, vocab: usize, seed: u64) -> DraftTree {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = |bound: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % bound as u64) as usize
        };
        let mut tree = DraftTree::new();
        for i in 0..n {
            let parent = match self {
                DraftShape::Chain => i.checked_sub(1),
                DraftShape::Tree if i == 0 || next(10) == 0 => None,
                DraftShape::Tree => Some(next(i)),
            };
            tree.push(100 + next(vocab.saturating_sub(100).max(1)) as u32, parent);
        }
        tree
    }
}

/// One measured pass: wall time (median and fastest over runs) and, on the quantized CPU path,
/// the time in matrix products and in attention (means over the same runs; zero on other paths);
/// `other_ms` is the rest of the median (norms, RoPE, SwiGLU, residuals, cache writes, tensor
/// copies).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct PassTiming {
    pub n: usize,
    pub ms: f64,
    /// The fastest run: a host's load only ever adds time.
    pub min_ms: f64,
    pub matrices_ms: f64,
    pub attention_ms: f64,
    pub other_ms: f64,
    /// The median over rounds of this size's time over the first size's in the same round
    /// ([`time_passes`]): a ratio the host's drift between rounds does not bias.
    pub over_first: f64,
}

/// A cache holding `context` tokens of a fixed synthetic prefix, to time passes against.
pub fn cached_context<B: Backend>(
    model: &Model<B>,
    context: usize,
    room: usize,
) -> Result<draftsmith_model::KvCache<B>, ModelError> {
    let vocab = model.config().vocab_size;
    let prefix = DraftShape::Chain.tree(context, vocab, 2);
    let mut cache = model.new_cache(context + room + 1);
    let positions: Vec<usize> = (0..context).collect();
    model.forward_hidden(prefix.tokens(), &positions, &AttentionMask::Causal, &mut cache)?;
    Ok(cache)
}

/// Milliseconds of a one-token pass after a one-token context (itself a first pass, which also
/// sizes the scratch buffers), the faster of two: what a step of `model` costs here, roughly and
/// at once. (Qwen2.5-Coder-1.5B on the AMX Xeon: one pass read 43 ms or more in two of three
/// processes, where its steps take 37, and its calibration's plan lost a size for it; session 59.)
pub fn probe_step<B: Backend>(model: &Model<B>) -> Result<f64, ModelError> {
    let mut cache = cached_context(model, 1, 1)?;
    Ok(time_passes(model, &mut cache, DraftShape::Chain, &[1], Rounds::cold(2))?[0].min_ms)
}

/// How long one-token passes run before each timed pass ([`time_passes`]). Where the CPU's
/// last-level cache holds the model, what a pass costs depends on how recently and how often
/// the weights were read before it: on the 2-core Xeon with AMX (480 MiB L3), SmolLM2-135M's
/// one-token pass took 3.8 ms right after a 64-token pass or 30 ms of spinning, against 2.3 ms
/// after other steps, and ~10 ms of one-token passes (1 / 2 / 4 of them: 3.07 / 2.88 / 2.49 ms)
/// to recover (session 58). Timed in a rotation through 32 and 64 tokens without them, the small
/// sizes were cold: t(8)/t(1) read 1.43 where decoding sees ~2, and the draft policy's
/// calibration priced large drafts 40–50 % under what they then cost. A model whose step takes
/// 8 ms or more gets one warm pass. After a pass that took longer than this, the warm passes
/// last as long as it did: on the 2-core Emerald Rapids guest the one-token passes right after
/// a 64-token pass (~45 ms) took 4.75 / 4.6 / 3.9 / 3.6 / 3.2 / 3.0 ms and only the seventh was
/// back at its 2.7–2.9, ~25 ms later (after 32 tokens ~15 ms, after 8 or 16 one or two passes;
/// `examples/after_big.rs`, session 72), so 8 ms left the curve's t(1) timed too slow.
pub const WARM_MS: f64 = 8.0;

/// How [`time_passes`] runs its rounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rounds {
    /// Timed rounds (at least one).
    pub runs: usize,
    /// One untimed round of every size first, to warm the caches and the scratch buffers.
    pub warmup: bool,
    /// Untimed one-token passes before each timed pass, for this many milliseconds or as long as
    /// the pass before took, whichever is longer (at least one pass: [`WARM_MS`]); `None`: none.
    pub warm_ms: Option<f64>,
}

impl Rounds {
    /// `runs` timed rounds after an untimed one, each timed pass after [`WARM_MS`] of one-token
    /// passes (longer after a longer pass): how `bench ar` times, and the draft policy's
    /// calibration when it can afford it.
    pub fn full(runs: usize) -> Self {
        Self { runs, warmup: true, warm_ms: Some(WARM_MS) }
    }

    /// `runs` timed rounds with nothing before them (no untimed round, no warm steps): a quick
    /// reading, as the calibration's probe step and its plan for a slow model take.
    pub fn cold(runs: usize) -> Self {
        Self { runs, warmup: false, warm_ms: None }
    }
}

/// Times the verification of `n` tokens of `shape` (all logits) for each `n` of `sizes` after
/// the `cache`'s context, `rounds.runs` rounds, rolling the cache back after each pass. A round
/// times one pass of every size (starting one size further each round), so every size is
/// measured across the same stretch of time and a host that speeds up or slows down between
/// rounds moves all sizes alike; with `rounds.warmup`, one untimed round first warms the caches
/// and the scratch buffers.
///
/// With `rounds.warm_ms`, each timed pass follows that long of untimed one-token passes, or as
/// long as the pass before it took if that was longer (at least one), as a decoding step follows
/// steps.
pub fn time_passes<B: Backend>(
    model: &Model<B>,
    cache: &mut draftsmith_model::KvCache<B>,
    shape: DraftShape,
    sizes: &[usize],
    rounds: Rounds,
) -> Result<Vec<PassTiming>, ModelError> {
    if sizes.is_empty() {
        return Ok(Vec::new());
    }
    let context = cache.len();
    let passes: Vec<_> = sizes
        .iter()
        .map(|&n| {
            let tree = shape.tree(n, model.config().vocab_size, 4 + n as u64);
            let (mask, positions) = if n == 1 {
                (AttentionMask::Causal, vec![context])
            } else {
                (AttentionMask::Visible(tree.visibility(context)), tree.positions(context - 1))
            };
            (tree, mask, positions)
        })
        .collect();
    // The step before each timed pass: one token after the context.
    let warm = DraftShape::Chain.tree(1, model.config().vocab_size, 3);
    let runs = rounds.runs.max(1);
    // Per size: wall ms of each round, and the summed matrix and attention seconds.
    let mut times = vec![Vec::with_capacity(runs); sizes.len()];
    let mut split = vec![(0.0, 0.0); sizes.len()];
    // The last pass's wall ms, timed or not: the warm passes after it last at least as long.
    let mut last_ms = 0.0f64;
    set_profiling(true);
    let result = (|| -> Result<(), ModelError> {
        // One pass, its logits read back (on a GPU: the pass has finished), then the cache
        // rolled back to the context.
        let mut pass = |tokens: &[u32], positions: &[usize], mask: &AttentionMask| {
            let out = model.forward(tokens, positions, mask, LogitsSelect::All, cache)?;
            let _ = out.logits.into_data();
            cache.truncate(context);
            Ok::<(), ModelError>(())
        };
        for round in usize::from(!rounds.warmup)..=runs {
            for k in 0..sizes.len() {
                let i = (k + round) % sizes.len();
                let (tree, mask, positions) = &passes[i];
                // Round 0 is not timed: its passes need no warm steps before them.
                if let (true, Some(warm_ms)) = (round > 0, rounds.warm_ms) {
                    let warm_ms = warm_ms.max(last_ms);
                    let warming = Instant::now();
                    loop {
                        pass(warm.tokens(), &[context], &AttentionMask::Causal)?;
                        if warming.elapsed().as_secs_f64() * 1e3 >= warm_ms {
                            break;
                        }
                    }
                }
                take_profile();
                let start = Instant::now();
                pass(tree.tokens(), positions, mask)?;
                let ms = start.elapsed().as_secs_f64() * 1e3;
                last_ms = ms;
                let parts = take_profile();
                if round > 0 {
                    times[i].push(ms);
                    split[i].0 += parts.matrices_s;
                    split[i].1 += parts.attention_s;
                }
            }
        }
        Ok(())
    })();
    set_profiling(false);
    result?;
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    Ok(sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let ms = median(times[i].clone());
            let min_ms = times[i].iter().copied().fold(f64::INFINITY, f64::min);
            let over_first = median(times[i].iter().zip(&times[0]).map(|(t, t0)| t / t0).collect());
            let per_run = |s: f64| s * 1e3 / runs as f64;
            let (matrices_ms, attention_ms) = (per_run(split[i].0), per_run(split[i].1));
            PassTiming {
                n,
                ms,
                min_ms,
                matrices_ms,
                attention_ms,
                other_ms: (ms - matrices_ms - attention_ms).max(0.0),
                over_first,
            }
        })
        .collect())
}
