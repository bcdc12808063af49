//! The frequency trie of the N-Gram-Trie method (paper §3.1, Algorithm 1) and its two queries
//! (§3.2): longest-suffix match of the generated tokens, and the frequency-pruned subtree below
//! the match, kept by a bounded min-heap of `num_draft` nodes.
//!
//! Every node stores how many inserted keys pass through it (Algorithm 1 lines 11 and 15: the
//! frequency is updated on every node of the key). A parent's count is therefore never smaller
//! than any child's, which is what makes the top-`num_draft` selection closed under parents.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use draftsmith_core::DraftTree;

/// Index of a node in the trie's arena; the root is [`Trie::ROOT`].
pub type NodeId = usize;

/// One trie node: its token, the number of keys through it, children ordered by token.
#[derive(Debug, Clone, Default)]
struct Node {
    token: u32,
    count: u64,
    children: BTreeMap<u32, NodeId>,
}

/// A token trie with per-node frequencies, supporting insertion and exact removal of keys.
#[derive(Debug, Clone)]
pub struct Trie {
    nodes: Vec<Node>,
    /// Arena slots released by removals, reused by later insertions.
    free: Vec<NodeId>,
}

/// Result of [`Trie::longest_suffix_match`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SuffixMatch {
    /// The node reached by the matched tokens (the root `v_r` of the suffix tree `τ_s`).
    pub node: NodeId,
    /// How many trailing tokens matched.
    pub len: usize,
}

impl Default for Trie {
    fn default() -> Self {
        Self::new()
    }
}

impl Trie {
    /// The empty root node.
    pub const ROOT: NodeId = 0;

    /// A trie holding only the root.
    pub fn new() -> Self {
        Self { nodes: vec![Node::default()], free: Vec::new() }
    }

    /// Live nodes, the root excluded.
    pub fn len(&self) -> usize {
        self.nodes.len() - 1 - self.free.len()
    }

    /// Whether no key is stored.
    pub fn is_empty(&self) -> bool {
        self.nodes[Self::ROOT].children.is_empty()
    }

    /// Inserts `key` once: every node on its path gains one count (Algorithm 1, eq. 4).
    pub fn insert(&mut self, key: &[u32]) {
        let mut node = Self::ROOT;
        for &t in key {
            node = match self.nodes[node].children.get(&t) {
                Some(&child) => child,
                None => {
                    let child = self.alloc(t);
                    self.nodes[node].children.insert(t, child);
                    child
                }
            };
            self.nodes[node].count += 1;
        }
    }

    /// Undoes one [`Trie::insert`] of `key`; nodes whose count drops to zero are unlinked and
    /// recycled. Returns `false` (and changes nothing) when `key` is not stored.
    pub fn remove(&mut self, key: &[u32]) -> bool {
        if key.is_empty() || self.find(key).is_none() {
            return false;
        }
        let mut node = Self::ROOT;
        for &t in key {
            let child = self.nodes[node].children[&t];
            self.nodes[child].count -= 1;
            if self.nodes[child].count == 0 {
                // Counts never grow downwards, so the whole subtree is empty too.
                self.nodes[node].children.remove(&t);
                self.release(child);
                return true;
            }
            node = child;
        }
        true
    }

    /// The node reached from the root by `path`, if stored (the empty path is the root).
    pub fn find(&self, path: &[u32]) -> Option<NodeId> {
        path.iter().try_fold(Self::ROOT, |node, t| self.nodes[node].children.get(t).copied())
    }

    /// Frequency of the node at `path` (`None` when absent).
    pub fn count(&self, path: &[u32]) -> Option<u64> {
        self.find(path).map(|n| self.nodes[n].count)
    }

    /// Tokens of the children of `node`, ascending.
    pub fn child_tokens(&self, node: NodeId) -> Vec<u32> {
        self.nodes[node].children.keys().copied().collect()
    }

    /// §3.2 "Draft Construction": matches the last `max_len` tokens of `tokens` as a path from
    /// the root, then one token fewer, down to one. A match counts only when the node has a
    /// continuation (a non-empty suffix tree); otherwise the search goes on with fewer tokens.
    pub fn longest_suffix_match(&self, tokens: &[u32], max_len: usize) -> Option<SuffixMatch> {
        (1..=max_len.min(tokens.len())).rev().find_map(|len| {
            let node = self.find(&tokens[tokens.len() - len..])?;
            (!self.nodes[node].children.is_empty()).then_some(SuffixMatch { node, len })
        })
    }

    /// §3.2 pruning: the `num_draft` highest-frequency nodes below `root` (at most `max_depth`
    /// levels down), chosen with a bounded min-heap, as a [`DraftTree`] in depth-first order.
    ///
    /// Ties are broken by depth-first preorder (children by descending frequency, then
    /// ascending token): of two nodes with equal frequency the one visited first is kept. A
    /// parent has at least its child's frequency and an earlier preorder, so it always outranks
    /// the child: no orphans.
    pub fn top_subtree(&self, root: NodeId, num_draft: usize, max_depth: Option<usize>) -> DraftTree {
        self.top_subtree_with_counts(root, num_draft, max_depth).0
    }

    /// [`Trie::top_subtree`] with each draft node's frequency and its parent's (the root's
    /// for the first level), in tree order.
    pub fn top_subtree_with_counts(
        &self,
        root: NodeId,
        num_draft: usize,
        max_depth: Option<usize>,
    ) -> (DraftTree, Vec<(u64, u64)>) {
        let max_depth = max_depth.unwrap_or(usize::MAX);
        // Preorder list of visited nodes: (trie node, index of its parent in this list).
        let mut visited: Vec<(NodeId, Option<usize>)> = Vec::new();
        // Min-heap on rank (count, earlier preorder wins): the top is the weakest kept node.
        let mut heap: BinaryHeap<Reverse<(u64, Reverse<usize>)>> = BinaryHeap::new();
        let mut stack: Vec<(NodeId, Option<usize>, usize)> = self.children_rev(root, None, 1);
        while let Some((node, parent, depth)) = stack.pop() {
            let rank = (self.nodes[node].count, Reverse(visited.len()));
            if heap.len() == num_draft {
                // Every later node of this subtree ranks lower still: skip it whole.
                match heap.peek() {
                    Some(Reverse(weakest)) if rank > *weakest => {
                        heap.pop();
                    }
                    _ => continue,
                }
            }
            heap.push(Reverse(rank));
            let index = visited.len();
            visited.push((node, parent));
            if depth < max_depth {
                stack.extend(self.children_rev(node, Some(index), depth + 1));
            }
        }
        self.assemble(root, &visited, heap.into_iter().map(|Reverse((_, Reverse(i)))| i).collect())
    }

    /// Children of `node` as stack entries, in reverse of [`Trie::children_by_count`] (so the
    /// most frequent pops first).
    fn children_rev(&self, node: NodeId, parent: Option<usize>, depth: usize) -> Vec<(NodeId, Option<usize>, usize)> {
        self.children_by_count(node).into_iter().rev().map(|c| (c, parent, depth)).collect()
    }

    /// Children of `node`, most frequent first (ties: ascending token). Drafts list siblings in
    /// this order, so a sibling's rank says how likely it is (the draft policy learns
    /// acceptance by rank).
    fn children_by_count(&self, node: NodeId) -> Vec<NodeId> {
        let mut children: Vec<NodeId> = self.nodes[node].children.values().copied().collect();
        // Stable: equal counts keep the map's ascending-token order.
        children.sort_by_key(|&c| Reverse(self.nodes[c].count));
        children
    }

    /// Builds the draft tree from the kept preorder indices (parents precede children), with
    /// each node's and its parent's frequency (`root` is the first level's parent).
    fn assemble(
        &self,
        root: NodeId,
        visited: &[(NodeId, Option<usize>)],
        mut kept: Vec<usize>,
    ) -> (DraftTree, Vec<(u64, u64)>) {
        kept.sort_unstable();
        let mut slot = vec![None; visited.len()];
        let mut tree = DraftTree::new();
        let mut counts = Vec::with_capacity(kept.len());
        for i in kept {
            let (node, parent) = visited[i];
            let above = parent.map_or(root, |p| visited[p].0);
            let parent = parent.map(|p| slot[p].expect("a kept node's parent is kept"));
            slot[i] = Some(tree.push(self.nodes[node].token, parent));
            counts.push((self.nodes[node].count, self.nodes[above].count));
        }
        (tree, counts)
    }

    /// A fresh node for `token` (count zero), reusing a released slot when there is one.
    fn alloc(&mut self, token: u32) -> NodeId {
        let node = Node { token, count: 0, children: BTreeMap::new() };
        match self.free.pop() {
            Some(id) => {
                self.nodes[id] = node;
                id
            }
            None => {
                self.nodes.push(node);
                self.nodes.len() - 1
            }
        }
    }

    /// Returns `node` and its whole subtree to the free list.
    fn release(&mut self, node: NodeId) {
        let mut stack = vec![node];
        while let Some(n) = stack.pop() {
            let children = std::mem::take(&mut self.nodes[n].children);
            stack.extend(children.into_values());
            self.free.push(n);
        }
    }
}

/// The keys one n-gram window contributes (§3.1, eqs. 1–3, Algorithm 1 lines 3–5): for the
/// window starting at `start`, prefix `P = T[start..start+L_p]` and suffix `S` = the rest of
/// the window, the keys `P[j..L_p] + S` for `j` in `0..L_p`, i.e. `T[start+j..end]`. Windows
/// running past the end of `tokens` are cut there; empty keys are skipped.
pub fn window_keys(tokens: &[u32], start: usize, n: usize, prefix_len: usize) -> impl Iterator<Item = &[u32]> {
    let end = (start + n).min(tokens.len());
    (0..prefix_len).map(move |j| start + j).take_while(move |&from| from < end).map(move |from| &tokens[from..end])
}
