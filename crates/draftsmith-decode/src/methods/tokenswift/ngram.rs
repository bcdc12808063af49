//! TokenSwift's token reutilization table: counts of the `n − 1` tokens that followed each
//! token in the text so far (n = 4 in the paper), queried for the most frequent continuations
//! of a key token. Ties go to the continuation whose count rose most recently (as the
//! reference's sorted set returns them).

use std::collections::HashMap;

/// One continuation of a key: its tokens, count and the tick of its last increment.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    tokens: Vec<u32>,
    count: u32,
    tick: u64,
}

/// n-gram counts keyed by the first token.
#[derive(Debug, Clone)]
pub struct NgramTable {
    n: usize,
    table: HashMap<u32, Vec<Entry>>,
    tick: u64,
    /// Start index of the next n-gram of the text to count.
    counted: usize,
}

impl NgramTable {
    /// A table of `n`-grams (`n ≥ 2`).
    pub fn new(n: usize) -> Self {
        assert!(n >= 2, "an n-gram table needs n ≥ 2");
        Self { n, table: HashMap::new(), tick: 0, counted: 0 }
    }

    pub fn n(&self) -> usize {
        self.n
    }

    /// Counts one n-gram (`gram.len() == n`).
    pub fn add(&mut self, gram: &[u32]) {
        debug_assert_eq!(gram.len(), self.n);
        self.tick += 1;
        let entries = self.table.entry(gram[0]).or_default();
        match entries.iter_mut().find(|e| e.tokens == gram[1..]) {
            Some(e) => {
                e.count += 1;
                e.tick = self.tick;
            }
            None => entries.push(Entry { tokens: gram[1..].to_vec(), count: 1, tick: self.tick }),
        }
    }

    /// Counts every n-gram of `text` that starts before `text.len() − n − lag + 1` and was not
    /// counted yet: the table follows the text, `lag` tokens behind its end. `text` must extend
    /// the text of earlier calls; a different text (a new prompt) starts the table afresh.
    pub fn follow(&mut self, text: &[u32], lag: usize) {
        let end = (text.len() + 1).saturating_sub(self.n + lag);
        if end < self.counted {
            self.table.clear();
            self.counted = 0;
        }
        for start in self.counted..end {
            let gram = text[start..start + self.n].to_vec();
            self.add(&gram);
        }
        self.counted = self.counted.max(end);
    }

    /// Forgets everything (a new text).
    pub fn clear(&mut self) {
        self.table.clear();
        self.counted = 0;
    }

    /// The `k` most frequent continuations of `key` (most recent first among equal counts).
    pub fn top_k(&self, key: u32, k: usize) -> Vec<&[u32]> {
        self.top_k_after(&[key], k).into_iter().map(|(tokens, _)| tokens).collect()
    }

    /// The `k` most frequent continuations of the text `suffix` (`1 ..= n − 1` tokens: the
    /// n-grams that start with it, less those tokens), with their counts; `top_k` is the
    /// one-token case. Order as [`NgramTable::top_k`].
    pub fn top_k_after(&self, suffix: &[u32], k: usize) -> Vec<(&[u32], u32)> {
        let skip = suffix.len() - 1;
        let mut found: Vec<&Entry> = self.after(suffix).collect();
        found.sort_by(|a, b| b.count.cmp(&a.count).then(b.tick.cmp(&a.tick)));
        found.into_iter().take(k).map(|e| (&e.tokens[skip..], e.count)).collect()
    }

    /// How many counted n-grams start with `suffix`.
    pub fn total_after(&self, suffix: &[u32]) -> u32 {
        self.after(suffix).map(|e| e.count).sum()
    }

    fn after<'a, 's>(&'a self, suffix: &'s [u32]) -> impl Iterator<Item = &'a Entry> + use<'a, 's> {
        assert!((1..self.n).contains(&suffix.len()), "a suffix of 1 ..= n − 1 tokens");
        self.table.get(&suffix[0]).into_iter().flatten().filter(move |e| e.tokens.starts_with(&suffix[1..]))
    }

    /// Count of one continuation (0 when unseen).
    pub fn count(&self, key: u32, continuation: &[u32]) -> u32 {
        self.table.get(&key).and_then(|es| es.iter().find(|e| e.tokens == continuation)).map_or(0, |e| e.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_top_k_by_hand() {
        let mut t = NgramTable::new(4);
        // Text 1 2 3 4 1 2 3 5 1 2 3 4: 4-grams from 1: (2,3,4) ×2, (2,3,5) ×1.
        t.follow(&[1, 2, 3, 4, 1, 2, 3, 5, 1, 2, 3, 4], 0);
        assert_eq!(t.count(1, &[2, 3, 4]), 2);
        assert_eq!(t.count(1, &[2, 3, 5]), 1);
        assert_eq!(t.count(2, &[3, 4, 1]), 1);
        assert_eq!((t.total_after(&[1]), t.total_after(&[2]), t.total_after(&[9])), (3, 2, 0));
        // Longer keys: the continuations of the text 1 2, and of 2 3 (which followed 1 three times).
        assert_eq!(t.top_k_after(&[1, 2], 5), vec![(&[3, 4][..], 2), (&[3, 5][..], 1)]);
        assert_eq!(t.top_k_after(&[1, 2, 3], 1), vec![(&[4][..], 2)]);
        assert_eq!((t.total_after(&[1, 2]), t.total_after(&[1, 3]), t.total_after(&[2, 3])), (3, 0, 2));
        assert_eq!(t.top_k(1, 20), vec![&[2, 3, 4][..], &[2, 3, 5]]);
        assert_eq!(t.top_k(1, 1), vec![&[2, 3, 4][..]]);
        assert!(t.top_k(9, 5).is_empty());
        // Equal counts: the most recently incremented first.
        let mut t = NgramTable::new(3);
        t.add(&[7, 1, 1]);
        t.add(&[7, 2, 2]);
        assert_eq!(t.top_k(7, 2), vec![&[2, 2][..], &[1, 1]]);
        t.add(&[7, 1, 1]);
        assert_eq!(t.top_k(7, 2), vec![&[1, 1][..], &[2, 2]]);
    }

    #[test]
    fn following_a_growing_text_counts_each_gram_once_with_a_lag() {
        let text = [1u32, 2, 3, 4, 5, 6, 7, 8];
        let mut t = NgramTable::new(4);
        t.follow(&text[..6], 2); // 4-grams ending ≤ position 3: only (1,2,3,4)
        assert_eq!(t.count(1, &[2, 3, 4]), 1);
        assert_eq!(t.count(2, &[3, 4, 5]), 0, "inside the lag");
        t.follow(&text, 2);
        t.follow(&text, 2);
        assert_eq!((t.count(1, &[2, 3, 4]), t.count(2, &[3, 4, 5]), t.count(3, &[4, 5, 6])), (1, 1, 1), "counted once");
        assert_eq!(t.count(4, &[5, 6, 7]), 0);
        // A shorter text is a new text: the table starts afresh.
        t.follow(&[9, 9, 9, 9], 0);
        assert_eq!((t.count(1, &[2, 3, 4]), t.count(9, &[9, 9, 9])), (0, 1));
    }
}
