//! Beam search against a greedy chain, exhaustive enumeration and a naive beam search.

use super::*;
use crate::beams::top_k_log_probs;
use crate::beams::XorShift;

/// Logits are a pure function of the whole path (g0 included), from a seeded hash; the
/// drafter records every call.
struct FakeDrafter {
    vocab: usize,
    seed: u64,
    paths: Vec<Vec<u32>>,
    calls: Vec<(Vec<usize>, Vec<u32>)>,
    starts: usize,
}

impl FakeDrafter {
    fn new(vocab: usize, seed: u64) -> Self {
        Self { vocab, seed, paths: vec![], calls: vec![], starts: 0 }
    }

    fn logits(&self, path: &[u32]) -> Vec<f32> {
        let h = path.iter().fold(self.seed, |h, &t| (h ^ u64::from(t) ^ 0xabcd).wrapping_mul(0x100_0000_01b3));
        let mut rng = XorShift::new(h);
        (0..self.vocab).map(|_| (rng.next_u64() % 4001) as f32 / 1000.0 - 2.0).collect()
    }
}

impl BeamDrafter for FakeDrafter {
    fn start(&mut self, g0: u32) -> Vec<f32> {
        self.starts += 1;
        self.paths = vec![vec![g0]];
        self.logits(&self.paths[0])
    }

    fn step(&mut self, parents: &[usize], tokens: &[u32]) -> Vec<Vec<f32>> {
        self.calls.push((parents.to_vec(), tokens.to_vec()));
        self.paths = parents.iter().zip(tokens).map(|(&p, &t)| extend(&self.paths[p], t)).collect();
        self.paths.iter().map(|p| self.logits(p)).collect()
    }
}

/// Table drafter: logits depend on the last token only.
struct TableDrafter(Vec<Vec<f32>>, Vec<u32>);

impl BeamDrafter for TableDrafter {
    fn start(&mut self, g0: u32) -> Vec<f32> {
        self.1 = vec![g0];
        self.0[g0 as usize].clone()
    }

    fn step(&mut self, _parents: &[usize], tokens: &[u32]) -> Vec<Vec<f32>> {
        self.1 = tokens.to_vec();
        tokens.iter().map(|&t| self.0[t as usize].clone()).collect()
    }
}

/// Naive warped log-probs of every token: sort, mask to −∞ beyond k, full log-softmax.
fn naive_log_probs(logits: &[f32], k: usize) -> Vec<f32> {
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by(|&a, &b| logits[b].partial_cmp(&logits[a]).unwrap().then(a.cmp(&b)));
    let mut warped = vec![f32::NEG_INFINITY; logits.len()];
    order.iter().take(k).for_each(|&t| warped[t] = logits[t]);
    let max = warped.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let log_z = max + warped.iter().map(|l| (l - max).exp()).sum::<f32>().ln();
    warped.iter().map(|l| l - log_z).collect()
}

/// Every complete path from g0 with its summed warped log-prob (−∞ if any token is cut).
fn all_paths(d: &FakeDrafter, g0: u32, length: usize, k: usize) -> Vec<(Vec<u32>, f32)> {
    let mut paths = vec![(vec![g0], 0.0f32)];
    for _ in 1..length {
        paths = paths
            .iter()
            .flat_map(|(p, s)| {
                let lp = naive_log_probs(&d.logits(p), k);
                (0..d.vocab).map(move |t| (extend(p, t as u32), s + lp[t]))
            })
            .collect();
    }
    paths
}

fn best(mut paths: Vec<(Vec<u32>, f32)>, n: usize) -> Vec<(Vec<u32>, f32)> {
    paths.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap().then(a.0.cmp(&b.0)));
    paths.truncate(n);
    paths
}

fn cfg(width: usize, length: usize, top_k: usize) -> BeamSearchConfig {
    BeamSearchConfig { width, length, top_k }
}

#[test]
fn length_one_does_not_call_the_drafter() {
    let mut d = FakeDrafter::new(5, 1);
    let out = beam_search(&mut d, 3, &cfg(3, 1, 5));
    assert_eq!(out.beams, vec![vec![3]; 3]);
    assert_eq!(out.scores, vec![0.0; 3]);
    assert_eq!(out.log_probs, vec![Vec::<f32>::new(); 3]);
    assert_eq!((d.starts, d.calls.len()), (0, 0));
}

#[test]
fn width_one_is_the_greedy_chain() {
    let mut d = FakeDrafter::new(7, 3);
    let out = beam_search(&mut d, 2, &cfg(1, 6, 50));
    let mut path = vec![2];
    for _ in 1..6 {
        let l = d.logits(&path);
        let argmax = (0..l.len()).max_by(|&a, &b| l[a].total_cmp(&l[b]).then(b.cmp(&a))).unwrap();
        path.push(argmax as u32);
    }
    assert_eq!(out.beams, vec![path]);
    assert_eq!((d.starts, d.calls.len()), (1, 4));
}

#[test]
fn beam_search_finds_the_better_path_greedy_misses() {
    // From g0 = 0: token 1 is likelier than 2, but 1 leads to a flat distribution and 2 to a
    // sure one, so the best 2-token path is 0 → 2 → 3.
    let table = vec![
        vec![-9.0, 1.0, 0.5, -9.0],
        vec![0.0, 0.0, 0.0, 0.0],
        vec![-9.0, -9.0, -9.0, 9.0],
        vec![0.0, 0.0, 0.0, 0.0],
    ];
    let mut greedy = TableDrafter(table.clone(), vec![]);
    assert_eq!(beam_search(&mut greedy, 0, &cfg(1, 3, 4)).beams[0], vec![0, 1, 0]);
    let mut d = TableDrafter(table, vec![]);
    let out = beam_search(&mut d, 0, &cfg(2, 3, 4));
    assert_eq!(out.beams, vec![vec![0, 2, 3], vec![0, 1, 0]]);
    assert_eq!(d.1, vec![1, 2], "step 2 was called with the step-1 beams, best first");
}

#[test]
fn width_equal_to_vocab_and_two_drafted_tokens_is_exhaustive() {
    // Step 1 keeps every token, so step 2 ranks all vocab² paths.
    for (vocab, seed) in [(2, 1), (3, 2), (3, 5), (4, 9)] {
        let mut d = FakeDrafter::new(vocab, seed);
        let out = beam_search(&mut d, 1, &cfg(vocab, 3, vocab));
        let expected = best(all_paths(&d, 1, 3, vocab), vocab);
        let got: Vec<(Vec<u32>, f32)> = out.beams.into_iter().zip(out.scores).collect();
        assert_eq!(got, expected, "vocab {vocab} seed {seed}");
    }
}

#[test]
fn one_drafted_token_gives_the_top_width_tokens() {
    let mut d = FakeDrafter::new(6, 4);
    let out = beam_search(&mut d, 0, &cfg(3, 2, 6));
    let expected = best(all_paths(&d, 0, 2, 6), 3);
    assert_eq!(out.beams, expected.iter().map(|p| p.0.clone()).collect::<Vec<_>>());
    assert_eq!(d.calls.len(), 0);
}

#[test]
fn uniform_logits_break_ties_by_beam_then_token() {
    let mut d = TableDrafter(vec![vec![0.0; 4]; 4], vec![]);
    let out = beam_search(&mut d, 3, &cfg(3, 3, 4));
    assert_eq!(out.beams, vec![vec![3, 0, 0], vec![3, 0, 1], vec![3, 0, 2]]);
}

#[test]
fn top_k_warp_excludes_tokens_outside_the_top_k() {
    // Token 3 has the best continuation but is 3rd after g0; with top_k = 2 it never appears.
    let table = vec![vec![3.0, 2.0, -5.0, 1.0], vec![0.0, 1.0, 2.0, 3.0], vec![0.0; 4], vec![9.0, 0.0, 0.0, 0.0]];
    let mut d = TableDrafter(table, vec![]);
    let out = beam_search(&mut d, 0, &cfg(2, 2, 2));
    let z = (3.0f32.exp() + 2.0f32.exp()).ln();
    assert_eq!(out.beams, vec![vec![0, 0], vec![0, 1]]);
    assert_eq!(out.log_probs, vec![vec![3.0 - z], vec![2.0 - z]]);
    let table = d.0;
    let mut d = TableDrafter(table.clone(), vec![]);
    let out = beam_search(&mut d, 0, &cfg(2, 4, 2));
    for beam in &out.beams {
        for w in beam.windows(2) {
            let top2 = top_k_log_probs(&table[w[0] as usize], 2);
            assert!(top2.iter().any(|p| p.0 == w[1]), "{beam:?}");
        }
    }
    assert!(out.beams.iter().all(|b| b[1] != 3), "{:?}", out.beams);
}

#[test]
#[should_panic(expected = "top_k (2) must be ≥ width (3)")]
fn top_k_below_width_is_rejected() {
    beam_search(&mut FakeDrafter::new(5, 0), 0, &cfg(3, 3, 2));
}

/// Direct reference: at every depth, rank all extensions of the kept prefixes by naive
/// warped log-probs and keep the best `width`.
#[test]
fn matches_a_naive_beam_search_on_random_drafters() {
    let mut rng = XorShift::new(5);
    for case in 0..300 {
        let (vocab, length) = (rng.range(2, 7), rng.range(1, 6));
        let width = rng.range(1, vocab + 1);
        let top_k = rng.range(width, vocab + 2);
        let mut d = FakeDrafter::new(vocab, case);
        let out = beam_search(&mut d, 1, &cfg(width, length, top_k));

        let mut kept = vec![(vec![1u32], 0.0f32)];
        for _ in 1..length {
            let mut next = vec![];
            for (beam, (p, s)) in kept.iter().enumerate() {
                let lp = naive_log_probs(&d.logits(p), top_k);
                for t in (0..vocab).filter(|&t| lp[t].is_finite()) {
                    next.push((s + lp[t], beam, t, extend(p, t as u32)));
                }
            }
            next.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap().then((a.1, a.2).cmp(&(b.1, b.2))));
            kept = next.into_iter().take(width).map(|c| (c.3, c.0)).collect();
        }
        if length == 1 {
            kept = vec![(vec![1], 0.0); width];
        }
        let beams: Vec<Vec<u32>> = kept.iter().map(|k| k.0.clone()).collect();
        assert_eq!(out.beams, beams, "case {case}");
        for (b, lps) in out.log_probs.iter().enumerate() {
            assert_eq!(lps.len(), length - 1);
            let sum: f32 = lps.iter().sum();
            assert!((out.scores[b] - sum).abs() < 1e-5, "score = sum of log-probs");
            assert!((out.scores[b] - kept[b].1).abs() < 1e-4);
        }
        let steps = length.saturating_sub(2);
        assert_eq!(d.calls.len(), steps, "case {case}");
        for (parents, tokens) in &d.calls {
            assert_eq!((parents.len(), tokens.len()), (width, width), "only kept beams are stepped");
        }
    }
}

/// [`FakeDrafter`] scoring only the ids in `ids` (its rows hold those entries), or padding the
/// same rows to the whole vocabulary with −∞.
struct SubsetDrafter {
    inner: FakeDrafter,
    ids: std::sync::Arc<[u32]>,
    padded: bool,
}

impl SubsetDrafter {
    fn row(&self, full: Vec<f32>) -> Vec<f32> {
        if self.padded {
            let mut row = vec![f32::NEG_INFINITY; full.len()];
            self.ids.iter().for_each(|&t| row[t as usize] = full[t as usize]);
            row
        } else {
            self.ids.iter().map(|&t| full[t as usize]).collect()
        }
    }
}

impl BeamDrafter for SubsetDrafter {
    fn start(&mut self, g0: u32) -> Vec<f32> {
        let full = self.inner.start(g0);
        self.row(full)
    }

    fn step(&mut self, parents: &[usize], tokens: &[u32]) -> Vec<Vec<f32>> {
        self.inner.step(parents, tokens).into_iter().map(|full| self.row(full)).collect()
    }

    fn vocabulary(&self) -> Option<std::sync::Arc<[u32]>> {
        (!self.padded).then(|| self.ids.clone())
    }
}

#[test]
fn a_drafter_over_part_of_the_vocabulary_finds_the_beams_of_its_padded_rows() {
    let mut rng = XorShift::new(11);
    for trial in 0..20u64 {
        let vocab = 40 + rng.range(0, 40);
        let ids: std::sync::Arc<[u32]> = (0..vocab as u32).filter(|_| rng.range(0, 3) > 0).collect();
        let (width, length) = (1 + rng.range(0, 4), 2 + rng.range(0, 4));
        let c = cfg(width, length, width.max(1 + rng.range(0, 8)).min(ids.len()));
        let g0 = ids[rng.range(0, ids.len())];
        let run = |padded| {
            let inner = FakeDrafter::new(vocab, trial);
            beam_search(&mut SubsetDrafter { inner, ids: ids.clone(), padded }, g0, &c)
        };
        assert_eq!(run(false), run(true), "trial {trial}: vocab {vocab}, {c:?}");
    }
}

/// A [`FakeDrafter`] that ends the search once its beams hold `stop_at` tokens.
struct StoppingDrafter {
    inner: FakeDrafter,
    stop_at: usize,
    asked: usize,
}

impl BeamDrafter for StoppingDrafter {
    fn start(&mut self, g0: u32) -> Vec<f32> {
        self.inner.start(g0)
    }

    fn step(&mut self, parents: &[usize], tokens: &[u32]) -> Vec<Vec<f32>> {
        self.inner.step(parents, tokens)
    }

    fn keep_going(&mut self, live: &Beams) -> bool {
        self.asked += 1;
        live.beams[0].len() < self.stop_at
    }
}

#[test]
fn a_drafter_that_stops_gets_the_shorter_search_without_further_calls() {
    for width in [1, 3] {
        for stop_at in 2..=4 {
            let mut d = StoppingDrafter { inner: FakeDrafter::new(12, 7), stop_at, asked: 0 };
            let stopped = beam_search(&mut d, 3, &cfg(width, 6, 12));
            let full = beam_search(&mut FakeDrafter::new(12, 7), 3, &cfg(width, stop_at, 12));
            assert_eq!(stopped, full, "width {width}, stop at {stop_at}");
            // One `step` per kept level after the first; asked before each, the last one said no.
            assert_eq!(d.inner.calls.len(), stop_at - 2);
            assert_eq!(d.asked, stop_at - 1);
        }
    }
}
