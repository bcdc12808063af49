//! `draftsmith train tokenswift`: TokenSwift heads on long texts (Gutenberg + KJV by default),
//! split by whole book. The run directory gets `split.json` (which books trained, which are
//! held out) and `eval-prompts.jsonl` (long prefixes of held-out books only, for
//! `eval --no-chat-template` / `generate`), besides the checkpoints and the exported heads.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use burn::backend::Autodiff;
use burn::tensor::backend::Backend;
use clap::Args;
use draftsmith_data::books::{read_books, split_books, Book};
use draftsmith_train::{chunks, heldout, train_tokenswift, TokenSwiftTrainConfig};

use crate::model_arg::ModelArgs;
use crate::out::outln;
use crate::progress::fetch_with_progress;
use crate::progress::TrainDisplay;

/// Books shorter than this (characters) are skipped.
const MIN_BOOK_CHARS: usize = 10_000;

#[derive(Debug, Args)]
pub struct TokenSwiftArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Long-text sources: directories of `.txt` books or single files, or dataset names
    /// (`gutenberg`, `kjv`; fetched on first use).
    #[arg(long, value_delimiter = ',', default_value = "gutenberg,kjv")]
    pub books: Vec<String>,
    /// Books held out of training (names: file name without `_gut.txt`). Default: hamlet,
    /// macbeth, tempest, paradise_lost_(no_introduction).
    #[arg(long, value_delimiter = ',')]
    pub eval_books: Option<Vec<String>>,
    /// Run directory (its name should contain `tokenswift`). Rerunning resumes.
    #[arg(long, default_value = "checkpoints/tokenswift")]
    pub out: PathBuf,
    #[arg(long, default_value_t = TokenSwiftTrainConfig::default().num_heads)]
    pub num_heads: usize,
    /// Tokens per training chunk (reference: 8192).
    #[arg(long, default_value_t = TokenSwiftTrainConfig::default().seq_len)]
    pub seq_len: usize,
    /// Chunks per micro-batch.
    #[arg(long, default_value_t = TokenSwiftTrainConfig::default().batch_size)]
    pub batch_size: usize,
    #[arg(long, default_value_t = TokenSwiftTrainConfig::default().grad_accum)]
    pub grad_accum: usize,
    /// Optimiser steps (reference: 200).
    #[arg(long, default_value_t = TokenSwiftTrainConfig::default().steps)]
    pub steps: usize,
    #[arg(long, default_value_t = TokenSwiftTrainConfig::default().lr)]
    pub lr: f64,
    #[arg(long, default_value_t = TokenSwiftTrainConfig::default().warmup_steps)]
    pub warmup_steps: usize,
    #[arg(long, default_value_t = TokenSwiftTrainConfig::default().weight_decay)]
    pub weight_decay: f64,
    #[arg(long, default_value_t = TokenSwiftTrainConfig::default().checkpoint_every)]
    pub checkpoint_every: usize,
    #[arg(long, default_value_t = TokenSwiftTrainConfig::default().seed)]
    pub seed: u64,
    /// Start the heads' output norms at 1, as the reference does, instead of from the
    /// target's final norm.
    #[arg(long)]
    pub reference_init: bool,
    /// Eval prompts written per held-out book.
    #[arg(long, default_value_t = 3)]
    pub prompts_per_book: usize,
    /// Tokens per eval prompt (the paper's prefixes are 1K–2K+ tokens).
    #[arg(long, default_value_t = 1536)]
    pub prompt_tokens: usize,
}

impl TokenSwiftArgs {
    fn config(&self) -> TokenSwiftTrainConfig {
        TokenSwiftTrainConfig {
            num_heads: self.num_heads,
            seq_len: self.seq_len,
            batch_size: self.batch_size,
            grad_accum: self.grad_accum,
            steps: self.steps,
            lr: self.lr,
            warmup_steps: self.warmup_steps,
            weight_decay: self.weight_decay,
            checkpoint_every: self.checkpoint_every,
            seed: self.seed,
            reference_init: self.reference_init,
            ..TokenSwiftTrainConfig::default()
        }
    }
}

pub fn run(args: &TokenSwiftArgs) -> Result<()> {
    crate::with_backend!(args.model.device, |B, device| train::<B>(args, &device))
}

/// A book source: an existing path, or a dataset name fetched into the data dir.
fn resolve_source(spec: &str) -> Result<PathBuf> {
    let path = Path::new(spec);
    if path.exists() {
        return Ok(path.to_path_buf());
    }
    match draftsmith_fetch::find(spec) {
        Ok(a) if a.kind == draftsmith_fetch::ArtifactKind::Dataset => {
            let fetched = fetch_with_progress(a)?;
            // `gutenberg` is a directory holding `texts/`.
            Ok(if fetched.join("texts").is_dir() { fetched.join("texts") } else { fetched })
        }
        _ => bail!("--books {spec}: no such file or directory, and not a dataset name (gutenberg, kjv)"),
    }
}

fn train<B: Backend>(args: &TokenSwiftArgs, device: &B::Device) -> Result<()> {
    let cfg = args.config();
    cfg.validate()?;
    if args.prompt_tokens == 0 && args.prompts_per_book > 0 {
        bail!("--prompt-tokens 0: an eval prompt needs at least 1 token (--prompts-per-book 0 writes none)");
    }
    let loaded = args.model.load::<B>(device)?;
    let identity = draftsmith_decode::target_identity(&loaded)?;
    let sources = args.books.iter().map(|s| resolve_source(s)).collect::<Result<Vec<_>>>()?;
    let books = read_books(&sources, MIN_BOOK_CHARS)?;
    let (train_books, eval_books, split) = split_books(books, args.eval_books.as_deref())?;
    let tokenize = |books: &[Book]| -> Result<Vec<Vec<u32>>> {
        books
            .iter()
            .map(|b| loaded.tokenizer.encode(&b.text).with_context(|| format!("tokenizing {}", b.path.display())))
            .collect()
    };
    eprintln!("tokenizing {} training and {} held-out books …", train_books.len(), eval_books.len());
    let train_streams = tokenize(&train_books)?;
    let eval_streams = tokenize(&eval_books)?;
    heldout::check_eval_prompts(&eval_streams, args.prompts_per_book, args.prompt_tokens)?;
    let train_chunks = chunks(&train_streams, cfg.seq_len);
    // Validation chunks spread over the held-out books (never trained on).
    let held_out = chunks(&eval_streams, cfg.seq_len);
    let stride = (held_out.len() / cfg.val_chunks.max(1)).max(1);
    let val: Vec<Vec<u32>> = held_out.into_iter().step_by(stride).take(cfg.val_chunks).collect();
    let train_tokens: usize = train_streams.iter().map(Vec::len).sum();
    let fingerprint = serde_json::json!({ "split": split, "train_tokens": train_tokens, "sources": args.books });
    eprintln!(
        "training TokenSwift heads on {} chunks of {} tokens ({train_tokens} tokens in {} books; held out: {}) → {}",
        train_chunks.len(),
        cfg.seq_len,
        split.train.len(),
        split.eval.join(", "),
        args.out.display()
    );
    let mut display = TrainDisplay::new(None);
    let summary = train_tokenswift::<Autodiff<B>>(
        &loaded.model,
        &identity,
        &train_chunks,
        &val,
        &cfg,
        &args.out,
        fingerprint,
        &mut |e| display.on(e),
    )
    .context("training failed")?;
    display.finish();
    // Written once the training has let go of the directory (a second run into it stops at the
    // training's lock before writing anything there).
    heldout::write_split(&args.out, &split, &train_streams, &eval_streams)?;
    heldout::write_eval_prompts(
        &args.out.join("eval-prompts.jsonl"),
        &eval_books,
        &eval_streams,
        args.prompts_per_book,
        args.prompt_tokens,
        &loaded.tokenizer,
    )?;
    outln!(
        "done: {} steps (this run: {:.0} s); held-out top-1 % per head (tokens t+2, t+3, …): {}; heads exported to {}",
        summary.steps,
        summary.seconds,
        crate::progress::top1_percents(&summary.val_top1),
        args.out.display()
    )?;
    Ok(())
}
