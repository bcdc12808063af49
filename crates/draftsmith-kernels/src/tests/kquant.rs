//! The K-quants (Q4_K, Q5_K, Q6_K): the packed layout against an independent decoder, both activation
//! modes against f64 references on every path, batch invariance, and the shape errors.

use super::f32act::supported_paths;
use super::invariance::check_invariance;
use super::{dequantize_all, magnitude, quant_bound, reference, worst_violation, Rng};
use crate::{Activations, KernelError, KernelPath, QFormat, QMatrix};

/// `(rows, cols)`: a padded group, one super-block per row, and model-sized rows.
const SHAPES: [(usize, usize); 4] = [(7, 256), (33, 512), (577, 256), (40, 1536)];
const NS: [usize; 4] = [1, 3, 17, 64];

/// One K-quant format under test.
struct KQuant {
    format: QFormat,
    /// Bytes per 256 values once packed.
    packed: usize,
    /// draftsmith-gguf's decoder of the file's super-blocks.
    decode: fn(&[u8], &mut [f32]),
    seed: u64,
}

const Q4K: KQuant =
    KQuant { format: QFormat::Q4K, packed: 148, decode: draftsmith_gguf::dequant::dequantize_q4_k, seed: 40 };
const Q5K: KQuant =
    KQuant { format: QFormat::Q5K, packed: 180, decode: draftsmith_gguf::dequant::dequantize_q5_k, seed: 50 };
const Q6K: KQuant =
    KQuant { format: QFormat::Q6K, packed: 210, decode: draftsmith_gguf::dequant::dequantize_q6_k, seed: 60 };

/// Random super-blocks (`cols` a multiple of 256). Q4_K, Q5_K: small positive `d` and `dmin`,
/// every bit pattern of the packed 6-bit scales, the fifth bits and the nibbles. Q6_K: every bit pattern of `ql` and
/// `qh`, signed scales of both signs (−128 included), small positive `d`.
pub(super) fn random_bytes(format: QFormat, rows: usize, cols: usize, rng: &mut Rng) -> Vec<u8> {
    let f16 = |v: f32| half::f16::from_f32(v).to_bits().to_le_bytes();
    let mut out = Vec::new();
    for _ in 0..rows * cols / 256 {
        match format {
            QFormat::Q4K | QFormat::Q5K => {
                out.extend_from_slice(&f16(rng.range(1e-4, 2e-3)));
                out.extend_from_slice(&f16(rng.range(1e-5, 5e-4)));
                out.extend((0..format.block_bytes() - 4).map(|_| rng.next_u64() as u8));
            }
            _ => {
                out.extend((0..192 + 16).map(|_| rng.next_u64() as u8));
                out.extend_from_slice(&f16(rng.range(1e-4, 2e-3)));
            }
        }
    }
    out
}

/// Random blocks for a `rows × cols` matrix, and the matrix packed from them.
fn random_matrix(k: &KQuant, rows: usize, cols: usize, rng: &mut Rng) -> (Vec<u8>, QMatrix) {
    let bytes = random_bytes(k.format, rows, cols, rng);
    let m = QMatrix::from_ggml_blocks(k.format, &bytes, rows, cols).unwrap();
    (bytes, m)
}

/// The size of the terms a kernel adds per element: `|w|` for Q6_K; for Q4_K and Q5_K, which split `w`
/// into `d·sc·q − dmin·mn` whose parts can exceed `|w|`, `|d·sc·q| + |dmin·mn|`.
fn term_scale(m: &QMatrix, rows: usize, cols: usize) -> Vec<f32> {
    let w = dequantize_all(m);
    if m.format() == QFormat::Q6K {
        return w.iter().map(|v| v.abs()).collect();
    }
    (0..rows * cols)
        .map(|i| {
            let (row, b) = (i / cols, (i % cols) / 32);
            let min = crate::layout::q4_k_scales(m.group(row / 16).1, b, row % 16).1;
            (w[i] - min).abs() + min.abs()
        })
        .collect()
}

fn decodes_as_ggml_does(k: &KQuant) {
    let mut rng = Rng::new(k.seed);
    for (rows, cols) in SHAPES {
        let (bytes, m) = random_matrix(k, rows, cols, &mut rng);
        let mut want = vec![0.0; rows * cols];
        (k.decode)(&bytes, &mut want);
        let got = dequantize_all(&m);
        assert!(got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "{:?} {rows}x{cols}", k.format);
        assert_eq!(m.n_bytes(), rows.div_ceil(16) * 16 * cols / 256 * k.packed, "{:?}", k.format);
    }
}

fn products_match_f64_references_on_every_path(k: &KQuant) {
    let mut rng = Rng::new(k.seed + 1);
    for (rows, cols) in SHAPES {
        let (_, m) = random_matrix(k, rows, cols, &mut rng);
        let w = dequantize_all(&m);
        for n in NS {
            let x = rng.activations(n * cols);
            let want = reference(&w, &x, rows, cols, n);
            let terms = magnitude(&term_scale(&m, rows, cols), &x, rows, cols, n);
            let slack: Vec<f64> = terms.iter().map(|v| 1e-5 * v + 1e-30).collect();
            let int8: Vec<f64> = quant_bound(&w, &x, rows, cols, n).iter().zip(&slack).map(|(b, s)| b + s).collect();
            for path in supported_paths() {
                for (mode, tol) in [(Activations::Int8, &int8), (Activations::F32, &slack)] {
                    let mut y = vec![f32::NAN; n * rows];
                    m.matmul_mode_with(mode, path, &x, n, &mut y);
                    let bad = worst_violation(&y, &want, tol);
                    assert!(bad.is_none(), "{:?} {mode:?} {path:?} {rows}x{cols} n={n}: {bad:?}", k.format);
                }
            }
        }
    }
}

/// With int8 activations the integer block products are exact on every path and only the f32
/// order of the scaling differs: the SIMD paths agree with the scalar one to `1e-5` of the
/// terms' size (far tighter than the activations' rounding, so an off-by-a-few integer sum or a
/// wrong scale on one path shows).
fn int8_paths_agree_with_scalar(k: &KQuant) {
    let mut rng = Rng::new(k.seed + 3);
    for (rows, cols) in SHAPES {
        let (_, m) = random_matrix(k, rows, cols, &mut rng);
        for n in NS {
            let x = rng.activations(n * cols);
            let mut want = vec![0.0; n * rows];
            m.matmul_mode_with(Activations::Int8, KernelPath::Scalar, &x, n, &mut want);
            let want: Vec<f64> = want.into_iter().map(f64::from).collect();
            let terms = magnitude(&term_scale(&m, rows, cols), &x, rows, cols, n);
            let tol: Vec<f64> = terms.iter().map(|v| 1e-5 * v + 1e-30).collect();
            for path in supported_paths() {
                let mut y = vec![f32::NAN; n * rows];
                m.matmul_mode_with(Activations::Int8, path, &x, n, &mut y);
                let bad = worst_violation(&y, &want, &tol);
                assert!(bad.is_none(), "{:?} {path:?} {rows}x{cols} n={n}: {bad:?}", k.format);
            }
        }
    }
}

fn batched_outputs_are_bit_identical_to_single_token_outputs(k: &KQuant) {
    let mut rng = Rng::new(k.seed + 2);
    for (rows, cols) in [(7, 256), (577, 512)] {
        let (_, m) = random_matrix(k, rows, cols, &mut rng);
        let x = rng.activations(64 * cols);
        for path in supported_paths() {
            for mode in [Activations::Int8, Activations::F32] {
                check_invariance(&m, mode, path, &x);
            }
        }
    }
}

fn shape_errors_name_the_super_block(k: &KQuant) {
    let size = k.format.block_bytes();
    let e = QMatrix::from_ggml_blocks(k.format, &vec![0; size], 1, 288).unwrap_err();
    assert_eq!(e, KernelError::ColsNotBlockMultiple { cols: 288, block: 256 });
    assert!(e.to_string().contains("256"), "{e}");
    let e = QMatrix::from_ggml_blocks(k.format, &vec![0; size - 1], 1, 256).unwrap_err();
    assert!(matches!(e, KernelError::ByteLength { expected, actual, .. } if expected == size && actual == size - 1));
    let e = QMatrix::quantize(k.format, &[0.0; 256], 1, 256).unwrap_err();
    assert_eq!(e, KernelError::NoQuantizer { format: k.format });
    assert!(!k.format.fast_in(Activations::F32) && k.format.fast_in(Activations::Int8));
}

#[test]
fn packed_k_quants_decode_as_ggml_does() {
    decodes_as_ggml_does(&Q4K);
    decodes_as_ggml_does(&Q5K);
    decodes_as_ggml_does(&Q6K);
}

#[test]
fn k_quant_products_match_f64_references_on_every_path() {
    products_match_f64_references_on_every_path(&Q4K);
    products_match_f64_references_on_every_path(&Q5K);
    products_match_f64_references_on_every_path(&Q6K);
}

#[test]
fn k_quant_int8_paths_agree_with_scalar() {
    int8_paths_agree_with_scalar(&Q4K);
    int8_paths_agree_with_scalar(&Q5K);
    int8_paths_agree_with_scalar(&Q6K);
}

#[test]
fn k_quant_batched_outputs_are_bit_identical_to_single_token_outputs() {
    batched_outputs_are_bit_identical_to_single_token_outputs(&Q4K);
    batched_outputs_are_bit_identical_to_single_token_outputs(&Q5K);
    batched_outputs_are_bit_identical_to_single_token_outputs(&Q6K);
}

#[test]
fn k_quant_shape_errors_name_the_super_block() {
    shape_errors_name_the_super_block(&Q4K);
    shape_errors_name_the_super_block(&Q5K);
    shape_errors_name_the_super_block(&Q6K);
}
