//! Drafting methods behind the [`crate::spec::Proposer`] trait.

pub mod ngram_trie;
pub mod prompt_lookup;

pub use ngram_trie::{NgramTrie, NgramTrieConfig};
pub use prompt_lookup::PromptLookup;
