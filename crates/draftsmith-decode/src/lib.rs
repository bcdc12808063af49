//! Decoding on top of the target engine: logits processing and sampling shared by every
//! method, the autoregressive baseline, and the speculative engine with its drafting methods.

/// `FromStr` and `Display` for a fieldless enum of setting values (command-line flags, recipe
/// keys) from one table of names: `value_names!(Type, "what", { Variant => "name" | "alias", … })`.
/// `Display` writes each variant's first name; `FromStr` reads any of its names, and refuses
/// others with "unknown what `x` (name, name, …)" listing the first names.
macro_rules! value_names {
    ($ty:ty, $what:literal, { $first:ident => $fname:literal $(| $falias:literal)* $(, $variant:ident => $name:literal $(| $alias:literal)*)* $(,)? }) => {
        impl std::str::FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $fname $(| $falias)* => Ok(Self::$first),
                    $($name $(| $alias)* => Ok(Self::$variant),)*
                    other => Err(format!(concat!("unknown ", $what, " `{}` (", $fname, $(", ", $name,)* ")"), other)),
                }
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(match self {
                    Self::$first => $fname,
                    $(Self::$variant => $name,)*
                })
            }
        }
    };
}

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
    build_proposer, build_proposer_with, check_drafters, validate_method, DraftTokens, DraftWeights, Drafters,
    MethodParams,
};
pub use sampling::{Sampler, SamplingConfig};
pub use spec::{
    generate_speculative, generate_speculative_sampled, generate_speculative_with, DraftContext, DraftCost,
    DraftPolicy, HiddenState, Proposer, SpecOutput, StepCosts, StepRecord, StepView, Verified,
};
