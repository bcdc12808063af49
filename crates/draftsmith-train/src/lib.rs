//! Drafter training over a frozen target. The target runs on the inner (non-autodiff)
//! backend, once, to produce the hidden states the drafter is conditioned on; only the drafter
//! is trained and checkpointed.

pub mod checkpoint;
pub mod distilled;
pub mod error;
pub mod examples;
pub mod export;
pub mod heldout;
pub mod hidden;
pub mod metrics;
pub mod redrafter;
pub mod run;
pub mod schedule;
pub mod tokenswift;

pub use distilled::{read_sequences, DistilledSequences, DEFAULT_MAX_SEQ_LEN};
pub use error::TrainError;
pub use examples::{LabelSource, Sequence};
pub use export::{
    export_drafter, export_needs_target, run_drafter, ExportFormat, ExportOptions, ExportTarget, Exported,
};
pub use hidden::{cache_bytes, open_cached, write_hidden, HiddenEvent, HiddenStore};
pub use redrafter::{train_redrafter, ReDrafterTrainConfig};
pub use run::{TrainEvent, TrainSummary};
pub use tokenswift::{chunks, train_tokenswift, TokenSwiftTrainConfig};

/// A training setting that must be a finite number above 0 (NaN is neither), named with its
/// value when it is not.
pub(crate) fn check_positive(name: &str, value: f64) -> Result<(), TrainError> {
    match value.is_finite() && value > 0.0 {
        true => Ok(()),
        false => Err(TrainError::Config(format!("{name} = {value}: must be finite and positive"))),
    }
}

/// A training setting that must be a finite number ≥ 0 (NaN is neither), named with its value
/// when it is not.
pub(crate) fn check_non_negative(name: &str, value: f64) -> Result<(), TrainError> {
    match value.is_finite() && value >= 0.0 {
        true => Ok(()),
        false => Err(TrainError::Config(format!("{name} = {value}: must be finite and ≥ 0"))),
    }
}

/// Settings that count something and must be at least 1: the first that is 0, named with its
/// value.
pub(crate) fn check_counts(counts: &[(&str, usize)]) -> Result<(), TrainError> {
    match counts.iter().find(|(_, v)| *v == 0) {
        Some((name, _)) => Err(TrainError::Config(format!("{name} = 0: must be at least 1"))),
        None => Ok(()),
    }
}

/// A setting that must lie in `range` (`text` says which, for the message; NaN lies in none).
pub(crate) fn check_fraction(
    name: &str,
    value: f64,
    range: impl std::ops::RangeBounds<f64>,
    text: &str,
) -> Result<(), TrainError> {
    match range.contains(&value) {
        true => Ok(()),
        false => Err(TrainError::Config(format!("{name} = {value}: must be {text}"))),
    }
}
