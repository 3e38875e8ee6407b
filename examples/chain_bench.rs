//! Micro-benchmark: what a dependent step costs inside one dispatch against between
//! dispatches. A chain of `stages` steps, each `per` workgroups that read the whole
//! previous vector (as a matvec reads x) and write their slice of the next, runs either as
//! one dispatch per step, or as one dispatch whose workgroups take tickets from an atomic
//! counter (so a workgroup's producers have all started before it) and wait, spinning on the
//! previous step's arrival counter, for the step before theirs. The vectors ping-pong
//! between two halves of one buffer, so a stale cached read would show: every result is
//! checked against the host. Prints numbers only.
//!
//! `cargo run --release --example chain_bench [reps]` (RULLAMA_ADAPTER picks the GPU).

use std::sync::Arc;
use std::time::Instant;

use rullama::gpu::{Access, Batch, Gpu, KernelSource, Kernels, kernel};

const N: u32 = 2048;

const CODE: &str = r#"
struct P { stages: u32, per: u32, chain: u32, stage: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> ctr: array<atomic<u32>>;
@group(0) @binding(2) @coherent var<storage, read_write> buf: array<f32>;
var<workgroup> tk: u32;
var<workgroup> red: array<f32, 256>;
const N: u32 = 2048u;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    var t = wg.x + p.stage * p.per;
    if (p.chain != 0u) {
        if (lid == 0u) {
            tk = atomicAdd(&ctr[0], 1u);
        }
        t = workgroupUniformLoad(&tk);
    }
    let s = t / p.per;
    let g = t % p.per;
    if (p.chain != 0u && s > 0u) {
        if (lid == 0u) {
            var spins = 0u;
            while (atomicLoad(&ctr[s]) < p.per && spins < 100000000u) {
                spins += 1u;
            }
            if (spins >= 100000000u) {
                atomicAdd(&ctr[p.stages + 2u], 1u);
            }
        }
        storageBarrier();
    }
    let src = (s % 2u) * N;
    let dst = ((s + 1u) % 2u) * N;
    var acc = 0.0;
    for (var i = lid; i < N; i += 256u) {
        acc += buf[src + i];
    }
    red[lid] = acc;
    workgroupBarrier();
    for (var h = 128u; h > 0u; h >>= 1u) {
        if (lid < h) {
            red[lid] += red[lid + h];
        }
        workgroupBarrier();
    }
    let total = u32(red[0]);
    let chunk = N / p.per;
    for (var i = lid; i < chunk; i += 256u) {
        let j = g * chunk + i;
        buf[dst + j] = f32((j * 3u + total) % 5u);
    }
    if (p.chain != 0u) {
        storageBarrier();
        if (lid == 0u) {
            let n = atomicAdd(&ctr[s + 1u], 1u);
            if (s + 1u == p.stages && n + 1u == p.per) {
                for (var i = 0u; i <= p.stages; i++) {
                    atomicStore(&ctr[i], 0u);
                }
            }
        }
    }
}
"#;

/// The host's result of `stages` steps from `v` (the first half of the buffer).
fn expected(stages: u32, v: &[f32]) -> Vec<f32> {
    let mut cur = v.to_vec();
    for _ in 0..stages {
        let total = cur.iter().sum::<f32>() as u32;
        cur = (0..N).map(|j| ((j * 3 + total) % 5) as f32).collect();
    }
    cur
}

fn main() -> rullama::Result<()> {
    let reps: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(50);
    let k = Kernels::new(Gpu::get()?);
    println!("adapter: {} ({:?})", k.gpu.info.name, k.gpu.info.backend);
    let kern = k.get("bench/chain", || KernelSource { name: "bench/chain".into(), code: CODE.into(), entry: "main", buffers: vec![Access::ReadWrite, Access::ReadWrite] })?;
    let init: Vec<f32> = (0..2 * N).map(|i| (i % 3) as f32).collect();
    for stages in [16u32] {
        for per in [8u32, 32, 128, 256, 512, 1024] {
            let ctr = kernel::upload(&k.gpu, "ctr", bytemuck::cast_slice(&vec![0u32; stages as usize + 4]));
            let mut results = Vec::new();
            for chain in [false, true] {
                let buf = kernel::upload(&k.gpu, "buf", bytemuck::cast_slice(&init));
                let record = |b: &mut Batch| {
                    if chain {
                        b.dispatch(&kern, &[&ctr, &buf], &[stages, per, 1, 0], [stages * per, 1, 1]).unwrap();
                    } else {
                        for s in 0..stages {
                            b.dispatch(&kern, &[&ctr, &buf], &[stages, per, 0, s], [per, 1, 1]).unwrap();
                        }
                    }
                };
                // One checked pass from the known start, then timed repetitions.
                let mut b = Batch::new(Arc::clone(&k.gpu), stages as usize + 1);
                record(&mut b);
                b.submit()?;
                let got = kernel::read_f32(&k.gpu, &buf, (stages as usize % 2) * N as usize, N as usize)?;
                let ok = got == expected(stages, &init[..N as usize]);
                let mut b = Batch::new(Arc::clone(&k.gpu), reps * (stages as usize + 1));
                for _ in 0..reps {
                    record(&mut b);
                }
                let t0 = Instant::now();
                b.submit()?;
                k.gpu.wait()?;
                let t = t0.elapsed().as_secs_f64() / (reps as f64 * stages as f64);
                results.push((t, ok));
            }
            let timeouts = kernel::read_back(&k.gpu, &ctr, (stages as u64 + 2) * 4, 4)?;
            println!(
                "{stages:>3} steps x {per:>3} workgroups: per step {:6.2} us as dispatches ({}), {:6.2} us chained in one ({}), spin timeouts {}",
                results[0].0 * 1e6,
                if results[0].1 { "ok" } else { "WRONG" },
                results[1].0 * 1e6,
                if results[1].1 { "ok" } else { "WRONG" },
                u32::from_le_bytes([timeouts[0], timeouts[1], timeouts[2], timeouts[3]])
            );
        }
    }
    Ok(())
}
