//! `draftsmith train redrafter`: trains a drafter on a distilled dataset over the frozen target
//! (`train tokenswift` is in [`tokenswift`]).

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand, ValueEnum};
use draftsmith_heads::redrafter::HeadKind;
use draftsmith_train::{LabelSource, ReDrafterTrainConfig};

use crate::jobs::train::HiddenSource;
use crate::model_arg::ModelArgs;

pub mod tokenswift;

#[derive(Debug, Subcommand)]
pub enum TrainCommand {
    /// Train a ReDrafter RNN drafter (the target stays frozen; only the drafter is saved).
    Redrafter(RedrafterArgs),
    /// Train TokenSwift's chained linear heads on long texts (the target stays frozen).
    Tokenswift(tokenswift::TokenSwiftArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HeadArg {
    /// Through the target's frozen embeddings (exit_dim × hidden trained parameters).
    Tied,
    /// The reference's `exit_dim × vocab` output layer.
    Full,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LabelsArg {
    /// The sequences' own next tokens (the target's, for self-distilled responses).
    GroundTruth,
    /// The target's per-position greedy continuations (needs `distill --teacher-len`).
    Teacher,
}

#[derive(Debug, Args)]
pub struct RedrafterArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// A distilled dataset directory (written by `draftsmith distill`).
    #[arg(long)]
    pub data: PathBuf,
    /// Run directory: checkpoints, metrics.csv, and the exported drafter at the end.
    /// Rerunning with the same settings resumes from the last checkpoint.
    #[arg(long, default_value = "checkpoints/redrafter")]
    pub out: PathBuf,
    /// Output layer.
    #[arg(long, value_enum, default_value_t = HeadArg::Tied)]
    pub head: HeadArg,
    /// Tied head: propose only the N most frequent labels of the training data (0 = the whole
    /// vocabulary); the output layer's training cost scales with N.
    #[arg(long, default_value_t = ReDrafterTrainConfig::default().draft_vocab)]
    pub draft_vocab: usize,
    /// Label source.
    #[arg(long, value_enum, default_value_t = LabelsArg::GroundTruth)]
    pub labels: LabelsArg,
    /// Weight in [0, 1] of the target's own next-token distribution in the loss (knowledge
    /// distillation through its frozen LM head; ground-truth labels only). 0: labels alone.
    #[arg(long, default_value_t = ReDrafterTrainConfig::default().soft_labels)]
    pub soft_labels: f64,
    /// Future tokens per position (the reference: 5).
    #[arg(long, default_value_t = ReDrafterTrainConfig::default().horizon)]
    pub horizon: usize,
    #[arg(long, default_value_t = ReDrafterTrainConfig::default().epochs)]
    pub epochs: usize,
    /// Stop after this many optimiser steps (the schedule spans them).
    #[arg(long)]
    pub max_steps: Option<usize>,
    /// Context positions per micro-batch.
    #[arg(long, default_value_t = ReDrafterTrainConfig::default().batch_size)]
    pub batch_size: usize,
    #[arg(long, default_value_t = ReDrafterTrainConfig::default().grad_accum)]
    pub grad_accum: usize,
    #[arg(long, default_value_t = ReDrafterTrainConfig::default().lr)]
    pub lr: f64,
    #[arg(long, default_value_t = ReDrafterTrainConfig::default().warmup_fraction)]
    pub warmup_fraction: f64,
    #[arg(long, default_value_t = ReDrafterTrainConfig::default().weight_decay)]
    pub weight_decay: f64,
    #[arg(long, default_value_t = ReDrafterTrainConfig::default().val_fraction)]
    pub val_fraction: f64,
    #[arg(long, default_value_t = ReDrafterTrainConfig::default().checkpoint_every)]
    pub checkpoint_every: usize,
    #[arg(long, default_value_t = ReDrafterTrainConfig::default().seed)]
    pub seed: u64,
    /// Use at most this many sequences of the dataset.
    #[arg(long)]
    pub limit: Option<usize>,
    /// Sequences longer than this are cut.
    #[arg(long, default_value_t = draftsmith_train::DEFAULT_MAX_SEQ_LEN)]
    pub max_seq_len: usize,
    /// Read the target's hidden states from this `draftsmith hidden` cache. Default:
    /// `<data>/hidden-states` when it exists, else they are computed at the start.
    #[arg(long, conflicts_with = "online")]
    pub hidden: Option<PathBuf>,
    /// Compute the target's hidden states at the start even when a cache exists.
    #[arg(long)]
    pub online: bool,
}

impl RedrafterArgs {
    fn config(&self) -> ReDrafterTrainConfig {
        ReDrafterTrainConfig {
            head: match self.head {
                HeadArg::Tied => HeadKind::Tied,
                HeadArg::Full => HeadKind::Full,
            },
            draft_vocab: self.draft_vocab,
            labels: match self.labels {
                LabelsArg::GroundTruth => LabelSource::GroundTruth,
                LabelsArg::Teacher => LabelSource::Teacher,
            },
            soft_labels: self.soft_labels,
            horizon: self.horizon,
            epochs: self.epochs,
            max_steps: self.max_steps,
            batch_size: self.batch_size,
            grad_accum: self.grad_accum,
            lr: self.lr,
            warmup_fraction: self.warmup_fraction,
            weight_decay: self.weight_decay,
            val_fraction: self.val_fraction,
            checkpoint_every: self.checkpoint_every,
            seed: self.seed,
            ..ReDrafterTrainConfig::default()
        }
    }
}

pub fn run(cmd: TrainCommand) -> Result<()> {
    match cmd {
        TrainCommand::Redrafter(args) => {
            let job = crate::jobs::train::TrainJob {
                model: args.model.clone(),
                data: args.data.clone(),
                out: args.out.clone(),
                config: args.config(),
                limit: args.limit,
                max_seq_len: args.max_seq_len,
                hidden: match (&args.hidden, args.online) {
                    (Some(dir), _) => HiddenSource::Cache(dir.clone()),
                    (None, true) => HiddenSource::Online,
                    (None, false) => HiddenSource::Auto,
                },
            };
            crate::jobs::train::run(&job)
        }
        TrainCommand::Tokenswift(args) => tokenswift::run(&args),
    }
}
