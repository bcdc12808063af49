//! TokenSwift's draft tree: a cartesian product of candidates per depth (reference
//! `medusa_choices.py`, `[1, 3, 3, 3]`): the top-`b₀` tokens of the target's own next-token
//! distribution at depth 1, and below every depth-`d` node the top-`b_d` tokens of head `d`.

use draftsmith_core::DraftTree;

/// Builds the tree from per-depth candidate lists (best first); `branching[d]` of
/// `candidates[d]` are used at depth `d + 1`. Node `i`'s token comes from depth
/// `depths()[i] - 1`'s list.
pub fn cartesian(candidates: &[Vec<u32>], branching: &[usize]) -> DraftTree {
    let mut tree = DraftTree::new();
    let mut frontier: Vec<Option<usize>> = vec![None];
    for (list, &b) in candidates.iter().zip(branching) {
        let mut next = Vec::with_capacity(frontier.len() * b);
        for &parent in &frontier {
            for &t in list.iter().take(b) {
                next.push(Some(tree.push(t, parent)));
            }
        }
        frontier = next;
    }
    tree
}

/// Number of nodes of a cartesian tree: `b₀ + b₀b₁ + …`.
pub fn size(branching: &[usize]) -> usize {
    branching
        .iter()
        .scan(1usize, |acc, &b| {
            *acc *= b;
            Some(*acc)
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_1_3_3_3_tree_has_40_nodes_and_27_leaves() {
        let c = vec![vec![10, 11, 12], vec![20, 21, 22], vec![30, 31, 32], vec![40, 41, 42]];
        let tree = cartesian(&c, &[1, 3, 3, 3]);
        assert_eq!(tree.len(), 40);
        assert_eq!(size(&[1, 3, 3, 3]), 40, "41 verify tokens with the root");
        let leaves = (0..tree.len()).filter(|&i| !tree.parents().contains(&Some(i))).count();
        assert_eq!(leaves, 27);
        assert_eq!(tree.tokens()[0], 10, "depth 1: the top-1 of p0 only");
        assert!(
            (0..tree.len()).all(|i| tree.tokens()[i] / 10 == tree.depths()[i] as u32),
            "depth d holds head d−1's candidates"
        );
        // Every path is a distinct combination.
        let mut paths: Vec<Vec<u32>> = (0..tree.len())
            .filter(|&i| tree.depths()[i] == 4)
            .map(|i| tree.path_to(i).iter().map(|&j| tree.tokens()[j]).collect())
            .collect();
        paths.sort();
        paths.dedup();
        assert_eq!(paths.len(), 27);
        assert_eq!(cartesian(&c, &[3, 3, 3, 3]).len(), 120);
        assert_eq!(size(&[1, 9, 9, 9]), 1 + 9 + 81 + 729);
    }
}
