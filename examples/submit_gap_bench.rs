//! Micro-benchmark: how long the GPU sits idle between one submission and the next when
//! the host keeps several queued, and what each part of a decode step's submission adds:
//! the parameter upload every batch carries, the copy of a token into a fresh mappable
//! buffer with its mapping, and the number of dispatches. Each batch is a chain of trivial
//! dependent dispatches; the GPU's span per batch and the idle between batches come from
//! two timestamps per batch (run with RULLAMA_PROFILE=1). Prints numbers only.
//!
//! `RULLAMA_PROFILE=1 cargo run --release --example submit_gap_bench [batches]`

use std::sync::Arc;

use rullama::gpu::{Access, Batch, Gpu, KernelSource, Kernels, kernel};

const CODE: &str = r#"
struct P { i: u32, spin: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> buf: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32) {
    if (lid == 0u) {
        // A dependent chain of `spin` steps keeps the GPU busy long enough for the host
        // to stay ahead of it.
        var x = buf[0] + p.i;
        for (var j = 0u; j < p.spin; j++) {
            x = x * 1664525u + 1013904223u;
        }
        buf[0] = x;
    }
}
"#;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn main() -> rullama::Result<()> {
    let batches: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(100);
    let k = Kernels::new(Gpu::get()?);
    println!("adapter: {} ({:?})", k.gpu.info.name, k.gpu.info.backend);
    if !k.gpu.timestamps {
        println!("no GPU timestamps: run with RULLAMA_PROFILE=1 on an adapter that has them");
        return Ok(());
    }
    let kern = k.get("bench/gap", || KernelSource { name: "bench/gap".into(), code: CODE.into(), entry: "main", buffers: vec![Access::ReadWrite] })?;
    let buf = kernel::upload(&k.gpu, "buf", &[0u8; 256]);
    // (dispatches per batch, spin steps per dispatch): the spinning shapes keep the
    // host ahead, so their idle is the GPU's own between submissions.
    for (per, spin) in [(1usize, 0u32), (1, 100_000), (8, 12_000), (95, 0), (95, 1_000)] {
        for staged in [false, true] {
            // Warm up, then drop the spans of everything before the measured batches.
            let mut stagings = Vec::new();
            for round in 0..2 {
                let _ = kernel::batch_spans(&k.gpu)?;
                for _ in 0..batches {
                    let mut b = Batch::new(Arc::clone(&k.gpu), per);
                    for i in 0..per {
                        b.dispatch(&kern, &[&buf], &[i as u32, spin, 0, 0], [1, 1, 1])?;
                    }
                    let staging = staged.then(|| {
                        let s = k.gpu.device.create_buffer(&wgpu::BufferDescriptor {
                            label: Some("token"),
                            size: 4,
                            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                            mapped_at_creation: false,
                        });
                        b.copy(&buf, 0, &s, 0, 4);
                        s
                    });
                    b.submit()?;
                    if let Some(s) = staging {
                        s.slice(..).map_async(wgpu::MapMode::Read, |_| {});
                        stagings.push(s);
                    }
                }
                k.gpu.wait()?;
                stagings.clear();
                if round == 1 {
                    let spans = kernel::batch_spans(&k.gpu)?;
                    let span = median(spans.iter().map(|s| s.1 - s.0).collect());
                    let gap = median(spans.windows(2).map(|w| w[1].0 - w[0].1).collect());
                    println!("{per:>3} dispatches of {spin:>6} spin steps per batch, token copy and map {}: span {span:7.1} us, idle between batches {gap:6.1} us", if staged { "on " } else { "off" });
                }
            }
        }
    }
    Ok(())
}
