//! `dedup_prefix`: for every prefix of every beam, the smallest beam index sharing it.

use std::collections::HashMap;

/// For equal-length `beams`, `out[b][d]` is the smallest beam index `b'` with
/// `beams[b'][..=d] == beams[b][..=d]` (the reference's `prefix_tree`). Beam `b` owns its
/// token at depth `d` (it is the first to reach that prefix) iff `out[b][d] == b`.
///
/// The reference compares every pair of beams (`W²·L`, cumulative sum of equalities); here a
/// prefix of length `d + 1` is named by (name of its length-`d` prefix, last token), so one hash
/// lookup per token suffices: `O(W·L)`. Panics if the beams differ in length.
pub fn dedup_prefix(beams: &[Vec<u32>]) -> Vec<Vec<usize>> {
    let length = beams.first().map_or(0, Vec::len);
    assert!(
        beams.iter().all(|b| b.len() == length),
        "dedup_prefix: beams differ in length (first has {length} tokens)"
    );
    let mut out = vec![Vec::with_capacity(length); beams.len()];
    // (owner of the parent prefix, token) → owner of the prefix; usize::MAX names the empty prefix.
    let mut owners: HashMap<(usize, u32), usize> = HashMap::with_capacity(beams.len());
    for d in 0..length {
        owners.clear();
        for (b, beam) in beams.iter().enumerate() {
            let parent = if d == 0 { usize::MAX } else { out[b][d - 1] };
            let owner = *owners.entry((parent, beam[d])).or_insert(b);
            out[b].push(owner);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::beams::XorShift;

    /// Literal definition: scan the beams before `b` for one with the same prefix.
    fn brute_force(beams: &[Vec<u32>]) -> Vec<Vec<usize>> {
        beams
            .iter()
            .map(|beam| {
                (0..beam.len()).map(|d| (0..beams.len()).find(|&k| beams[k][..=d] == beam[..=d]).unwrap()).collect()
            })
            .collect()
    }

    #[test]
    fn paper_worked_example() {
        let beams = vec![vec![91, 92, 93, 95], vec![91, 92, 94, 96], vec![91, 92, 93, 97]];
        let expected = vec![vec![0, 0, 0, 0], vec![0, 0, 1, 1], vec![0, 0, 0, 2]];
        assert_eq!(dedup_prefix(&beams), expected);
        assert_eq!(brute_force(&beams), expected);
    }

    #[test]
    fn empty_inputs() {
        assert!(dedup_prefix(&[]).is_empty());
        assert_eq!(dedup_prefix(&[vec![], vec![]]), vec![Vec::<usize>::new(); 2]);
    }

    #[test]
    fn a_prefix_that_diverges_and_reconverges_is_not_shared() {
        // Same token at depth 1, different at depth 0: no sharing at depth 1.
        let beams = vec![vec![1, 5], vec![2, 5], vec![1, 5]];
        assert_eq!(dedup_prefix(&beams), vec![vec![0, 0], vec![1, 1], vec![0, 0]]);
    }

    #[test]
    #[should_panic(expected = "differ in length")]
    fn unequal_lengths_panic() {
        dedup_prefix(&[vec![1, 2], vec![1]]);
    }

    #[test]
    fn matches_brute_force_on_random_beams() {
        let mut rng = XorShift::new(7);
        for _ in 0..2000 {
            let width = rng.range(1, 17);
            let length = rng.range(1, 7);
            let vocab = rng.range(2, 4);
            let beams = rng.beams(width, length, vocab);
            assert_eq!(dedup_prefix(&beams), brute_force(&beams), "beams {beams:?}");
        }
    }
}
