//! `draftsmith bench ar`: decode and prefill throughput and tree-verification cost of the
//! target engine on a fixed prompt set, optionally side by side with llama.cpp.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use burn::tensor::backend::Backend;
use clap::{Args, Subcommand};
use draftsmith_decode::{Sampler, SamplingConfig};
use draftsmith_model::{AttentionMask, ChatMessage, LoadedModel, LogitsSelect, Model};
use serde_json::{json, Value};

use crate::model_arg::ModelArgs;

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
    /// Timed passes per curve point (the median is reported).
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
    /// Print one JSON object as the last stdout line.
    #[arg(long)]
    pub json: bool,
}

/// The fixed prompt set (user messages; the chat template is applied).
pub const PROMPTS: &[&str] = &[
    "Write a short story about a robot learning to paint.",
    "Explain the difference between a list and a tuple in Python.",
    "What are the main causes of the French Revolution?",
    "Give me three tips for improving my sleep.",
    "Write a Python function that checks whether a string is a palindrome.",
    "Summarize the plot of Romeo and Juliet in a few sentences.",
    "How does photosynthesis work?",
    "Compose a polite email declining a meeting invitation.",
];

pub fn run(cmd: BenchCommand) -> Result<()> {
    match cmd {
        BenchCommand::Ar(args) => crate::with_backend!(args.model.device, |B, device| bench_ar::<B>(&args, &device)),
    }
}

fn bench_ar<B: Backend>(args: &BenchArArgs, device: &B::Device) -> Result<()> {
    if args.prompts == 0 || args.prompts > PROMPTS.len() {
        bail!("--prompts must be between 1 and {}", PROMPTS.len());
    }
    let loaded = args.model.load::<B>(device)?;
    let prompts = encode_prompts(&loaded, args.prompts)?;
    let model = &loaded.model;
    // Warm-up: one short generation so first-call allocations are not timed.
    decode_run(model, &prompts[0], 8)?;
    let mut reference = if args.vs_llamacpp { Some(LlamaCpp::start(&loaded.path)?) } else { None };
    if let Some(r) = reference.as_mut() {
        r.run(&prompts[0], 8)?;
    }
    let repeats = args.repeats.unwrap_or(if args.vs_llamacpp { 3 } else { 1 }).max(1);
    let (mut decode_time, mut decode_tokens, mut prefill_time, mut prefill_tokens) =
        (Duration::ZERO, 0usize, Duration::ZERO, 0usize);
    let (mut lc_decode, mut lc_prefill, mut lc_tokens, mut ratios) = (0.0f64, 0.0f64, 0usize, Vec::new());
    for _ in 0..repeats {
        for prompt in &prompts {
            let g = decode_run(model, prompt, args.max_new_tokens)?;
            decode_time += g.decode;
            decode_tokens += g.tokens.len() - 1;
            prefill_time += g.prefill;
            prefill_tokens += prompt.len();
            if let Some(r) = reference.as_mut() {
                let t = r.run(prompt, args.max_new_tokens)?;
                lc_decode += t.decode_s;
                lc_prefill += t.prefill_s;
                lc_tokens += t.decoded;
                let ours = (g.tokens.len() - 1) as f64 / g.decode.as_secs_f64();
                ratios.push(ours / (t.decoded as f64 / t.decode_s));
            }
        }
    }
    let context = model.config().max_position_embeddings;
    let prefill_len = 512.min(context - 1);
    let prefill512 = time_prefill(model, prefill_len)?;
    let (step1, tree) = time_tree_verify(model, args.tree_size, 256.min(context / 2))?;
    let decode_tps = decode_tokens as f64 / decode_time.as_secs_f64();
    let machine = Machine::probe(model, args);
    let curve = verify_curve(model, args, &machine)?;
    let mut result = json!({
        "machine": machine,
        "verify_curve": curve,
        "model": loaded.path.display().to_string(),
        "device": format!("{:?}", args.model.device).to_lowercase(),
        "weights": format!("{:?}", args.model.matmul(&loaded.path)?).to_lowercase(),
        "activations": format!("{:?}", args.model.activations).to_lowercase(),
        "prompts": prompts.len(),
        "new_tokens_per_prompt": args.max_new_tokens,
        "decode_tokens_per_s": decode_tps,
        "ms_per_token": 1e3 / decode_tps,
        "prefill_tokens_per_s": prefill_tokens as f64 / prefill_time.as_secs_f64(),
        "prefill_len": prefill_len,
        "prefill512_ms": prefill512.as_secs_f64() * 1e3,
        "step1_ms": step1,
        "tree_size": args.tree_size,
        "tree_ms": tree,
        "tree64_over_step1_cost": tree / step1,
    });
    result["repeats"] = json!(repeats);
    if let Some(r) = reference {
        ratios.sort_by(f64::total_cmp);
        let at = |q: f64| ratios[((ratios.len() - 1) as f64 * q).round() as usize];
        result["llamacpp"] = json!({
            "engine": r.info["engine"],
            "threads": r.info["threads"],
            "system_info": r.info["system_info"],
            "decode_tokens_per_s": lc_tokens as f64 / lc_decode,
            "ms_per_token": 1e3 * lc_decode / lc_tokens as f64,
            "prefill_tokens_per_s": (prefill_tokens as f64) / lc_prefill,
        });
        // The engines alternate prompt by prompt: the median of the per-prompt ratios, with the
        // quartiles and the extremes as its spread.
        result["decode_ratio_vs_llamacpp"] = json!(at(0.5));
        result["decode_ratio_spread"] =
            json!({"min": at(0.0), "q1": at(0.25), "q3": at(0.75), "max": at(1.0), "pairs": ratios.len()});
    }
    if !args.json {
        eprintln!("{}", serde_json::to_string_pretty(&result)?);
    }
    println!("{result}");
    Ok(())
}

/// The CPU, its flags, the memory bandwidth for a buffer the size of the model's matrices and
/// the kernels' and the instruction set's peak rates in the model's activation mode: the
/// roofline of a pass over n tokens is `max(bytes / bandwidth, n · MACs / peak)`.
#[derive(Debug, serde::Serialize)]
struct Machine {
    cpu_model: String,
    cpu_flags: Vec<String>,
    threads: usize,
    kernel_path: &'static str,
    matrix_bytes: usize,
    macs_per_token: usize,
    read_bandwidth_gb_s: f64,
    kernel_peak_gmac_s: f64,
    /// 0 where not probed (only the AVX-512 VNNI path is).
    instruction_peak_gmac_s: f64,
}

impl Machine {
    fn probe<B: Backend>(model: &Model<B>, args: &BenchArArgs) -> Self {
        use draftsmith_kernels::probe;
        let cpu = probe::CpuInfo::detect();
        let footprint = model.matrix_footprint();
        let mode = args.model.activations.into();
        let m = Self {
            cpu_model: cpu.model,
            cpu_flags: cpu.flags,
            threads: cpu.threads,
            kernel_path: cpu.kernel_path,
            matrix_bytes: footprint.bytes,
            macs_per_token: footprint.macs_per_token,
            read_bandwidth_gb_s: probe::memory_bandwidth(footprint.bytes, 5),
            kernel_peak_gmac_s: probe::kernel_peak(mode, draftsmith_kernels::QFormat::Q4_1),
            instruction_peak_gmac_s: probe::instruction_peak(mode),
        };
        eprintln!(
            "cpu: {} ({} threads; kernels {}; flags {})",
            m.cpu_model,
            m.threads,
            m.kernel_path,
            m.cpu_flags.join(" ")
        );
        eprintln!(
            "roofline inputs: {:.1} MB of matrix weights, {:.1} M multiply-adds per token; read bandwidth {:.1} GB/s at that size; kernel peak {:.0} GMAC/s ({:?} activations, Q4_1, 64 rows); instruction peak {:.0} GMAC/s",
            m.matrix_bytes as f64 / 1e6,
            m.macs_per_token as f64 / 1e6,
            m.read_bandwidth_gb_s,
            m.kernel_peak_gmac_s,
            args.model.activations,
            m.instruction_peak_gmac_s
        );
        m
    }

    /// Milliseconds of a pass over `n` tokens at `peak` GMAC/s (NaN for an unprobed peak).
    fn roofline(&self, n: usize, peak: f64) -> f64 {
        let peak = if peak > 0.0 { peak } else { f64::NAN };
        (self.matrix_bytes as f64 / (self.read_bandwidth_gb_s * 1e6))
            .max(n as f64 * self.macs_per_token as f64 / (peak * 1e6))
    }
}

/// t(n) for chains and random trees at each cached context, split into matrices / attention /
/// the rest, with the roofline beside it; printed as a table on stderr.
fn verify_curve<B: Backend>(model: &Model<B>, args: &BenchArArgs, machine: &Machine) -> Result<Vec<Value>> {
    use draftsmith_decode::cost::{cached_context, time_pass, DraftShape};
    let roofline = |n: usize| machine.roofline(n, machine.kernel_peak_gmac_s);
    // The same bound at the instruction peak (what a perfect kernel could do).
    let isa_roofline = |n: usize| machine.roofline(n, machine.instruction_peak_gmac_s);
    let max_context = model.config().max_position_embeddings;
    let mut sizes = args.curve_sizes.clone();
    if !sizes.contains(&1) {
        sizes.insert(0, 1);
    }
    let largest = sizes.iter().copied().max().unwrap_or(1);
    let mut rows = Vec::new();
    eprintln!("verify cost curve (all logits; median of {} passes):", args.curve_runs);
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
    for &context in &args.contexts {
        if context == 0 {
            bail!("--contexts: a context must hold at least one cached token");
        }
        if context + largest >= max_context {
            eprintln!("context {context}: skipped ({context} cached tokens plus {largest} draft tokens do not fit the model's context of {max_context})");
            continue;
        }
        let mut cache = cached_context(model, context, largest)?;
        for shape in [DraftShape::Chain, DraftShape::Tree] {
            let mut t1 = f64::NAN;
            for &n in &sizes {
                let t = time_pass(model, &mut cache, shape, n, args.curve_runs)?;
                if n == 1 {
                    t1 = t.ms;
                }
                let roof = roofline(n);
                eprintln!(
                    "{context:>7} {:>5} {n:>4} {:>9.2} {:>7.2} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>8.2} {:>8.2} {:>8.2}",
                    format!("{shape:?}").to_lowercase(),
                    t.ms,
                    t.ms / t1,
                    t.matrices_ms,
                    t.attention_ms,
                    t.other_ms,
                    roof,
                    roof / roofline(1),
                    isa_roofline(n),
                    isa_roofline(n) / isa_roofline(1)
                );
                rows.push(json!({
                    "context": context,
                    "shape": shape,
                    "n": n,
                    "ms": t.ms,
                    "over_step1": t.ms / t1,
                    "matrices_ms": t.matrices_ms,
                    "attention_ms": t.attention_ms,
                    "other_ms": t.other_ms,
                    "roofline_ms": roof,
                    "roofline_over_step1": roof / roofline(1),
                    "isa_roofline_ms": isa_roofline(n),
                }));
            }
        }
    }
    Ok(rows)
}

fn encode_prompts<B: Backend>(loaded: &LoadedModel<B>, n: usize) -> Result<Vec<Vec<u32>>> {
    PROMPTS[..n]
        .iter()
        .map(|p| {
            let text = match loaded.tokenizer.chat_template() {
                Some(t) => t.render(&[ChatMessage::new("user", p)], true)?,
                None => p.to_string(),
            };
            Ok(loaded.tokenizer.encode(&text)?)
        })
        .collect()
}

fn decode_run<B: Backend>(model: &Model<B>, prompt: &[u32], n: usize) -> Result<draftsmith_decode::Generation> {
    let mut sampler = Sampler::new(SamplingConfig::default());
    Ok(draftsmith_decode::generate(model, prompt, n, &[], &mut sampler, &mut |_| true)?)
}

/// Median of `runs` timings of `f`.
fn median_time(runs: usize, mut f: impl FnMut() -> Result<()>) -> Result<Duration> {
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        f()?;
        times.push(start.elapsed());
    }
    times.sort();
    Ok(times[runs / 2])
}

/// Time to prefill `n` tokens into an empty cache (logits of the last position).
fn time_prefill<B: Backend>(model: &Model<B>, n: usize) -> Result<Duration> {
    let tokens = draftsmith_decode::cost::DraftShape::Chain.tree(n, model.config().vocab_size, 1).tokens().to_vec();
    let positions: Vec<usize> = (0..n).collect();
    median_time(3, || {
        let mut cache = model.new_cache(n);
        let out = model.forward(&tokens, &positions, &AttentionMask::Causal, LogitsSelect::Last, &mut cache)?;
        let _ = out.logits.into_data();
        Ok(())
    })
}

/// Milliseconds of a 1-token step and of a `tree_size`-node random tree verify (all logits),
/// after a `context`-token prefix (medians of 15 and 7 passes).
fn time_tree_verify<B: Backend>(model: &Model<B>, tree_size: usize, context: usize) -> Result<(f64, f64)> {
    use draftsmith_decode::cost::{cached_context, time_pass, DraftShape};
    let mut cache = cached_context(model, context, tree_size)?;
    let step = time_pass(model, &mut cache, DraftShape::Tree, 1, 15)?;
    let tree = time_pass(model, &mut cache, DraftShape::Tree, tree_size, 7)?;
    Ok((step.ms, tree.ms))
}

/// A running `scripts/bench_llamacpp.py`: llama.cpp on the same GGUF, timing one prompt per
/// request.
struct LlamaCpp {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
    /// Its first line: engine, threads and the build's SIMD flags.
    info: Value,
}

/// llama.cpp's timing of one prompt.
struct LlamaCppRun {
    prefill_s: f64,
    decode_s: f64,
    decoded: usize,
}

impl LlamaCpp {
    fn start(model: &std::path::Path) -> Result<Self> {
        use std::process::{Command, Stdio};
        if !model.is_file() {
            bail!("--vs-llamacpp needs a GGUF model file, got {}", model.display());
        }
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/bench_llamacpp.py");
        let mut child = Command::new("python3")
            .arg(&script)
            .arg("--model")
            .arg(model)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("cannot run {}", script.display()))?;
        let stdin = child.stdin.take().context("llama.cpp benchmark stdin")?;
        let stdout = std::io::BufReader::new(child.stdout.take().context("llama.cpp benchmark stdout")?);
        let mut lc = Self { child, stdin, stdout, info: Value::Null };
        lc.info = lc.read_line().with_context(|| {
            format!("{} did not start (install llama-cpp-python with `just install-llamacpp`)", script.display())
        })?;
        eprintln!(
            "llama.cpp: {} ({} threads): {}",
            lc.info["engine"],
            lc.info["threads"],
            lc.info["system_info"].as_str().unwrap_or("?")
        );
        Ok(lc)
    }

    fn read_line(&mut self) -> Result<Value> {
        use std::io::BufRead;
        let mut line = String::new();
        if self.stdout.read_line(&mut line)? == 0 {
            bail!("the llama.cpp benchmark exited early");
        }
        Ok(serde_json::from_str(&line)?)
    }

    fn run(&mut self, ids: &[u32], n: usize) -> Result<LlamaCppRun> {
        use std::io::Write;
        writeln!(self.stdin, "{}", json!({"ids": ids, "n": n}))?;
        self.stdin.flush()?;
        let v = self.read_line()?;
        let get = |k: &str| v[k].as_f64().with_context(|| format!("llama.cpp benchmark: no `{k}` in {v}"));
        Ok(LlamaCppRun { prefill_s: get("prefill_s")?, decode_s: get("decode_s")?, decoded: get("decoded")? as usize })
    }
}

impl Drop for LlamaCpp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
