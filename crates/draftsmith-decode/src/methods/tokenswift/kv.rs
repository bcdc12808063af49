//! TokenSwift's KV cache for drafting (paper §3.3, reference `RetrievalCache`): the draft
//! forward attends to a copy of part of the target's cache, while verification always uses the
//! full cache.
//!
//! - `full`: the draft cache mirrors every committed token.
//! - `partial-static`: once the context outgrows the budget B, S sink tokens plus the B − S
//!   highest-scored tokens are selected once and never updated (the paper's "Partial Cache").
//! - `dynamic` (TokenSwift): after a selection, each newly committed token overwrites the
//!   lowest-ranked selected slot still left (slot B − 1 first, then B − 2, …); when B − S new
//!   tokens have arrived, the draft falls back to sinks + the last B − S tokens and the selection
//!   is made afresh.
//! - `verify-pass`: no draft forward and no draft cache. The heads read the verification pass's
//!   own state at the last accepted token (before the final norm), whose next token the
//!   verification already committed: the tree starts at head 1, one level shallower, and a step
//!   costs the target one pass instead of two.
//!
//! Importance (reference `init_retri_cache`): the raw dot product of a layer's last query with
//! each cached key (rotated, unscaled), summed over the query heads of each KV head's group;
//! the top B − S over positions `S..` are chosen independently per layer and per KV head. The
//! query is the one of the token the last draft forward fed (a committed token; the reference
//! uses the last tree node's query inside the next verification, a speculative token).

use burn::tensor::backend::Backend;
use draftsmith_model::{KvCache, Model};

/// How the draft forward's KV cache is managed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KvMode {
    Full,
    PartialStatic,
    Dynamic,
    VerifyPass,
}

draftsmith_core::value_names!(KvMode, "KV mode", {
    Full => "full",
    PartialStatic => "partial-static" | "partial",
    Dynamic => "dynamic",
    VerifyPass => "verify-pass",
});

/// Importance of each cached position for one layer: `scores[h][j] = Σ_{q ∈ group(h)} q · k_{h,j}`.
/// `queries`: `[num_heads × head_dim]`; `keys`: `[kv_heads, len, head_dim]`.
pub fn importance(queries: &[f32], keys: &[f32], num_heads: usize, kv_heads: usize, head_dim: usize) -> Vec<Vec<f32>> {
    let len = keys.len() / (kv_heads * head_dim);
    let group = num_heads / kv_heads;
    (0..kv_heads)
        .map(|h| {
            (0..len)
                .map(|j| {
                    let k = &keys[(h * len + j) * head_dim..(h * len + j + 1) * head_dim];
                    (0..group)
                        .map(|g| {
                            queries[(h * group + g) * head_dim..(h * group + g + 1) * head_dim]
                                .iter()
                                .zip(k)
                                .map(|(a, b)| a * b)
                                .sum::<f32>()
                        })
                        .sum()
                })
                .collect()
        })
        .collect()
}

/// The kept positions of one KV head: the `sinks` first positions, then the `budget − sinks`
/// best-scored of the rest in descending score order (ties: the earlier position).
pub fn select(scores: &[f32], sinks: usize, budget: usize) -> Vec<usize> {
    let len = scores.len();
    let sinks = sinks.min(len);
    let mut rest: Vec<usize> = (sinks..len).collect();
    rest.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    rest.truncate(budget.saturating_sub(sinks));
    (0..sinks).chain(rest).collect()
}

/// The draft cache and its bookkeeping.
pub struct DraftKv<B: Backend> {
    mode: KvMode,
    budget: usize,
    sinks: usize,
    cache: KvCache<B>,
    /// Full mode (and partial modes below the budget): committed tokens mirrored so far.
    mirrored: usize,
    /// Partial modes: the full-cache length when the current slots were chosen, and how many
    /// newer tokens have overwritten slots since.
    selected_at: Option<usize>,
    recent: usize,
    /// A selection is due once a query is at hand (after the next draft forward).
    select_after_draft: bool,
    pub reselections: usize,
}

impl<B: Backend> DraftKv<B> {
    pub fn new(model: &Model<B>, mode: KvMode, budget: usize, sinks: usize) -> Self {
        let mut cache = model.new_cache(budget.min(4096) + 8);
        cache.capture_queries(true);
        Self {
            mode,
            budget,
            sinks: sinks.min(budget),
            cache,
            mirrored: 0,
            selected_at: None,
            recent: 0,
            select_after_draft: false,
            reselections: 0,
        }
    }

    /// Forgets everything (a new generation).
    pub fn reset(&mut self) {
        self.cache.truncate(0);
        self.mirrored = 0;
        self.selected_at = None;
        self.recent = 0;
        self.select_after_draft = false;
    }

    /// The cache the draft forward runs on.
    pub fn cache_mut(&mut self) -> &mut KvCache<B> {
        &mut self.cache
    }

    /// Brings the draft cache up to date with `full` (every committed token) before a draft
    /// forward.
    pub fn prepare(&mut self, full: &KvCache<B>) {
        let len = full.len();
        let layers = full.num_layers();
        if self.mode == KvMode::Full || (len <= self.budget && self.selected_at.is_none()) {
            if len < self.mirrored {
                self.mirrored = 0;
            }
            for layer in 0..layers {
                let (k, v) = full.read_rows(layer, self.mirrored, len - self.mirrored);
                self.cache.write_rows(layer, self.mirrored, &k, &v);
            }
            self.cache.set_len(len);
            self.mirrored = len;
            return;
        }
        let window = self.budget - self.sinks;
        match self.selected_at {
            None => self.fall_back_to_window(full),
            Some(at) if self.mode == KvMode::Dynamic => {
                let new = len - at;
                if new > window {
                    self.fall_back_to_window(full);
                } else {
                    // Newly committed tokens take the lowest-ranked slots left, B − 1 downwards.
                    for j in self.recent..new {
                        let slot = self.budget - 1 - j;
                        for layer in 0..layers {
                            let (k, v) = full.read_rows(layer, at + j, 1);
                            self.cache.write_rows(layer, slot, &k, &v);
                        }
                    }
                    self.recent = new;
                    self.cache.set_len(self.budget);
                }
            }
            Some(_) => self.cache.set_len(self.budget),
        }
    }

    /// Sinks plus the last B − S tokens; the selection follows the next draft forward.
    fn fall_back_to_window(&mut self, full: &KvCache<B>) {
        let len = full.len();
        let tail = self.budget - self.sinks;
        for layer in 0..full.num_layers() {
            let (k, v) = full.read_rows(layer, 0, self.sinks);
            self.cache.write_rows(layer, 0, &k, &v);
            let (k, v) = full.read_rows(layer, len - tail, tail);
            self.cache.write_rows(layer, self.sinks, &k, &v);
        }
        self.cache.set_len(self.budget);
        self.select_after_draft = true;
    }

    /// After a draft forward (`len_before` = the cache length before it): drops the fed token's
    /// keys and values and, when due, selects the slots for the next drafts with its queries.
    pub fn after_draft(&mut self, len_before: usize, full: &KvCache<B>, num_heads: usize) {
        self.cache.truncate(len_before);
        if !self.select_after_draft || (self.mode == KvMode::PartialStatic && self.selected_at.is_some()) {
            return;
        }
        let queries = self.cache.last_queries().expect("queries are captured").to_vec();
        let len = full.len();
        for (layer, q) in queries.iter().enumerate() {
            let (keys, values) = full.read_rows(layer, 0, len);
            let head_dim = q.len() / num_heads;
            let kv_heads = keys.len() / (len * head_dim);
            let scores = importance(q, &keys, num_heads, kv_heads, head_dim);
            let (mut k_sel, mut v_sel) = (
                Vec::with_capacity(kv_heads * self.budget * head_dim),
                Vec::with_capacity(kv_heads * self.budget * head_dim),
            );
            for (h, s) in scores.iter().enumerate() {
                for &j in &select(s, self.sinks, self.budget) {
                    k_sel.extend_from_slice(&keys[(h * len + j) * head_dim..(h * len + j + 1) * head_dim]);
                    v_sel.extend_from_slice(&values[(h * len + j) * head_dim..(h * len + j + 1) * head_dim]);
                }
            }
            self.cache.write_rows(layer, 0, &k_sel, &v_sel);
        }
        self.cache.set_len(self.budget);
        self.selected_at = Some(len);
        self.recent = 0;
        self.select_after_draft = false;
        self.reselections += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn importance_sums_the_group_and_select_keeps_sinks_then_the_best() {
        // 2 query heads sharing 1 KV head (head_dim 2), 4 cached keys.
        let q = [1.0f32, 0.0, 0.0, 1.0]; // head 0 = e0, head 1 = e1 → score = k0 + k1
        let keys = [0.5f32, 0.5, 3.0, -1.0, 0.0, 0.25, 2.0, 2.0];
        let s = importance(&q, &keys, 2, 1, 2);
        assert_eq!(s, vec![vec![1.0, 2.0, 0.25, 4.0]]);
        // Sinks 1, budget 3: position 0, then 3 (4.0) and 1 (2.0); 2 (0.25) is dropped.
        assert_eq!(select(&s[0], 1, 3), vec![0, 3, 1]);
        // Hand-made scores: sinks are kept whatever their score; ties go to the earlier position.
        assert_eq!(select(&[-9.0, -9.0, 5.0, 1.0, 5.0, 0.0], 2, 4), vec![0, 1, 2, 4]);
        assert_eq!(select(&[1.0, 2.0], 4, 8), vec![0, 1], "fewer positions than sinks");
    }
}
