//! GPU kernels against their CPU references (`cpu::ops`), on random inputs with odd sizes.
//! Runs on whatever adapter wgpu finds (lavapipe in CI).
//!
//! Tolerances: f32 sums in a different order differ by a few ulp per term; for the
//! reductions here (≤ a few thousand terms of O(1) values) 1e-5 relative is ample while
//! any indexing or formula mistake shows as O(1) error.

use std::sync::Arc;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rullama::cpu::ops;
use rullama::gpu::{Batch, Gpu, Kernels, kernel};

fn kernels() -> Kernels {
    Kernels::new(Gpu::get().expect("a GPU adapter (lavapipe in CI: mesa-vulkan-drivers)"))
}

fn rand_vec(rng: &mut ChaCha8Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(-2.0f32..2.0)).collect()
}

fn max_rel(got: &[f32], want: &[f32]) -> f32 {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-6);
    got.iter().zip(want).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max) / scale
}

fn up(k: &Kernels, v: &[f32]) -> wgpu::Buffer {
    kernel::upload(&k.gpu, "test", bytemuck::cast_slice(v))
}

#[test]
fn rms_norm_matches_cpu() {
    let k = kernels();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for (rows, n, weighted, off) in [(1, 1, true, 0), (3, 37, true, 5), (7, 256, false, 0), (2, 1153, true, 3)] {
        let x = rand_vec(&mut rng, off + rows * n);
        let w = rand_vec(&mut rng, n);
        let xb = up(&k, &x);
        let wb = up(&k, &w);
        let mut b = Batch::new(Arc::clone(&k.gpu), 4);
        rullama::gpu::norm::rms_norm(&k, &mut b, &xb, off, rows, n, weighted.then_some(&wb), 1e-6).unwrap();
        b.submit().unwrap();
        let got = kernel::read_f32(&k.gpu, &xb, 0, x.len()).unwrap();
        let mut want = x.clone();
        ops::rms_norm(&mut want[off..], n, weighted.then_some(&w[..]), 1e-6);
        assert_eq!(&got[..off], &x[..off], "elements before the offset are untouched");
        let e = max_rel(&got, &want);
        assert!(e < 1e-5, "rows {rows} n {n}: rel err {e}");
    }
}
