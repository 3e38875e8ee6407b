//! Micro-benchmark of the GPU matmul: decode matvec time and bandwidth (GB/s of weights
//! read) at the shapes of Gemma 4 E2B's and Gemma 3 270M's layers and LM heads, and
//! prefill (512 tokens) GFLOP/s at 2048x2048. Prints numbers only; weights are random valid blocks (speed does
//! not depend on the values).
//!
//! `cargo run --release --example matmul_bench [reps]` (RULLAMA_ADAPTER picks the GPU;
//! BENCH_TOKENS sets the prefill token count, BENCH_COOP_ONLY=1 times only tensor-core
//! prefill).

use std::sync::Arc;
use std::time::Instant;

use rullama::gguf::GgmlType;
use rullama::gpu::matmul::matmul;
use rullama::gpu::{Batch, Gpu, GpuMatrix, Kernels, kernel};

#[path = "common/warm.rs"]
mod warm;

/// Random blocks with finite f16 scales at the type's scale fields (first f16 of the block,
/// or the last for Q6_K).
fn random_blocks(ty: GgmlType, cols: usize, rows: usize, seed: u64) -> Vec<u8> {
    let mut s = seed;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let bytes = cols * rows / ty.block_elems() * ty.block_bytes();
    let mut data: Vec<u8> = (0..bytes).map(|_| next() as u8).collect();
    let scale = half::f16::from_f32(0.01).to_le_bytes();
    let field = if ty == GgmlType::Q6_K { 208 } else { 0 };
    for b in data.chunks_exact_mut(ty.block_bytes()) {
        b[field..field + 2].copy_from_slice(&scale);
        if matches!(ty, GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q4_1 | GgmlType::Q5_1) {
            b[2..4].copy_from_slice(&scale);
        }
    }
    data
}

/// Seconds per matmul, over `reps` dispatches recorded in one batch, timed warm.
fn time(k: &Kernels, w: &GpuMatrix, n: usize, reps: usize) -> rullama::Result<f64> {
    let x = kernel::upload(&k.gpu, "x", bytemuck::cast_slice(&vec![0.5f32; n * w.cols]));
    let y = kernel::storage(&k.gpu, "y", (n * w.rows * 4) as u64);
    let run = |reps: usize| -> rullama::Result<f64> {
        let mut b = Batch::new(Arc::clone(&k.gpu), reps * w.tiles().len() * 4 /* tensor-core matmuls add split dispatches */);
        for _ in 0..reps {
            matmul(k, &mut b, w, &x, 0, n, &y, 0)?;
        }
        let t0 = Instant::now();
        b.submit()?;
        k.gpu.wait()?;
        Ok(t0.elapsed().as_secs_f64())
    };
    Ok(warm::best_warm(|| run(reps))? / reps as f64)
}

fn main() -> rullama::Result<()> {
    let reps: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200);
    let k = Kernels::new(Gpu::get()?);
    println!("adapter: {} ({:?}), subgroups {}", k.gpu.info.name, k.gpu.info.backend, k.gpu.subgroups);
    // Decode shapes of the Gemma 4 E2B and Gemma 3 270M layers (rows x cols).
    let shapes = [
        (GgmlType::Q4_K, 12288, 1536, "E2B [gate; up]"),
        (GgmlType::Q4_K, 2048, 1536, "E2B q"),
        (GgmlType::Q4_K, 1536, 6144, "E2B down"),
        (GgmlType::Q6_K, 1536, 6144, "E2B down (Q6_K layers)"),
        (GgmlType::Q6_K, 262_144, 1536, "E2B LM head"),
        (GgmlType::Q5_0, 1024, 640, "270M q"),
        (GgmlType::Q8_0, 262_144, 640, "270M LM head"),
        (GgmlType::F16, 2048, 2048, "F16"),
    ];
    for (ty, rows, cols, what) in shapes.into_iter().filter(|_| std::env::var_os("BENCH_COOP_ONLY").is_none()) {
        let w = GpuMatrix::upload(&k, "w", ty, cols, rows, &random_blocks(ty, cols, rows, 42))?;
        let r = if rows > 100_000 { reps / 4 } else { reps };
        let t = time(&k, &w, 1, r.max(2))?;
        println!("{ty:5} decode  {rows:>6}x{cols:<5} {what:24}: {:8.2} us  {:7.1} GB/s", t * 1e6, w.bytes() as f64 / t / 1e9);
    }
    // Prefill (512 tokens) at the layer shapes, on the f32 kernel and on tensor cores
    // where the device has them.
    let prefill = [
        (GgmlType::Q4_K, 2048, 2048, "square"),
        (GgmlType::Q4_K, 12288, 1536, "E2B [gate; up]"),
        (GgmlType::Q4_K, 2048, 1536, "E2B q"),
        (GgmlType::Q4_K, 1536, 2048, "E2B o"),
        (GgmlType::Q6_K, 1536, 6144, "E2B down (Q6_K)"),
        (GgmlType::Q5_0, 1024, 640, "270M q"),
        (GgmlType::Q5_0, 4096, 640, "270M [gate; up]"),
    ];
    let mut kinds = vec![false];
    if k.gpu.coop {
        kinds.push(true);
    }
    let tokens: usize = std::env::var("BENCH_TOKENS").ok().and_then(|v| v.parse().ok()).unwrap_or(512);
    if std::env::var_os("BENCH_COOP_ONLY").is_some() {
        kinds.retain(|c| *c);
    }
    for coop in kinds {
        let mut kc = Kernels::new(Arc::clone(&k.gpu));
        kc.use_coop = coop;
        for (ty, rows, cols, what) in prefill {
            let n = tokens;
            let w = GpuMatrix::upload(&kc, "w", ty, cols, rows, &random_blocks(ty, cols, rows, 42))?;
            let t = time(&kc, &w, n, (reps / 10).max(2))?;
            let flops = 2.0 * (n * rows * cols) as f64 / t / 1e9;
            println!("{ty:5} prefill {rows:>6}x{cols:<5} x {n} {what:16} tensor cores {coop:5}: {:9.2} us  {flops:8.1} GFLOP/s", t * 1e6);
        }
    }
    Ok(())
}
