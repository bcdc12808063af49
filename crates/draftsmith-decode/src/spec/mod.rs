//! The speculative engine: a [`Proposer`] drafts a tree below the last token, the target
//! verifies the flattened tree in one forward pass, the accepted path is committed to the KV
//! cache and the rest rolled back.

pub mod driver;
pub mod policy;
pub mod proposer;
pub mod verify;
pub mod verify_sampled;

pub use driver::{
    generate_speculative, generate_speculative_sampled, generate_speculative_with, SpecOutput, StepRecord, StepView,
};
pub use policy::{agreement_class, context_class, probability_class, Auto, Clock, CostModel, DepthStop, DraftPolicy};
pub use proposer::{DraftContext, DraftCost, HiddenState, Proposer, StepCosts, Verified};
pub use verify::{greedy_path, known_next, verify_greedy, Acceptance};
pub use verify_sampled::{acceptance_chances, verify_sampled};
