//! Learning-rate schedule: linear warmup, then cosine decay to zero.

/// The learning rate at optimiser step `step` (0-based) of `total`.
pub fn cosine_with_warmup(peak: f64, step: usize, total: usize, warmup: usize) -> f64 {
    if step < warmup {
        return peak * (step + 1) as f64 / warmup as f64;
    }
    let span = total.saturating_sub(warmup).max(1);
    let progress = ((step - warmup) as f64 / span as f64).min(1.0);
    peak * 0.5 * (1.0 + (std::f64::consts::PI * progress).cos())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warms_up_linearly_then_decays_to_zero() {
        assert!((cosine_with_warmup(1.0, 0, 100, 10) - 0.1).abs() < 1e-12);
        assert!((cosine_with_warmup(1.0, 9, 100, 10) - 1.0).abs() < 1e-12);
        assert!((cosine_with_warmup(1.0, 10, 100, 10) - 1.0).abs() < 1e-12);
        assert!((cosine_with_warmup(1.0, 55, 100, 10) - 0.5).abs() < 1e-12);
        assert!(cosine_with_warmup(1.0, 100, 100, 10).abs() < 1e-12);
        assert!(cosine_with_warmup(1.0, 0, 100, 0) - 1.0 < 1e-12);
    }
}
