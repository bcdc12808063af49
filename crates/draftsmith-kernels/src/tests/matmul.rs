//! `matmul` against f64 references, with principled error bounds.

use rayon::prelude::*;

use super::{dequantize_all, quant_bound, random_blocks, reference, worst_violation, Rng};
use crate::{Activations, QFormat, QMatrix};

/// `(rows, cols)`: odd row counts exercise the padded last group; cols span 1 to 48 blocks.
pub(super) const SHAPES: [(usize, usize); 8] =
    [(1, 32), (7, 64), (16, 96), (33, 576), (577, 576), (7, 1536), (40, 1536), (1536, 576)];
/// Activation row counts: single row, ragged tiles, and a full verify batch.
pub(super) const NS: [usize; 4] = [1, 3, 17, 64];

/// `|d·q| + |m|` per element from GGUF bytes: bounds the size of every term the kernels add up
/// (Q4_1 splits `w·x` into `d·q·x + m·x`, whose parts can exceed `|w·x|`).
pub(super) fn term_scale(format: QFormat, bytes: &[u8]) -> Vec<f32> {
    let f16 = |b: &[u8]| half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32().abs();
    let mut out = Vec::new();
    for blk in bytes.chunks_exact(format.block_bytes()) {
        match format {
            QFormat::Q8_0 => out.extend(blk[2..].iter().map(|&q| f16(blk) * f32::from(q as i8).abs())),
            QFormat::Q4_0 => out.extend(std::iter::repeat_n(f16(blk) * 8.0, 32)),
            QFormat::Q5_0 => out.extend(std::iter::repeat_n(f16(blk) * 16.0, 32)),
            QFormat::Q4_1 => {
                let (d, m) = (f16(blk), f16(&blk[2..]));
                out.extend(blk[4..].iter().map(|&q| d * f32::from(q & 15) + m));
                out.extend(blk[4..].iter().map(|&q| d * f32::from(q >> 4) + m));
            }
            QFormat::Q4K | QFormat::Q5K | QFormat::Q6K => {
                unreachable!("tests::kquant bounds K-quant products by their decoded weights")
            }
        }
    }
    out
}

/// Rounding slack: `1e-5 · Σ (|d·q| + |m|) · |x|` (f32 accumulation over ≤ 48 blocks).
fn slack(format: QFormat, bytes: &[u8], x: &[f32], rows: usize, cols: usize, n: usize) -> Vec<f64> {
    let t = term_scale(format, bytes);
    super::magnitude(&t, x, rows, cols, n).into_iter().map(|v| 1e-5 * v + 1e-30).collect()
}

/// Runs the int8 `matmul` and checks it against the f32 product of the dequantized weights:
/// `|Δ| ≤ Σ_b (amax_b/254)·Σ_{i∈b}|w_i| + slack` (see [`quant_bound`]).
fn check_against_f32(format: QFormat, rows: usize, cols: usize, n: usize, rng: &mut Rng) {
    let bytes = random_blocks(format, rows, cols, rng);
    let m = QMatrix::from_ggml_blocks(format, &bytes, rows, cols).unwrap();
    let w = dequantize_all(&m);
    let x = rng.activations(n * cols);
    let mut y = vec![f32::NAN; n * rows];
    m.matmul_mode(Activations::Int8, &x, n, &mut y);
    let want = reference(&w, &x, rows, cols, n);
    let slack = slack(format, &bytes, &x, rows, cols, n);
    let bound = quant_bound(&w, &x, rows, cols, n);
    let tol: Vec<f64> = bound.iter().zip(&slack).map(|(b, s)| b + s).collect();
    if let Some((i, e)) = worst_violation(&y, &want, &tol) {
        panic!("{format:?} {rows}x{cols} n={n}: y[{i}]={} want {} (excess {e:e})", y[i], want[i]);
    }
}

#[test]
fn matmul_matches_f32_reference_within_quantization_bound() {
    let mut rng = Rng::new(10);
    for format in super::BLOCK_FORMATS {
        for (rows, cols) in SHAPES {
            for n in NS {
                check_against_f32(format, rows, cols, n, &mut rng);
            }
        }
    }
}

/// Quantizes activations the way llama.cpp's reference does (`roundf`), as f32 values `d·q`.
pub(super) fn llama_quantized(x: &[f32]) -> Vec<f32> {
    let mut out = Vec::with_capacity(x.len());
    for xb in x.chunks_exact(32) {
        let amax = xb.iter().fold(0.0f32, |a, v| a.max(v.abs()));
        let d = amax / 127.0;
        let id = if d == 0.0 { 0.0 } else { 1.0 / d };
        out.extend(xb.iter().map(|&v| d * (v * id).round()));
    }
    out
}

/// Against the exact product with quantized activations the only error left is f32 rounding
/// of the per-block scaling and accumulation, so the tolerance is just `slack` (1e-5 relative).
#[test]
fn matmul_matches_quantized_activation_reference_tightly() {
    let mut rng = Rng::new(11);
    for format in super::BLOCK_FORMATS {
        for (rows, cols) in SHAPES {
            for n in [1, 17] {
                let bytes = random_blocks(format, rows, cols, &mut rng);
                let m = QMatrix::from_ggml_blocks(format, &bytes, rows, cols).unwrap();
                let x = rng.activations(n * cols);
                let mut y = vec![0.0; n * rows];
                m.matmul_mode(Activations::Int8, &x, n, &mut y);
                let want = reference(&dequantize_all(&m), &llama_quantized(&x), rows, cols, n);
                let tol = slack(format, &bytes, &x, rows, cols, n);
                let bad = worst_violation(&y, &want, &tol);
                assert!(bad.is_none(), "{format:?} {rows}x{cols} n={n}: {bad:?}");
            }
        }
    }
}

/// Fraction of outputs of `m` (int8 mode) that violate the bound around the product of the
/// *true* weights.
fn violation_rate(m: &QMatrix, format: QFormat, bytes: &[u8], x: &[f32], n: usize) -> f64 {
    let (rows, cols) = (m.rows(), m.cols());
    let truth = QMatrix::from_ggml_blocks(format, bytes, rows, cols).unwrap();
    let w = dequantize_all(&truth);
    let mut y = vec![0.0; n * rows];
    m.matmul_mode(Activations::Int8, x, n, &mut y);
    let want = reference(&w, x, rows, cols, n);
    let slack = slack(format, bytes, x, rows, cols, n);
    let bound = quant_bound(&w, x, rows, cols, n);
    let bad = (0..y.len()).filter(|&i| (f64::from(y[i]) - want[i]).abs() > bound[i] + slack[i]);
    bad.count() as f64 / y.len() as f64
}

/// The bound is tight enough to catch layout bugs: swapped nibbles, a block offset, a
/// transposed 4-byte interleave all push most outputs outside it.
#[test]
fn bound_detects_layout_bugs() {
    let (rows, cols, n) = (48, 576, 3);
    let mut rng = Rng::new(12);
    let x = rng.activations(n * cols);
    let q41 = random_blocks(QFormat::Q4_1, rows, cols, &mut rng);
    let swapped: Vec<u8> = q41
        .chunks_exact(20)
        .flat_map(|b| b[..4].iter().copied().chain(b[4..].iter().map(|q| q.rotate_left(4))))
        .collect();
    let m = QMatrix::from_ggml_blocks(QFormat::Q4_1, &swapped, rows, cols).unwrap();
    assert!(violation_rate(&m, QFormat::Q4_1, &q41, &x, n) > 0.5, "nibble swap undetected");

    let q80 = random_blocks(QFormat::Q8_0, rows, cols, &mut rng);
    let mut shifted = q80.clone();
    for row in shifted.chunks_exact_mut(cols / 32 * 34) {
        row.rotate_left(34); // every block read one block off
    }
    let m = QMatrix::from_ggml_blocks(QFormat::Q8_0, &shifted, rows, cols).unwrap();
    assert!(violation_rate(&m, QFormat::Q8_0, &q80, &x, n) > 0.5, "block offset undetected");

    let mut interleaved = q80.clone();
    for blk in interleaved.chunks_exact_mut(34) {
        blk[2..].chunks_exact_mut(4).for_each(|g| g.reverse());
    }
    let m = QMatrix::from_ggml_blocks(QFormat::Q8_0, &interleaved, rows, cols).unwrap();
    assert!(violation_rate(&m, QFormat::Q8_0, &q80, &x, n) > 0.5, "byte order undetected");
}

#[test]
fn quantize_q8_0_then_matmul_tracks_f32_weights() {
    let (rows, cols, n) = (37, 576, 5);
    let mut rng = Rng::new(13);
    let w: Vec<f32> = (0..rows * cols).map(|_| 0.05 * rng.activation()).collect();
    let x = rng.activations(n * cols);
    let m = QMatrix::quantize_q8_0(&w, rows, cols).unwrap();
    let mut y = vec![0.0; n * rows];
    m.matmul_mode(Activations::Int8, &x, n, &mut y);
    let want = reference(&w, &x, rows, cols, n);
    // Activation error ≤ d_x/2 per element (against the quantized weights); weight error
    // ≤ d_w/2 + 127·|d_w − f16(d_w)| ≤ (1/2 + 127·2⁻¹¹)·d_w < 1.13 · d_w/2.
    let wq = dequantize_all(&m);
    let bound = quant_bound(&wq, &x, rows, cols, n);
    let wbound = quant_bound(&x, &w, n, cols, rows); // Σ_b (amax_w/254)·Σ|x|, transposed
    for c in 0..n {
        for r in 0..rows {
            let i = c * rows + r;
            let tol = bound[i] + 1.13 * wbound[r * n + c] + 1e-5;
            assert!((f64::from(y[i]) - want[i]).abs() <= tol, "y[{i}]");
        }
    }
}

#[test]
fn edge_cases_do_not_panic_and_overwrite_output() {
    let mut rng = Rng::new(14);
    let bytes = random_blocks(QFormat::Q4_1, 7, 64, &mut rng);
    let m = QMatrix::from_ggml_blocks(QFormat::Q4_1, &bytes, 7, 64).unwrap();
    for mode in [Activations::F32, Activations::Int8] {
        m.matmul_mode(mode, &[], 0, &mut []);
        let mut y = vec![f32::NAN; 7];
        m.matmul_mode(mode, &[0.0; 64], 1, &mut y);
        assert!(y.iter().all(|&v| v == 0.0), "{mode:?}");
        let mut x = vec![1.0; 64];
        x[3] = f32::NAN;
        x[40] = f32::INFINITY;
        m.matmul_mode(mode, &x, 1, &mut y); // garbage in, but no panic
        let empty = QMatrix::from_ggml_blocks(QFormat::Q8_0, &[], 0, 64).unwrap();
        empty.matmul_mode(mode, &[0.0; 128], 2, &mut []);
        let no_cols = QMatrix::from_ggml_blocks(QFormat::Q4_1, &[], 3, 0).unwrap();
        let mut y = vec![f32::NAN; 6];
        no_cols.matmul_mode(mode, &[], 2, &mut y);
        assert_eq!(y, vec![0.0; 6], "{mode:?}");
    }
}

/// `matmul` called from inside rayon tasks (nested parallelism, scratch re-entrancy).
#[test]
fn nested_matmul_inside_rayon() {
    let mut rng = Rng::new(15);
    let (rows, cols) = (577, 576);
    let bytes = random_blocks(QFormat::Q8_0, rows, cols, &mut rng);
    let m = QMatrix::from_ggml_blocks(QFormat::Q8_0, &bytes, rows, cols).unwrap();
    let x = rng.activations(4 * cols);
    for mode in [Activations::F32, Activations::Int8] {
        let mut want = vec![0.0; 4 * rows];
        m.matmul_mode(mode, &x, 4, &mut want);
        let outs: Vec<Vec<f32>> = (0..8)
            .into_par_iter()
            .map(|_| {
                let mut y = vec![0.0; 4 * rows];
                m.matmul_mode(mode, &x, 4, &mut y);
                y
            })
            .collect();
        assert!(outs.iter().all(|y| *y == want), "{mode:?}");
    }
}

/// Q4_0 and Q5_0 are packed from GGUF bytes only, multiplied by SIMD kernels with int8
/// activations only, and decode as draftsmith-gguf does, in the file's own bytes.
#[test]
fn q4_0_and_q5_0_are_kept_from_gguf_bytes_and_decode_as_ggml_does() {
    let mut rng = Rng::new(16);
    type Decoder = fn(&[u8], &mut [f32]);
    let decoders: [(QFormat, Decoder); 2] = [
        (QFormat::Q4_0, draftsmith_gguf::dequant::dequantize_q4_0),
        (QFormat::Q5_0, draftsmith_gguf::dequant::dequantize_q5_0),
    ];
    for (format, decode) in decoders {
        let bytes = random_blocks(format, 33, 576, &mut rng);
        let m = QMatrix::from_ggml_blocks(format, &bytes, 33, 576).unwrap();
        let mut want = vec![0.0; 33 * 576];
        decode(&bytes, &mut want);
        let got = dequantize_all(&m);
        assert!(got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "{format:?}");
        // The file's own bytes per 32 values once packed (rows padded to 16).
        assert_eq!(m.n_bytes(), 48 * 576 / 32 * format.block_bytes(), "{format:?}");
        if format == QFormat::Q5_0 {
            let e = QMatrix::quantize(format, &[0.0; 32], 1, 32).unwrap_err();
            assert_eq!(e, crate::KernelError::NoQuantizer { format });
        }
        assert!(!format.fast_in(Activations::F32) && format.fast_in(Activations::Int8));
    }
}
