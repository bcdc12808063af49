//! Prompt lookup decoding: find the most recent earlier occurrence of the last `n` tokens
//! (n from `max_ngram` down to `min_ngram`) in prompt + output and draft the `k` tokens that
//! followed it, as a single chain.

use draftsmith_core::DraftTree;

use crate::method::Method;
use crate::spec::{DraftContext, Proposer};

/// Prompt-lookup proposer.
#[derive(Debug, Clone)]
pub struct PromptLookup {
    pub max_ngram: usize,
    pub min_ngram: usize,
    /// Draft length.
    pub k: usize,
}

impl Default for PromptLookup {
    fn default() -> Self {
        Self { max_ngram: 3, min_ngram: 1, k: 10 }
    }
}

impl PromptLookup {
    /// The continuation after the most recent earlier match of the longest matching suffix.
    pub fn lookup(&self, tokens: &[u32]) -> Vec<u32> {
        self.lookup_with_len(tokens).1
    }

    /// [`PromptLookup::lookup`] with the length of the matched suffix (0: no match).
    pub fn lookup_with_len(&self, tokens: &[u32]) -> (usize, Vec<u32>) {
        for n in (self.min_ngram..=self.max_ngram).rev() {
            if tokens.len() <= n {
                continue;
            }
            let suffix = &tokens[tokens.len() - n..];
            // Start positions of earlier occurrences, most recent first (not the suffix itself).
            for start in (0..tokens.len() - n).rev() {
                if &tokens[start..start + n] == suffix {
                    let from = start + n;
                    let to = (from + self.k).min(tokens.len());
                    return (n, tokens[from..to].to_vec());
                }
            }
        }
        (0, Vec::new())
    }
}

impl Proposer for PromptLookup {
    fn name(&self) -> &str {
        Method::PromptLookup.name()
    }

    fn draft_len(&self) -> Option<usize> {
        Some(self.k)
    }

    fn propose(&mut self, ctx: &DraftContext<'_>) -> Result<DraftTree, crate::DecodeError> {
        Ok(DraftTree::chain(&self.lookup(ctx.tokens)))
    }

    /// A longer matched n-gram makes a better draft: the draft policy learns each length apart.
    fn draft_class(&self, ctx: &DraftContext<'_>) -> usize {
        self.lookup_with_len(ctx.tokens).0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drafts_what_followed_the_latest_longest_match() {
        let p = PromptLookup { max_ngram: 3, min_ngram: 1, k: 3 };
        //            0  1  2  3  4  5  6  7  8  9
        let tokens = [1, 2, 3, 4, 5, 1, 2, 3, 9, 1, 2, 3];
        assert_eq!(p.lookup(&tokens), vec![9, 1, 2], "latest match of [1,2,3] is at 5");
        assert_eq!(p.lookup(&[7, 8, 7]), vec![8, 7], "1-gram fallback, cut at the end");
        assert!(p.lookup(&[1, 2, 3]).is_empty());
    }
}
