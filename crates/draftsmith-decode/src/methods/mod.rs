//! Drafting methods behind the [`crate::spec::Proposer`] trait.

pub mod prompt_lookup;

pub use prompt_lookup::PromptLookup;
