//! Q6_K: the packed layout against an independent decoder, both activation modes against f64
//! references, every path, and batch invariance.

use super::f32act::supported_paths;
use super::invariance::check_invariance;
use super::{dequantize_all, magnitude, quant_bound, reference, worst_violation, Rng};
use crate::{Activations, KernelError, QFormat, QMatrix};

/// `(rows, cols)`: a padded group, one super-block per row, and model-sized rows.
const SHAPES: [(usize, usize); 4] = [(7, 256), (33, 512), (577, 256), (40, 1536)];
const NS: [usize; 4] = [1, 3, 17, 64];

/// Random Q6_K super-blocks (`cols` a multiple of 256): every bit pattern of `ql` and `qh`,
/// signed scales of both signs (−128 included), small positive `d`.
fn random_q6k(rows: usize, cols: usize, rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..rows * cols / 256 {
        out.extend((0..192 + 16).map(|_| rng.next_u64() as u8));
        out.extend_from_slice(&half::f16::from_f32(rng.range(1e-4, 2e-3)).to_bits().to_le_bytes());
    }
    out
}

/// Random Q6_K blocks for a `rows × cols` matrix, and the matrix packed from them.
fn random_matrix(rows: usize, cols: usize, rng: &mut Rng) -> (Vec<u8>, QMatrix) {
    let bytes = random_q6k(rows, cols, rng);
    let m = QMatrix::from_ggml_blocks(QFormat::Q6K, &bytes, rows, cols).unwrap();
    (bytes, m)
}

#[test]
fn packed_q6k_decodes_as_ggml_does() {
    let mut rng = Rng::new(60);
    for (rows, cols) in SHAPES {
        let (bytes, m) = random_matrix(rows, cols, &mut rng);
        let mut want = vec![0.0; rows * cols];
        draftsmith_gguf::dequant::dequantize_q6_k(&bytes, &mut want);
        let got = dequantize_all(&m);
        assert!(got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "{rows}x{cols}");
        // The file's own 210 bytes per 256 values once packed (rows padded to 16).
        assert_eq!(m.n_bytes(), rows.div_ceil(16) * 16 * cols / 256 * 210);
    }
}

#[test]
fn q6k_products_match_f64_references_on_every_path() {
    let mut rng = Rng::new(61);
    for (rows, cols) in SHAPES {
        let (_, m) = random_matrix(rows, cols, &mut rng);
        let w = dequantize_all(&m);
        for n in NS {
            let x = rng.activations(n * cols);
            let want = reference(&w, &x, rows, cols, n);
            let slack: Vec<f64> = magnitude(&w, &x, rows, cols, n).into_iter().map(|v| 1e-5 * v + 1e-30).collect();
            let int8: Vec<f64> = quant_bound(&w, &x, rows, cols, n).iter().zip(&slack).map(|(b, s)| b + s).collect();
            for path in supported_paths() {
                for (mode, tol) in [(Activations::Int8, &int8), (Activations::F32, &slack)] {
                    let mut y = vec![f32::NAN; n * rows];
                    m.matmul_mode_with(mode, path, &x, n, &mut y);
                    let bad = worst_violation(&y, &want, tol);
                    assert!(bad.is_none(), "{mode:?} {path:?} {rows}x{cols} n={n}: {bad:?}");
                }
            }
        }
    }
}

#[test]
fn q6k_batched_outputs_are_bit_identical_to_single_token_outputs() {
    let mut rng = Rng::new(62);
    for (rows, cols) in [(7, 256), (577, 512)] {
        let (_, m) = random_matrix(rows, cols, &mut rng);
        let x = rng.activations(64 * cols);
        for path in supported_paths() {
            for mode in [Activations::Int8, Activations::F32] {
                check_invariance(&m, mode, path, &x);
            }
        }
    }
}

#[test]
fn q6k_shape_errors_name_the_super_block() {
    let e = QMatrix::from_ggml_blocks(QFormat::Q6K, &[0; 210], 1, 288).unwrap_err();
    assert_eq!(e, KernelError::ColsNotBlockMultiple { cols: 288, block: 256 });
    assert!(e.to_string().contains("256"), "{e}");
    let e = QMatrix::from_ggml_blocks(QFormat::Q6K, &[0; 209], 1, 256).unwrap_err();
    assert!(matches!(e, KernelError::ByteLength { expected: 210, actual: 209, .. }));
    let e = QMatrix::quantize(QFormat::Q6K, &[0.0; 256], 1, 256).unwrap_err();
    assert_eq!(e, KernelError::NoQuantizer { format: QFormat::Q6K });
    assert!(!QFormat::Q6K.fast_in(Activations::F32) && QFormat::Q6K.fast_in(Activations::Int8));
}
