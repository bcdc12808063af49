//! The dense engine on burn-cuda: the same checks as `tests/wgpu.rs` (`gpu/mod.rs`), run with
//! `cargo test --release -p draftsmith-model --features cuda --test cuda` on a machine with an
//! NVIDIA GPU (`just test-cuda`). CI compiles it (`just check-cuda`) and has no GPU to run it.
//!
//! burn-cuda's f32 matrix products run on tensor cores in TF32 (10-bit mantissa inputs, f32
//! accumulation; `cubek-matmul`'s `adjust_dtypes`), chosen per shape by autotune, so its logits
//! sit further from the reference than wgpu's. Tolerances, max |Δlogit|, against what an H100
//! measured (session 14, `eval/results/gpu-h100/`): tiny models against numpy ≤ 0.03 (1.45e-2),
//! SmolLM2 against the float64 golden file ≤ 0.15 (5.77e-2) with greedy tokens equal wherever the
//! reference margin exceeds 0.5, a tree branch against the branch alone ≤ 1e-2 (0).
//!
//! Without a CUDA device the tests are skipped (`DRAFTSMITH_REQUIRE_CUDA=1`: failed).
#![cfg(feature = "cuda")]

mod common;
mod gpu;

use burn::backend::cuda::CudaDevice;
use burn::backend::Cuda;

const REQUIRE: &str = "DRAFTSMITH_REQUIRE_CUDA";
const FIX: &str = "an NVIDIA GPU and driver";

fn device() -> Option<CudaDevice> {
    static PROBE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let device = CudaDevice::default();
    // burn-cuda panics in a device thread when the driver is missing: look for it first.
    let present = || match draftsmith_model::cuda_driver_present() {
        true => gpu::have_device::<Cuda>(&device, REQUIRE, FIX),
        false => gpu::no_device("cuda", REQUIRE, FIX),
    };
    PROBE.get_or_init(present).then_some(device)
}

#[test]
fn tiny_models_reproduce_the_reference_on_cuda() {
    let Some(device) = device() else { return };
    gpu::tiny_models_reproduce_the_reference::<Cuda>(&device, 0.03);
}

#[test]
fn smollm2_logits_match_the_numpy_reference_on_cuda() {
    let Some(device) = device() else { return };
    gpu::smollm2_logits_match_the_numpy_reference::<Cuda>(&device, 0.15, usize::MAX);
}

#[test]
fn tree_branches_match_the_branch_run_alone_on_cuda() {
    let Some(device) = device() else { return };
    gpu::tree_branches_match_the_branch_run_alone::<Cuda>(&device, 1e-2);
}

/// `DRAFTSMITH_CUDA_TOKENS` tokens per prompt (64).
#[test]
fn smollm2_greedy_on_cuda_equals_the_dense_cpu_path_up_to_near_ties() {
    let tokens = std::env::var("DRAFTSMITH_CUDA_TOKENS").ok().and_then(|v| v.parse().ok()).unwrap_or(64);
    let Some(device) = device() else { return };
    gpu::smollm2_greedy_equals_the_dense_cpu_path_up_to_near_ties::<Cuda>(&device, tokens);
}
