//! `draftsmith generate`: prompt or chat messages in, streamed text out.

use std::path::PathBuf;

use anyhow::Result;
use burn::tensor::backend::Backend;
use clap::Args;
use draftsmith_decode::{build_proposer_with, Generation, Method, MethodParams, Sampler};

use crate::method_args::{load_drafters, method_parser};
use crate::prompt_args::PromptArgs;
use crate::sampling_args::SamplingArgs;
use draftsmith_model::TextStream;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use crate::model_arg::ModelArgs;
use crate::out::outln;

/// Generate text with the target model (greedy by default).
#[derive(Debug, Args)]
pub struct GenerateArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub prompt: PromptArgs,
    #[arg(long, default_value_t = 256)]
    pub max_new_tokens: usize,
    /// Do not stop at the end-of-sequence token: generate exactly --max-new-tokens (or up to
    /// the model's context), as fixed-length long-generation benchmarks do.
    #[arg(long)]
    pub ignore_eos: bool,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// Decoding method: `ar` (autoregressive) or a speculative method (lossless for greedy and
    /// for sampling: the output has the target's distribution).
    #[arg(long, default_value_t = Method::Ar, value_parser = method_parser())]
    pub method: Method,
    #[command(flatten)]
    pub params: MethodParams,
    /// Print one JSON object as the last stdout line instead of streaming text.
    #[arg(long)]
    pub json: bool,
    /// Append statistics (tokens/s, τ, α, method extras such as TokenSwift's β,
    /// Distinct-1..4, peak RSS) as a JSON line every --stats-every tokens and
    /// at the end; lines already written survive an interrupted run.
    #[arg(long)]
    pub stats_out: Option<PathBuf>,
    #[arg(long, default_value_t = 1000, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub stats_every: usize,
}

pub fn run(args: GenerateArgs) -> Result<()> {
    args.prompt.check()?;
    let sampling = args.sampling.config_with(&args.params);
    sampling.validate()?;
    crate::given::warn_unread(&[args.method], &args.params, &sampling);
    if args.max_new_tokens == 0 {
        anyhow::bail!("--max-new-tokens must be at least 1");
    }
    crate::with_backend!(args.model.device, |B, device| run_on::<B>(&args, &device))
}

fn run_on<B: Backend>(args: &GenerateArgs, device: &B::Device) -> Result<()> {
    let loaded = args.model.load::<B>(device)?;
    let prompt = args.prompt.ids(&loaded)?;
    let params = &args.params;
    let mut sampler = Sampler::new(args.sampling.config_with(params));
    let mut stream = TextStream::default();
    let mut unwritten = None;
    let mut steps = None;
    let drafters = load_drafters(params, &loaded, &args.model, device)?;
    let proposer = build_proposer_with(args.method, params, &loaded.model, drafters.as_drafters())?;
    let stop_tokens: &[u32] = if args.ignore_eos { &[] } else { loaded.tokenizer.eos_ids() };
    let generation = match proposer {
        None => {
            // `--stats-out` for plain decoding: the same lines, timed from the first token.
            let mut stats = draftsmith_eval::StatsLog::open(args.stats_out.as_deref(), args.stats_every)?;
            let (mut output, mut first) = (Vec::new(), None::<std::time::Instant>);
            let generation = draftsmith_decode::generate(
                &loaded.model,
                &prompt,
                args.max_new_tokens,
                stop_tokens,
                &mut sampler,
                &mut |t| {
                    output.push(t);
                    let elapsed = first.get_or_insert_with(std::time::Instant::now).elapsed();
                    stats.maybe_write(output.len(), || draftsmith_eval::stats::ar_stats(&output, elapsed));
                    if !args.json {
                        if let Ok(piece) = stream.push(&loaded.tokenizer, t) {
                            // A closed pipe or a full disk stops the decoding.
                            if let Err(e) = crate::out::print(&piece) {
                                unwritten = Some(e);
                                return false;
                            }
                        }
                    }
                    true
                },
            )?;
            if let Some(e) = unwritten {
                return Err(e.into());
            }
            stats.finish(|| {
                draftsmith_eval::stats::ar_stats(&output, first.map_or(std::time::Duration::ZERO, |f| f.elapsed()))
            })?;
            generation
        }
        Some(mut proposer) => {
            let bar = ProgressBar::new(args.max_new_tokens as u64);
            bar.set_style(
                ProgressStyle::with_template("{bar:30} {pos}/{len} tokens [{elapsed} < {eta}] {msg}")
                    .expect("valid template"),
            );
            let mut stats = draftsmith_eval::StatsLog::open(args.stats_out.as_deref(), args.stats_every)?;
            let out = draftsmith_decode::generate_speculative_with(
                &loaded.model,
                &prompt,
                args.max_new_tokens,
                stop_tokens,
                proposer.as_mut(),
                &mut sampler,
                &mut |view| {
                    bar.set_position(view.output.len() as u64);
                    if view.steps.len() % 8 == 1 {
                        let line =
                            draftsmith_eval::stats::rate_stats(view.output, view.steps, view.elapsed, view.proposer);
                        let f =
                            |k: &str| line.get(k).and_then(|v| v.as_f64()).map_or("–".into(), |v| format!("{v:.2}"));
                        bar.set_message(format!(
                            "{} tok/s, τ {}, α {}, β {}",
                            f("tokens_per_s"),
                            f("tokens_per_step"),
                            f("alpha"),
                            f("beta")
                        ));
                    }
                    stats.maybe_write(view.output.len(), || {
                        draftsmith_eval::stats::spec_stats(view.output, view.steps, view.elapsed, view.proposer)
                    });
                    true
                },
            )?;
            bar.finish_and_clear();
            stats.finish(|| {
                draftsmith_eval::stats::spec_stats(&out.tokens, &out.steps, out.decode, proposer.as_ref())
            })?;
            if !args.json {
                crate::out::print(&loaded.tokenizer.decode(&out.tokens)?)?;
            }
            steps = Some(out.steps.len());
            Generation { tokens: out.tokens, prefill: out.prefill, decode: out.decode, stop: out.stop }
        }
    };
    let text = loaded.tokenizer.decode(&generation.tokens)?;
    let prefill_tps = prompt.len() as f64 / generation.prefill.as_secs_f64();
    let decode_tps = generation.decode_tokens_per_s();
    if args.json {
        outln!(
            "{}",
            json!({
                "prompt_ids": prompt, "output_ids": generation.tokens, "text": text,
                "stop": generation.stop, "method": args.method,
                "target_calls": steps.map_or(generation.tokens.len(), |s| s + 1),
                "decode_tokens_per_s": decode_tps, "prefill_tokens_per_s": prefill_tps,
                "prefill_ms": generation.prefill.as_secs_f64() * 1e3, "decode_ms": generation.decode.as_secs_f64() * 1e3,
                "distinct_n": (1..=4).map(|n| draftsmith_eval::distinct_n(&generation.tokens, n)).collect::<Vec<_>>(),
                "peak_rss_mb": draftsmith_eval::peak_rss_mb(),
            })
        )?;
    } else {
        outln!()?;
        let n = generation.tokens.len();
        // The first new token comes from the prefill: a decode rate needs a second.
        let decode = if n > 1 { format!("{decode_tps:.1} tok/s decode") } else { "no decode step".into() };
        eprintln!(
            "[{} prompt tokens, {prefill_tps:.1} tok/s prefill; {n} new token{}, {decode}; stop: {:?}]",
            prompt.len(),
            if n == 1 { "" } else { "s" },
            generation.stop
        );
    }
    Ok(())
}
