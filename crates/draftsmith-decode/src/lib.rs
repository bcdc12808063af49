//! Decoding on top of the target engine: logits processing and sampling shared by every
//! method, the autoregressive baseline, and the speculative engine with its drafting methods.

pub mod ar;
pub mod batch;
pub mod cost;
pub mod drafters;
pub mod error;
pub mod method;
pub mod methods;
pub mod registry;
pub mod sampling;
pub mod spec;

pub use ar::{generate, prefill, Generation, StopReason};
pub use drafters::{target_identity, LoadedDrafters};
pub use error::DecodeError;
pub use method::{Method, Needs};
pub use registry::{
    build_proposer, build_proposer_with, check_drafters, params_read, validate_method, DraftTokens, DraftWeights,
    Drafters, MethodParams,
};
pub use sampling::{Sampler, SamplingConfig};
pub use spec::{
    generate_speculative, generate_speculative_sampled, generate_speculative_with, DraftContext, DraftCost,
    DraftPolicy, HiddenState, Proposer, SpecOutput, StepCosts, StepRecord, StepView, Verified,
};
