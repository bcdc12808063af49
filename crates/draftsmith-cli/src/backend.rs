//! Backend selection: burn's `flex` CPU backend by default, CUDA with `--features cuda`, wgpu
//! (Vulkan / Metal / DX12, and Mesa's software Vulkan driver lavapipe in CI) with the `wgpu`
//! feature (on by default).

use clap::ValueEnum;

/// The CPU backend.
pub type Cpu = burn::backend::Flex;
/// The GPU backend.
#[cfg(feature = "cuda")]
pub type Gpu = burn::backend::Cuda;
/// The portable GPU backend: burn-wgpu, sharing burn's CubeCL kernels with burn-cuda.
#[cfg(feature = "wgpu")]
pub type Wgpu = burn::backend::Wgpu;

/// Where the target model runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum DeviceKind {
    /// burn `flex` on the CPU (quantized matmul kernels by default).
    #[default]
    Cpu,
    /// burn-cuda on GPU 0 (binary built with `--features cuda`).
    Cuda,
    /// burn-wgpu on the default adapter: Vulkan, Metal or DX12 (in the default build; not in
    /// one built with `--no-default-features`).
    Wgpu,
}

#[cfg(feature = "cuda")]
pub use draftsmith_model::cuda_driver_present;

/// Runs `$body` with `$B` bound to the selected backend type and `$device` to its device.
#[macro_export]
macro_rules! with_backend {
    ($kind:expr, |$B:ident, $device:ident| $body:expr) => {{
        match $kind {
            $crate::backend::DeviceKind::Cpu => {
                type $B = $crate::backend::Cpu;
                let $device = burn::backend::flex::FlexDevice;
                $body
            }
            $crate::backend::DeviceKind::Cuda => $crate::with_cuda!(|$B, $device| $body),
            $crate::backend::DeviceKind::Wgpu => $crate::with_wgpu!(|$B, $device| $body),
        }
    }};
}

#[cfg(feature = "cuda")]
#[macro_export]
macro_rules! with_cuda {
    (|$B:ident, $device:ident| $body:expr) => {{
        if !$crate::backend::cuda_driver_present() {
            anyhow::bail!("--device cuda: no NVIDIA driver (libcuda.so) found on this machine");
        }
        type $B = $crate::backend::Gpu;
        let $device = burn::backend::cuda::CudaDevice::new(0);
        $body
    }};
}

#[cfg(not(feature = "cuda"))]
#[macro_export]
macro_rules! with_cuda {
    (|$B:ident, $device:ident| $body:expr) => {{
        anyhow::bail!(
            "--device cuda: this binary was built without CUDA; rebuild with `cargo build --release --features cuda`"
        )
    }};
}

/// The default wgpu adapter, or a clear error where there is none: burn-wgpu panics instead of
/// returning one, so a one-element tensor is made and read back with the panic caught.
#[cfg(feature = "wgpu")]
pub fn wgpu_device() -> anyhow::Result<burn::backend::wgpu::WgpuDevice> {
    use burn::tensor::Tensor;
    let device = burn::backend::wgpu::WgpuDevice::DefaultDevice;
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let probe = std::panic::catch_unwind(|| Tensor::<Wgpu, 1>::zeros([1], &device).into_data());
    std::panic::set_hook(hook);
    if probe.is_err() {
        anyhow::bail!("--device wgpu: no usable GPU adapter (Vulkan, Metal or DX12) found. On Linux without a GPU, Mesa's software driver works: `apt install mesa-vulkan-drivers`");
    }
    Ok(device)
}

#[cfg(feature = "wgpu")]
#[macro_export]
macro_rules! with_wgpu {
    (|$B:ident, $device:ident| $body:expr) => {{
        type $B = $crate::backend::Wgpu;
        let $device = $crate::backend::wgpu_device()?;
        $body
    }};
}

#[cfg(not(feature = "wgpu"))]
#[macro_export]
macro_rules! with_wgpu {
    (|$B:ident, $device:ident| $body:expr) => {{
        anyhow::bail!(
            "--device wgpu: this binary was built without wgpu; rebuild with `cargo build --release --features wgpu`"
        )
    }};
}
