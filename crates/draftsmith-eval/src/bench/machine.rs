//! The machine a benchmark ran on, and the roofline it sets for a pass over `n` tokens.

use burn::tensor::backend::Backend;
use draftsmith_kernels::{probe, QFormat};
use draftsmith_model::Model;
use serde::Serialize;

/// The CPU, its flags and, for the quantized CPU path, the roofline's inputs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Machine {
    pub cpu_model: String,
    pub cpu_flags: Vec<String>,
    pub threads: usize,
    pub kernel_path: &'static str,
    /// Transparent huge pages: the kernel's mode and whether this process asked for them
    /// ([`probe::huge_pages`]).
    pub huge_pages: String,
    /// `None` off the quantized CPU path (the dense path, a GPU): the roofline models the host
    /// kernels, and a GPU's pass is not bound by this CPU's bandwidth or multiply-add rate.
    #[serde(flatten)]
    pub roofline: Option<Roofline>,
}

/// The memory bandwidth for a buffer the size of the model's matrices and the kernels' and the
/// instruction set's peak rates in the model's activation mode: the roofline of a pass over n
/// tokens is `max(bytes / bandwidth, n · MACs / peak)`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Roofline {
    pub matrix_bytes: usize,
    pub macs_per_token: usize,
    pub read_bandwidth_gb_s: f64,
    pub kernel_peak_gmac_s: f64,
    /// 0 where not probed (only the AVX-512 VNNI path is).
    pub instruction_peak_gmac_s: f64,
    /// The instruction peak probed again after the verify curve (`None` before that or where
    /// not probed): on a shared host whose speed changed during the run the two differ
    /// ([`Roofline::host_peaks`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instruction_peak_after_gmac_s: Option<f64>,
}

/// Instruction peaks after / before a run within this range: the host gave the run about the
/// same compute throughout.
pub const STEADY_HOST: std::ops::RangeInclusive<f64> = 0.8..=1.25;

impl Machine {
    /// Probes this machine; the roofline's inputs only when `model` runs the quantized CPU path
    /// (in its activation mode).
    pub fn probe<B: Backend>(model: &Model<B>) -> Self {
        let cpu = probe::CpuInfo::detect();
        let roofline = model.activations().map(|mode| {
            let footprint = model.matrix_footprint();
            Roofline {
                matrix_bytes: footprint.bytes,
                macs_per_token: footprint.macs_per_token,
                read_bandwidth_gb_s: probe::memory_bandwidth(footprint.bytes, 5),
                kernel_peak_gmac_s: probe::kernel_peak(mode, QFormat::Q4_1),
                instruction_peak_gmac_s: probe::instruction_peak(mode),
                instruction_peak_after_gmac_s: None,
            }
        });
        Self {
            cpu_model: cpu.model,
            cpu_flags: cpu.flags,
            threads: cpu.threads,
            kernel_path: cpu.kernel_path,
            huge_pages: probe::huge_pages(),
            roofline,
        }
    }

    /// The CPU as [`probe::CpuInfo`] (printed the way every benchmark and report names it).
    pub fn cpu(&self) -> probe::CpuInfo {
        probe::CpuInfo {
            model: self.cpu_model.clone(),
            flags: self.cpu_flags.clone(),
            threads: self.threads,
            kernel_path: self.kernel_path,
        }
    }

    /// Probes the instruction peak again (after a run), where it was probed before.
    pub fn reprobe_peak<B: Backend>(&mut self, model: &Model<B>) {
        if let (Some(r), Some(mode)) = (self.roofline.as_mut(), model.activations()) {
            if r.instruction_peak_gmac_s > 0.0 {
                r.instruction_peak_after_gmac_s = Some(probe::instruction_peak(mode));
            }
        }
    }
}

/// The instruction peaks probed before and after a run, in words: a steady host, or a warning
/// that the host's speed changed during the run (outside [`STEADY_HOST`]) — on a shared machine
/// a loud neighbour slows the multi-token passes that speculation verifies with more than the
/// one-token steps of plain decoding, so speedups measured then read low.
pub fn host_drift_message(before: f64, after: f64) -> String {
    if STEADY_HOST.contains(&(after / before)) {
        format!("instruction peak before / after the run: {before:.0} / {after:.0} GMAC/s (a steady host)")
    } else {
        format!(
            "warning: the instruction peak moved from {before:.0} to {after:.0} GMAC/s during the run: the host's speed changed (a shared machine), so these timings mix two speeds; compare only runs with a steady peak"
        )
    }
}

impl Roofline {
    /// The instruction peaks before and after the run, GMAC/s (`None` unless both were probed),
    /// for [`host_drift_message`].
    pub fn host_peaks(&self) -> Option<[f64; 2]> {
        let after = self.instruction_peak_after_gmac_s.filter(|&a| a > 0.0)?;
        (self.instruction_peak_gmac_s > 0.0).then_some([self.instruction_peak_gmac_s, after])
    }

    /// Milliseconds of a pass over `n` tokens at `peak` GMAC/s (NaN for an unprobed peak).
    pub fn ms(&self, n: usize, peak: f64) -> f64 {
        let peak = if peak > 0.0 { peak } else { f64::NAN };
        (self.matrix_bytes as f64 / (self.read_bandwidth_gb_s * 1e6))
            .max(n as f64 * self.macs_per_token as f64 / (peak * 1e6))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roofline(instruction_peak: f64) -> Roofline {
        Roofline {
            matrix_bytes: 10_000_000,
            macs_per_token: 1_000_000,
            read_bandwidth_gb_s: 10.0,
            kernel_peak_gmac_s: 100.0,
            instruction_peak_gmac_s: instruction_peak,
            instruction_peak_after_gmac_s: None,
        }
    }

    #[test]
    fn host_drift_compares_the_peaks_after_and_before() {
        let mut r = roofline(400.0);
        assert_eq!(r.host_peaks(), None, "not probed again yet");
        r.instruction_peak_after_gmac_s = Some(200.0);
        assert_eq!(r.host_peaks(), Some([400.0, 200.0]));
        assert!(!STEADY_HOST.contains(&0.5) && STEADY_HOST.contains(&1.1));
        assert_eq!(roofline(0.0).host_peaks(), None, "an unprobed peak has no drift");
        assert!(host_drift_message(400.0, 420.0).contains("steady"));
        assert!(host_drift_message(700.0, 500.0).starts_with("warning: the instruction peak moved from 700 to 500"));
    }

    #[test]
    fn the_roofline_is_bandwidth_bound_for_few_tokens_and_compute_bound_for_many() {
        let m = roofline(0.0);
        // 10 MB at 10 GB/s = 1 ms; n · 1 M MACs at 100 GMAC/s = n / 100 ms.
        assert!((m.ms(1, m.kernel_peak_gmac_s) - 1.0).abs() < 1e-12);
        assert!((m.ms(100, m.kernel_peak_gmac_s) - 1.0).abs() < 1e-12);
        assert!((m.ms(400, m.kernel_peak_gmac_s) - 4.0).abs() < 1e-12);
        assert_eq!(m.ms(400, m.instruction_peak_gmac_s), 1.0, "an unprobed peak leaves the bandwidth bound");
    }
}
