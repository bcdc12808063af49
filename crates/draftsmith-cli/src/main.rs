//! `draftsmith`: lossless speculative decoding toolkit.

mod backend;
mod commands;
mod eval_args;
mod given;
mod huge_pages;
mod jobs;
mod method_args;
mod model_arg;
mod out;
mod progress;
mod prompt_args;
mod sampling_args;

use std::process::ExitCode;

use anyhow::Result;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// Train small drafters for a frozen target model and decode faster without changing a token.
///
/// An option given twice takes its last value, in every subcommand (`args_override_self`), so a
/// `just` recipe that passes its own default before the user's arguments (`just distill --out
/// …`) is overridden rather than refused.
#[derive(Debug, Parser)]
#[command(name = "draftsmith", version, about, args_override_self = true)]
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
    // A misspelt setting would otherwise fall back to its default unseen (a benchmark of the
    // `avx2` path timing `avx512vnni`), so it stops the run before anything starts.
    if let Err(e) = draftsmith_kernels::check_environment().and_then(|()| huge_pages::setting().map(drop)) {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    huge_pages::ask_before_start();
    // `DRAFTSMITH_THREADS` bounds rayon's pool too (a prefill's activation quantization, the
    // layers' parallel load), not only the kernels' own.
    if let Ok(Some(threads)) = draftsmith_kernels::pool::threads_setting() {
        let _ = rayon::ThreadPoolBuilder::new().num_threads(threads).build_global();
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("DRAFTSMITH_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        // Colour codes only where a terminal reads them, not into a log file.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cmd = command();
    let matches = cmd.clone().get_matches();
    given::record(&cmd, &matches);
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        // `draftsmith … | head`: the reader has what it wanted.
        Err(e) if e.downcast_ref::<out::StdoutError>().is_some_and(out::StdoutError::is_closed_pipe) => {
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {}", report(&e));
            ExitCode::FAILURE
        }
    }
}

/// The command line, with every option that takes a value accepting a negative number as that
/// value (`--temperature -1`): a number out of range then reaches the parameter's own check and
/// its message, instead of clap's "unexpected argument '-1'". A list option (`--methods a,b`)
/// given twice takes its last list, as every other option does (clap's lists would add up).
fn command() -> clap::Command {
    fn adjust(cmd: clap::Command) -> clap::Command {
        cmd.mut_args(|a| {
            let a = if matches!(a.get_action(), clap::ArgAction::Append) { a.action(clap::ArgAction::Set) } else { a };
            if a.get_action().takes_values() {
                a.allow_negative_numbers(true)
            } else {
                a
            }
        })
        .mut_subcommands(adjust)
    }
    adjust(Cli::command())
}

/// The error and its causes joined by ": ", leaving out a cause whose text the message before it
/// already ends with (library errors name the file and repeat their I/O cause in their message).
fn report(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.is_empty() {
            out = text;
        } else if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
    }
    out
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

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, FromArgMatches, Parser};

    use super::{command, report, Cli, Command};

    #[test]
    fn an_option_given_twice_takes_its_last_value_in_every_subcommand() {
        let cli =
            Cli::try_parse_from(["draftsmith", "distill", "--model", "a", "--out", "x", "--model", "b", "--out", "y"])
                .unwrap();
        let Command::Distill(args) = cli.command else { panic!("not distill") };
        let text = format!("{args:?}");
        assert!(text.contains("\"y\"") && !text.contains("\"x\""), "{text}");
        // A nested subcommand too.
        Cli::try_parse_from(["draftsmith", "train", "tokenswift", "--out", "p", "--out", "q"]).unwrap();
        Cli::command().debug_assert();
    }

    #[test]
    fn a_negative_number_is_a_value_for_the_parameter_to_check() {
        for args in [
            &["draftsmith", "generate", "--prompt", "p", "--temperature", "-1"][..],
            &["draftsmith", "eval", "--methods", "ar", "--prompts", "p", "--top-p", "-0.5"],
            &["draftsmith", "train", "tokenswift", "--lr", "-3"],
        ] {
            let matches = command().try_get_matches_from(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
            let cli = Cli::from_arg_matches(&matches).unwrap();
            let text = format!("{:?}", cli.command);
            assert!(text.contains(args[args.len() - 1]), "{args:?}: {text}");
        }
        // A flag is still a flag, and an unknown one still an error.
        assert!(command().try_get_matches_from(["draftsmith", "generate", "-x"]).is_err());
        command().debug_assert();
    }

    #[test]
    fn a_list_option_given_twice_takes_its_last_list() {
        let parse = |args: &[&str]| {
            let matches = command().try_get_matches_from(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
            format!("{:?}", Cli::from_arg_matches(&matches).unwrap().command)
        };
        let eval = ["draftsmith", "eval", "--prompts", "p", "--methods", "prompt-lookup,ar", "--methods", "ngram-trie"];
        let text = parse(&eval);
        assert!(text.contains("NgramTrie") && !text.contains("PromptLookup"), "{text}");
        let text = parse(&["draftsmith", "generate", "--prompt", "p", "--tree", "1,3,3,3", "--tree", "1,2"]);
        assert!(text.contains("tree: [1, 2]"), "{text}");
        let text = parse(&["draftsmith", "bench", "ar", "--contexts", "64", "--contexts", "128,256"]);
        assert!(text.contains("contexts: [128, 256]"), "{text}");
    }

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory (os error 2)");
        // As a library error that names the file and repeats its cause, under a context.
        let e = anyhow::Error::new(io)
            .context("/tmp/x/manifest.json: No such file or directory (os error 2)")
            .context("reading the dataset");
        assert_eq!(report(&e), "reading the dataset: /tmp/x/manifest.json: No such file or directory (os error 2)");
    }
}
