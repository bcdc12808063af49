//! Which options the command line gave (not their defaults), for warnings about options the
//! chosen methods do not read.

use std::sync::OnceLock;

use clap::parser::ValueSource;
use draftsmith_decode::{DraftPolicy, Method, MethodParams, SamplingConfig};

/// The given options: `(id, --long name)`.
static GIVEN: OnceLock<Vec<(String, String)>> = OnceLock::new();

/// Records the options given on the command line of the innermost subcommand of `command`.
pub fn record(command: &clap::Command, matches: &clap::ArgMatches) {
    let (mut cmd, mut leaf) = (command, matches);
    while let Some((name, sub)) = leaf.subcommand() {
        match cmd.find_subcommand(name) {
            Some(c) => (cmd, leaf) = (c, sub),
            None => return,
        }
    }
    let long =
        |id: &str| cmd.get_arguments().find(|a| a.get_id() == id).and_then(|a| a.get_long()).unwrap_or(id).to_string();
    let given = leaf
        .ids()
        .filter(|id| leaf.value_source(id.as_str()) == Some(ValueSource::CommandLine))
        .map(|id| (id.as_str().to_string(), long(id.as_str())))
        .collect();
    let _ = GIVEN.set(given);
}

/// Warns about each option given on the command line that changes nothing in this run, which a
/// user would not guess: a method parameter none of `methods` reads (`--beam-width` with
/// `--method ar`), and a sampling option while `sampling` is greedy (`--top-p` without
/// `--temperature`). Also says that a `--seed` does not repeat a sampled run's tokens when a
/// method sizes its drafts from timings (`--draft-policy auto`).
pub fn warn_unread(methods: &[Method], params: &MethodParams, sampling: &SamplingConfig) {
    let given = GIVEN.get().map_or(&[][..], Vec::as_slice);
    let names = methods.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", ");
    for (id, long) in given {
        if unread(id, methods) {
            eprintln!("warning: --{long} is not read by {names}: it changes nothing here");
        } else if sampling.is_greedy() && SAMPLING_ONLY.contains(&id.as_str()) {
            eprintln!("warning: --{long} is read only when sampling (--temperature above 0): decoding is greedy here");
        }
    }
    let seeded = given.iter().any(|(id, _)| id == "seed");
    let timed = |m: &Method| draftsmith_decode::params_read(*m).contains(&"draft_policy");
    if seeded && !sampling.is_greedy() && params.draft_policy == DraftPolicy::Auto && methods.iter().any(timed) {
        eprintln!(
            "warning: --draft-policy auto sizes drafts from measured timings, so a sampled speculative run's tokens \
             vary from run to run even with one --seed (each run samples the target's distribution); \
             --draft-policy fixed repeats them"
        );
    }
}

/// Options that only sampling reads (the repetition penalty applies to greedy decoding too).
const SAMPLING_ONLY: [&str; 5] = ["top_k", "top_p", "min_p", "eta", "seed"];

/// Whether `id` is a method parameter that no method of `methods` reads.
fn unread(id: &str, methods: &[Method]) -> bool {
    let read = |m: &Method| draftsmith_decode::params_read(*m).contains(&id);
    Method::ALL.iter().any(read) && !methods.iter().any(read)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parameter_no_chosen_method_reads_is_named() {
        assert!(unread("beam_width", &[Method::Ar]) && unread("draft_len", &[Method::Ar]));
        assert!(!unread("penalty", &[Method::Ar]), "every method reads the penalty");
        assert!(!unread("max_new_tokens", &[Method::Ar]), "not a method parameter");
        let all = [Method::Ar, Method::ReDrafter, Method::PromptLookup];
        assert!(!unread("beam_width", &all) && !unread("draft_len", &all));
    }
}
