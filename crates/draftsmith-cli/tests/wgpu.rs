//! The whole product on burn-wgpu (`--device wgpu`; `cargo test -p draftsmith-cli --features
//! wgpu --test wgpu`), run in CI on Mesa's software Vulkan driver (lavapipe): generate equals
//! the dense CPU path's greedy ids, distill → train ReDrafter (loss falls, a rerun resumes from
//! the checkpoint) → eval of every method against `ar` with no real mismatch, TokenSwift
//! training and eval, all on the checked-in tiny model. Without a wgpu adapter the tests are
//! skipped (`DRAFTSMITH_REQUIRE_WGPU=1`: failed).

#![cfg(feature = "wgpu")]

mod common;
mod gpu;

use common::{bin, fixture};

/// Whether `--device wgpu` finds an adapter; without one the tests are skipped, unless
/// `DRAFTSMITH_REQUIRE_WGPU=1` (CI, with lavapipe installed) makes that a failure.
fn have_adapter() -> bool {
    static PROBE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ok = *PROBE.get_or_init(|| {
        let out = bin()
            .args([
                "generate",
                "--device",
                "wgpu",
                "--weights",
                "dense",
                "--max-new-tokens",
                "1",
                "--prompt",
                "x",
                "--model",
            ])
            .arg(fixture("tiny-llama.gguf"))
            .output()
            .unwrap();
        !String::from_utf8_lossy(&out.stderr).contains("no usable GPU adapter")
    });
    if !ok {
        assert!(
            std::env::var("DRAFTSMITH_REQUIRE_WGPU").as_deref() != Ok("1"),
            "no wgpu adapter: install Mesa's lavapipe (`apt install mesa-vulkan-drivers`)"
        );
        eprintln!("skipped: no wgpu adapter (Vulkan, Metal or DX12)");
    }
    ok
}

#[test]
fn generate_on_wgpu_equals_the_dense_cpu_path() {
    if have_adapter() {
        gpu::generate_equals_the_dense_cpu_path("wgpu");
    }
}

#[test]
fn redrafter_pipeline_and_every_method_on_wgpu() {
    if have_adapter() {
        gpu::redrafter_pipeline_and_every_method("wgpu");
    }
}

#[test]
fn tokenswift_trains_and_evaluates_on_wgpu() {
    if have_adapter() {
        gpu::tokenswift_trains_and_evaluates("wgpu");
    }
}
