//! Packing beams into a draft tree (the reference's `pack_beam`): shared prefixes stored once.

use super::dedup_prefix;
use crate::DraftTree;

/// Beams packed into a tree hanging below their shared first token `g0`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedBeams {
    /// `beams[..][1..]`, every distinct prefix once, parent-first (beam-major, as the reference
    /// flattens its packed beam).
    pub tree: DraftTree,
    /// `node[b][d - 1]` = the tree node holding `beams[b][d]` (`d ≥ 1`).
    pub node: Vec<Vec<usize>>,
}

impl PackedBeams {
    /// Tokens sent for verification with tree attention: `g0` plus the tree.
    pub fn packed_len(&self) -> usize {
        1 + self.tree.len()
    }
}

/// Tokens sent for verification without tree attention: width × length (`g0` included).
pub fn unpacked_len(beams: &[Vec<u32>]) -> usize {
    beams.iter().map(Vec::len).sum()
}

/// Packs equal-length `beams` that all start with the guaranteed token `g0` (panics otherwise).
/// The tree holds `beams[..][1..]` with every shared prefix stored once; nodes come beam by
/// beam, each beam's new tokens by depth, so parents precede their children.
pub fn pack_beams(beams: &[Vec<u32>]) -> PackedBeams {
    let prefix_owner = dedup_prefix(beams);
    if let Some(first) = beams.first() {
        assert!(!first.is_empty(), "pack_beams: beams must hold at least g0");
        assert!(
            beams.iter().all(|b| b[0] == first[0]),
            "pack_beams: every beam must start with the same guaranteed token g0 = {}",
            first[0]
        );
    }
    let mut tree = DraftTree::new();
    let mut node: Vec<Vec<usize>> = Vec::with_capacity(beams.len());
    for (b, beam) in beams.iter().enumerate() {
        let mut row = Vec::with_capacity(beam.len().saturating_sub(1));
        for d in 1..beam.len() {
            let owner = prefix_owner[b][d];
            let n = if owner == b {
                let parent = (d > 1).then(|| row[d - 2]);
                tree.push(beam[d], parent)
            } else {
                // The owner is a smaller beam index, already packed.
                node[owner][d - 1]
            };
            row.push(n);
        }
        node.push(row);
    }
    PackedBeams { tree, node }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::beams::XorShift;
    use std::collections::HashSet;

    fn tokens_on_path(tree: &DraftTree, node: usize) -> Vec<u32> {
        tree.path_to(node).iter().map(|&n| tree.tokens()[n]).collect()
    }

    #[test]
    fn paper_worked_example() {
        let beams = vec![vec![91, 92, 93, 95], vec![91, 92, 94, 96], vec![91, 92, 93, 97]];
        let p = pack_beams(&beams);
        assert_eq!(p.tree.tokens(), &[92, 93, 95, 94, 96, 97]);
        assert_eq!(p.tree.parents(), &[None, Some(0), Some(1), Some(0), Some(3), Some(1)]);
        assert_eq!(p.tree.depths(), &[1, 2, 3, 2, 3, 3]);
        assert_eq!(p.node, vec![vec![0, 1, 2], vec![0, 3, 4], vec![0, 1, 5]]);
        assert_eq!((unpacked_len(&beams), p.packed_len()), (12, 7));
        // g0 at position 9: depth-d nodes sit at 9 + d.
        assert_eq!(p.tree.positions(9), vec![10, 11, 12, 11, 12, 12]);
    }

    #[test]
    fn paper_figure_4_counts_15_tokens_before_and_8_after() {
        // "morning sipping coffee and {listening | watching}", "morning sipping coffee on her".
        let (morning, sipping, coffee, and, listening, watching, on, her) = (1, 2, 3, 4, 5, 6, 7, 8);
        let beams = vec![
            vec![morning, sipping, coffee, and, listening],
            vec![morning, sipping, coffee, and, watching],
            vec![morning, sipping, coffee, on, her],
        ];
        let p = pack_beams(&beams);
        assert_eq!((unpacked_len(&beams), p.packed_len()), (15, 8));
        assert_eq!(p.tree.tokens(), &[sipping, coffee, and, listening, watching, on, her]);
    }

    #[test]
    fn visibility_is_ancestor_or_self() {
        let p = pack_beams(&[vec![0, 1, 2], vec![0, 1, 3], vec![0, 4, 2]]);
        // Nodes: 0=1, 1=2 (under 0), 2=3 (under 0), 3=4, 4=2 (under 3).
        let n = p.tree.len();
        let cached = 2;
        let mask = p.tree.visibility(cached);
        for q in 0..n {
            for k in 0..n {
                let ancestor_or_self = p.tree.path_to(q).contains(&k);
                assert_eq!(mask[q * (cached + n) + cached + k], ancestor_or_self, "({q},{k})");
            }
        }
    }

    #[test]
    fn length_one_beams_pack_to_an_empty_tree() {
        let p = pack_beams(&[vec![7], vec![7]]);
        assert!(p.tree.is_empty());
        assert_eq!(p.node, vec![Vec::<usize>::new(); 2]);
        assert_eq!(p.packed_len(), 1);
    }

    #[test]
    #[should_panic(expected = "same guaranteed token")]
    fn beams_must_share_g0() {
        pack_beams(&[vec![1, 2], vec![3, 2]]);
    }

    #[test]
    fn random_beams_pack_into_a_trie() {
        let mut rng = XorShift::new(11);
        for _ in 0..1000 {
            let (width, length, vocab) = (rng.range(1, 17), rng.range(1, 7), rng.range(2, 4));
            let mut beams = rng.beams(width, length, vocab);
            beams.iter_mut().for_each(|b| b[0] = 42);
            let p = pack_beams(&beams);
            let t = &p.tree;
            for (b, beam) in beams.iter().enumerate() {
                assert_eq!(p.node[b].len(), length - 1);
                for d in 1..length {
                    let n = p.node[b][d - 1];
                    assert_eq!(tokens_on_path(t, n), beam[1..=d], "beams {beams:?}");
                    assert_eq!(t.depths()[n], d);
                }
            }
            let mut children = HashSet::new();
            for (i, parent) in t.parents().iter().enumerate() {
                assert!(parent.is_none_or(|p| p < i), "parent-first order");
                assert!(children.insert((*parent, t.tokens()[i])), "duplicate sibling");
            }
            let prefixes: HashSet<&[u32]> = beams.iter().flat_map(|b| (2..=length).map(move |l| &b[..l])).collect();
            assert_eq!(t.len(), prefixes.len(), "one node per distinct prefix");
            assert_eq!(unpacked_len(&beams), width * length);
        }
    }
}
