//! The dense engine on burn-wgpu (`cargo test -p draftsmith-model --test wgpu`), which shares
//! burn's CubeCL kernels with burn-cuda; CI runs it on Mesa's software Vulkan driver (lavapipe).
//! The checks are in `gpu/mod.rs`; the tolerances stated here, max |Δlogit|:
//! tiny models against numpy ≤ 1e-3, SmolLM2 against the float64 golden file ≤ 0.02 (the dense
//! CPU bound), a tree branch against the branch alone ≤ 1e-3. SmolLM2 follows the first
//! [`GREEDY_STEPS`] steps of each golden prompt's greedy continuation, not all eight: lavapipe
//! takes seconds a pass, and with all eight this file took 538 s alone on a 2-core AVX2 machine
//! (session 51; the SmolLM2 test with two: 210 s); CUDA follows all of them.
//!
//! Without a wgpu adapter the tests are skipped (`DRAFTSMITH_REQUIRE_WGPU=1`: failed).

mod common;
mod gpu;

use burn::backend::wgpu::WgpuDevice;
use burn::backend::Wgpu;

const REQUIRE: &str = "DRAFTSMITH_REQUIRE_WGPU";
const FIX: &str = "install Mesa's lavapipe (`apt install mesa-vulkan-drivers`)";
/// Greedy steps followed after each SmolLM2 golden prompt (the KV cache on the device).
const GREEDY_STEPS: usize = 2;

fn device() -> Option<WgpuDevice> {
    static PROBE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let device = WgpuDevice::DefaultDevice;
    PROBE.get_or_init(|| gpu::have_device::<Wgpu>(&device, REQUIRE, FIX)).then_some(device)
}

#[test]
fn tiny_models_reproduce_the_reference_on_wgpu() {
    let Some(device) = device() else { return };
    gpu::tiny_models_reproduce_the_reference::<Wgpu>(&device, 1e-3);
}

#[test]
fn smollm2_logits_match_the_numpy_reference_on_wgpu() {
    let Some(device) = device() else { return };
    gpu::smollm2_logits_match_the_numpy_reference::<Wgpu>(&device, 0.02, GREEDY_STEPS);
}

#[test]
fn tree_branches_match_the_branch_run_alone_on_wgpu() {
    let Some(device) = device() else { return };
    gpu::tree_branches_match_the_branch_run_alone::<Wgpu>(&device, 1e-3);
}

/// `just wgpu-vs-cpu` (minutes on lavapipe); `DRAFTSMITH_WGPU_TOKENS` tokens per prompt (64).
#[test]
#[ignore = "SmolLM2 greedy on wgpu vs the dense CPU path over MT-Bench: `just wgpu-vs-cpu`"]
fn smollm2_greedy_on_wgpu_equals_the_dense_cpu_path_up_to_near_ties() {
    let tokens = std::env::var("DRAFTSMITH_WGPU_TOKENS").ok().and_then(|v| v.parse().ok()).unwrap_or(64);
    let Some(device) = device() else { return };
    gpu::smollm2_greedy_equals_the_dense_cpu_path_up_to_near_ties::<Wgpu>(&device, tokens);
}
