//! One eval, resolved: prompts fetched, model and drafters loaded, the manifest written, a
//! progress bar, the summary printed and the lossless check turned into the exit status (run
//! by `eval` and by `reproduce` for each grid point).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use burn::tensor::backend::Backend;
use draftsmith_eval::{interval_text, EvalInput, Manifest, Progress, Summary};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use crate::eval_args::EvalArgs;
use crate::out::outln;
use crate::progress::{fetch_with_progress, OffTerminal};

/// Where an eval without `--out` goes: ignored by git, unlike the recorded `eval/results/`.
pub const DEFAULT_RUNS_DIR: &str = "eval/runs";

pub fn run(args: &EvalArgs) -> Result<()> {
    crate::with_backend!(args.model.device, |B, device| run_on::<B>(args, &device))
}

fn run_on<B: Backend>(args: &EvalArgs, device: &B::Device) -> Result<()> {
    let params = args.params.clone();
    let sampling = args.sampling.config_with(&params);
    sampling.validate()?;
    let methods = draftsmith_eval::resolve_methods(&args.methods, &params)?;
    crate::given::warn_unread(&methods, &params, &sampling);
    if args.limit == Some(0) {
        bail!("--limit must be at least 1");
    }
    if args.max_new_tokens == 0 {
        bail!("--max-new-tokens must be at least 1");
    }
    // An earlier eval's directory stands for its records file.
    let reuse_ar_from = args.reuse_ar_from.as_deref().map(|p| match p.is_dir() {
        true => p.join(draftsmith_eval::RECORDS_FILE),
        false => p.to_path_buf(),
    });
    if let Some(path) = reuse_ar_from.as_deref().filter(|p| !p.is_file()) {
        bail!(
            "--reuse-ar-from {}: no such records file (an earlier eval's directory or its records.jsonl)",
            path.display()
        );
    }
    let set = draftsmith_eval::read_prompts(&resolve_prompts(&args.prompts)?, args.limit)?;
    let out = args.out.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_RUNS_DIR).join(utc_stamp()));
    let loaded = args.model.load::<B>(device)?;
    let drafters = crate::method_args::load_drafters(&params, &loaded, &args.model, device)?;
    // A wrong drafter is refused before the run's directory is written.
    for &m in &methods {
        draftsmith_decode::check_drafters(m, &params, drafters.as_drafters())?;
    }
    let prompts = draftsmith_eval::encode_prompts(&loaded.tokenizer, &set.prompts, !args.no_chat_template)?;
    let command_line = command_line();
    let manifest = Manifest {
        schema_version: draftsmith_eval::SCHEMA_VERSION,
        model: loaded.path.display().to_string(),
        engine: args.model.engine_label(&loaded.path)?,
        methods,
        params,
        max_new_tokens: args.max_new_tokens,
        prompts: set.path.display().to_string(),
        prompts_sha256: set.sha256.clone(),
        limit: args.limit,
        chat_template: !args.no_chat_template,
        drafter_sha256: args
            .params
            .drafter
            .as_deref()
            .map(|d| draftsmith_eval::drafter_sha256(Path::new(d)))
            .transpose()?,
        ignore_eos: args.ignore_eos,
        turn_tokens: args.turn_tokens.map(|k| k as usize),
        sampling: (sampling.temperature > 0.0).then_some(sampling),
        command: command_line.clone(),
        machine: Some(draftsmith_eval::manifest::machine_line()),
    };
    let input = EvalInput {
        out_dir: &out,
        manifest: &manifest,
        prompts: &prompts,
        stop_tokens: loaded.tokenizer.eos_ids(),
        command_line: &command_line,
        reuse_ar_from: reuse_ar_from.as_deref(),
    };
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} pairs [{elapsed} < {eta}] {msg}").expect("valid template"),
    );
    let lines = OffTerminal::new("eval");
    let outcome = draftsmith_eval::evaluate(&loaded.model, drafters.as_drafters(), &input, &mut |p| match p {
        Progress::Start { total, done } => {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
            lines.tick(&bar);
        }
        Progress::Running { prompt_id, methods } => {
            bar.set_message(format!("{prompt_id} · {}", draftsmith_eval::method_names(methods).replace(',', " + ")))
        }
        Progress::Finished { .. } => {
            bar.inc(1);
            lines.tick(&bar);
        }
    })
    .with_context(|| format!("eval into {}", out.display()))?;
    bar.finish_and_clear();
    // A host whose speed changed during the run says so (`bench ar` does the same).
    if let Some([before, after]) = outcome.summary.host_peaks_gmac_s {
        eprintln!("{}", draftsmith_eval::bench::host_drift_message(before, after));
    }
    if outcome.resumed {
        eprintln!("resumed {}: {} pair(s) run now, the rest from records.jsonl", out.display(), outcome.ran);
    }
    print_summary(&outcome.summary, &out, args.json)?;
    check_lossless(&outcome.summary)
}

/// A prompts file path, or a dataset name fetched into the data dir.
fn resolve_prompts(spec: &str) -> Result<PathBuf> {
    let path = Path::new(spec);
    if path.exists() {
        return Ok(path.to_path_buf());
    }
    match draftsmith_fetch::find(spec) {
        Ok(a) if a.kind == draftsmith_fetch::ArtifactKind::Dataset && a.output.ends_with(".jsonl") => {
            fetch_with_progress(a)
        }
        _ => bail!("--prompts {spec}: no such file, and not a prompt dataset (mt-bench, humaneval)"),
    }
}

fn print_summary(summary: &Summary, out: &Path, json: bool) -> Result<(), crate::out::StdoutError> {
    if json {
        outln!(
            "{}",
            json!({ "methods": summary.methods, "lossless": summary.lossless, "sampled": summary.sampled, "near_tie_bound": summary.near_tie_bound, "out": out.display().to_string() })
        )?;
        return Ok(());
    }
    let f = |v: Option<f64>| v.map_or_else(|| "–".into(), |v| format!("{v:.2}"));
    let interval = |v: Option<[f64; 2]>| v.map_or_else(|| "–".into(), |v| interval_text(v, 2));
    outln!(
        "{:<16} {:>8} {:>8} {:>8} {:>12} {:>11} {:>9}",
        "method",
        "τ",
        "accept%",
        "speedup",
        "95% interval",
        "w/ prefill",
        "lossless"
    )?;
    for (name, s) in summary.iter() {
        outln!(
            "{name:<16} {:>8.3} {:>8} {:>8} {:>12} {:>11} {:>9}",
            s.tokens_per_step,
            f(s.acceptance_pct),
            f(s.speedup),
            interval(s.speedup_interval),
            f(s.speedup_with_prefill),
            if summary.sampled { "sampled".to_string() } else { s.lossless.to_string() }
        )?;
    }
    for r in &summary.relative {
        let ratio = r.ratio.map_or_else(|| "–".into(), |v| format!("{v:.3}"));
        let within = r.interval.map_or_else(String::new, |v| format!(" (95% interval {})", interval_text(v, 3)));
        outln!("{} over {}: {ratio}× the speed{within}", r.method, r.over)?;
    }
    if let Some(b) = &summary.near_tie_bound {
        let ties: usize = summary.methods.values().map(|s| s.near_ties).sum();
        outln!(
            "near-tie check (kernels not batch-invariant): drift {:.2e}, bound {:.2e}, near-ties {ties}",
            b.drift,
            b.bound
        )?;
    }
    outln!("records, summary.json, report.md and plot.svg in {}", out.display())
}

/// Fails with the first mismatches when any method's output differs from `ar`'s.
fn check_lossless(summary: &Summary) -> Result<()> {
    if summary.lossless {
        return Ok(());
    }
    let tok = |t: Option<u32>| t.map_or_else(|| "end".to_string(), |t| t.to_string());
    let real: Vec<_> = summary.mismatches.iter().filter(|m| !m.near_tie).collect();
    let listed: Vec<String> = real
        .iter()
        .take(5)
        .map(|m| {
            format!(
                "prompt `{}`, {}: position {}: ar {} vs {}",
                m.prompt_id,
                m.method,
                m.position,
                tok(m.ar_token),
                tok(m.method_token)
            )
        })
        .collect();
    match listed.is_empty() {
        true => bail!("not lossless: some method has prompts without an ar record"),
        false => bail!("not lossless: {} mismatch(es) with ar:\n  {}", real.len(), listed.join("\n  ")),
    }
}

/// The command line as typed, shell-quoted where needed.
fn command_line() -> String {
    let quote = |a: String| {
        if !a.is_empty() && a.chars().all(|c| c.is_ascii_alphanumeric() || "-_./,:=@+".contains(c)) {
            a
        } else {
            format!("'{}'", a.replace('\'', r"'\''"))
        }
    };
    let mut args = std::env::args();
    let program = args
        .next()
        .map(|p| Path::new(&p).file_name().map_or(p.clone(), |n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    std::iter::once(program).chain(args.map(quote)).collect::<Vec<_>>().join(" ")
}

/// `YYYYMMDD-HHMMSS` in UTC.
fn utc_stamp() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}{month:02}{day:02}-{:02}{:02}{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}
