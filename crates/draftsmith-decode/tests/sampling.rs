//! The speculative sampler's output distribution equals the target's. On a tiny random model
//! the exact joint distribution of the first two sampled tokens is computed from the target,
//! then thousands of seeded speculative runs (a chain proposer and a tree proposer whose drafts
//! include likely and unlikely tokens, a proposer whose tokens are drawn from distributions
//! unlike the target's, and a draft model drawing its drafts) are compared with it by a
//! chi-square goodness-of-fit test at significance level α = 0.001. Greedy with a repetition
//! penalty equals AR token for token.

mod common;

use common::{tiny, B};
use draftsmith_core::DraftTree;
use draftsmith_decode::methods::{DraftModel, DraftModelConfig};
use draftsmith_decode::sampling::{probabilities, sample_from};
use draftsmith_decode::{
    ar::prefill, generate, generate_speculative_sampled, DecodeError, DraftContext, Proposer, Sampler, SamplingConfig,
    SpecOutput,
};
use draftsmith_model::{Architecture, Model};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Drafts a fixed shape below whatever the last token is: the target's likeliest tokens
/// (from a table) and a token it rarely picks.
struct Fixed {
    likely: Vec<Vec<u32>>,
    tree: bool,
}

impl Proposer for Fixed {
    fn name(&self) -> &str {
        "fixed"
    }

    fn propose(&mut self, ctx: &DraftContext<'_>) -> Result<DraftTree, DecodeError> {
        let last = *ctx.tokens.last().unwrap() as usize;
        let (a, b) = (self.likely[last][0], self.likely[last][1]);
        if !self.tree {
            return Ok(DraftTree::chain(&[a, b, 7]));
        }
        let mut t = DraftTree::new();
        let x = t.push(b, None);
        t.push(a, None);
        t.push(a, Some(x));
        t.push(7, None);
        Ok(t)
    }
}

/// Draws its tokens from a distribution of its own after each token (half on the target's
/// likeliest, a fifth on its second, the rest spread evenly): a chain of two, or a tree of two
/// drawn siblings, a given one (token 7) and a drawn child below the first.
struct Drawn {
    likely: Vec<Vec<u32>>,
    tree: bool,
    rng: StdRng,
    q: Vec<Vec<f32>>,
}

impl Drawn {
    fn q(&self, after: u32) -> Vec<f32> {
        let v = self.likely.len();
        let mut q = vec![0.3 / (v - 2) as f32; v];
        let l = &self.likely[after as usize];
        (q[l[0] as usize], q[l[1] as usize]) = (0.5, 0.2);
        q
    }

    fn draw(&mut self, after: u32) -> u32 {
        let q = self.q(after);
        let x = sample_from(&q, self.rng.random::<f32>());
        self.q.push(q);
        x
    }
}

impl Proposer for Drawn {
    fn name(&self) -> &str {
        "drawn"
    }

    fn propose(&mut self, ctx: &DraftContext<'_>) -> Result<DraftTree, DecodeError> {
        self.q.clear();
        let last = *ctx.tokens.last().unwrap();
        let mut t = DraftTree::new();
        let a = self.draw(last);
        let x = t.push(a, None);
        if self.tree {
            let b = self.draw(last);
            t.push(b, None);
            self.q.push(vec![0.0; 7].into_iter().chain([1.0]).collect());
            t.push(7, None);
        }
        let c = self.draw(a);
        t.push(c, Some(x));
        Ok(t)
    }

    fn draft_distributions(&self) -> Option<&[Vec<f32>]> {
        Some(&self.q)
    }
}

fn cfg() -> SamplingConfig {
    // A penalty window shorter than the prompt: the window must slide over the drafted path.
    SamplingConfig {
        temperature: 0.9,
        top_k: 12,
        repetition_penalty: 1.3,
        penalty_window: 3,
        eta: 0.001,
        ..Default::default()
    }
}

/// Exact P(t1, t2) under the target with the sampling settings.
fn joint(model: &Model<B>, prompt: &[u32]) -> Vec<f64> {
    let v = model.config().vocab_size;
    let mut cache = model.new_cache(16);
    let p1 = probabilities(&prefill(model, prompt, &mut cache).unwrap(), prompt, &cfg());
    let mut out = vec![0.0; v * v];
    for t1 in 0..v {
        if p1[t1] == 0.0 {
            continue;
        }
        let mut ctx = prompt.to_vec();
        ctx.push(t1 as u32);
        let mut c = model.new_cache(16);
        let p2 = probabilities(&prefill(model, &ctx, &mut c).unwrap(), &ctx, &cfg());
        for t2 in 0..v {
            out[t1 * v + t2] = p1[t1] as f64 * p2[t2] as f64;
        }
    }
    out
}

/// A sampler with [`cfg`]'s settings and `seed`.
fn sampler(seed: u64) -> Sampler {
    Sampler::new(SamplingConfig { seed, ..cfg() })
}

/// The first two tokens of `n` runs, one per seed `0..n` (`v`: the vocabulary size): their
/// counts at `t1 · v + t2`, and the draft tokens the runs accepted.
fn first_pairs(v: usize, n: usize, mut run: impl FnMut(u64) -> SpecOutput) -> (Vec<usize>, usize) {
    let (mut counts, mut accepted) = (vec![0usize; v * v], 0);
    for seed in 0..n as u64 {
        let out = run(seed);
        accepted += out.steps.iter().map(|s| s.accepted).sum::<usize>();
        counts[out.tokens[0] as usize * v + out.tokens[1] as usize] += 1;
    }
    (counts, accepted)
}

/// Upper α = 0.001 quantile of χ²(k) (Wilson–Hilferty).
fn chi2_critical(k: f64) -> f64 {
    let z = 3.0902;
    k * (1.0 - 2.0 / (9.0 * k) + z * (2.0 / (9.0 * k)).sqrt()).powi(3)
}

fn chi_square(expected: &[f64], counts: &[usize], n: usize) -> (f64, f64) {
    // Cells with expected count < 5 are pooled into one.
    let (mut stat, mut cells, mut pool_e, mut pool_o) = (0.0, 0usize, 0.0, 0.0);
    for (e, &o) in expected.iter().zip(counts) {
        let e = e * n as f64;
        if e >= 5.0 {
            stat += (o as f64 - e).powi(2) / e;
            cells += 1;
        } else {
            pool_e += e;
            pool_o += o as f64;
        }
    }
    if pool_e > 0.0 {
        stat += (pool_o - pool_e).powi(2) / pool_e.max(1e-9);
        cells += 1;
    }
    (stat, chi2_critical((cells - 1) as f64))
}

/// Generations of two tokens after `prompt`, `n` seeds each, with the proposer `proposer(seed,
/// tree)` drafting a chain and then a tree: the first two tokens' counts pass the χ² test against
/// the exact joint `exact`, and drafts are accepted often enough to matter.
fn assert_drafts_keep_the_target<P: Proposer>(
    model: &Model<B>,
    prompt: &[u32],
    exact: &[f64],
    n: usize,
    proposer: impl Fn(u64, bool) -> P,
) {
    for tree in [false, true] {
        let (counts, accepted) = first_pairs(model.config().vocab_size, n, |seed| {
            let mut proposer = proposer(seed, tree);
            generate_speculative_sampled(model, prompt, 2, &[], &mut proposer, &mut sampler(seed)).unwrap()
        });
        let (stat, critical) = chi_square(exact, &counts, n);
        assert!(stat < critical, "tree={tree}: χ² = {stat:.1} ≥ {critical:.1} (α = 0.001)");
        assert!(accepted > n / 10, "tree={tree}: drafts are accepted often enough to matter ({accepted})");
    }
}

#[test]
fn speculative_sampling_matches_the_target_distribution() {
    let model = tiny(Architecture::Llama, 8);
    let v = model.config().vocab_size;
    let prompt = [3u32, 9, 4];
    let exact = joint(&model, &prompt);
    // The target's likeliest next tokens after prompt + t1, for the proposer.
    let likely = likely_after(&model, &prompt);
    let n = 4000;
    assert_drafts_keep_the_target(&model, &prompt, &exact, n, |_, tree| Fixed { likely: likely.clone(), tree });
    // The test can fail: plain AR samples against a distribution with the penalty switched off.
    let plain = SamplingConfig { repetition_penalty: 1.0, ..cfg() };
    let mut counts = vec![0usize; v * v];
    for seed in 0..n {
        let mut s = Sampler::new(SamplingConfig { seed: seed as u64, ..plain.clone() });
        let g = generate(&model, &prompt, 2, &[], &mut s, &mut |_| true).unwrap();
        counts[g.tokens[0] as usize * v + g.tokens[1] as usize] += 1;
    }
    let (stat, critical) = chi_square(&exact, &counts, n);
    assert!(stat > critical, "a different distribution is detected: χ² = {stat:.1} vs {critical:.1}");
}

/// The target's likeliest next tokens after `prompt` + each token.
fn likely_after(model: &Model<B>, prompt: &[u32]) -> Vec<Vec<u32>> {
    let v = model.config().vocab_size;
    (0..v as u32)
        .map(|t| {
            let mut ctx = prompt.to_vec();
            ctx.push(t);
            let mut c = model.new_cache(8);
            let p = probabilities(&prefill(model, &ctx, &mut c).unwrap(), &ctx, &cfg());
            let mut idx: Vec<u32> = (0..v as u32).collect();
            idx.sort_by(|&a, &b| p[b as usize].total_cmp(&p[a as usize]));
            idx
        })
        .collect()
}

#[test]
fn drawn_drafts_keep_the_target_distribution() {
    let model = tiny(Architecture::Llama, 8);
    let prompt = [3u32, 9, 4];
    let exact = joint(&model, &prompt);
    let likely = likely_after(&model, &prompt);
    assert_drafts_keep_the_target(&model, &prompt, &exact, 4000, |seed, tree| {
        let rng = StdRng::seed_from_u64(1_000_000 + seed);
        Drawn { likely: likely.clone(), tree, rng, q: Vec::new() }
    });
}

#[test]
fn a_draft_model_drawing_its_drafts_keeps_the_target_distribution() {
    let target = tiny(Architecture::Qwen2, 8);
    let drafter = tiny(Architecture::Qwen2, 108);
    let v = target.config().vocab_size;
    let prompt = [3u32, 9, 4];
    let exact = joint(&target, &prompt);
    let n = 4000;
    let config = DraftModelConfig { lambda: 3, sample: true, ..Default::default() };
    let mut proposer = DraftModel::new(drafter, config).unwrap();
    let (counts, accepted) = first_pairs(v, n, |seed| {
        let out = generate_speculative_sampled(&target, &prompt, 2, &[], &mut proposer, &mut sampler(seed)).unwrap();
        assert_eq!(proposer.draft_distributions().map(<[_]>::len), Some(proposer.confidences().len()));
        out
    });
    let (stat, critical) = chi_square(&exact, &counts, n);
    assert!(stat < critical, "χ² = {stat:.1} ≥ {critical:.1} (α = 0.001)");
    assert!(accepted > n / 20, "drafts are accepted often enough to matter ({accepted})");
    // Greedy generation drafts the argmax: nothing drawn.
    proposer.set_sampling(&SamplingConfig::default());
    assert!(proposer.draft_distributions().is_none());
}

#[test]
fn penalized_greedy_equals_autoregressive() {
    let model = tiny(Architecture::Qwen2, 4);
    for window in [0, 3] {
        let greedy = SamplingConfig { repetition_penalty: 1.5, penalty_window: window, ..Default::default() };
        let prompt = [5u32, 6, 7, 5, 6, 7, 5];
        let want = generate(&model, &prompt, 40, &[], &mut Sampler::new(greedy.clone()), &mut |_| true).unwrap().tokens;
        let likely = vec![vec![1, 2]; model.config().vocab_size];
        for tree in [false, true] {
            let mut p = Fixed { likely: likely.clone(), tree };
            let got = generate_speculative_sampled(&model, &prompt, 40, &[], &mut p, &mut Sampler::new(greedy.clone()))
                .unwrap();
            assert_eq!(got.tokens, want, "window {window}, tree {tree}");
        }
    }
}
