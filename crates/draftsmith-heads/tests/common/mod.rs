//! Helpers shared by the heads crate's integration tests.

/// `n` values spread over about [-1.7, 1.7] (unit variance), fixed by `seed`: test inputs that
/// are the same on every run (burn's `Tensor::random` is not seeded, so a threshold on what a
/// few training steps reach could pass or fail by the draw).
pub fn spread(n: usize, seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 2.0 * 3f32.sqrt()
        })
        .collect()
}
