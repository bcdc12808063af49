//! Greedy verification of a draft tree: the longest path whose every token equals the
//! target's argmax after its parent, plus the target's own next token (the bonus).

use draftsmith_core::DraftTree;

/// Result of verifying one tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acceptance {
    /// Accepted node indices, from a child of the root downwards.
    pub path: Vec<usize>,
    /// The target's next token after the accepted path.
    pub bonus: u32,
}

/// `root_next`: the target's argmax after the root token; `node_next[i]`: its argmax after
/// node `i`. Among siblings carrying the same token the lowest index wins (first beam on ties).
pub fn verify_greedy(tree: &DraftTree, root_next: u32, node_next: &[u32]) -> Acceptance {
    assert_eq!(node_next.len(), tree.len(), "one target token per node");
    let mut path = Vec::new();
    let mut parent = None;
    let mut want = root_next;
    loop {
        let child = (0..tree.len()).find(|&i| tree.parents()[i] == parent && tree.tokens()[i] == want);
        match child {
            Some(c) => {
                path.push(c);
                want = node_next[c];
                parent = Some(c);
            }
            None => return Acceptance { path, bonus: want },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_longest_matching_path() {
        // root ─ 5 (0) ─ 6 (1) ─ 7 (2)
        //      └ 5 (3) ─ 8 (4)
        //      └ 9 (5)
        let mut t = DraftTree::new();
        let a = t.push(5, None);
        let b = t.push(6, Some(a));
        t.push(7, Some(b));
        let d = t.push(5, None);
        t.push(8, Some(d));
        t.push(9, None);
        // Target: after root → 5, after node0 → 6, after node1 → 1 (rejects 7).
        let next = [6, 1, 0, 8, 3, 0];
        assert_eq!(verify_greedy(&t, 5, &next), Acceptance { path: vec![0, 1], bonus: 1 });
        // Root's argmax matches nothing: only the bonus.
        assert_eq!(verify_greedy(&t, 4, &next), Acceptance { path: vec![], bonus: 4 });
        // After node0 the target wants 8, which only hangs below node3: not reachable.
        let next = [8, 1, 0, 8, 3, 0];
        assert_eq!(verify_greedy(&t, 5, &next), Acceptance { path: vec![0], bonus: 8 });
        assert_eq!(verify_greedy(&t, 9, &next), Acceptance { path: vec![5], bonus: 0 });
    }

    #[test]
    fn empty_tree_yields_only_the_bonus() {
        assert_eq!(verify_greedy(&DraftTree::new(), 3, &[]), Acceptance { path: vec![], bonus: 3 });
    }
}
