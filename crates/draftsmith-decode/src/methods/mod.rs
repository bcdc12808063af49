//! Drafting methods behind the [`crate::spec::Proposer`] trait.

pub mod copy_context;
pub mod draft_model;
pub mod ngram_trie;
pub mod precut;
pub mod prompt_lookup;
pub mod redrafter;
mod redrafter_host;
pub mod token_cache;
pub mod tokenswift;

pub use copy_context::{CopyContext, CopyStats, WithCopy};
pub use draft_model::{check_tokenizers, DraftModel, DraftModelConfig, DraftModelStats};
pub use ngram_trie::{NgramTrie, NgramTrieConfig};
pub use precut::{PreCut, PreCutConfig};
pub use prompt_lookup::PromptLookup;
pub use redrafter::{LoadedReDrafter, PackingStats, ReDrafterProposer, ReDrafterSettings};
pub use token_cache::{PhraseCache, TokenCache, TokenCacheConfig, TokenCacheStats};
pub use tokenswift::{
    KvMode, LoadedTokenSwift, TokenSwiftProposer, TokenSwiftSettings, TokenSwiftStats, AUTO_NGRAM_KEY, AUTO_NGRAM_N,
};
