//! The whole product on burn-cuda (`--device cuda`), the same checks as `tests/wgpu.rs`
//! (`gpu/mod.rs`): generate equals the dense CPU path's greedy ids, distill → train ReDrafter →
//! resume → eval of every method, TokenSwift training and eval, on the checked-in tiny model.
//! `cargo test --release -p draftsmith-cli --features cuda --test cuda` on a machine with an
//! NVIDIA GPU (`just test-cuda`); CI compiles it (`just check-cuda`) and has no GPU to run it.
//! To run a test binary built elsewhere, point `DRAFTSMITH_BIN` at a CUDA build of `draftsmith`
//! and `CARGO_MANIFEST_DIR` at this crate.
//!
//! Without an NVIDIA driver the tests are skipped (`DRAFTSMITH_REQUIRE_CUDA=1`: failed).
#![cfg(feature = "cuda")]

mod common;
mod gpu;

fn have_driver() -> bool {
    let present = draftsmith_model::cuda_driver_present();
    if !present {
        assert!(
            std::env::var("DRAFTSMITH_REQUIRE_CUDA").as_deref() != Ok("1"),
            "no NVIDIA driver (libcuda.so) on this machine"
        );
        eprintln!("skipped: no NVIDIA driver");
    }
    present
}

#[test]
fn generate_on_cuda_equals_the_dense_cpu_path() {
    if have_driver() {
        gpu::generate_equals_the_dense_cpu_path("cuda");
    }
}

#[test]
fn redrafter_pipeline_and_every_method_on_cuda() {
    if have_driver() {
        gpu::redrafter_pipeline_and_every_method("cuda");
    }
}

#[test]
fn tokenswift_trains_and_evaluates_on_cuda() {
    if have_driver() {
        gpu::tokenswift_trains_and_evaluates("cuda");
    }
}
