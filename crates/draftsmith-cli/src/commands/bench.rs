//! `draftsmith bench ar`: the flags of the engine benchmark ([`draftsmith_eval::bench`]) and
//! its tables on stderr; the result is one JSON object on stdout.

use anyhow::Result;
use burn::tensor::backend::Backend;
use clap::{Args, Subcommand};
use draftsmith_eval::bench::{bench_ar, encode_prompts, BenchConfig, BenchEvent, BenchTarget, CurvePoint, Machine};

use crate::model_arg::ModelArgs;
use crate::out::outln;

/// Benchmarks (timings are measured here, never asserted in tests).
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Autoregressive decode throughput, prefill throughput and tree-verify cost.
    Ar(BenchArArgs),
}

#[derive(Debug, Args)]
pub struct BenchArArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// New tokens per prompt (EOS is ignored so every prompt decodes the same count).
    #[arg(long, default_value_t = 64)]
    pub max_new_tokens: usize,
    /// How many of the built-in prompts to use (1–8).
    #[arg(long, default_value_t = 8)]
    pub prompts: usize,
    /// Nodes in the random draft tree whose verification cost is compared with a 1-token step.
    #[arg(long, default_value_t = 64)]
    pub tree_size: usize,
    /// Draft sizes of the verify cost curve (a pass over n tokens against a 1-token step).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,4,6,8,12,16,32,64")]
    pub curve_sizes: Vec<usize>,
    /// Cached context lengths the curve is measured at.
    #[arg(long, value_delimiter = ',', default_value = "64,2048")]
    pub contexts: Vec<usize>,
    /// Rounds of the curve: each round times one pass of every size, each after 8 ms of
    /// one-token passes as in decoding, or as long as the pass before took if longer (the
    /// median is reported, and t(n)/t1 is the median of each round's own ratio).
    #[arg(long, default_value_t = 9)]
    pub curve_runs: usize,
    /// Also time llama.cpp (llama-cpp-python, `just install-llamacpp`) on the same GGUF and
    /// prompt token ids, the two engines alternating prompt by prompt, and print the median
    /// per-prompt speed ratio with its spread.
    #[arg(long)]
    pub vs_llamacpp: bool,
    /// Passes over the prompts (default: 3 with --vs-llamacpp, else 1).
    #[arg(long)]
    pub repeats: Option<usize>,
    /// Leave out the pretty-printed copy of the result on stderr (the result is always the last
    /// stdout line, one JSON object, for scripts).
    #[arg(long)]
    pub json: bool,
}

impl BenchArArgs {
    fn config(&self) -> BenchConfig {
        BenchConfig {
            max_new_tokens: self.max_new_tokens,
            prompts: self.prompts,
            tree_size: self.tree_size,
            curve_sizes: self.curve_sizes.clone(),
            contexts: self.contexts.clone(),
            curve_runs: self.curve_runs,
            vs_llamacpp: self.vs_llamacpp,
            repeats: self.repeats,
        }
    }
}

pub fn run(cmd: BenchCommand) -> Result<()> {
    match cmd {
        BenchCommand::Ar(args) => crate::with_backend!(args.model.device, |B, device| run_ar::<B>(&args, &device)),
    }
}

fn run_ar<B: Backend>(args: &BenchArArgs, device: &B::Device) -> Result<()> {
    let config = args.config();
    config.validate()?;
    let start = std::time::Instant::now();
    let loaded = args.model.load::<B>(device)?;
    // Loading's own figures (a fetch included where the model was not cached yet): the peak
    // resident memory so far is loading's, before the benchmark's probe buffers.
    let (load_s, load_peak_rss_mb) = (start.elapsed().as_secs_f64(), draftsmith_eval::peak_rss_mb());
    eprintln!(
        "loaded in {load_s:.2} s; peak RSS {}",
        load_peak_rss_mb.map_or("unknown".into(), |mb| format!("{mb:.0} MiB"))
    );
    let prompts = encode_prompts(&loaded.tokenizer, config.prompts)?;
    let device = format!("{:?}", args.model.device).to_lowercase();
    let weights = args.model.matmul(&loaded.path)?;
    let target = BenchTarget { model: &loaded.model, path: &loaded.path, device: &device, weights };
    let result = bench_ar(target, &prompts, &config, &mut |event| {
        match event {
        BenchEvent::LlamaCpp(info) => eprintln!(
            "llama.cpp: {} ({} threads): {}",
            info["engine"],
            info["threads"],
            info["system_info"].as_str().unwrap_or("?")
        ),
        BenchEvent::Machine(m) => print_machine(m, args),
        BenchEvent::CurveStart { runs } => print_curve_header(runs),
        BenchEvent::CurveSkipped { context, largest, max_context } => eprintln!("context {context}: skipped ({context} cached tokens plus {largest} draft tokens do not fit the model's context of {max_context})"),
        BenchEvent::CurvePoint(p) => print_curve_point(p),
    }
    })?;
    print_host_drift(&result.machine);
    let mut result = serde_json::to_value(&result)?;
    result["load_s"] = serde_json::json!(load_s);
    result["load_peak_rss_mb"] = serde_json::json!(load_peak_rss_mb);
    if !args.json {
        eprintln!("{}", serde_json::to_string_pretty(&result)?);
    }
    outln!("{result}")?;
    Ok(())
}

fn print_machine(m: &Machine, args: &BenchArArgs) {
    eprintln!("cpu: {}; huge pages: {}", m.cpu(), m.huge_pages);
    match &m.roofline {
        Some(r) => eprintln!(
            "roofline inputs: {:.1} MB of matrix weights, {:.1} M multiply-adds per token; read bandwidth {:.1} GB/s at that size; kernel peak {:.0} GMAC/s ({:?} activations, Q4_1, 64 rows); instruction peak {:.0} GMAC/s",
            r.matrix_bytes as f64 / 1e6,
            r.macs_per_token as f64 / 1e6,
            r.read_bandwidth_gb_s,
            r.kernel_peak_gmac_s,
            args.model.activations,
            r.instruction_peak_gmac_s
        ),
        None => eprintln!(
            "no roofline and no time split: they describe the quantized CPU path, and this run is the dense path on {:?} (t(n) only)",
            args.model.device
        ),
    }
}

/// The instruction peak before and after the run, with a warning when the host's speed changed.
fn print_host_drift(m: &Machine) {
    let Some(r) = m.roofline.as_ref() else { return };
    if let Some([before, after]) = r.host_peaks() {
        eprintln!("{}", draftsmith_eval::bench::host_drift_message(before, after));
    }
}

fn print_curve_header(runs: usize) {
    eprintln!("verify cost curve (all logits; median of {runs} rounds, each timing every size once):");
    eprintln!("(roofline: max(bytes / bandwidth, n · MACs / peak) with the kernel's measured peak; isa: with the instruction peak)");
    eprintln!(
        "{:>7} {:>5} {:>4} {:>9} {:>7} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8}",
        "context",
        "shape",
        "n",
        "ms",
        "t(n)/t1",
        "matrices",
        "attention",
        "other",
        "roofline",
        "roof/r1",
        "isa",
        "isa/r1"
    );
}

fn print_curve_point(p: &CurvePoint) {
    let cell = |x: Option<f64>, width: usize| x.map_or(format!("{:>width$}", "-"), |x| format!("{x:>width$.2}"));
    let (split, roof) = (p.split.as_ref(), p.roofline.as_ref());
    eprintln!(
        "{:>7} {:>5} {:>4} {:>9.2} {:>7.2} {} {} {} {} {} {} {}",
        p.context,
        format!("{:?}", p.shape).to_lowercase(),
        p.n,
        p.ms,
        p.over_step1,
        cell(split.map(|s| s.matrices_ms), 9),
        cell(split.map(|s| s.attention_ms), 9),
        cell(split.map(|s| s.other_ms), 9),
        cell(roof.map(|r| r.roofline_ms), 9),
        cell(roof.map(|r| r.roofline_over_step1), 8),
        cell(roof.map(|r| r.isa_roofline_ms), 8),
        cell(roof.map(|r| r.isa_roofline_over_step1), 8)
    );
}
