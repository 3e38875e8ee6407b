//! What one dependent dispatch costs on the GPU through wgpu, against `barrier_bench`'s raw
//! Vulkan figure: a chain of N dispatches of a kernel that reads what the one before wrote,
//! recorded in one batch (one compute pass, as a decode step is), timed from the pass's
//! first GPU timestamp to its last (`RULLAMA_PROFILE=1` batch spans, set here). Variants:
//! bindings (1, or 11 as a decode matvec binds, 4 of them writable), workgroups (1, 132),
//! and two pipelines alternating. Prints µs per dispatch.
//!
//! `cargo run --release --example dispatch_cost_bench [n]`

use std::sync::Arc;

use rullama::gpu::{Access, Batch, Gpu, KernelSource, Kernels, kernel};

/// The chain's kernel; `step` tells two pipelines of the same bindings apart.
fn source(name: &str, bindings: usize, writable: usize, step: u32) -> KernelSource {
    let mut code = String::from("struct P { n: u32, pad: u32 }\n@group(0) @binding(0) var<uniform> p: P;\n");
    for i in 0..bindings {
        let access = if i < writable { "read_write" } else { "read" };
        code += &format!("@group(0) @binding({}) var<storage, {access}> b{i}: array<u32>;\n", i + 1);
    }
    // Workgroup 0 carries the chain through b0[0]; the others read it too.
    code += "@compute @workgroup_size(64)\nfn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) l: u32) {\n";
    code += "    if (l == 0u) {\n        var v = b0[0] + p.n;\n";
    for i in writable..bindings {
        code += &format!("        v += b{i}[0];\n");
    }
    code += &format!("        if (wg.x == 0u) {{ b0[0] = v + {step}u; }} else {{ b0[wg.x] = v; }}\n    }}\n}}\n");
    let mut buffers = vec![Access::ReadWrite; writable];
    buffers.extend(vec![Access::Read; bindings - writable]);
    KernelSource { name: name.to_string(), code, entry: "main", buffers }
}

fn main() -> rullama::Result<()> {
    // SAFETY: set before any thread reads the environment.
    unsafe { std::env::set_var("RULLAMA_PROFILE", "1") };
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(500);
    let k = Kernels::new(Gpu::get()?);
    println!("adapter: {} ({:?}), {n} dispatches a chain", k.gpu.info.name, k.gpu.info.backend);
    let bufs: Vec<wgpu::Buffer> = (0..11).map(|_| kernel::storage(&k.gpu, "b", 4096)).collect();
    for (bindings, writable, groups, two) in [(1, 1, 1, false), (11, 4, 1, false), (11, 4, 132, false), (11, 4, 1, true), (11, 4, 132, true)] {
        let a = k.get(&format!("chain/{bindings}/{writable}/a"), || source("a", bindings, writable, 1))?;
        let b2 = k.get(&format!("chain/{bindings}/{writable}/b"), || source("b", bindings, writable, 2))?;
        let refs: Vec<&wgpu::Buffer> = bufs.iter().take(bindings).collect();
        let mut best = f64::MAX;
        for _ in 0..5 {
            let mut b = Batch::new(Arc::clone(&k.gpu), n);
            for i in 0..n {
                let kern = if two && i % 2 == 1 { &b2 } else { &a };
                b.dispatch(kern, &refs, &[i as u32, 0u32], [groups, 1, 1])?;
            }
            b.submit()?;
            k.gpu.wait()?;
            let spans = kernel::batch_spans(&k.gpu)?;
            if let Some(&(s, e)) = spans.last() {
                best = best.min((e - s) / n as f64);
            }
        }
        println!("{bindings:>2} bindings ({writable} writable), {groups:>3} workgroups, {}: {best:.2} µs a dispatch", if two { "two pipelines" } else { "one pipeline" });
    }
    Ok(())
}
