//! Quantized CPU matrix kernels for the LLM decode and small-batch verify path.
//!
//! A [`QMatrix`] holds a weight matrix `W` (`rows` outputs × `cols` inputs) in one of the GGUF
//! block formats ([`QFormat::Q8_0`], [`QFormat::Q4_0`], [`QFormat::Q4_1`], [`QFormat::Q5_0`], [`QFormat::Q4K`], [`QFormat::Q5K`], [`QFormat::Q6K`]) and computes `y[n, rows] = x[n, cols] · Wᵀ`
//! in one of two modes ([`Activations`]):
//!
//! * [`Activations::F32`] (the default of [`QMatrix::matmul`]): weight-only quantization. Weight
//!   blocks are dequantized in registers and multiplied with the f32 activations, accumulating
//!   in f32, so the result equals the exact product of the dequantized weights up to f32
//!   rounding. The operation order for one output depends only on `cols`, so every output is
//!   bit-identical whatever the batch size, the token's position in it, or the thread split.
//! * [`Activations::Int8`]: the llama.cpp way. Each activation row is quantized per 32 values to
//!   8 bits, and every 32-element block product is an exact integer dot product scaled by the
//!   two block scales. About twice as fast per weight, but not exact.
//!
//! ```
//! use draftsmith_kernels::{Activations, QFormat, QMatrix};
//!
//! // A 64×32 weight matrix, quantized to Q8_0 (GGUF bytes work too: `from_ggml_blocks`).
//! let w: Vec<f32> = (0..64 * 32).map(|i| (i % 7) as f32 - 3.0).collect();
//! let m = QMatrix::quantize_q8_0(&w, 64, 32)?;
//! assert_eq!((m.rows(), m.cols(), m.format()), (64, 32, QFormat::Q8_0));
//!
//! // Two activation rows at once: y[2, 64] = x[2, 32] · Wᵀ.
//! let x = vec![0.5f32; 2 * 32];
//! let mut y = vec![0.0f32; 2 * 64];
//! m.matmul(&x, 2, &mut y);
//!
//! // f32 activations: the product of the stored weights, up to f32 rounding.
//! let mut w0 = vec![0.0f32; 32];
//! m.dequantize_row(0, &mut w0);
//! let exact: f32 = w0.iter().map(|v| 0.5 * v).sum();
//! assert!((y[0] - exact).abs() <= 1e-6 * exact.abs().max(1.0));
//!
//! // 8-bit activations (llama.cpp style): close to the f32 weights' product.
//! m.matmul_mode(Activations::Int8, &x, 2, &mut y);
//! let want: f32 = w[..32].iter().map(|v| 0.5 * v).sum();
//! assert!((y[0] - want).abs() < 1e-3 * want.abs().max(1.0));
//! # Ok::<(), draftsmith_kernels::KernelError>(())
//! ```
//!
//! # Layout
//!
//! At load time the GGUF blocks are repacked so that 16 consecutive weight rows are interleaved
//! four bytes at a time (see the `layout` module). One 64-byte load then holds four
//! consecutive elements of 16 rows, and a single `vpdpbusd` against four broadcast activation
//! bytes yields one partial dot product per row, lane `j` being row `j`. Per-block scales are
//! applied as one vector multiply per block, and no horizontal reduction is needed.
//!
//! # Paths
//!
//! The kernel path is chosen once at run time: AVX-512 VNNI, AVX2 (+FMA, F16C), or a portable
//! scalar fallback (the f32 mode's AVX-512 kernels need only AVX-512 F/BW, but run on the
//! `avx512vnni` path). `DRAFTSMITH_KERNEL_PATH=scalar|avx2|avx512vnni|amx` forces a (supported)
//! path; `amx` (AVX-512 VNNI plus Intel's AMX-INT8 tiles for int8 products of two or more
//! activation rows, bit for bit the AVX-512 VNNI results) is only used when asked for: it
//! measured slower ([`KernelPath::detect`]).

// Kernel loops index several lane arrays with one counter, as the SIMD code they mirror does.
#![allow(clippy::needless_range_loop)]

mod act;
#[cfg(target_arch = "x86_64")]
mod amx;
#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod dispatch;
mod error;
mod f32act;
mod layout;
mod matrix;
pub mod pool;
pub mod probe;
pub mod rowops;
mod scalar;

#[cfg(test)]
mod tests;

pub use dispatch::KernelPath;
pub use error::KernelError;
pub use matrix::QMatrix;
pub use pool::Pool;

/// Checks the environment variables that steer the kernels (`DRAFTSMITH_THREADS`,
/// `DRAFTSMITH_KERNEL_PATH`): `Err` names the first one set to something unusable and what is
/// wrong with it. The kernels themselves fall back to their defaults on such a value; a program
/// calls this first to refuse it instead.
pub fn check_environment() -> Result<(), String> {
    pool::threads_setting()?;
    KernelPath::forced()?;
    Ok(())
}

/// How [`QMatrix::matmul_mode`] treats the activations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Activations {
    /// Weight-only quantization: f32 activations times the weights dequantized in registers
    /// (`d·q`, `d·q + m`), accumulated in f32 with FMA. Exact up to f32 rounding, and
    /// batch-invariant: each output's operation order depends only on `cols`. The default.
    #[default]
    F32,
    /// llama.cpp style: activations quantized to 8 bits per 32 values, exact integer block dot
    /// products. Faster, but each output is off by up to `Σ_b (amax_b/254)·Σ|w|`.
    Int8,
}

/// A GGUF weight block format supported by the kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QFormat {
    /// 32 signed 8-bit values with one f16 scale: `value = d * q` (34 bytes per block).
    Q8_0,
    /// 32 unsigned 4-bit values with one f16 scale: `value = d · (q − 8)` (18 bytes per block;
    /// nibbles as Q4_1's). Kept in its own bits (5 bits per value once packed, against Q8_0's
    /// 8.5); as Q5_0, the int8 kernels multiply it, f32 activations have the scalar kernel only.
    Q4_0,
    /// 32 unsigned 4-bit values with an f16 scale and an f16 minimum: `value = d * q + m`
    /// (20 bytes per block; low nibbles are elements 0..16, high nibbles 16..32).
    Q4_1,
    /// 32 unsigned 5-bit values with one f16 scale: `value = d · (q − 16)` (22 bytes per block:
    /// `d`, the fifth bits as a little-endian u32, 16 nibble bytes as Q4_1's). Kept in its own
    /// bits (5.5 bits per value, against Q8_0's 8.5); as the K-quants, the int8 kernels multiply
    /// it, f32 activations have the scalar kernel only.
    Q5_0,
    /// A GGUF K-quant super-block of 256 values: 6-bit `q` and one signed 8-bit scale per 16
    /// values, with one f16 `d`: `value = d · sc · (q − 32)` (210 bytes per 256 values). Kept
    /// in its own bits (the same 6.56 bits per value once packed, against Q8_0's 8.5);
    /// multiplied with 8-bit activations by the int8 kernels, with f32 activations by the
    /// scalar kernel only.
    Q6K,
    /// A GGUF K-quant super-block of 256 values: 4-bit `q` with one 6-bit scale `sc` and one
    /// 6-bit minimum `mn` per 32 values, and one f16 `d` and `dmin`: `value = d·sc·q − dmin·mn`
    /// (144 bytes per 256 values). Kept in its own bits (4.625 bits per value once packed,
    /// against 5 as Q4_1 with f16-rounded sub-block scales); as [`QFormat::Q6K`], the int8
    /// kernels multiply it, f32 activations have the scalar kernel only.
    Q4K,
    /// A GGUF K-quant super-block of 256 values as [`QFormat::Q4K`] with a fifth bit per value:
    /// `value = d·sc·q − dmin·mn`, `q` in `0..32` (176 bytes per 256 values; 5.625 bits per value
    /// once packed, against Q8_0's 8.5). Int8 kernels as Q4_K's, f32 activations the scalar
    /// kernel only.
    Q5K,
}

impl QFormat {
    /// Bytes of one block ([`QFormat::block_elems`] values) in the GGUF (ggml) layout.
    pub const fn block_bytes(self) -> usize {
        match self {
            QFormat::Q8_0 => 34,
            QFormat::Q4_1 => 20,
            QFormat::Q6K => 210,
            QFormat::Q4K => 144,
            QFormat::Q5_0 => 22,
            QFormat::Q4_0 => 18,
            QFormat::Q5K => 176,
        }
    }

    /// Number of elements per GGUF block: 32, or 256 for the K-quant super-block.
    pub const fn block_elems(self) -> usize {
        match self {
            QFormat::Q6K | QFormat::Q4K | QFormat::Q5K => 256,
            _ => layout::QK,
        }
    }

    /// Whether products in `mode` run on SIMD kernels (Q4_0, Q5_0 and the K-quants with f32
    /// activations have only the scalar reference kernel: load such weights as Q8_0 or Q4_1 for
    /// that mode).
    pub const fn fast_in(self, mode: Activations) -> bool {
        matches!(mode, Activations::Int8) || matches!(self, QFormat::Q8_0 | QFormat::Q4_1)
    }

    /// Whether f32 values can be quantized to this format ([`QMatrix::quantize`],
    /// [`QMatrix::requantize`]).
    pub fn has_quantizer(self) -> bool {
        matrix::encoder(self).is_ok()
    }
}
