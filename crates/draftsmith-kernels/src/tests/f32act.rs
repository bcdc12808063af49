//! The f32-activation mode against f64 references: error at f32 rounding level, and every
//! SIMD path bit-identical to the scalar path (they all follow one canonical order).

use super::matmul::{NS, SHAPES};
use super::{dequantize_all, magnitude, random_blocks, reference, worst_violation, Rng};
use crate::{Activations, KernelPath, QFormat, QMatrix};

/// Every kernel path this CPU supports.
pub(super) fn supported_paths() -> Vec<KernelPath> {
    KernelPath::ALL.into_iter().filter(|p| p.is_supported()).collect()
}

/// f32 bits of `y`, for exact comparisons with a readable failure message.
pub(super) fn bits(y: &[f32]) -> Vec<u32> {
    y.iter().map(|v| v.to_bits()).collect()
}

/// `|y − y_ref| ≤ 1e-5 · Σ|w·x| + 1e-6` against the f64 product of the dequantized weights and
/// the f32 activations, on every path, all shapes and batch sizes. (The canonical order makes
/// about `16 + cols/32 ≤ 64` roundings per output, so the worst case is ≈ 4e-6 · Σ|w·x|.)
#[test]
fn f32_mode_matches_f64_reference_at_rounding_level() {
    let mut rng = Rng::new(30);
    let mut worst = 0.0f64;
    for format in super::BLOCK_FORMATS {
        for (rows, cols) in SHAPES {
            let bytes = random_blocks(format, rows, cols, &mut rng);
            let m = QMatrix::from_ggml_blocks(format, &bytes, rows, cols).unwrap();
            let w = dequantize_all(&m);
            for n in NS {
                let x = rng.activations(n * cols);
                let want = reference(&w, &x, rows, cols, n);
                let mag = magnitude(&w, &x, rows, cols, n);
                let tol: Vec<f64> = mag.iter().map(|v| 1e-5 * v + 1e-6).collect();
                for path in supported_paths() {
                    let mut y = vec![f32::NAN; n * rows];
                    m.matmul_f32_with(path, &x, n, &mut y);
                    let bad = worst_violation(&y, &want, &tol);
                    assert!(bad.is_none(), "{path:?} {format:?} {rows}x{cols} n={n}: {bad:?}");
                    for ((&g, &r), &s) in y.iter().zip(&want).zip(&mag) {
                        worst = worst.max((f64::from(g) - r).abs() / s.max(1e-30));
                    }
                }
            }
        }
    }
    eprintln!("f32 mode: worst |Δ| / Σ|w·x| = {worst:.3e}");
}

/// The SIMD paths perform exactly the scalar path's operations (Q8_0 up to an exact power-of-two
/// scaling), so their outputs are bit-identical.
#[test]
fn f32_simd_paths_are_bit_identical_to_scalar() {
    let mut rng = Rng::new(31);
    for format in super::BLOCK_FORMATS {
        for (rows, cols) in SHAPES {
            let bytes = random_blocks(format, rows, cols, &mut rng);
            let m = QMatrix::from_ggml_blocks(format, &bytes, rows, cols).unwrap();
            for n in NS {
                let x = rng.activations(n * cols);
                let mut want = vec![0.0; n * rows];
                m.matmul_f32_with(KernelPath::Scalar, &x, n, &mut want);
                for path in supported_paths() {
                    let mut y = vec![f32::NAN; n * rows];
                    m.matmul_f32_with(path, &x, n, &mut y);
                    assert_eq!(bits(&y), bits(&want), "{path:?} {format:?} {rows}x{cols} n={n}");
                }
            }
        }
    }
}

/// Small integer weights and activations: every product and sum is exact in f32, so the f32
/// mode must return the exact integer result (the int8 mode cannot: 3/127 is not representable).
#[test]
fn f32_mode_is_exact_on_small_integers() {
    // Q4_1, d = 1, m = -8: weights q - 8; Q8_0, d = 0.5: weights (i - 16) / 2.
    let mut q41 = Vec::new();
    let mut q80 = Vec::new();
    for r in 0..19u8 {
        q41.extend([0x00, 0x3C, 0x00, 0xC8]);
        q41.extend((0..16u8).map(|i| ((i + r) & 15) | ((15 - i) << 4)));
        q80.extend([0x00, 0x38]);
        q80.extend((0..32).map(|i| (i as i8 - 16 + r as i8) as u8));
    }
    let x: Vec<f32> = (0..3 * 32).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
    for (format, bytes) in [(QFormat::Q4_1, q41), (QFormat::Q8_0, q80)] {
        let m = QMatrix::from_ggml_blocks(format, &bytes, 19, 32).unwrap();
        let want = reference(&dequantize_all(&m), &x, 19, 32, 3);
        for path in supported_paths() {
            let mut y = vec![f32::NAN; 3 * 19];
            m.matmul_f32_with(path, &x, 3, &mut y);
            let got: Vec<f64> = y.iter().map(|&v| f64::from(v)).collect();
            assert_eq!(got, want, "{path:?} {format:?}");
        }
        let mut y = vec![f32::NAN; 3 * 19];
        m.matmul_mode(Activations::F32, &x, 3, &mut y);
        let mut z = vec![f32::NAN; 3 * 19];
        m.matmul(&x, 3, &mut z);
        assert_eq!(bits(&y), bits(&z), "matmul defaults to Activations::F32");
    }
}
