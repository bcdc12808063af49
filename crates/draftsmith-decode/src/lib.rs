//! Decoding on top of the target engine: logits processing and sampling shared by every
//! method, and the autoregressive baseline every speculative method is measured against.

pub mod ar;
pub mod sampling;

pub use ar::{generate, prefill, Generation, StopReason};
pub use sampling::{Sampler, SamplingConfig};
