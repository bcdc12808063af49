//! Per-head training metrics, appended to `metrics.csv` (one row per logged step and split).

use std::io::Write;
use std::path::{Path, PathBuf};

use draftsmith_heads::StepMetrics;

use crate::error::TrainError;

/// Appends rows `step,epoch,split,lr,loss,head,head_loss,top1,top5,count`.
pub struct MetricsCsv {
    path: PathBuf,
}

impl MetricsCsv {
    /// Opens (creating with a header) `path`. On resume, rows after `resume_step` are dropped
    /// so a step is never logged twice.
    pub fn open(path: &Path, resume_step: usize) -> Result<Self, TrainError> {
        let header = "step,epoch,split,lr,loss,head,head_loss,top1,top5,count";
        let kept = match std::fs::read_to_string(path) {
            Ok(text) => text
                .lines()
                .filter(|l| {
                    *l == header
                        || l.split(',').next().and_then(|s| s.parse::<usize>().ok()).is_some_and(|s| s <= resume_step)
                })
                .map(|l| format!("{l}\n"))
                .collect::<String>(),
            Err(_) => String::new(),
        };
        let text = if kept.is_empty() { format!("{header}\n") } else { kept };
        std::fs::write(path, text).map_err(TrainError::io(path))?;
        Ok(Self { path: path.to_path_buf() })
    }

    pub fn log(
        &self,
        step: usize,
        epoch: usize,
        split: &str,
        lr: f64,
        heads: &[StepMetrics],
    ) -> Result<(), TrainError> {
        let mut f = std::fs::OpenOptions::new().append(true).open(&self.path).map_err(TrainError::io(&self.path))?;
        // Steps with no trained row are written as NaN; so is the total when no step has one.
        let loss = StepMetrics::summed_loss(heads).unwrap_or(f64::NAN);
        let mut out = String::new();
        for (i, m) in heads.iter().enumerate() {
            out += &format!(
                "{step},{epoch},{split},{lr:.3e},{loss:.5},{},{:.5},{:.5},{:.5},{}\n",
                i + 1,
                m.mean_loss(),
                m.top1_acc(),
                m.top5_acc(),
                m.count
            );
        }
        f.write_all(out.as_bytes()).map_err(TrainError::io(&self.path))
    }
}
