//! Batch invariance: the value computed for (token `t`, row `r`) must be bit-identical whatever
//! the batch size, the token's position in the batch (and so in its kernel tile), and the split
//! of rows among threads. Lossless speculative decoding relies on it: the verify pass (n > 1)
//! must reproduce exactly the logits that plain decoding (n = 1) would compute.
//!
//! * f32 mode: each output follows one canonical order that depends only on `cols`.
//! * int8 mode: activations are quantized per row (independently of the batch) and the block dot
//!   products are exact integers; the f32 scaling and accumulation per output is the same
//!   sequence for every tile width, so it holds as well.

use super::f32act::bits;
use super::{random_blocks, Rng};
use crate::{Activations, KernelPath, QMatrix};

/// Shapes: odd rows (padded group), a tall one that runs in parallel, and long rows.
const SHAPES: [(usize, usize); 4] = [(7, 64), (577, 576), (1536, 576), (40, 1536)];
const MODES: [Activations; 2] = [Activations::F32, Activations::Int8];

/// `y[n, rows]` in `mode` on `path`.
fn product(m: &QMatrix, mode: Activations, path: KernelPath, x: &[f32], n: usize) -> Vec<f32> {
    let mut y = vec![f32::NAN; n * m.rows()];
    m.matmul_mode_with(mode, path, x, n, &mut y);
    y
}

/// The same product computed inside a rayon pool of `threads` threads.
fn product_in_pool(
    threads: usize,
    m: &QMatrix,
    (mode, path): (Activations, KernelPath),
    x: &[f32],
    n: usize,
) -> Vec<f32> {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
    pool.install(|| product(m, mode, path, x, n))
}

/// Checks one matrix on one path in one mode: n = 64 against n = 1 per row, a 17-row window at
/// an odd offset (other tiles, other lane positions), and 1- and 3-thread pools.
pub(super) fn check_invariance(m: &QMatrix, mode: Activations, path: KernelPath, x: &[f32]) {
    let (rows, cols, n) = (m.rows(), m.cols(), x.len() / m.cols());
    let what = format!("{mode:?} {path:?} {:?} {rows}x{cols}", m.format());
    let full = product(m, mode, path, x, n);
    for t in 0..n {
        let one = product(m, mode, path, &x[t * cols..][..cols], 1);
        assert_eq!(bits(&one), bits(&full[t * rows..][..rows]), "{what}: token {t}, n=1 vs n={n}");
    }
    let (off, len) = (5, 17);
    let window = product(m, mode, path, &x[off * cols..][..len * cols], len);
    assert_eq!(bits(&window), bits(&full[off * rows..][..len * rows]), "{what}: window");
    for threads in [1, 3] {
        let pooled = product_in_pool(threads, m, (mode, path), x, n);
        assert_eq!(bits(&pooled), bits(&full), "{what}: {threads}-thread pool");
    }
}

#[test]
fn batched_outputs_are_bit_identical_to_single_token_outputs() {
    let paths: Vec<KernelPath> = KernelPath::ALL.into_iter().filter(|p| p.is_supported()).collect();
    eprintln!("batch invariance checked on {paths:?}, modes {MODES:?}");
    let mut rng = Rng::new(40);
    for format in super::BLOCK_FORMATS {
        for (rows, cols) in SHAPES {
            let bytes = random_blocks(format, rows, cols, &mut rng);
            let m = QMatrix::from_ggml_blocks(format, &bytes, rows, cols).unwrap();
            let x = rng.activations(64 * cols);
            for &path in &paths {
                for mode in MODES {
                    check_invariance(&m, mode, path, &x);
                }
            }
        }
    }
}

/// Every tile width a path has (up to 12 rows on AVX2, 12 on AVX-512 VNNI (8 for Q6_K), 16
/// with AMX, then a split into tiles): each row of an n-row product, n = 1 ..= widest + 1, is
/// bit-identical to that row alone, for every block format and K-quant, in int8 mode (the
/// integer tile kernels; f32 activations have their own tiles, checked above).
#[test]
fn every_tile_width_matches_single_rows() {
    let paths: Vec<KernelPath> = KernelPath::ALL.into_iter().filter(|p| p.is_supported()).collect();
    let most = 1 + paths
        .iter()
        .map(|p| p.tile_width(false).max(p.tile_width(true)))
        .max()
        .expect("the scalar path is always supported");
    let mut rng = Rng::new(41);
    for format in super::BLOCK_FORMATS.into_iter().chain(super::KQUANT_FORMATS) {
        let (rows, cols) = (33, 512);
        let m = super::random_matrix(format, rows, cols, &mut rng);
        let x = rng.activations(most * cols);
        for &path in &paths {
            let alone: Vec<Vec<f32>> =
                (0..most).map(|t| product(&m, Activations::Int8, path, &x[t * cols..][..cols], 1)).collect();
            for n in 2..=most {
                let full = product(&m, Activations::Int8, path, &x[..n * cols], n);
                for (t, one) in alone.iter().enumerate().take(n) {
                    assert_eq!(bits(one), bits(&full[t * rows..][..rows]), "{path:?} {format:?}: row {t} of n={n}");
                }
            }
        }
    }
}
