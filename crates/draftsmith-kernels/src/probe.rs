//! What the running machine offers the decode path: the CPU model and the SIMD flags that
//! matter, the memory bandwidth seen when streaming a model-sized buffer, and the kernels' peak
//! multiply-add rate on cache-resident weights. Benchmarks print these beside their timings so
//! a figure is read against the machine it was measured on.

use std::time::Instant;

use crate::{Activations, KernelPath, Pool, QFormat, QMatrix};

/// The CPU flags that decide which kernels can run (as `/proc/cpuinfo` names them).
const FLAGS: &[&str] = &["avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16"];

/// The CPU this process runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuInfo {
    /// `model name` from `/proc/cpuinfo` (or the architecture when unavailable).
    pub model: String,
    /// Which of the flags that matter here are present.
    pub flags: Vec<String>,
    /// Threads in the kernels' worker pool.
    pub threads: usize,
    /// The matrix-kernel path in use.
    pub kernel_path: &'static str,
}

impl CpuInfo {
    /// Reads `/proc/cpuinfo` (Linux); elsewhere the model is the architecture and the flags
    /// those the standard library detects.
    pub fn detect() -> Self {
        let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let field = |name: &str| {
            text.lines()
                .find(|l| l.split(':').next().is_some_and(|k| k.trim() == name))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        };
        let present: Vec<String> = field("flags").unwrap_or_default().split_whitespace().map(str::to_string).collect();
        let flags = FLAGS.iter().filter(|f| present.iter().any(|p| p == *f)).map(|f| f.to_string()).collect();
        Self {
            model: field("model name").unwrap_or_else(|| std::env::consts::ARCH.to_string()),
            flags,
            threads: Pool::global().threads(),
            kernel_path: KernelPath::detect().name(),
        }
    }
}

/// Read bandwidth in GB/s when the pool's threads stream `bytes` bytes (the best of `runs`
/// passes after one warm-up pass). A buffer the size of a model's weights measures what a
/// decoding step can read: from DRAM, or from a large last-level cache when it fits.
pub fn memory_bandwidth(bytes: usize, runs: usize) -> f64 {
    let words = (bytes / 8).max(1 << 16);
    let buf: Vec<u64> = (0..words as u64).collect();
    let pool = Pool::global();
    let sink = std::sync::atomic::AtomicU64::new(0);
    let mut best = f64::INFINITY;
    for _ in 0..runs.max(1) + 1 {
        let start = Instant::now();
        pool.run(&|t, n| {
            let part = &buf[crate::pool::split(words, t, n)];
            // Eight independent sums so the loop is bound by loads, not by one add chain.
            let mut acc = [0u64; 8];
            for c in part.chunks_exact(8) {
                for l in 0..8 {
                    acc[l] = acc[l].wrapping_add(c[l]);
                }
            }
            sink.fetch_add(acc.iter().fold(0, |a, &b| a.wrapping_add(b)), std::sync::atomic::Ordering::Relaxed);
        });
        best = best.min(start.elapsed().as_secs_f64());
    }
    std::hint::black_box(sink.into_inner());
    (words * 8) as f64 / best / 1e9
}

/// The matrix kernels' multiply-add rate in GMAC/s on this machine in `mode`: a `1536 × 576`
/// matrix of `format` (cache-resident) times 64 activation rows, best of several runs on the
/// whole pool. What the verify pass of many draft tokens can reach at most.
pub fn kernel_peak(mode: Activations, format: QFormat) -> f64 {
    let (rows, cols, n) = (1536, 576, 64);
    let block = format.block_bytes();
    let mut bytes = Vec::with_capacity(rows * cols / 32 * block);
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..rows * cols / 32 {
        bytes.extend_from_slice(&half::f16::from_f32(0.01).to_bits().to_le_bytes());
        if format == QFormat::Q4_1 {
            bytes.extend_from_slice(&half::f16::from_f32(-0.08).to_bits().to_le_bytes());
        }
        for _ in 0..block - if format == QFormat::Q4_1 { 4 } else { 2 } {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            bytes.push((state >> 56) as u8);
        }
    }
    let m = QMatrix::from_ggml_blocks(format, &bytes, rows, cols).expect("valid probe matrix");
    let x: Vec<f32> = (0..n * cols).map(|i| ((i * 7919) % 2003) as f32 / 1001.0 - 1.0).collect();
    let mut y = vec![0.0f32; n * rows];
    let mut best = f64::INFINITY;
    for _ in 0..20 {
        let start = Instant::now();
        m.matmul_mode(mode, &x, n, &mut y);
        best = best.min(start.elapsed().as_secs_f64());
    }
    (rows * cols * n) as f64 / best / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_return_positive_rates() {
        let cpu = CpuInfo::detect();
        assert!(!cpu.model.is_empty() && cpu.threads >= 1);
        assert!(memory_bandwidth(1 << 20, 1) > 0.0);
        assert!(kernel_peak(Activations::Int8, QFormat::Q4_1) > 0.0);
    }
}
