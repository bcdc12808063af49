//! Q4_K: the packed layout against an independent decoder, both activation modes against f64
//! references, every path, and batch invariance.

use super::f32act::supported_paths;
use super::invariance::check_invariance;
use super::{dequantize_all, magnitude, quant_bound, reference, worst_violation, Rng};
use crate::{Activations, KernelError, QFormat, QMatrix};

/// `(rows, cols)`: a padded group, one super-block per row, and model-sized rows.
const SHAPES: [(usize, usize); 4] = [(7, 256), (33, 512), (577, 256), (40, 1536)];
const NS: [usize; 4] = [1, 3, 17, 64];

/// Random Q4_K super-blocks (`cols` a multiple of 256): small positive `d` and `dmin`, every bit
/// pattern of the 12 packed scale bytes and the 128 nibble bytes.
fn random_q4k(rows: usize, cols: usize, rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..rows * cols / 256 {
        for scale in [rng.range(1e-4, 2e-3), rng.range(1e-5, 5e-4)] {
            out.extend_from_slice(&half::f16::from_f32(scale).to_bits().to_le_bytes());
        }
        out.extend((0..12 + 128).map(|_| rng.next_u64() as u8));
    }
    out
}

/// Random Q4_K blocks for a `rows × cols` matrix, and the matrix packed from them.
fn random_matrix(rows: usize, cols: usize, rng: &mut Rng) -> (Vec<u8>, QMatrix) {
    let bytes = random_q4k(rows, cols, rng);
    let m = QMatrix::from_ggml_blocks(QFormat::Q4K, &bytes, rows, cols).unwrap();
    (bytes, m)
}

#[test]
fn packed_q4k_decodes_as_ggml_does() {
    let mut rng = Rng::new(40);
    for (rows, cols) in SHAPES {
        let (bytes, m) = random_matrix(rows, cols, &mut rng);
        let mut want = vec![0.0; rows * cols];
        draftsmith_gguf::dequant::dequantize_q4_k(&bytes, &mut want);
        let got = dequantize_all(&m);
        assert!(got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "{rows}x{cols}");
        // 148 bytes per 256 values once packed (the file's 144, with each block's two 6-bit
        // bytes whole), rows padded to 16.
        assert_eq!(m.n_bytes(), rows.div_ceil(16) * 16 * cols / 256 * 148);
    }
}

#[test]
fn q4k_products_match_f64_references_on_every_path() {
    let mut rng = Rng::new(41);
    for (rows, cols) in SHAPES {
        let (_, m) = random_matrix(rows, cols, &mut rng);
        let w = dequantize_all(&m);
        for n in NS {
            let x = rng.activations(n * cols);
            let want = reference(&w, &x, rows, cols, n);
            // Q4_K splits `w·x` into `d·sc·q·x − dmin·mn·x`, whose parts can exceed `|w·x|`:
            // the rounding slack is taken on both.
            let terms = magnitude(&term_scale(&m, rows, cols), &x, rows, cols, n);
            let slack: Vec<f64> = terms.iter().map(|v| 1e-5 * v + 1e-30).collect();
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

/// `|d·sc·q| + |dmin·mn|` per element: the size of the two terms a kernel adds for it.
fn term_scale(m: &QMatrix, rows: usize, cols: usize) -> Vec<f32> {
    let w = dequantize_all(m);
    (0..rows * cols)
        .map(|i| {
            let (row, b) = (i / cols, (i % cols) / 32);
            let min = crate::layout::q4_k_scales(m.group(row / 16).1, b, row % 16).1;
            (w[i] - min).abs() + min.abs()
        })
        .collect()
}

#[test]
fn q4k_batched_outputs_are_bit_identical_to_single_token_outputs() {
    let mut rng = Rng::new(42);
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
fn q4k_shape_errors_name_the_super_block() {
    let e = QMatrix::from_ggml_blocks(QFormat::Q4K, &[0; 144], 1, 288).unwrap_err();
    assert_eq!(e, KernelError::ColsNotBlockMultiple { cols: 288, block: 256 });
    let e = QMatrix::from_ggml_blocks(QFormat::Q4K, &[0; 143], 1, 256).unwrap_err();
    assert!(matches!(e, KernelError::ByteLength { expected: 144, actual: 143, .. }));
    let e = QMatrix::quantize(QFormat::Q4K, &[0.0; 256], 1, 256).unwrap_err();
    assert_eq!(e, KernelError::NoQuantizer { format: QFormat::Q4K });
    assert!(!QFormat::Q4K.fast_in(Activations::F32) && QFormat::Q4K.fast_in(Activations::Int8));
}
