//! ReDrafter beams (apple/ml-recurrent-drafter semantics): beam search over a recurrent drafter,
//! prefix deduplication, and packing the beams into a [`DraftTree`](crate::DraftTree) for dynamic
//! tree attention.
//!
//! A beam is `length` tokens starting with the LLM's guaranteed token `g0`; every beam of one
//! search has the same length. The tree built by [`pack_beams`] hangs below `g0` (the root), so
//! its `visibility()` is the reference's mask "p attends q iff q is an ancestor of p or p itself"
//! and its `positions(pos(g0))` are the prefix length plus the depth.

mod dedup;
mod pack;
mod search;
mod warp;

pub use dedup::dedup_prefix;
pub use pack::{pack_beams, unpacked_len, PackedBeams};
pub use search::{beam_search, BeamDrafter, BeamSearchConfig, Beams};
pub use warp::top_k_log_probs;

/// Tiny deterministic PRNG for the property tests (xorshift64*).
#[cfg(test)]
pub(crate) struct XorShift(u64);

#[cfg(test)]
impl XorShift {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `lo..hi` (slightly biased, fine for tests).
    pub(crate) fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo) as u64) as usize
    }

    /// Random beams: `width` × `length` tokens from `0..vocab`.
    pub(crate) fn beams(&mut self, width: usize, length: usize, vocab: usize) -> Vec<Vec<u32>> {
        (0..width).map(|_| (0..length).map(|_| self.range(0, vocab) as u32).collect()).collect()
    }
}
