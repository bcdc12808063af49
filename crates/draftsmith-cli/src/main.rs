//! `draftsmith`: lossless speculative decoding toolkit.

mod backend;
mod commands;
mod eval_args;
mod jobs;
mod method_args;
mod model_arg;
mod progress;
mod prompt_args;
mod sampling_args;

use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// Train small drafters for a frozen target model and decode faster without changing a token.
#[derive(Debug, Parser)]
#[command(name = "draftsmith", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Fetch a model or dataset into the data dir (`$DRAFTSMITH_HOME`, default ~/.cache/draftsmith).
    Fetch(commands::fetch::FetchArgs),
    /// Generate text with the target model.
    Generate(commands::generate::GenerateArgs),
    Eval(commands::eval::EvalArgs),
    /// Distill the target into a drafter training dataset (resumable Parquet shards).
    Distill(commands::distill::DistillArgs),
    /// Compute the target's hidden states of a distilled dataset once, for offline training.
    Hidden(commands::hidden::HiddenArgs),
    /// Run a recipe (`recipes/*.toml`): one eval per grid point, then a combined table.
    Reproduce(commands::reproduce::ReproduceArgs),
    /// Train a drafter over the frozen target.
    #[command(subcommand)]
    Train(commands::train::TrainCommand),
    /// Export a trained drafter (`drafter.safetensors` + `config.json`).
    Export(commands::export::ExportArgs),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(commands::bench::BenchCommand),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("DRAFTSMITH_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(Cli::parse().command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(command: Command) -> Result<()> {
    match command {
        Command::Fetch(args) => commands::fetch::run(args),
        Command::Generate(args) => commands::generate::run(args),
        Command::Eval(args) => commands::eval::run(args),
        Command::Distill(args) => commands::distill::run(args),
        Command::Hidden(args) => commands::hidden::run(args),
        Command::Bench(cmd) => commands::bench::run(cmd),
        Command::Reproduce(args) => commands::reproduce::run(args),
        Command::Train(cmd) => commands::train::run(cmd),
        Command::Export(args) => commands::export::run(args),
    }
}
