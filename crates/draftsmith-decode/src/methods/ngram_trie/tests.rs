//! Unit tests on hand-made token sequences, plus randomized checks against brute force.

use super::*;

/// `T = [1,2,3,1,2,4]`, `n = 4`, `L_p = 2`. Windows (start: keys):
/// 0: [1,2,3,1] [2,3,1] · 1: [2,3,1,2] [3,1,2] · 2: [3,1,2,4] [1,2,4] ·
/// 3 (cut): [1,2,4] [2,4] · 4 (cut): [2,4] [4] · 5 (cut): [4].
fn hand_index() -> NgramIndex {
    NgramIndex::build(&[1, 2, 3, 1, 2, 4], 4, 2)
}

/// Every stored path with its count, in depth-first preorder (children by ascending token).
fn dump(trie: &Trie) -> Vec<(Vec<u32>, u64)> {
    dump_ordered(trie, false)
}

/// [`dump`] with children by descending count when `by_count` (ties: ascending token), the
/// order drafts list siblings in.
fn dump_ordered(trie: &Trie, by_count: bool) -> Vec<(Vec<u32>, u64)> {
    fn walk(trie: &Trie, by_count: bool, path: &mut Vec<u32>, out: &mut Vec<(Vec<u32>, u64)>) {
        let node = trie.find(path).unwrap();
        let mut children = trie.child_tokens(node);
        if by_count {
            children.sort_by_key(|&t| {
                path.push(t);
                let c = trie.count(path).unwrap();
                path.pop();
                std::cmp::Reverse(c)
            });
        }
        for t in children {
            path.push(t);
            out.push((path.clone(), trie.count(path).unwrap()));
            walk(trie, by_count, path, out);
            path.pop();
        }
    }
    let mut out = Vec::new();
    walk(trie, by_count, &mut Vec::new(), &mut out);
    out
}

struct Lcg(u64);
impl Lcg {
    fn next(&mut self, bound: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % bound
    }
}

#[test]
fn confidence_classes_follow_the_share_of_the_parent() {
    assert_eq!(
        [(5, 5), (1, 1), (3, 5), (2, 5), (1, 2), (1, 0)].map(|(c, p)| confidence_class(c, p)),
        [0, 1, 2, 3, 2, 1]
    );
}

#[test]
fn window_keys_are_sub_prefixes_plus_suffix() {
    let t = [1, 2, 3, 1, 2, 4];
    let keys: Vec<&[u32]> = window_keys(&t, 0, 4, 2).collect();
    assert_eq!(keys, vec![&[1, 2, 3, 1][..], &[2, 3, 1][..]]);
    let keys: Vec<&[u32]> = window_keys(&t, 5, 4, 2).collect();
    assert_eq!(keys, vec![&[4][..]], "cut at the end, empty keys skipped");
    let keys: Vec<&[u32]> = window_keys(&t, 1, 6, 3).collect();
    assert_eq!(keys, vec![&[2, 3, 1, 2, 4][..], &[3, 1, 2, 4][..], &[1, 2, 4][..]]);
}

#[test]
fn counts_after_insertion_match_hand_computation() {
    let index = hand_index();
    let trie = index.trie();
    let expect: &[(&[u32], u64)] = &[
        (&[1], 3),
        (&[1, 2], 3),
        (&[1, 2, 3], 1),
        (&[1, 2, 3, 1], 1),
        (&[1, 2, 4], 2),
        (&[2], 4),
        (&[2, 3], 2),
        (&[2, 3, 1], 2),
        (&[2, 3, 1, 2], 1),
        (&[2, 4], 2),
        (&[3], 2),
        (&[3, 1], 2),
        (&[3, 1, 2], 2),
        (&[3, 1, 2, 4], 1),
        (&[4], 2),
    ];
    let got = dump(trie);
    let want: Vec<(Vec<u32>, u64)> = expect.iter().map(|(p, c)| (p.to_vec(), *c)).collect();
    assert_eq!(got, want);
    assert_eq!(trie.len(), 15);
    assert_eq!(trie.count(&[4, 1]), None);
}

#[test]
fn longest_suffix_match_falls_back_from_lp_to_one() {
    let index = hand_index();
    let trie = index.trie();
    let m = trie.longest_suffix_match(&[9, 1, 2], 2).unwrap();
    assert_eq!((m.len, Some(m.node)), (2, trie.find(&[1, 2])));
    let m = trie.longest_suffix_match(&[5, 3], 2).unwrap();
    assert_eq!((m.len, Some(m.node)), (1, trie.find(&[3])), "[5,3] absent: falls back to [3]");
    let m = trie.longest_suffix_match(&[2, 3, 1], 3).unwrap();
    assert_eq!(m.len, 3, "deeper than L_p of the build when asked");
    assert_eq!(trie.longest_suffix_match(&[9, 7], 2), None, "nothing matches");
    // [2,4] and [4] are stored but have no continuation: no draft to take.
    assert_eq!(trie.longest_suffix_match(&[1, 2, 4], 2), None);
    assert_eq!(trie.longest_suffix_match(&[], 2), None);
}

#[test]
fn subtree_keeps_the_most_frequent_nodes_parents_first() {
    let index = hand_index();
    let trie = index.trie();
    let below_2 = trie.find(&[2]).unwrap();
    // Below [2]: 3 (f 2) → 1 (f 2) → 2 (f 1); 4 (f 2). Preorder: 3, 31, 312, 4.
    let all = trie.top_subtree(below_2, 10, None);
    assert_eq!(all.tokens(), &[3, 1, 2, 4]);
    assert_eq!(all.parents(), &[None, Some(0), Some(1), None]);
    let two = trie.top_subtree(below_2, 2, None);
    assert_eq!((two.tokens(), two.parents()), (&[3, 1][..], &[None, Some(0)][..]), "ties: earlier preorder wins");
    let three = trie.top_subtree(below_2, 3, None);
    assert_eq!((three.tokens(), three.parents()), (&[3, 1, 4][..], &[None, Some(0), None][..]));
    let shallow = trie.top_subtree(below_2, 10, Some(1));
    assert_eq!(shallow.tokens(), &[3, 4]);
}

#[test]
fn frequency_beats_preorder_and_ties_are_deterministic() {
    let mut a = Trie::new();
    for key in [&[5, 1][..], &[5, 2], &[5, 2], &[5, 3, 7]] {
        a.insert(key);
    }
    let root = a.find(&[5]).unwrap();
    assert_eq!(a.top_subtree(root, 1, None).tokens(), &[2], "frequency 2 beats earlier tokens");
    assert_eq!(a.top_subtree(root, 2, None).tokens(), &[2, 1], "tie 1 vs 3: lower token; siblings by frequency");
    // The same multiset of keys inserted in another order gives the same draft.
    let mut b = Trie::new();
    for key in [&[5, 3, 7][..], &[5, 2], &[5, 1], &[5, 2]] {
        b.insert(key);
    }
    let root_b = b.find(&[5]).unwrap();
    for k in 1..6 {
        assert_eq!(a.top_subtree(root, k, None), b.top_subtree(root_b, k, None));
    }
}

/// Brute force: all nodes below `path` ranked by (frequency desc, preorder asc), the preorder
/// visiting children by descending frequency.
fn brute_top(trie: &Trie, path: &[u32], k: usize) -> DraftTree {
    let below: Vec<(Vec<u32>, u64)> =
        dump_ordered(trie, true).into_iter().filter(|(p, _)| p.len() > path.len() && p.starts_with(path)).collect();
    let mut order: Vec<usize> = (0..below.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(below[i].1), i));
    let mut kept: Vec<usize> = order.into_iter().take(k).collect();
    kept.sort_unstable();
    let mut tree = DraftTree::new();
    let mut at: Vec<Vec<u32>> = Vec::new();
    for i in kept {
        let p = &below[i].0;
        let parent = at.iter().position(|q| q[..] == p[..p.len() - 1]);
        assert!(p.len() == path.len() + 1 || parent.is_some(), "orphan {p:?}");
        tree.push(*p.last().unwrap(), parent);
        at.push(p.clone());
    }
    tree
}

#[test]
fn bounded_heap_equals_brute_force_and_never_orphans() {
    let mut rng = Lcg(7);
    for _ in 0..60 {
        let tokens: Vec<u32> = (0..5 + rng.next(60)).map(|_| rng.next(5) as u32).collect();
        let (n, lp) = (2 + rng.next(8), 1 + rng.next(3));
        let index = NgramIndex::build(&tokens, n.max(lp + 1), lp);
        let trie = index.trie();
        let path: Vec<u32> = (0..rng.next(3)).map(|_| rng.next(5) as u32).collect();
        let Some(node) = trie.find(&path) else { continue };
        let k = 1 + rng.next(20);
        assert_eq!(trie.top_subtree(node, k, None), brute_top(trie, &path, k), "{tokens:?} {path:?} k={k}");
    }
}

#[test]
fn extending_equals_building_from_scratch() {
    let mut rng = Lcg(3);
    for _ in 0..40 {
        let tokens: Vec<u32> = (0..1 + rng.next(50)).map(|_| rng.next(4) as u32).collect();
        let (lp, n) = (1 + rng.next(3), 2 + rng.next(10));
        let n = n.max(lp + 1);
        let mut index = NgramIndex::default();
        let mut done = 0;
        while done < tokens.len() {
            let to = (done + 1 + rng.next(5)).min(tokens.len());
            index.sync(&tokens[..to], n, lp);
            done = to;
        }
        let fresh = NgramIndex::build(&tokens, n, lp);
        assert_eq!(dump(index.trie()), dump(fresh.trie()), "{tokens:?} n={n} lp={lp}");
        assert_eq!(index.trie().len(), fresh.trie().len(), "released nodes are accounted for");
        index.sync(&[9, 9], n, lp);
        assert_eq!(dump(index.trie()), dump(NgramIndex::build(&[9, 9], n, lp).trie()), "a new prompt rebuilds");
    }
}

#[test]
fn remove_undoes_insert() {
    let mut trie = Trie::new();
    trie.insert(&[1, 2, 3]);
    trie.insert(&[1, 2]);
    assert!(!trie.remove(&[1, 4]), "absent key");
    assert!(!trie.remove(&[]));
    assert!(trie.remove(&[1, 2, 3]));
    assert_eq!(dump(&trie), vec![(vec![1], 1), (vec![1, 2], 1)]);
    assert!(trie.remove(&[1, 2]));
    assert!(trie.is_empty());
    assert_eq!(trie.len(), 0);
    trie.insert(&[4]);
    assert_eq!(trie.len(), 1, "slots are reused");
}

#[test]
fn config_validation() {
    assert_eq!(NgramTrieConfig::default().validate(), Ok(()));
    let d = NgramTrieConfig::default();
    assert_eq!((d.n, d.prefix_len, d.num_draft, d.update_with_output), (13, 3, 64, true));
    let bad = |c: NgramTrieConfig| NgramTrie::new(c).unwrap_err();
    assert_eq!(bad(NgramTrieConfig { prefix_len: 0, ..d }), NgramTrieError::ZeroPrefixLen);
    assert_eq!(bad(NgramTrieConfig { n: 3, ..d }), NgramTrieError::WindowNotLongerThanPrefix { n: 3, prefix_len: 3 });
    assert_eq!(
        bad(NgramTrieConfig { n: 0, prefix_len: 1, ..d }),
        NgramTrieError::WindowNotLongerThanPrefix { n: 0, prefix_len: 1 }
    );
    assert_eq!(bad(NgramTrieConfig { num_draft: 0, ..d }), NgramTrieError::ZeroNumDraft);
    assert_eq!(bad(NgramTrieConfig { max_depth: Some(0), ..d }), NgramTrieError::ZeroMaxDepth);
    assert!(NgramTrie::new(NgramTrieConfig { n: 2, prefix_len: 1, num_draft: 1, max_depth: Some(1), ..d }).is_ok());
}

#[test]
fn proposer_drafts_from_the_prompt_and_optionally_the_output() {
    let config = NgramTrieConfig { n: 4, prefix_len: 2, update_with_output: false, ..Default::default() };
    let mut p = NgramTrie::new(config).unwrap();
    // Prompt [1,2,3,1,2,4], generated [7,1,2]: longest suffix [1,2] → below it 4 (f 2) and
    // 3→1 (f 1), the more frequent sibling first.
    let tokens = [1, 2, 3, 1, 2, 4, 7, 1, 2];
    let tree = p.draft(&tokens, 6);
    assert_eq!((tree.tokens(), tree.parents()), (&[4, 3, 1][..], &[None, None, Some(1)][..]));
    // [1,2] has frequency 3: 4 followed it 2 times of 3, 3 once; 1 followed [1,2,3], seen once.
    assert_eq!(p.node_classes(&tree), Some(vec![2, 3, 1]));
    assert_eq!(p.node_classes(&DraftTree::chain(&[4])), None, "another tree has no classes");
    assert_eq!(p.index().tokens(), &tokens[..6], "only the prompt is indexed when told");
    // Output-only repetition: invisible to the prompt trie, drafted with the switch on.
    let tokens = [1, 2, 3, 7, 8, 7];
    assert!(p.draft(&tokens, 3).is_empty());
    let mut q = NgramTrie::new(NgramTrieConfig { update_with_output: true, ..config }).unwrap();
    assert_eq!(q.draft(&tokens, 3).tokens(), &[8, 7]);
    assert_eq!(q.index().tokens(), &tokens);
}
