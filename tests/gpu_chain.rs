//! Chained dispatch (`rullama::gpu::chain`): dependent matvecs gathered into one dispatch
//! give bit for bit what the same kernels give as separate dispatches, chain after chain
//! (the counters reset), and no wait ever runs past its bound. The kernels themselves are
//! checked against the CPU in tests/gpu_matmul.rs; a chain runs the same code, only
//! scheduled differently, so anything but equality is a hand-over bug (a stale read, a
//! stage started early).

use std::sync::Arc;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rullama::gguf::GgmlType;
use rullama::gpu::chain::TIMEOUT_WORD;
use rullama::gpu::matmul::{MatvecIn, ResidualIn, matvec_geglu, matvec_input};
use rullama::gpu::{Batch, Gpu, GpuMatrix, Kernels, kernel};

fn random_matrix(rng: &mut ChaCha8Rng, ty: GgmlType, cols: usize, rows: usize) -> GpuMatrix {
    let k = Kernels::new(Gpu::get().unwrap());
    let bytes = cols * rows / ty.block_elems() * ty.block_bytes();
    let mut data: Vec<u8> = (0..bytes).map(|_| rng.random::<u8>()).collect();
    // Finite scales of both signs where the type has f16 ones.
    let scales: &[usize] = match ty {
        GgmlType::Q5_0 | GgmlType::Q8_0 => &[0],
        GgmlType::Q4_K => &[0, 2],
        GgmlType::Q6_K => &[208],
        _ => &[],
    };
    for block in data.chunks_exact_mut(ty.block_bytes()) {
        for &off in scales {
            let s = half::f16::from_f32(if rng.random::<bool>() { 0.01 } else { -0.01 });
            block[off..off + 2].copy_from_slice(&s.to_le_bytes());
        }
    }
    GpuMatrix::upload(&k, "w", ty, cols, rows, &data).unwrap()
}

/// The decode FFN's shape (o, then [gate; up] on the residual step, then down, then the next
/// layer's first projection on the next residual step), at the 270M layout's widths.
#[test]
fn chained_matvecs_equal_separate_dispatches() {
    let gpu = Gpu::get().expect("a GPU adapter (lavapipe in CI: mesa-vulkan-drivers)");
    assert!(gpu.coherent, "the device offers no @coherent storage, so nothing is chained");
    let (d, h, f) = (640usize, 1024usize, 2048usize);
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let o = random_matrix(&mut rng, GgmlType::Q4_K, h, d);
    let gate_up = random_matrix(&mut rng, GgmlType::Q5_0, d, 2 * f);
    let down = random_matrix(&mut rng, GgmlType::Q6_K, f, d);
    let q = random_matrix(&mut rng, GgmlType::Q8_0, d, h);
    let mut vec = |n: usize| -> Vec<f32> { (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect() };
    let (attn, x, post, pre, post2) = (vec(h), vec(d), vec(d), vec(d), vec(d));
    for subgroups in [false, true] {
        let mut outs = Vec::new();
        for chained in [false, true] {
            let mut k = Kernels::new(Arc::clone(&gpu));
            k.use_subgroups = subgroups && gpu.subgroups;
            k.chain = chained;
            let up = |v: &[f32]| kernel::upload(&gpu, "v", bytemuck::cast_slice(v));
            let (attn, x, post, pre, post2) = (up(&attn), up(&x), up(&post), up(&pre), up(&post2));
            let [a, x2, g, ffn, x3, y] = [d, d, f, d, d, h].map(|n| kernel::storage(&gpu, "out", (n * 4) as u64));
            let mut results = Vec::new();
            // Three rounds: a chain must leave its counters ready for the next.
            for _ in 0..3 {
                let mut b = Batch::new(Arc::clone(&gpu), 16);
                b.begin_chain(&k);
                matvec_input(&k, &mut b, &o, MatvecIn::Vector(&attn, 0), &a, 0).unwrap();
                let r = ResidualIn { a: (&a, 0), x_in: (&x, 0), x_out: (&x2, 0), post: &post, pre: Some(&pre), scale: 1.0, eps: 1e-6 };
                matvec_geglu(&k, &mut b, &gate_up, MatvecIn::Residual(r), &g, 0).unwrap();
                matvec_input(&k, &mut b, &down, MatvecIn::Vector(&g, 0), &ffn, 0).unwrap();
                let r = ResidualIn { a: (&ffn, 0), x_in: (&x2, 0), x_out: (&x3, 0), post: &post2, pre: None, scale: 0.5, eps: 1e-6 };
                matvec_input(&k, &mut b, &q, MatvecIn::Residual(r), &y, 0).unwrap();
                b.end_chain(&k).unwrap();
                // As many matvecs (11 buffers each) per chain as the device binds.
                let per_chain = ((gpu.limits.max_storage_buffers_per_shader_stage as usize - 1) / 11).min(4);
                assert!(per_chain >= 2, "the device binds too few buffers to chain two matvecs");
                assert_eq!(b.steps(), if chained { 4usize.div_ceil(per_chain) } else { 4 });
                b.submit().unwrap();
                let read = |buf: &wgpu::Buffer, n: usize| kernel::read_f32(&gpu, buf, 0, n).unwrap();
                results.push([read(&a, d), read(&x2, d), read(&g, f), read(&ffn, d), read(&x3, d), read(&y, h)]);
            }
            assert!(results.iter().all(|r| r == &results[0]), "rounds differ (chained: {chained})");
            if chained {
                let ctr = k.scratch("chain/counters", 4);
                let words: Vec<u32> = bytemuck::pod_collect_to_vec(&kernel::read_back(&gpu, &ctr, 0, ctr.size()).unwrap());
                assert_eq!(words[TIMEOUT_WORD], 0, "a chain stage waited past its bound");
                assert!(words[..TIMEOUT_WORD].iter().all(|&w| w == 0), "counters left set: {words:?}");
            }
            assert!(results[0].iter().flatten().all(|v| v.is_finite()), "non-finite output");
            outs.push(results.swap_remove(0));
        }
        for (i, name) in ["o", "residual", "geglu", "down", "residual 2", "q"].iter().enumerate() {
            assert_eq!(outs[0][i], outs[1][i], "{name} differs chained (subgroups: {subgroups})");
        }
    }
}

/// A batch submitted between begin_chain and end_chain is an error, not a lost dispatch.
#[test]
fn unfinished_chain_is_an_error() {
    let gpu = Gpu::get().unwrap();
    let mut k = Kernels::new(Arc::clone(&gpu));
    k.chain = true;
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let w = random_matrix(&mut rng, GgmlType::Q8_0, 64, 32);
    let x = kernel::upload(&gpu, "x", bytemuck::cast_slice(&[0.5f32; 64]));
    let y = kernel::storage(&gpu, "y", 32 * 4);
    let mut b = Batch::new(Arc::clone(&gpu), 4);
    b.begin_chain(&k);
    matvec_input(&k, &mut b, &w, MatvecIn::Vector(&x, 0), &y, 0).unwrap();
    assert!(b.submit().is_err());
}
