//! The one training loop every drafter runs: seeded shuffling per epoch, warm-up + cosine
//! learning rate, gradient accumulation, metric logs, validation and checkpoints (resumed
//! bit-exactly), over a small `DrafterTask` that knows its own batches, loss and export.
//! Also the run's shared types: [`TrainEvent`] (progress) and [`TrainSummary`].

use std::path::Path;

use burn::module::AutodiffModule;
use burn::optim::{GradientsAccumulator, GradientsParams, Optimizer};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::Tensor;
use draftsmith_heads::StepMetrics;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

use crate::checkpoint::{resume, save_checkpoint, LoopState};
use crate::error::TrainError;
use crate::metrics::MetricsCsv;
use crate::schedule::cosine_with_warmup;

/// Progress of a training run.
#[derive(Debug, Clone)]
pub enum TrainEvent {
    /// Target hidden states: tokens done of total.
    Hidden {
        done: usize,
        total: usize,
    },
    Start {
        total_steps: usize,
        resumed_at: usize,
        examples: usize,
        val_examples: usize,
        params: usize,
    },
    Step {
        step: usize,
        total: usize,
        /// The step's loss; NaN when none of its rows was trained.
        loss: f64,
        lr: f64,
        /// Per head, top-1 accuracy over the logging window; NaN for a head with no rows.
        top1: Vec<f64>,
    },
    Validation {
        step: usize,
        heads: Vec<StepMetrics>,
    },
    Checkpoint {
        step: usize,
    },
}

/// What a finished run reports (also written to `summary.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrainSummary {
    pub steps: usize,
    pub epochs: usize,
    pub examples: usize,
    pub train_sequences: usize,
    pub val_sequences: usize,
    pub params: usize,
    pub seconds: f64,
    /// Per head: validation (loss, top-1, top-5).
    pub val_loss: Vec<f64>,
    pub val_top1: Vec<f64>,
    pub val_top5: Vec<f64>,
    /// Wall seconds of each epoch this run trained (an epoch resumed part-way counts this run's
    /// part only); the target's hidden-state pass is not in them.
    #[serde(default)]
    pub epoch_seconds: Vec<f64>,
    /// ReDrafter: where the target's hidden states came from (`online`, or a cache directory)
    /// and the seconds spent computing or opening them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden_source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden_seconds: Option<f64>,
}

impl TrainSummary {
    /// The validation columns (empty without a held-out set) and epoch times of a finished loop.
    pub(crate) fn with_outcome(self, outcome: &LoopOutcome) -> Self {
        let heads = &outcome.heads;
        Self {
            val_loss: heads.iter().map(StepMetrics::mean_loss).collect(),
            val_top1: heads.iter().map(StepMetrics::top1_acc).collect(),
            val_top5: heads.iter().map(StepMetrics::top5_acc).collect(),
            epoch_seconds: outcome.epoch_seconds.clone(),
            ..self
        }
    }

    /// Writes `run/summary.json`.
    pub(crate) fn write(&self, run: &Path) -> Result<(), TrainError> {
        let path = run.join("summary.json");
        std::fs::write(&path, serde_json::to_string_pretty(self).expect("serializable")).map_err(TrainError::io(&path))
    }
}

/// What one kind of drafter brings to the loop.
pub(crate) trait DrafterTask<AB: AutodiffBackend> {
    type Module: AutodiffModule<AB>;
    /// One training item (a context position, a chunk); a micro-batch is a slice of them.
    type Item: Clone;
    /// Prediction steps per item, the metric columns (ReDrafter's horizon, TokenSwift's heads).
    fn metric_steps(&self) -> usize;
    /// The loss to back-propagate and per-step metrics of one micro-batch.
    fn loss(
        &self,
        module: &Self::Module,
        items: &[Self::Item],
    ) -> Result<(Tensor<AB, 1>, Vec<StepMetrics>), TrainError>;
    /// Whether anything is held out for validation.
    fn holds_out(&self) -> bool;
    /// Metrics over the held-out set.
    fn validate(
        &self,
        module: &<Self::Module as AutodiffModule<AB>>::InnerModule,
    ) -> Result<Vec<StepMetrics>, TrainError>;
    /// Writes the drafter in its export layout into `dir`, as trained for `step` steps.
    fn export(&self, dir: &Path, module: &Self::Module, step: usize) -> Result<(), TrainError>;
}

/// How micro-batches follow one another across epochs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Epochs {
    /// Every epoch starts a new optimiser step (its last step may hold fewer micro-batches).
    Aligned,
    /// Micro-batches run on across epoch boundaries (a run sized in steps, not epochs: the
    /// metric log's epoch column stays 0).
    Continuous,
}

/// The loop's schedule and sizes.
#[derive(Debug, Clone)]
pub(crate) struct LoopPlan {
    pub total_steps: usize,
    pub batch_size: usize,
    pub grad_accum: usize,
    pub lr: f64,
    pub warmup_steps: usize,
    pub log_every: usize,
    pub checkpoint_every: usize,
    /// Epoch `e` is shuffled with seed `seed + 1 + e`.
    pub seed: u64,
    pub epochs: Epochs,
    /// For the start event: training and held-out examples, trainable parameters.
    pub examples: usize,
    pub val_examples: usize,
    pub params: usize,
}

/// What [`train_loop`] ends with.
pub(crate) struct LoopOutcome {
    /// Final held-out metrics (empty without a held-out set).
    pub heads: Vec<StepMetrics>,
    /// Wall seconds per epoch trained in this run.
    pub epoch_seconds: Vec<f64>,
}

/// Trains `fresh` (or the run's checkpoint of it, after `check_export` accepted the exported
/// drafter there) on `items` for `plan.total_steps` steps.
#[allow(clippy::too_many_arguments)]
pub(crate) fn train_loop<AB, T, O>(
    task: &T,
    items: &[T::Item],
    plan: &LoopPlan,
    run_dir: &Path,
    fingerprint: &serde_json::Value,
    fresh: T::Module,
    optim: O,
    device: &AB::Device,
    check_export: impl FnOnce(&Path) -> Result<(), TrainError>,
    progress: &mut dyn FnMut(TrainEvent),
) -> Result<LoopOutcome, TrainError>
where
    AB: AutodiffBackend,
    T: DrafterTask<AB>,
    O: Optimizer<T::Module, AB>,
{
    let total = plan.total_steps;
    let (mut module, mut optim, start) = resume::<AB, _, _>(run_dir, fingerprint, fresh, optim, device, check_export)?;
    progress(TrainEvent::Start {
        total_steps: total,
        resumed_at: start,
        examples: plan.examples,
        val_examples: plan.val_examples,
        params: plan.params,
    });
    let csv = MetricsCsv::open(&run_dir.join("metrics.csv"), start)?;
    let micro_per_epoch = items.len().div_ceil(plan.batch_size);
    let steps_per_epoch = micro_per_epoch.div_ceil(plan.grad_accum);
    let (mut order, mut order_epoch) = (Vec::new(), usize::MAX);
    let mut window = vec![StepMetrics::default(); task.metric_steps()];
    let (mut epoch_seconds, mut epoch_began, mut timed_epoch) = (Vec::new(), std::time::Instant::now(), None);
    for step in start..total {
        let lr = cosine_with_warmup(plan.lr, step, total, plan.warmup_steps);
        let mut accum = GradientsAccumulator::new();
        // The sum over micro-batches of their summed losses; `None` while none trained a row.
        let (mut loss_sum, mut epoch) = (None::<f64>, 0);
        for micro in 0..plan.grad_accum {
            let (e, index) = match plan.epochs {
                Epochs::Aligned => (step / steps_per_epoch, (step % steps_per_epoch) * plan.grad_accum + micro),
                Epochs::Continuous => {
                    let at = step * plan.grad_accum + micro;
                    (at / micro_per_epoch, at % micro_per_epoch)
                }
            };
            if index >= micro_per_epoch {
                break;
            }
            if plan.epochs == Epochs::Aligned {
                epoch = e;
            }
            if micro == 0 && timed_epoch != Some(e) {
                if timed_epoch.is_some() {
                    epoch_seconds.push(epoch_began.elapsed().as_secs_f64());
                    epoch_began = std::time::Instant::now();
                }
                timed_epoch = Some(e);
            }
            if e != order_epoch {
                order = items.to_vec();
                order.shuffle(&mut rand::rngs::StdRng::seed_from_u64(plan.seed.wrapping_add(1 + e as u64)));
                order_epoch = e;
            }
            let rows = &order[index * plan.batch_size..((index + 1) * plan.batch_size).min(order.len())];
            let (loss, metrics) = task.loss(&module, rows)?;
            // The loss is the sum of the steps' mean losses, already on the host in `metrics`.
            if let Some(l) = StepMetrics::summed_loss(&metrics) {
                loss_sum = Some(loss_sum.unwrap_or(0.0) + l);
            }
            metrics.iter().zip(window.iter_mut()).for_each(|(m, w)| w.add(m));
            accum.accumulate(&module, GradientsParams::from_grads(loss.backward(), &module));
        }
        if let Some(loss) = loss_sum.filter(|l| !l.is_finite()) {
            return Err(diverged(run_dir, step + 1, format!("the loss is {loss} (learning rate {lr:.2e})")));
        }
        module = optim.step(lr, module, accum.grads());
        let done = step + 1;
        if done % plan.log_every == 0 || done == total {
            csv.log(done, epoch, "train", lr, &window)?;
            progress(TrainEvent::Step {
                step: done,
                total,
                // No loss at all (NaN) rather than 0 when no row of the step was trained.
                loss: loss_sum.map_or(f64::NAN, |l| l / plan.grad_accum as f64),
                lr,
                top1: window.iter().map(StepMetrics::top1_acc).collect(),
            });
            window = vec![StepMetrics::default(); task.metric_steps()];
        }
        if done % plan.checkpoint_every == 0 || done == total {
            if task.holds_out() {
                let heads = task.validate(&module.valid())?;
                csv.log(done, epoch, "val", lr, &heads)?;
                progress(TrainEvent::Validation { step: done, heads });
            }
            check_finite(run_dir, done, &module)?;
            let state = LoopState {
                step: done,
                total_steps: total,
                fingerprint: fingerprint.clone(),
                files: Default::default(),
            };
            save_checkpoint(run_dir, &state, &module, &optim, |dir| task.export(dir, &module, done))?;
            progress(TrainEvent::Checkpoint { step: done });
        }
    }
    if timed_epoch.is_some() {
        epoch_seconds.push(epoch_began.elapsed().as_secs_f64());
    }
    // The last step always checkpoints (checked there), and a resumed module comes from a
    // checkpoint whose exported drafter was loaded, and so checked, on resume.
    let heads = if task.holds_out() { task.validate(&module.valid())? } else { Vec::new() };
    task.export(run_dir, &module, total)?;
    Ok(LoopOutcome { heads, epoch_seconds })
}

/// A run stopped because its loss or weights stopped being finite: nothing of that step is
/// saved, so the last checkpoint stays the last good state.
fn diverged(run_dir: &Path, step: usize, what: String) -> TrainError {
    TrainError::Dir {
        path: run_dir.to_path_buf(),
        problem: format!(
            "training diverged at step {step}: {what}; nothing of it was saved (the last checkpoint is kept) — \
             lower --lr and train into a new directory"
        ),
    }
}

/// Refuses to save a module holding a NaN or an infinity (an update that diverged).
fn check_finite<B: burn::tensor::backend::Backend, M: burn::module::Module<B>>(
    run_dir: &Path,
    step: usize,
    module: &M,
) -> Result<(), TrainError> {
    struct FirstNonFinite(Option<f32>);
    impl<B: burn::tensor::backend::Backend> burn::module::ModuleVisitor<B> for FirstNonFinite {
        fn visit_float<const D: usize>(&mut self, param: &burn::module::Param<Tensor<B, D>>) {
            if self.0.is_none() {
                self.0 = param.val().into_data().iter::<f32>().find(|v| !v.is_finite());
            }
        }
    }
    let mut visitor = FirstNonFinite(None);
    module.visit(&mut visitor);
    match visitor.0 {
        Some(v) => Err(diverged(run_dir, step, format!("a weight became {v}"))),
        None => Ok(()),
    }
}
