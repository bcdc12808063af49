//! Resolved runs shared by a subcommand and `reproduce` (which drives them for a recipe): load
//! the model, show progress, call the library, print the outcome.

pub mod distill;
pub mod eval;
pub mod train;
