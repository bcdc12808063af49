//! Block decoding, construction errors, and activation quantization.

use super::{dequantize_all, ggml_dequantize, random_blocks, Rng};
use crate::act::quantize_block_scalar;
use crate::{KernelError, QFormat, QMatrix};

#[test]
fn public_types_are_thread_safe() {
    fn check<T: Send + Sync + Clone + std::fmt::Debug>() {}
    check::<QMatrix>();
    check::<KernelError>();
    check::<QFormat>();
}

#[test]
fn construction_errors() {
    let e = QMatrix::from_ggml_blocks(QFormat::Q8_0, &[0; 34], 1, 48).unwrap_err();
    assert_eq!(e, KernelError::ColsNotBlockMultiple { cols: 48, block: 32 });
    let e = QMatrix::from_ggml_blocks(QFormat::Q4_1, &[0; 39], 1, 64).unwrap_err();
    assert!(matches!(e, KernelError::ByteLength { expected: 40, actual: 39, .. }));
    assert!(e.to_string().contains("40"));
    let e = QMatrix::quantize_q8_0(&[0.0; 63], 2, 32).unwrap_err();
    assert!(matches!(e, KernelError::ValueCount { expected: 64, actual: 63, .. }));
    let e = QMatrix::from_ggml_blocks(QFormat::Q8_0, &[], usize::MAX, 64).unwrap_err();
    assert!(matches!(e, KernelError::ShapeOverflow { .. }));
}

#[test]
fn dequantize_row_matches_ggml_decoding() {
    let mut rng = Rng::new(1);
    for format in super::BLOCK_FORMATS {
        for (rows, cols) in [(1, 32), (7, 64), (16, 96), (33, 576)] {
            let bytes = random_blocks(format, rows, cols, &mut rng);
            let m = QMatrix::from_ggml_blocks(format, &bytes, rows, cols).unwrap();
            assert_eq!((m.rows(), m.cols(), m.format()), (rows, cols, format));
            assert_eq!(dequantize_all(&m), ggml_dequantize(format, &bytes), "{format:?} {rows}x{cols}");
        }
    }
}

#[test]
fn q4_1_nibble_order_hand_example() {
    // d = 1, m = -8: low nibble i holds element i, high nibble element 16 + i.
    let mut block = vec![0x00, 0x3C, 0x00, 0xC8]; // f16 1.0, f16 -8.0
    block.extend((0..16u8).map(|i| i | ((15 - i) << 4)));
    let m = QMatrix::from_ggml_blocks(QFormat::Q4_1, &block, 1, 32).unwrap();
    let mut row = [0.0; 32];
    m.dequantize_row(0, &mut row);
    let want: Vec<f32> = (0..16).chain((0..16).rev()).map(|q| q as f32 - 8.0).collect();
    assert_eq!(row.to_vec(), want);
}

#[test]
fn q8_0_hand_example() {
    let mut block = vec![0x00, 0x38]; // f16 0.5
    block.extend((0..32).map(|i| (i as i8 - 16) as u8));
    let m = QMatrix::from_ggml_blocks(QFormat::Q8_0, &block, 1, 32).unwrap();
    let mut row = [0.0; 32];
    m.dequantize_row(0, &mut row);
    let want: Vec<f32> = (0..32).map(|i| 0.5 * (i as f32 - 16.0)).collect();
    assert_eq!(row.to_vec(), want);
}

#[test]
fn n_bytes_counts_gguf_size_for_full_groups() {
    let mut rng = Rng::new(2);
    for format in super::BLOCK_FORMATS {
        let bytes = random_blocks(format, 32, 576, &mut rng);
        let m = QMatrix::from_ggml_blocks(format, &bytes, 32, 576).unwrap();
        assert_eq!(m.n_bytes(), bytes.len());
    }
}

#[test]
fn quantize_q8_0_follows_ggml_rule() {
    let mut rng = Rng::new(3);
    let (rows, cols) = (5, 96);
    let mut w = rng.activations(rows * cols);
    w[..32].fill(0.0); // an all-zero block gets d = 0
    let m = QMatrix::quantize_q8_0(&w, rows, cols).unwrap();
    let got = dequantize_all(&m);
    for (xb, gb) in w.chunks_exact(32).zip(got.chunks_exact(32)) {
        let amax = xb.iter().fold(0.0f32, |a, v| a.max(v.abs()));
        let d = amax / 127.0;
        let id = if d == 0.0 { 0.0 } else { 1.0 / d };
        let dh = half::f16::from_f32(d).to_f32();
        for (&x, &g) in xb.iter().zip(gb) {
            assert_eq!(g, dh * (x * id).round(), "ggml: q = roundf(x / d), value = f16(d) * q");
        }
    }
}

#[test]
fn quantize_q4_1_follows_ggml_rule() {
    let mut rng = Rng::new(4);
    let (rows, cols) = (5, 96);
    let mut w = rng.activations(rows * cols);
    w[..32].fill(0.25); // a constant block gets d = 0 and keeps its value as the minimum
    let m = QMatrix::quantize_q4_1(&w, rows, cols).unwrap();
    assert_eq!((m.format(), m.rows(), m.cols()), (QFormat::Q4_1, rows, cols));
    let got = dequantize_all(&m);
    for (xb, gb) in w.chunks_exact(32).zip(got.chunks_exact(32)) {
        let lo = xb.iter().fold(f32::INFINITY, |a, &v| a.min(v));
        let hi = xb.iter().fold(f32::NEG_INFINITY, |a, &v| a.max(v));
        let d = (hi - lo) / 15.0;
        let id = if d == 0.0 { 0.0 } else { 1.0 / d };
        let (dh, mh) = (half::f16::from_f32(d).to_f32(), half::f16::from_f32(lo).to_f32());
        for (&x, &g) in xb.iter().zip(gb) {
            let q = ((x - lo) * id + 0.5).min(15.0).trunc();
            assert_eq!(g, dh * q + mh, "ggml: q = min(15, (x − min) / d + 0.5), value = f16(d) · q + f16(min)");
        }
    }
    assert_eq!(QMatrix::quantize(QFormat::Q4_1, &w, rows, cols).unwrap().n_bytes(), m.n_bytes());
    assert!(QMatrix::quantize_q4_1(&w[..95], 1, 95).is_err(), "columns not a multiple of 32");
}

#[test]
fn quantize_q4_0_follows_ggml_rule() {
    let mut rng = Rng::new(5);
    let (rows, cols) = (5, 96);
    let mut w = rng.activations(rows * cols);
    w[..32].fill(0.0); // an all-zero block gets d = 0
    w[40] = -3.0; // the largest magnitude negative: d > 0
    let m = QMatrix::quantize_q4_0(&w, rows, cols).unwrap();
    assert_eq!((m.format(), m.rows(), m.cols()), (QFormat::Q4_0, rows, cols));
    let got = dequantize_all(&m);
    for (xb, gb) in w.chunks_exact(32).zip(got.chunks_exact(32)) {
        let v = xb.iter().fold(0.0f32, |m, &v| if v.abs() > m.abs() { v } else { m });
        let d = v / -8.0;
        let id = if d == 0.0 { 0.0 } else { 1.0 / d };
        let dh = half::f16::from_f32(d).to_f32();
        for (&x, &g) in xb.iter().zip(gb) {
            let q = (x * id + 8.5).trunc().min(15.0);
            assert_eq!(g, dh * (q - 8.0), "ggml: q = min(15, (int8_t)(x / d + 8.5)), value = f16(d) · (q − 8)");
        }
    }
    assert_eq!(QMatrix::quantize(QFormat::Q4_0, &w, rows, cols).unwrap().n_bytes(), m.n_bytes());
}

#[test]
fn requantizing_a_matrix_quantizes_its_values() {
    let mut rng = Rng::new(6);
    let (rows, cols) = (21, 64); // a partial last row group
    let w = rng.activations(rows * cols);
    let q8 = QMatrix::quantize_q8_0(&w, rows, cols).unwrap();
    let values = dequantize_all(&q8);
    for format in [QFormat::Q4_0, QFormat::Q4_1, QFormat::Q8_0] {
        let direct = QMatrix::quantize(format, &values, rows, cols).unwrap();
        let re = q8.requantize(format).unwrap();
        assert_eq!((re.format(), re.rows(), re.cols()), (format, rows, cols));
        assert_eq!(dequantize_all(&re), dequantize_all(&direct), "{format:?}");
    }
    assert_eq!(dequantize_all(&q8.requantize(QFormat::Q8_0).unwrap()), values, "Q8_0 values are Q8_0's fixed points");
    assert!(q8.requantize(QFormat::Q5_0).is_err(), "no Q5_0 quantizer");
    assert!(QFormat::Q4_0.has_quantizer() && !QFormat::Q5_0.has_quantizer() && !QFormat::Q6K.has_quantizer());
}

#[test]
fn scalar_quantizer_rounds_half_away_and_clamps() {
    let mut x = [0.0f32; 32];
    x[0] = 127.0; // d = 1
    x[1] = 2.5;
    x[2] = -2.5;
    x[3] = 0.5;
    x[4] = -0.49999997;
    x[5] = 126.5;
    let mut q = [0i8; 32];
    let (d, sum) = quantize_block_scalar(&x, &mut q);
    assert_eq!(d, 1.0);
    assert_eq!(&q[..6], &[127, 3, -3, 1, 0, 127]);
    assert_eq!(sum, q.iter().map(|&v| i32::from(v)).sum::<i32>());
    let (d, sum) = quantize_block_scalar(&[0.0; 32], &mut q);
    assert_eq!((d, sum, q), (0.0, 0, [0; 32]));
}

/// Activation blocks that stress the quantizer: ties, zeros, tiny, huge and non-finite values.
fn tricky_blocks(rng: &mut Rng) -> Vec<f32> {
    let mut x = rng.activations(32 * 64);
    for (i, v) in x.chunks_exact_mut(32).enumerate() {
        match i % 8 {
            0 => v.iter_mut().enumerate().for_each(|(k, e)| *e = k as f32 - 15.5),
            1 => v.fill(0.0),
            2 => v.iter_mut().for_each(|e| *e *= 1e-30),
            3 => v.iter_mut().for_each(|e| *e *= 1e30),
            4 => v[7] = f32::NAN,
            5 => v[3] = f32::INFINITY,
            6 => v.iter_mut().enumerate().for_each(|(k, e)| *e = (k as f32 - 16.0) * 0.5),
            _ => {}
        }
    }
    x
}

#[cfg(target_arch = "x86_64")]
#[test]
fn simd_quantizer_is_bit_identical_to_scalar() {
    if !crate::KernelPath::Avx2.is_supported() {
        return;
    }
    let x = tricky_blocks(&mut Rng::new(4));
    let nb = x.len() / 32;
    type Quantizer = unsafe fn(&[f32], &mut [i8], &mut [f32], &mut [i32]);
    let mut quantizers: Vec<(&str, Quantizer)> = vec![("avx2", crate::avx2::quantize_blocks)];
    if crate::KernelPath::Avx512Vnni.is_supported() {
        quantizers.push(("avx512", crate::avx512::quantize_blocks));
    }
    for (name, quantize) in quantizers {
        let (mut q, mut d, mut s) = (vec![0i8; x.len()], vec![0.0f32; nb], vec![0i32; nb]);
        // SAFETY: the CPU supports each quantizer's path (checked above).
        unsafe { quantize(&x, &mut q, &mut d, &mut s) };
        for (b, xb) in x.chunks_exact(32).enumerate() {
            let mut qr = [0i8; 32];
            let (dr, sr) = quantize_block_scalar(xb, &mut qr);
            assert_eq!(&q[b * 32..][..32], &qr, "{name} block {b}");
            assert_eq!((d[b].to_bits(), s[b]), (dr.to_bits(), sr), "{name} block {b}");
        }
    }
}

#[test]
fn non_finite_activations_do_not_panic() {
    let x = tricky_blocks(&mut Rng::new(5));
    let mut q = [0i8; 32];
    for xb in x.chunks_exact(32) {
        quantize_block_scalar(xb, &mut q);
        assert!(q.iter().all(|&v| v != i8::MIN));
    }
}

#[test]
fn a_matrix_filled_row_by_row_is_the_quantized_matrix_and_rows_copy_and_grow_exactly() {
    let mut rng = Rng::new(7);
    let (rows, cols) = (37, 64); // three row groups, the last partial
    let w = rng.activations(rows * cols);
    for format in [QFormat::Q8_0, QFormat::Q4_1, QFormat::Q4_0] {
        let whole = QMatrix::quantize(format, &w, rows, cols).unwrap();
        let mut m = QMatrix::zeros(format, rows, cols).unwrap();
        // Rows arrive out of order, as a cache's tree rows do.
        for r in (0..rows).rev() {
            m.set_row(r, &w[r * cols..][..cols]);
        }
        assert_eq!(dequantize_all(&m), dequantize_all(&whole), "{format:?}");
        // Copies across groups and within one; a copy onto itself changes nothing.
        let mut copied = m.clone();
        for (from, to) in [(36, 2), (3, 5), (20, 20)] {
            copied.copy_row(from, to);
        }
        let (a, b) = (dequantize_all(&m), dequantize_all(&copied));
        let row = |v: &[f32], r: usize| v[r * cols..(r + 1) * cols].to_vec();
        assert_eq!((row(&b, 2), row(&b, 5)), (row(&a, 36), row(&a, 3)), "{format:?}");
        assert_eq!(row(&b, 20), row(&a, 20));
        // Growing keeps the first rows; the new rows start empty.
        let grown = m.resized(70, 33);
        assert_eq!((grown.rows(), grown.cols()), (70, cols));
        assert_eq!(dequantize_all(&grown)[..33 * cols], a[..33 * cols], "{format:?}");
        assert!(dequantize_all(&grown)[48 * cols..].iter().all(|&v| v == 0.0));
    }
    assert!(QMatrix::zeros(QFormat::Q6K, 16, 256).is_err(), "no Q6_K quantizer");
}

#[test]
fn a_product_over_the_first_rows_is_the_full_products_first_rows() {
    let mut rng = Rng::new(8);
    let (rows, cols, n) = (53, 64, 11); // two tiles of activation rows
    let m = QMatrix::quantize_q8_0(&rng.activations(rows * cols), rows, cols).unwrap();
    let x = rng.activations(n * cols);
    let mut full = vec![0.0; n * rows];
    m.matmul_mode(crate::Activations::Int8, &x, n, &mut full);
    for limit in [0, 1, 16, 17, 40, 53] {
        let mut part = vec![f32::NAN; n * rows];
        m.matmul_rows_here(&x, n, limit, &mut part);
        let groups_end = limit.div_ceil(16) * 16;
        for c in 0..n {
            for r in 0..rows {
                let (got, want) = (part[c * rows + r], full[c * rows + r]);
                if r < groups_end.min(rows) {
                    assert_eq!(got.to_bits(), want.to_bits(), "limit {limit}, row {c}, key {r}");
                } else {
                    assert!(got.is_nan(), "limit {limit}: row {r} past the last group left as it was");
                }
            }
        }
    }
}

/// One packed tile's quantized values, scale bits, `d·Σq` bits, biases and half biases.
type TileContents = (Vec<i8>, Vec<u32>, Vec<u32>, Vec<i32>, Vec<i32>);

/// The packed tiles as plain vectors, for comparing two quantizations.
fn packed_contents(act: &impl crate::act::ActTiles) -> Vec<TileContents> {
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    (0..act.tiles().len())
        .map(|i| {
            let t = act.packed_tile(i);
            (t.qs.to_vec(), bits(t.d), bits(t.dsum), t.bias.to_vec(), t.half_bias.to_vec())
        })
        .collect()
}

#[test]
fn activations_quantized_in_shares_by_several_threads_are_the_whole_quantized_at_once() {
    use crate::act::{ActQuant, ActTiles};
    use crate::KernelPath;
    let mut rng = Rng::new(34);
    let simd = KernelPath::ALL.into_iter().filter(|&p| p.simd() && p.is_supported());
    for path in simd {
        for (n, cols, halves) in [(1, 64, false), (2, 576, true), (8, 96, false), (17, 160, true), (64, 32, false)] {
            let x: Vec<f32> = (0..n * cols).map(|_| rng.unit() * 8.0 - 4.0).collect();
            let mut whole = ActQuant::default();
            whole.quantize(&x, n, cols, path, halves);
            let expected = packed_contents(&whole);
            for parts in 1..=5 {
                let mut act = ActQuant::default();
                let shared = act.packed_for(n, cols, path, halves);
                // Shares in reverse order, each once, before any read: the contract of
                // `quantize_part` and `ready`.
                for part in (0..parts).rev() {
                    // SAFETY: as above.
                    unsafe { shared.quantize_part(&x, part, parts) };
                }
                // SAFETY: every share is done.
                let ready = unsafe { shared.ready() };
                assert_eq!(ready.tiles(), whole.tiles(), "{path:?} n={n}");
                assert!(packed_contents(&ready) == expected, "{path:?} n={n} cols={cols} parts={parts}");
            }
        }
    }
}

#[test]
fn parts_pack_into_the_matrix_of_their_rows_one_after_another() {
    let mut rng = Rng::new(7);
    for format in super::BLOCK_FORMATS.into_iter().chain(super::KQUANT_FORMATS) {
        let cols = 512;
        let make = |rows: usize, rng: &mut Rng| match super::KQUANT_FORMATS.contains(&format) {
            true => super::kquant::random_bytes(format, rows, cols, rng),
            false => random_blocks(format, rows, cols, rng),
        };
        // Three parts, the last with a padded row group (as k and v under grouped-query attention).
        let parts: Vec<(Vec<u8>, usize)> = [32, 16, 7].into_iter().map(|rows| (make(rows, &mut rng), rows)).collect();
        let refs: Vec<(&[u8], usize)> = parts.iter().map(|(b, r)| (b.as_slice(), *r)).collect();
        let stacked = QMatrix::from_ggml_parts(format, &refs, cols).unwrap();
        let whole: Vec<u8> = parts.iter().flat_map(|(b, _)| b.iter().copied()).collect();
        let one = QMatrix::from_ggml_blocks(format, &whole, 55, cols).unwrap();
        assert_eq!((stacked.rows(), stacked.n_bytes()), (55, one.n_bytes()), "{format:?}");
        assert_eq!(dequantize_all(&stacked), dequantize_all(&one), "{format:?}");
        let x = rng.activations(3 * cols);
        let (mut a, mut b) = (vec![0.0; 3 * 55], vec![0.0; 3 * 55]);
        stacked.matmul(&x, 3, &mut a);
        one.matmul(&x, 3, &mut b);
        assert_eq!(a, b, "{format:?}");
        // Only the last part may end in a padded row group.
        let uneven = [(refs[2].0, 7), (refs[0].0, 32)];
        let e = QMatrix::from_ggml_parts(format, &uneven, cols).unwrap_err();
        assert_eq!(e, KernelError::PartRows { rows: 7, group: 16 });
    }
}
