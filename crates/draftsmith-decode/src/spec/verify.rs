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
/// node `i`. Every path whose tokens all equal the target's argmax after their parents is the
/// target's own greedy continuation; the deepest one is accepted (the lowest node indices on
/// ties: first beam first). Siblings may repeat a token (beams verified as separate chains), so
/// all matching children are searched, not only the first.
pub fn verify_greedy(tree: &DraftTree, root_next: u32, node_next: &[u32]) -> Acceptance {
    assert_eq!(node_next.len(), tree.len(), "one target token per node");
    let mut children = vec![Vec::new(); tree.len() + 1];
    for (i, p) in tree.parents().iter().enumerate() {
        children[p.map_or(0, |p| p + 1)].push(i);
    }
    let path = deepest(tree, &children, None, root_next, node_next);
    let bonus = path.last().map_or(root_next, |&n| node_next[n]);
    Acceptance { path, bonus }
}

/// [`verify_greedy`]'s `node_next` when the target's greedy continuation from the root is known
/// to be `truth` (its first token after the root, then the next, …): after a node at depth `d`,
/// `truth[d]` — right on the continuation's path, a stand-in off it (no node there is accepted
/// whatever follows it), `u32::MAX` past the end of `truth`. How a replay, or a policy learning
/// in hindsight, judges a draft after the fact.
pub fn known_next(tree: &DraftTree, truth: &[u32]) -> Vec<u32> {
    tree.depths().iter().map(|&d| truth.get(d).copied().unwrap_or(u32::MAX)).collect()
}

/// The path [`verify_greedy`] accepts when the target's greedy continuation is known to be
/// `truth` ([`known_next`]): a node at depth `d` is accepted when its path spells `truth[..d]`.
pub fn greedy_path(tree: &DraftTree, truth: &[u32]) -> Vec<usize> {
    let Some(&root_next) = truth.first() else { return Vec::new() };
    verify_greedy(tree, root_next, &known_next(tree, truth)).path
}

/// The deepest accepted path below `parent` whose first token must be `want`.
fn deepest(
    tree: &DraftTree,
    children: &[Vec<usize>],
    parent: Option<usize>,
    want: u32,
    node_next: &[u32],
) -> Vec<usize> {
    let mut best: Vec<usize> = Vec::new();
    for &c in &children[parent.map_or(0, |p| p + 1)] {
        if tree.tokens()[c] != want {
            continue;
        }
        let mut path = vec![c];
        path.extend(deepest(tree, children, Some(c), node_next[c], node_next));
        if path.len() > best.len() {
            best = path;
        }
    }
    best
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
        // After token 5 the target wants 8: node 0's branch stops, node 3's (the same token
        // 5, another beam) continues with 8, so that deeper path is accepted.
        let next = [8, 1, 0, 8, 3, 0];
        assert_eq!(verify_greedy(&t, 5, &next), Acceptance { path: vec![3, 4], bonus: 3 });
        assert_eq!(verify_greedy(&t, 9, &next), Acceptance { path: vec![5], bonus: 0 });
    }

    #[test]
    fn empty_tree_yields_only_the_bonus() {
        assert_eq!(verify_greedy(&DraftTree::new(), 3, &[]), Acceptance { path: vec![], bonus: 3 });
    }
}
