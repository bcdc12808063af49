//! Drafters: small modules trained on top of a frozen target model. They take the target's
//! hidden states and frozen token embeddings as inputs and never own the target's weights.

pub mod error;
pub mod identity;
pub mod metrics;
pub mod redrafter;
mod tensors;
pub mod tokenswift;

pub use error::HeadsError;
pub use identity::{drafter_kind, DrafterKind, TargetIdentity};
pub use metrics::StepMetrics;
pub use redrafter::weights_path;
pub use tensors::WeightDtype;
