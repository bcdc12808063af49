//! What the running machine offers the decode path: the CPU model and the SIMD flags that
//! matter, the memory bandwidth seen when streaming a model-sized buffer, and the kernels' peak
//! multiply-add rate on cache-resident weights. Benchmarks print these beside their timings so
//! a figure is read against the machine it was measured on.

use std::time::Instant;

use crate::{Activations, KernelPath, Pool, QFormat, QMatrix};

/// The CPU flags that decide which kernels can run (as `/proc/cpuinfo` names them).
const FLAGS: &[&str] = &[
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx_vnni",
    "avx512_bf16",
    "amx_tile",
    "amx_int8",
    "amx_bf16",
];

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

/// `MODEL (N threads; kernels PATH; flags …)`: how every benchmark and report names the CPU.
impl std::fmt::Display for CpuInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (model, threads, path) = (&self.model, self.threads, self.kernel_path);
        write!(f, "{model} ({threads} threads; kernels {path}; flags {})", self.flags.join(" "))
    }
}

/// The `GLIBC_TUNABLES` key and the entry with which glibc (2.35 and later) asks Linux for
/// transparent huge pages for its heap and its large allocations (`madvise(MADV_HUGEPAGE)`).
pub const MALLOC_HUGE_PAGES_KEY: &str = "glibc.malloc.hugetlb";
pub const MALLOC_HUGE_PAGES: &str = "glibc.malloc.hugetlb=1";

/// Linux's transparent-huge-page mode for this process's anonymous memory (`always`,
/// `madvise`, `never`), or "unknown" where `/sys/kernel/mm/transparent_hugepage/enabled` does
/// not say.
pub fn thp_mode() -> String {
    let text = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    text.split_whitespace().find_map(|w| w.strip_prefix('[')?.strip_suffix(']')).unwrap_or("unknown").to_string()
}

/// How this process's memory is paged: Linux's transparent-huge-page mode (`always`, `madvise`,
/// `never`; "unknown" elsewhere) and, under `madvise`, whether malloc asks for them
/// ([`MALLOC_HUGE_PAGES`] in `GLIBC_TUNABLES`). A decoding step streams the whole model and KV
/// cache; with 4 KiB pages that is tens of thousands of TLB misses a step.
pub fn huge_pages() -> String {
    let asked = std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.split(':').any(|kv| kv == MALLOC_HUGE_PAGES));
    match thp_mode().as_str() {
        "madvise" if asked => "madvise, asked by malloc (2 MiB pages)".into(),
        "madvise" => "madvise, not asked (4 KiB pages)".into(),
        "always" => "always (2 MiB pages)".into(),
        "never" => "never (4 KiB pages)".into(),
        other => other.into(),
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

/// The instruction throughput limit in GMAC/s for `mode` on all the pool's threads: twelve
/// independent chains of the widest multiply-add the kernels use, timed on every thread at
/// once. On the AVX-512 VNNI path `vpdpbusd` zmm (64 int8 MACs) for int8 and `vfmadd` zmm (16
/// f32 MACs) for f32; on the AVX2 path `vpmaddubsw` ymm (32 int8 products, summed in pairs)
/// and `vfmadd` ymm (8 f32 MACs). What no kernel can exceed; the scalar path reports 0 (not
/// probed).
pub fn instruction_peak(mode: Activations) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        // AMX's tiles are not probed: the vector instructions' peak.
        let path = KernelPath::detect().vector();
        let per_instr = match (path, mode) {
            (KernelPath::Avx512Vnni, Activations::Int8) => 64.0,
            (KernelPath::Avx512Vnni, Activations::F32) => 16.0,
            (KernelPath::Avx2, Activations::Int8) => 32.0,
            (KernelPath::Avx2, Activations::F32) => 8.0,
            _ => return 0.0,
        };
        let iters = 2_000_000u64;
        let mut best = f64::INFINITY;
        for _ in 0..3 {
            let start = Instant::now();
            Pool::global().run(&|_, _| {
                // SAFETY: the path's instructions are supported (`detect` checked them).
                let r = unsafe {
                    match path {
                        KernelPath::Avx512Vnni => peak_loop(mode, iters),
                        _ => peak_loop_avx2(mode, iters),
                    }
                };
                std::hint::black_box(r);
            });
            best = best.min(start.elapsed().as_secs_f64());
        }
        #[allow(clippy::needless_return)]
        return 12.0 * iters as f64 * per_instr * Pool::global().threads() as f64 / best / 1e9;
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = mode;
        0.0
    }
}

/// [`peak_loop`] with AVX2 instructions: `vpmaddubsw` ymm (int8) or `vfmadd` ymm (f32).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn peak_loop_avx2(mode: Activations, iters: u64) -> f32 {
    use std::arch::x86_64::*;
    let mut f = [_mm256_set1_ps(1.0); 12];
    let mut i = [_mm256_set1_epi16(1); 12];
    let b = std::hint::black_box(_mm256_set1_epi8(5));
    let (x, y) = (std::hint::black_box(_mm256_set1_ps(0.999_99)), std::hint::black_box(_mm256_set1_ps(1e-6)));
    // As in `peak_loop`: the empty `asm!` keeps every instruction of every chain.
    macro_rules! keep {
        ($v:expr) => {
            std::arch::asm!("/* {0} */", inout(ymm_reg) $v, options(nomem, nostack, preserves_flags))
        };
    }
    if mode == Activations::Int8 {
        for _ in 0..iters {
            for acc in &mut i {
                *acc = _mm256_maddubs_epi16(*acc, b);
                keep!(*acc);
            }
        }
    } else {
        for _ in 0..iters {
            for acc in &mut f {
                *acc = _mm256_fmadd_ps(*acc, x, y);
                keep!(*acc);
            }
        }
    }
    let mut lanes = [0i16; 16];
    let mut s = 0.0;
    for acc in &i {
        _mm256_storeu_si256(lanes.as_mut_ptr().cast(), *acc);
        s += lanes.iter().map(|&v| v as f32).sum::<f32>();
    }
    let mut fl = [0f32; 8];
    for acc in &f {
        _mm256_storeu_ps(fl.as_mut_ptr(), *acc);
        s += fl.iter().sum::<f32>();
    }
    s
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vnni,avx512bw")]
unsafe fn peak_loop(mode: Activations, iters: u64) -> f32 {
    use std::arch::x86_64::*;
    let mut f = [_mm512_set1_ps(1.0); 12];
    let mut i = [_mm512_set1_epi32(1); 12];
    let (a, b) = (std::hint::black_box(_mm512_set1_epi8(3)), std::hint::black_box(_mm512_set1_epi8(5)));
    let (x, y) = (std::hint::black_box(_mm512_set1_ps(0.999_99)), std::hint::black_box(_mm512_set1_ps(1e-6)));
    // Every accumulator passes through an empty `asm!` each iteration: the compiler must issue
    // each multiply-add as written (with loop-invariant operands it could otherwise fold the
    // chain into fewer instructions, and the probe would report more than the core can do).
    macro_rules! keep {
        ($v:expr) => {
            std::arch::asm!("/* {0} */", inout(zmm_reg) $v, options(nomem, nostack, preserves_flags))
        };
    }
    if mode == Activations::Int8 {
        for _ in 0..iters {
            for acc in &mut i {
                *acc = _mm512_dpbusd_epi32(*acc, a, b);
                keep!(*acc);
            }
        }
    } else {
        for _ in 0..iters {
            for acc in &mut f {
                *acc = _mm512_fmadd_ps(*acc, x, y);
                keep!(*acc);
            }
        }
    }
    let mut s = 0.0;
    for acc in &i {
        s += _mm512_reduce_add_epi32(*acc) as f32;
    }
    for acc in &f {
        s += _mm512_reduce_add_ps(*acc);
    }
    s
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
        assert!(instruction_peak(Activations::Int8) >= 0.0);
    }
}
