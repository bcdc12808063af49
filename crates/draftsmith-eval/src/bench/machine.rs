//! The machine a benchmark ran on, and the roofline it sets for a pass over `n` tokens.

use burn::tensor::backend::Backend;
use draftsmith_kernels::{probe, Activations, QFormat};
use draftsmith_model::Model;
use serde::Serialize;

/// The CPU, its flags, the memory bandwidth for a buffer the size of the model's matrices and
/// the kernels' and the instruction set's peak rates in the model's activation mode: the
/// roofline of a pass over n tokens is `max(bytes / bandwidth, n · MACs / peak)`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Machine {
    pub cpu_model: String,
    pub cpu_flags: Vec<String>,
    pub threads: usize,
    pub kernel_path: &'static str,
    pub matrix_bytes: usize,
    pub macs_per_token: usize,
    pub read_bandwidth_gb_s: f64,
    pub kernel_peak_gmac_s: f64,
    /// 0 where not probed (only the AVX-512 VNNI path is).
    pub instruction_peak_gmac_s: f64,
}

impl Machine {
    /// Probes this machine for `model`'s matrices in activation mode `mode`.
    pub fn probe<B: Backend>(model: &Model<B>, mode: Activations) -> Self {
        let cpu = probe::CpuInfo::detect();
        let footprint = model.matrix_footprint();
        Self {
            cpu_model: cpu.model,
            cpu_flags: cpu.flags,
            threads: cpu.threads,
            kernel_path: cpu.kernel_path,
            matrix_bytes: footprint.bytes,
            macs_per_token: footprint.macs_per_token,
            read_bandwidth_gb_s: probe::memory_bandwidth(footprint.bytes, 5),
            kernel_peak_gmac_s: probe::kernel_peak(mode, QFormat::Q4_1),
            instruction_peak_gmac_s: probe::instruction_peak(mode),
        }
    }

    /// Milliseconds of a pass over `n` tokens at `peak` GMAC/s (NaN for an unprobed peak).
    pub fn roofline(&self, n: usize, peak: f64) -> f64 {
        let peak = if peak > 0.0 { peak } else { f64::NAN };
        (self.matrix_bytes as f64 / (self.read_bandwidth_gb_s * 1e6))
            .max(n as f64 * self.macs_per_token as f64 / (peak * 1e6))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(instruction_peak: f64) -> Machine {
        Machine {
            cpu_model: "test".into(),
            cpu_flags: Vec::new(),
            threads: 1,
            kernel_path: "scalar",
            matrix_bytes: 10_000_000,
            macs_per_token: 1_000_000,
            read_bandwidth_gb_s: 10.0,
            kernel_peak_gmac_s: 100.0,
            instruction_peak_gmac_s: instruction_peak,
        }
    }

    #[test]
    fn the_roofline_is_bandwidth_bound_for_few_tokens_and_compute_bound_for_many() {
        let m = machine(0.0);
        // 10 MB at 10 GB/s = 1 ms; n · 1 M MACs at 100 GMAC/s = n / 100 ms.
        assert!((m.roofline(1, m.kernel_peak_gmac_s) - 1.0).abs() < 1e-12);
        assert!((m.roofline(100, m.kernel_peak_gmac_s) - 1.0).abs() < 1e-12);
        assert!((m.roofline(400, m.kernel_peak_gmac_s) - 4.0).abs() < 1e-12);
        assert_eq!(m.roofline(400, m.instruction_peak_gmac_s), 1.0, "an unprobed peak leaves the bandwidth bound");
    }
}
