//! One file per subcommand.

pub mod bench;
pub mod fetch;
pub mod generate;
