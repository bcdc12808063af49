//! `draftsmith eval`: methods × prompts on one loaded engine, `ar` first as the baseline, every
//! output checked against it token for token; records, summary, report and plot in `--out`
//! ([`crate::jobs::eval`]).

use anyhow::Result;

pub use crate::eval_args::EvalArgs;

pub fn run(args: EvalArgs) -> Result<()> {
    crate::jobs::eval::run(&args)
}
