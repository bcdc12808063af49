//! Loss and accuracy of a drafter's prediction steps (a ReDrafter beam step, a TokenSwift
//! head): shared by every drafter's loss and by training's logs, summaries and `metrics.csv`.

use burn::tensor::{backend::Backend, Int, Tensor};

/// Loss and accuracy of one draft step over a batch.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StepMetrics {
    /// Sum over counted rows of the cross-entropy.
    pub loss_sum: f64,
    pub top1: usize,
    pub top5: usize,
    /// Rows that counted.
    pub count: usize,
    /// Rows whose label the logits cover (all of `count` without a draft vocabulary): the
    /// loss is averaged over these.
    pub trained: usize,
}

impl StepMetrics {
    pub fn add(&mut self, other: &StepMetrics) {
        self.loss_sum += other.loss_sum;
        self.top1 += other.top1;
        self.top5 += other.top5;
        self.count += other.count;
        self.trained += other.trained;
    }

    /// The loss averaged over the trained rows; NaN when no row was trained (every label outside
    /// the draft vocabulary, say), which no real loss is.
    pub fn mean_loss(&self) -> f64 {
        per_row(self.loss_sum, self.trained)
    }

    /// The sum of `steps`' mean losses over those that trained a row (`None` when none did: a
    /// step without one adds nothing to the loss, as it adds nothing to the gradient).
    pub fn summed_loss(steps: &[StepMetrics]) -> Option<f64> {
        let trained: Vec<f64> = steps.iter().filter(|m| m.trained > 0).map(StepMetrics::mean_loss).collect();
        (!trained.is_empty()).then(|| trained.iter().sum())
    }

    /// Top-1 accuracy over the counted rows; NaN when none counted.
    pub fn top1_acc(&self) -> f64 {
        per_row(self.top1 as f64, self.count)
    }

    /// Top-5 accuracy over the counted rows; NaN when none counted.
    pub fn top5_acc(&self) -> f64 {
        per_row(self.top5 as f64, self.count)
    }
}

/// `total / rows`, NaN for no rows (no loss or accuracy rather than 0).
fn per_row(total: f64, rows: usize) -> f64 {
    match rows {
        0 => f64::NAN,
        n => total / n as f64,
    }
}

/// Top-1 / top-5 hits: a label ranks `r` when `r` logits are strictly larger than its own.
pub(crate) fn step_metrics<B: Backend>(
    logits: Tensor<B, 2>,
    labels: Tensor<B, 1, Int>,
    weight: Tensor<B, 1>,
    loss_sum: f64,
    count: usize,
) -> StepMetrics {
    let [rows, vocab] = logits.dims();
    let logits = logits.detach();
    let own = logits.clone().gather(1, labels.reshape([rows, 1]));
    let rank = logits.greater(own.expand([rows, vocab])).int().sum_dim(1).reshape([rows]);
    let ranks: Vec<i64> = rank.into_data().convert::<i64>().to_vec().expect("int ranks");
    let weights: Vec<f32> = weight.into_data().convert::<f32>().to_vec().expect("f32 weights");
    let counted = ranks.iter().zip(&weights).filter(|(_, &w)| w > 0.0);
    let (mut top1, mut top5) = (0, 0);
    for (&r, _) in counted {
        top1 += usize::from(r < 1);
        top5 += usize::from(r < 5);
    }
    StepMetrics { loss_sum, top1, top5, count, trained: count }
}

#[cfg(test)]
mod tests {
    use super::StepMetrics;

    #[test]
    fn a_step_with_no_trained_row_has_no_loss_rather_than_zero() {
        let none = StepMetrics { loss_sum: 0.0, top1: 0, top5: 0, count: 17, trained: 0 };
        assert!(none.mean_loss().is_nan());
        let empty = StepMetrics::default();
        assert!(empty.top1_acc().is_nan() && empty.top5_acc().is_nan());
        let some = StepMetrics { loss_sum: 6.0, top1: 1, top5: 2, count: 4, trained: 3 };
        assert_eq!(some.mean_loss(), 2.0);
        assert_eq!(StepMetrics::summed_loss(&[none, some, some]), Some(4.0));
        assert_eq!(StepMetrics::summed_loss(&[none]), None);
    }
}
