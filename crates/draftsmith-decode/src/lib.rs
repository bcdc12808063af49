//! Decoding on top of the target engine: logits processing and sampling shared by every
//! method, the autoregressive baseline, and the speculative engine with its drafting methods.

pub mod ar;
pub mod error;
pub mod methods;
pub mod sampling;
pub mod spec;

pub use error::DecodeError;
pub use ar::{generate, prefill, Generation, StopReason};
pub use sampling::{Sampler, SamplingConfig};
pub use spec::{generate_speculative, DraftContext, Proposer, SpecOutput, StepRecord, Verified};
