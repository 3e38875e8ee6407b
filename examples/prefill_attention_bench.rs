//! Micro-benchmark of prefill attention: a prompt's queries over its own keys at the
//! Gemma 3 270M (4 heads on one KV head) and Gemma 4 E2B (8 heads on one KV head, sliding
//! 256-wide and global 512-wide layers) shapes, by blocks of query rows
//! (attention_tiled.wgsl) and by per-token workgroups (attention.wgsl). Each figure is the
//! time per call over many calls in one batch, timed warm. Prints numbers only.
//!
//! `cargo run --release --example prefill_attention_bench [reps]` (RULLAMA_ADAPTER picks the GPU).

use std::sync::Arc;
use std::time::Instant;

use rullama::gpu::attention::{self, KvCaches};
use rullama::gpu::{Batch, Gpu, Kernels, kernel};

#[path = "common/warm.rs"]
mod warm;

fn main() -> rullama::Result<()> {
    let reps: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(20);
    let gpu = Gpu::get()?;
    println!("adapter: {} ({:?})", gpu.info.name, gpu.info.backend);
    let tiled = Kernels::new(Arc::clone(&gpu));
    let mut rows = Kernels::new(Arc::clone(&gpu));
    rows.tiled_attention = false;
    // Varied values, so the softmax weights are not all equal.
    let f = |n: usize, s: f32| {
        let v: Vec<f32> = (0..n).map(|i| s * (((i * 7919) % 1000) as f32 / 500.0 - 1.0)).collect();
        kernel::upload(&gpu, "v", bytemuck::cast_slice(&v))
    };
    for (name, heads, hd, window) in [("270M", 4usize, 256usize, 512usize), ("E2B sliding", 8, 256, 512), ("E2B global", 8, 512, 0)] {
        for tokens in [512usize, 2048] {
            let (q, kc, vc) = (f(tokens * heads * hd, 0.5), f(tokens * hd, 0.5), f(tokens * hd, 1.0));
            let out = kernel::storage(&gpu, "out", (tokens * heads * hd * 4) as u64);
            let kv = KvCaches { k: &kc, v: &vc, f16: false };
            let time = |k: &Kernels| {
                let run = |n: usize| {
                    let mut b = Batch::new(Arc::clone(&gpu), 8 * n);
                    for _ in 0..n {
                        attention::attention_split(k, &mut b, &q, 0, tokens, heads, hd, kv, 1, hd, 0, window, 0.06, &out, 0).unwrap();
                    }
                    let t0 = Instant::now();
                    b.submit().unwrap();
                    gpu.wait().unwrap();
                    Ok::<_, std::convert::Infallible>(t0.elapsed().as_secs_f64() / n as f64)
                };
                let Ok(t) = warm::best_warm(|| run(reps));
                t * 1e6
            };
            println!("{name:12} {tokens:5} tokens: blocks of rows {:8.1} us, per-token workgroups {:8.1} us", time(&tiled), time(&rows));
        }
    }
    Ok(())
}
