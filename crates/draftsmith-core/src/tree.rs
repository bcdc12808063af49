//! Draft trees: one structure for chains, beams and trees. Nodes are stored parent-first
//! (every parent index is smaller than its child's), which is also the order they are
//! flattened in for a single verification pass.

/// A tree of drafted tokens hanging below the last committed token.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DraftTree {
    tokens: Vec<u32>,
    /// `None` = child of the root (the last committed token).
    parents: Vec<Option<usize>>,
    /// 1 for children of the root.
    depths: Vec<usize>,
}

impl DraftTree {
    pub fn new() -> Self {
        Self::default()
    }

    /// A single chain `tokens[0] → tokens[1] → …`.
    pub fn chain(tokens: &[u32]) -> Self {
        let mut tree = Self::new();
        let mut parent = None;
        for &t in tokens {
            parent = Some(tree.push(t, parent));
        }
        tree
    }

    /// Adds a node and returns its index. Panics if `parent` is not an existing node.
    pub fn push(&mut self, token: u32, parent: Option<usize>) -> usize {
        let depth = match parent {
            Some(p) => {
                assert!(p < self.tokens.len(), "parent {p} does not exist");
                self.depths[p] + 1
            }
            None => 1,
        };
        self.tokens.push(token);
        self.parents.push(parent);
        self.depths.push(depth);
        self.tokens.len() - 1
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    pub fn parents(&self) -> &[Option<usize>] {
        &self.parents
    }

    pub fn depths(&self) -> &[usize] {
        &self.depths
    }

    /// Node indices from the root's child down to `node`.
    pub fn path_to(&self, node: usize) -> Vec<usize> {
        let mut path = vec![node];
        let mut cur = node;
        while let Some(p) = self.parents[cur] {
            path.push(p);
            cur = p;
        }
        path.reverse();
        path
    }

    /// Position ids of the nodes when the root token sits at `root_position`.
    pub fn positions(&self, root_position: usize) -> Vec<usize> {
        self.depths.iter().map(|d| root_position + d).collect()
    }

    /// Whether every node's parent is the node before it (a plain chain, the empty tree
    /// included): its attention mask is the causal one.
    pub fn is_chain(&self) -> bool {
        self.parents.iter().enumerate().all(|(i, p)| *p == i.checked_sub(1))
    }

    /// Row-major `[n, cached + n]` visibility (`true` = may attend) for verifying the tree after
    /// `cached` committed positions: every node sees the whole cache, its ancestors and itself.
    pub fn visibility(&self, cached: usize) -> Vec<bool> {
        let n = self.len();
        let width = cached + n;
        let mut mask = vec![false; n * width];
        for node in 0..n {
            let row = &mut mask[node * width..(node + 1) * width];
            row[..cached].iter_mut().for_each(|v| *v = true);
            let mut cur = Some(node);
            while let Some(c) = cur {
                row[cached + c] = true;
                cur = self.parents[c];
            }
        }
        mask
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_is_causal() {
        let t = DraftTree::chain(&[5, 6, 7]);
        assert!(t.is_chain() && DraftTree::new().is_chain());
        let mut forked = DraftTree::chain(&[5, 6]);
        forked.push(8, Some(0));
        assert!(!forked.is_chain());
        assert_eq!(t.positions(10), vec![11, 12, 13]);
        let m = t.visibility(2);
        let rows: Vec<&[bool]> = m.chunks(5).collect();
        assert_eq!(rows[0], &[true, true, true, false, false]);
        assert_eq!(rows[2], &[true, true, true, true, true]);
    }

    #[test]
    fn siblings_share_a_position_and_do_not_see_each_other() {
        let mut t = DraftTree::new();
        let a = t.push(1, None);
        let b = t.push(2, None);
        let c = t.push(3, Some(b));
        assert_eq!(t.positions(0), vec![1, 1, 2]);
        assert_eq!(t.path_to(c), vec![b, c]);
        let m = t.visibility(1);
        assert_eq!(&m[4..8], &[true, false, true, false], "b sees the cache and itself, not a");
        assert_eq!(&m[8..12], &[true, false, true, true]);
        let _ = a;
    }
}
