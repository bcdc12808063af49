//! The speculative engine: a [`Proposer`] drafts a tree below the last token, the target
//! verifies the flattened tree in one forward pass, the accepted path is committed to the KV
//! cache and the rest rolled back.

pub mod driver;
pub mod proposer;
pub mod verify;

pub use driver::{generate_speculative, SpecOutput, StepRecord};
pub use proposer::{DraftContext, Proposer, Verified};
pub use verify::{verify_greedy, Acceptance};
