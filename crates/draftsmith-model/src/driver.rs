//! Whether a GPU driver is there before a backend touches it.

/// Whether an NVIDIA driver can be loaded: checked before a CUDA device is created, because
/// burn-cuda panics in a device thread instead of returning an error when it is missing.
pub fn cuda_driver_present() -> bool {
    let candidates = [
        "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
        "/usr/lib64/libcuda.so.1",
        "/usr/local/nvidia/lib64/libcuda.so.1",
        "/usr/lib/wsl/lib/libcuda.so.1",
    ];
    if candidates.iter().any(|p| std::path::Path::new(p).exists()) {
        return true;
    }
    std::process::Command::new("ldconfig")
        .arg("-p")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("libcuda.so"))
        .unwrap_or(false)
}
