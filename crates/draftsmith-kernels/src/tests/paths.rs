//! Every SIMD path the CPU supports against the scalar path.

use super::matmul::{term_scale, NS, SHAPES};
use super::{magnitude, random_blocks, worst_violation, Rng};
use crate::{Activations, KernelPath, QMatrix};

/// The integer block dot products are exact on every path; only the f32 order of the per-block
/// scaling and accumulation differs, so paths agree to `1e-5 · Σ (|d·q| + |m|)·|x|`.
#[test]
fn simd_paths_agree_with_scalar() {
    let paths: Vec<KernelPath> = KernelPath::ALL.into_iter().filter(|p| p.simd() && p.is_supported()).collect();
    eprintln!("SIMD paths tested: {paths:?} (detected: {:?})", KernelPath::detect());
    let mut rng = Rng::new(20);
    for format in super::BLOCK_FORMATS {
        for (rows, cols) in SHAPES {
            let bytes = random_blocks(format, rows, cols, &mut rng);
            let m = QMatrix::from_ggml_blocks(format, &bytes, rows, cols).unwrap();
            for n in NS {
                let x = rng.activations(n * cols);
                let mut want = vec![0.0; n * rows];
                m.matmul_with(KernelPath::Scalar, &x, n, &mut want);
                let want: Vec<f64> = want.into_iter().map(f64::from).collect();
                let scale = term_scale(format, &bytes);
                let tol: Vec<f64> =
                    magnitude(&scale, &x, rows, cols, n).into_iter().map(|v| 1e-5 * v + 1e-30).collect();
                for &path in &paths {
                    let mut y = vec![f32::NAN; n * rows];
                    m.matmul_with(path, &x, n, &mut y);
                    let bad = worst_violation(&y, &want, &tol);
                    assert!(bad.is_none(), "{path:?} {format:?} {rows}x{cols} n={n}: {bad:?}");
                }
            }
        }
    }
}

#[test]
fn detected_path_is_supported() {
    assert!(KernelPath::detect().is_supported());
    assert!(KernelPath::Scalar.is_supported());
    for p in KernelPath::ALL {
        assert!(!p.name().is_empty());
    }
}

/// AMX's tiles compute the AVX-512 VNNI kernels' integer block sums and fold them in the same
/// order: the two paths agree bit for bit on every format and tile width (skipped without
/// AMX-INT8, as on the CI machines; run on an AMX machine: `eval/results/`).
#[test]
fn amx_is_bit_identical_to_avx512_vnni() {
    if !KernelPath::Amx.is_supported() {
        eprintln!("no AMX-INT8 tiles on this machine: skipped");
        return;
    }
    let mut rng = Rng::new(21);
    for format in super::BLOCK_FORMATS.into_iter().chain(super::KQUANT_FORMATS) {
        for (rows, cols) in [(16, 256), (33, 512), (577, 256), (40, 1536)] {
            let m = super::random_matrix(format, rows, cols, &mut rng);
            for n in (1..=17).chain([64]) {
                let x = rng.activations(n * cols);
                let (mut want, mut got) = (vec![0.0; n * rows], vec![f32::NAN; n * rows]);
                m.matmul_mode_with(Activations::Int8, KernelPath::Avx512Vnni, &x, n, &mut want);
                m.matmul_mode_with(Activations::Int8, KernelPath::Amx, &x, n, &mut got);
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert!(bits(&got) == bits(&want), "{format:?} {rows}x{cols} n={n}: AMX differs from AVX-512 VNNI");
            }
        }
    }
}
