//! Target → distilled dataset, for drafter training.
//!
//! [`distill`] turns conversations into [`draftsmith_data::DistillRecord`]s written through a
//! resumable [`draftsmith_data::ShardWriter`]:
//!
//! - self-distilled records ([`DistillConfig::responses`]): the first user message (and a leading
//!   system message) rendered with the chat template, then the target's own response (greedy, or
//!   seeded sampling), trained on the response tokens including the EOS; responses are generated
//!   [`DistillConfig::batch_size`] at a time through one KV cache
//!   ([`draftsmith_decode::batch::generate_batch`]), each exactly what generating it alone gives;
//! - ground-truth records ([`DistillConfig::ground_truth`]): the whole conversation, trained on its
//!   assistant turns (spans found by rendering prefixes, see [`sequence`]);
//! - per trained position, the target's greedy `T`-token continuation ([`DistillConfig::teacher_len`],
//!   computed in `T` batched passes, see [`teacher`]) and optionally its top-k next-token
//!   log-probs ([`DistillConfig::topk`]).
//!
//! Conversations that cannot be used are skipped and counted ([`DistillStats::skipped`]);
//! progress goes to a callback ([`DistillEvent`]).

mod config;
mod error;
mod run;
pub mod sequence;
pub mod teacher;

pub use config::DistillConfig;
pub use error::DistillError;
pub use run::{distill, DistillEvent, DistillStats};
pub use sequence::SkipReason;
