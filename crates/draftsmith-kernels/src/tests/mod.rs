//! Unit tests: shared helpers (deterministic data, reference products and error bounds).

mod blocks;
mod f32act;
mod invariance;
mod kquant;
mod matmul;
mod paths;

use crate::{QFormat, QMatrix};

/// SplitMix64: small deterministic generator for test data.
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub(super) fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Uniform in `[lo, hi)`.
    pub(super) fn range(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.unit()
    }

    /// Roughly normal (Irwin–Hall, 4 terms), with an occasional ×8 outlier as in activations.
    pub(super) fn activation(&mut self) -> f32 {
        let v = (0..4).map(|_| self.unit()).sum::<f32>() - 2.0;
        if self.next_u64().is_multiple_of(64) {
            8.0 * v
        } else {
            v
        }
    }

    pub(super) fn activations(&mut self, len: usize) -> Vec<f32> {
        (0..len).map(|_| self.activation()).collect()
    }
}

/// The formats of 32-value blocks, which the tests below build from random GGUF bytes.
pub(super) const BLOCK_FORMATS: [QFormat; 4] = [QFormat::Q8_0, QFormat::Q4_0, QFormat::Q4_1, QFormat::Q5_0];

/// The K-quant formats, whose 256-value super-blocks `tests::kquant` builds.
pub(super) const KQUANT_FORMATS: [QFormat; 3] = [QFormat::Q4K, QFormat::Q5K, QFormat::Q6K];

/// A `rows × cols` matrix of any format from random GGUF bytes: [`random_blocks`], or
/// `tests::kquant`'s super-blocks for the K-quants.
pub(super) fn random_matrix(format: QFormat, rows: usize, cols: usize, rng: &mut Rng) -> QMatrix {
    let bytes = if KQUANT_FORMATS.contains(&format) {
        kquant::random_bytes(format, rows, cols, rng)
    } else {
        random_blocks(format, rows, cols, rng)
    };
    QMatrix::from_ggml_blocks(format, &bytes, rows, cols).expect("random bytes of a valid shape")
}

/// Random GGUF block bytes for a `rows × cols` matrix. Q8_0 quants include -128 (legal bytes
/// that ggml itself never writes); Q4_1 minimums are negative or positive; Q5_0 fifth bits and
/// nibbles take every pattern.
pub(super) fn random_blocks(format: QFormat, rows: usize, cols: usize, rng: &mut Rng) -> Vec<u8> {
    let blocks = rows * cols / 32;
    let mut out = Vec::with_capacity(blocks * format.block_bytes());
    for _ in 0..blocks {
        let d = half::f16::from_f32(rng.range(1e-3, 2e-2));
        out.extend_from_slice(&d.to_bits().to_le_bytes());
        match format {
            QFormat::Q8_0 => out.extend((0..32).map(|_| rng.next_u64() as u8)),
            QFormat::Q4_0 => out.extend((0..16).map(|_| rng.next_u64() as u8)),
            QFormat::Q5_0 => out.extend((0..20).map(|_| rng.next_u64() as u8)),
            QFormat::Q4_1 => {
                let m = half::f16::from_f32(rng.range(-0.15, 0.05));
                out.extend_from_slice(&m.to_bits().to_le_bytes());
                out.extend((0..16).map(|_| rng.next_u64() as u8));
            }
            QFormat::Q4K | QFormat::Q5K | QFormat::Q6K => {
                unreachable!("K-quant blocks are 256 values: tests::kquant makes them")
            }
        }
    }
    out
}

/// Decodes GGUF block bytes directly (independently of the packed layout).
pub(super) fn ggml_dequantize(format: QFormat, bytes: &[u8]) -> Vec<f32> {
    let f16 = |b: &[u8]| half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32();
    let mut out = Vec::new();
    for blk in bytes.chunks_exact(format.block_bytes()) {
        let d = f16(blk);
        match format {
            QFormat::Q8_0 => out.extend(blk[2..].iter().map(|&q| d * f32::from(q as i8))),
            QFormat::Q4_0 => {
                let qs = &blk[2..18];
                out.extend(qs.iter().map(|&q| d * f32::from(i16::from(q & 0x0F) - 8)));
                out.extend(qs.iter().map(|&q| d * f32::from(i16::from(q >> 4) - 8)));
            }
            QFormat::Q5_0 => {
                let qh = u32::from_le_bytes([blk[2], blk[3], blk[4], blk[5]]);
                let value = |e: usize| {
                    let nibble = if e < 16 { blk[6 + e] & 0x0F } else { blk[6 + e - 16] >> 4 };
                    i32::from(nibble) + 16 * ((qh >> e) & 1) as i32 - 16
                };
                out.extend((0..32).map(|e| d * value(e) as f32));
            }
            QFormat::Q4_1 => {
                let m = f16(&blk[2..]);
                let qs = &blk[4..20];
                out.extend(qs.iter().map(|&q| d * f32::from(q & 0x0F) + m));
                out.extend(qs.iter().map(|&q| d * f32::from(q >> 4) + m));
            }
            QFormat::Q4K | QFormat::Q5K | QFormat::Q6K => {
                unreachable!("tests::kquant decodes K-quants with draftsmith-gguf")
            }
        }
    }
    out
}

/// All rows of `m`, dequantized (`rows × cols`).
pub(super) fn dequantize_all(m: &QMatrix) -> Vec<f32> {
    let mut w = vec![0.0; m.rows() * m.cols()];
    for (r, row) in w.chunks_exact_mut(m.cols().max(1)).enumerate() {
        m.dequantize_row(r, row);
    }
    w
}

/// Reference products in f64: `y[c][r] = Σ_i w[r][i] · x[c][i]`.
pub(super) fn reference(w: &[f32], x: &[f32], rows: usize, cols: usize, n: usize) -> Vec<f64> {
    let mut y = vec![0.0; n * rows];
    for c in 0..n {
        for r in 0..rows {
            let (wr, xc) = (&w[r * cols..][..cols], &x[c * cols..][..cols]);
            y[c * rows + r] = wr.iter().zip(xc).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum();
        }
    }
    y
}

/// `Σ_i |w[r][i]| · |x[c][i]|`: the scale of floating-point rounding in `y[c][r]`.
pub(super) fn magnitude(w: &[f32], x: &[f32], rows: usize, cols: usize, n: usize) -> Vec<f64> {
    let wa: Vec<f32> = w.iter().map(|v| v.abs()).collect();
    let xa: Vec<f32> = x.iter().map(|v| v.abs()).collect();
    reference(&wa, &xa, rows, cols, n)
}

/// Worst-case error of 8-bit activation quantization for `y[c][r]`.
///
/// Each activation block is quantized with step `d = amax/127` and round-to-nearest, so every
/// value moves by at most `d/2 = amax/254`; the weights are exact. Hence
/// `|y − y_ref| ≤ Σ_b (amax_b / 254) · Σ_{i∈b} |w_i|`.
pub(super) fn quant_bound(w: &[f32], x: &[f32], rows: usize, cols: usize, n: usize) -> Vec<f64> {
    let mut bound = vec![0.0; n * rows];
    for c in 0..n {
        let xc = &x[c * cols..][..cols];
        for r in 0..rows {
            let wr = &w[r * cols..][..cols];
            bound[c * rows + r] = xc
                .chunks_exact(32)
                .zip(wr.chunks_exact(32))
                .map(|(xb, wb)| {
                    let amax = xb.iter().fold(0.0f64, |m, v| m.max(f64::from(v.abs())));
                    amax / 254.0 * wb.iter().map(|v| f64::from(v.abs())).sum::<f64>()
                })
                .sum();
        }
    }
    bound
}

/// Index and size of the largest `|got − want| − tol`, or `None` when every entry is within.
pub(super) fn worst_violation(got: &[f32], want: &[f64], tol: &[f64]) -> Option<(usize, f64)> {
    let excess = got.iter().zip(want).zip(tol).map(|((&g, &w), &t)| (f64::from(g) - w).abs() - t);
    excess.enumerate().filter(|(_, e)| *e > 0.0 || e.is_nan()).max_by(|a, b| a.1.total_cmp(&b.1))
}
