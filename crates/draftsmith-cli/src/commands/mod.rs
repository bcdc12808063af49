//! One file per subcommand.

pub mod bench;
pub mod distill;
pub mod eval;
pub mod export;
pub mod fetch;
pub mod generate;
pub mod hidden;
pub mod reproduce;
pub mod train;
