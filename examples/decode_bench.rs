//! Micro-benchmark of the small decode kernels one at a time: decode attention (split and
//! merged, as one workgroup per head, and with the new token's norms and RoPE done inside
//! against head_norm_rope before it, and what each part of that costs) at several depths,
//! the residual step, a matvec with and without the residual step folded in, the cost of
//! workgroup barriers, and matvecs whose weights come from memory against from cache. Each
//! figure is the time per dispatch over many dependent dispatches of one batch (so it
//! includes the per-dispatch cost a decode step pays). Prints numbers only.
//!
//! `cargo run --release --example decode_bench [reps]` (RULLAMA_ADAPTER picks the GPU).

use std::sync::Arc;
use std::time::Instant;

use rullama::gguf::GgmlType;
use rullama::gpu::attention::{self, DecodePrep, FreshKv, KvCaches};
use rullama::gpu::rope::{HeadGroup, head_norm_rope};
use rullama::gpu::matmul::{MatvecIn, ResidualIn, matvec_geglu, matvec_input};
use rullama::gpu::{Access, Batch, Gpu, GpuMatrix, KernelSource, Kernels, kernel, norm};

#[path = "common/warm.rs"]
mod warm;

/// Seconds per call of `record`, over `reps` calls recorded in one batch, timed warm.
fn time(k: &Kernels, reps: usize, record: &dyn Fn(&mut Batch)) -> f64 {
    let run = || {
        let mut b = Batch::new(Arc::clone(&k.gpu), 4 * reps);
        for _ in 0..reps {
            record(&mut b);
        }
        let t0 = Instant::now();
        b.submit().unwrap();
        k.gpu.wait().unwrap();
        Ok::<_, std::convert::Infallible>(t0.elapsed().as_secs_f64())
    };
    let Ok(t) = warm::best_warm(run);
    t / reps as f64
}

fn main() -> rullama::Result<()> {
    let reps: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200);
    let k = Kernels::new(Gpu::get()?);
    println!("adapter: {} ({:?})", k.gpu.info.name, k.gpu.info.backend);
    let f = |n: usize, v: f32| kernel::upload(&k.gpu, "v", bytemuck::cast_slice(&vec![v; n]));
    let empty = |n: usize| kernel::storage(&k.gpu, "o", (n * 4) as u64);
    // Attention at the 270M (4 heads, 1 KV head) and E2B sliding (8 heads, 1 KV head) shapes.
    for (heads, hd) in [(4usize, 256usize), (8, 256)] {
        let cap = 4096;
        let (q, kc, vc, out) = (f(heads * hd, 0.1), f(cap * hd, 0.01), f(cap * hd, 0.5), empty(heads * hd));
        let kv = KvCaches { k: &kc, v: &vc, f16: false };
        for keys in [16, 48, 256, 1024, 4096] {
            let split = time(&k, reps, &|b| attention::attention_split(&k, b, &q, 0, 1, heads, hd, kv, 1, hd, keys - 1, 0, 0.06, &out, 0).unwrap());
            let one = time(&k, reps / 4 + 2, &|b| attention::attention(&k, b, &q, 0, 1, heads, hd, kv, 1, hd, keys - 1, 0, 0.06, &out, 0).unwrap());
            let (w, kn, vn) = (f(hd, 1.0), f(hd, 0.2), f(hd, 0.3));
            // What the prep costs, part by part: q rotated only, q normed too, and the new
            // K and V (rotated, not normed) on top of a rotated q.
            let prep = |q_norm: bool, fresh: bool, kv_norm: bool| DecodePrep {
                q_norm: q_norm.then_some(Some(&w)),
                fresh: fresh.then(|| FreshKv { k: &kn, v: &vn, k_norm: kv_norm.then_some(Some(&w)), v_norm: kv_norm }),
                eps: 1e-6,
                base: 1e4,
                factors: None,
                pos_scale: 1.0,
            };
            let decode = |p: DecodePrep| time(&k, reps, &|b| attention::attention_decode(&k, b, &q, heads, hd, kv, 1, hd, keys - 1, 0, 0.06, &out, &p).unwrap());
            let fused = decode(prep(true, true, true));
            let parts = [decode(prep(false, false, false)), decode(prep(true, false, false)), decode(prep(false, true, false))];
            let apart = time(&k, reps, &|b| {
                let qg = HeadGroup { buf: &q, off: 0, heads, dim: hd, norm: Some(Some(&w)), rope: true, f16_out: None };
                let kg = HeadGroup { buf: &kn, off: 0, heads: 1, dim: hd, norm: Some(Some(&w)), rope: true, f16_out: None };
                let vg = HeadGroup { buf: &vn, off: 0, heads: 1, dim: hd, norm: Some(None), rope: false, f16_out: None };
                head_norm_rope(&k, b, qg, Some(kg), Some(vg), 1, keys - 1, 1e-6, 1e4, None, 1.0).unwrap();
                attention::attention_split(&k, b, &q, 0, 1, heads, hd, kv, 1, hd, keys - 1, 0, 0.06, &out, 0).unwrap();
            });
            println!(
                "attention {heads} heads hd {hd}, {keys:>4} keys: split+merge {:7.2} us, one workgroup per head {:8.2} us; with q/K/V norms and RoPE inside {:7.2} us, head_norm_rope before {:7.2} us",
                split * 1e6,
                one * 1e6,
                fused * 1e6,
                apart * 1e6
            );
            println!("  inside: q rotated only {:7.2} us, q normed {:7.2} us, new K and V unnormed {:7.2} us", parts[0] * 1e6, parts[1] * 1e6, parts[2] * 1e6);
        }
    }
    for n in [640usize, 1536] {
        let (a, x, y, w) = (f(n, 0.3), f(n, 1.0), empty(n), f(n, 1.1));
        let t = time(&k, reps, &|b| norm::residual_norm(&k, b, (&a, 0), (&x, 0), 1, n, &w, None, Some((&y, 0, &w)), 1e-6).unwrap());
        println!("residual_norm {n}: {:7.2} us", t * 1e6);
    }
    // The E2B q projection (Q4_K 2048 x 1536) and the 270M one (Q5_0 1024 x 640), plain and folded.
    for (ty, rows, cols) in [(GgmlType::Q4_K, 2048usize, 1536usize), (GgmlType::Q5_0, 1024, 640)] {
        let bytes = rows * cols / ty.block_elems() * ty.block_bytes();
        let mut data = vec![0u8; bytes];
        for b in data.chunks_exact_mut(ty.block_bytes()) {
            b[0..2].copy_from_slice(&half::f16::from_f32(0.01).to_le_bytes());
        }
        let w = GpuMatrix::upload(&k, "w", ty, cols, rows, &data)?;
        let (a, x, x2, y, nw) = (f(cols, 0.3), f(cols, 1.0), empty(cols), empty(rows), f(cols, 1.1));
        let plain = time(&k, reps, &|b| matvec_input(&k, b, &w, MatvecIn::Vector(&x, 0), &y, 0).unwrap());
        let r = ResidualIn { a: (&a, 0), x_in: (&x, 0), x_out: (&x2, 0), post: &nw, pre: Some(&nw), scale: 1.0, eps: 1e-6 };
        let folded = time(&k, reps, &|b| matvec_input(&k, b, &w, MatvecIn::Residual(r), &y, 0).unwrap());
        println!("matvec {ty} {rows}x{cols}: plain {:7.2} us, residual step folded in {:7.2} us", plain * 1e6, folded * 1e6);
    }
    // The cost of a workgroup barrier: one workgroup of 256 running `n` rounds of a
    // workgroup-memory exchange (write, barrier, read a neighbour's, barrier).
    for n in [0u32, 8, 32, 128] {
        let code = format!(
            "@group(0) @binding(0) var<uniform> p: vec4<u32>;\n@group(0) @binding(1) var<storage, read_write> o: array<f32>;\nvar<workgroup> s: array<f32, 256>;\n@compute @workgroup_size(256)\nfn main(@builtin(local_invocation_index) lid: u32) {{\n var v = f32(lid);\n for (var i = 0u; i < {n}u; i++) {{ s[lid] = v; workgroupBarrier(); v += s[(lid + 1u) % 256u]; workgroupBarrier(); }}\n o[lid] = v;\n}}\n"
        );
        let name = format!("bench/barriers{n}");
        let kern = k.get(&name, || KernelSource { name: name.clone(), code, entry: "main", buffers: vec![Access::ReadWrite] })?;
        let o = empty(256);
        let t = time(&k, reps, &|b| b.dispatch(&kern, &[&o], &[0u32; 4], [1, 1, 1]).unwrap());
        println!("one workgroup, {:>3} barriers: {:7.2} us", 2 * n, t * 1e6);
    }
    // The floor for the matvecs below: a kernel that only streams `bytes` (16-byte loads,
    // `per` of them in flight per invocation, summed) from memory, over enough copies to
    // pass through L2.
    for (bytes, copies) in [(1_769_472usize, 96usize), (10_616_832, 16), (7_962_624, 24), (15_925_248, 12), (21_233_664, 8), (110_100_480, 4), (330_301_440, 2)] {
        for per in [1u32, 4, 8] {
            let code = format!(
                "@group(0) @binding(0) var<uniform> p: vec4<u32>;\n@group(0) @binding(1) var<storage, read> src: array<vec4<u32>>;\n@group(0) @binding(2) var<storage, read_write> o: array<u32>;\n@compute @workgroup_size(256)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {{\n let n = arrayLength(&src);\n let total = nw.x * 256u;\n var s = vec4<u32>(0u);\n for (var b = gid.x; b < n; b += total * {per}u) {{\n  var r: array<vec4<u32>, {per}>;\n  for (var i = 0u; i < {per}u; i++) {{ r[i] = src[min(b + i * total, n - 1u)]; }}\n  for (var i = 0u; i < {per}u; i++) {{ s += r[i]; }}\n }}\n if (s.x == 12345u) {{ o[0] = s.y; }}\n}}\n"
            );
            let name = format!("bench/stream{per}");
            let kern = k.get(&name, || KernelSource { name: name.clone(), code, entry: "main", buffers: vec![Access::Read, Access::ReadWrite] })?;
            let srcs: Vec<wgpu::Buffer> = (0..copies).map(|_| kernel::storage(&k.gpu, "s", bytes as u64)).collect();
            let o = empty(4);
            let vec4s = bytes / 16;
            // One vec4 per invocation per step: as many workgroups as the GPU holds at once
            // (132 SMs x 8 on an H100) or fewer where the data is smaller.
            let groups = (vec4s / 256 / per as usize).clamp(1, 1056) as u32;
            let i = std::cell::Cell::new(0usize);
            let t = time(&k, (4 * copies).max(reps), &|b| {
                b.dispatch(&kern, &[&srcs[i.get() % copies], &o], &[0u32; 4], [groups, 1, 1]).unwrap();
                i.set(i.get() + 1);
            });
            println!("stream {:>6.2} MB, {per} loads in flight: {:7.2} us  {:7.1} GB/s", bytes as f64 / 1e6, t * 1e6, bytes as f64 / t / 1e9);
        }
    }
    // Matvecs as decode meets them: weights from memory, not cache (enough copies of the
    // matrix to pass through a 50 MB L2 before one is read again), against the same matrix
    // read again and again (from L2 where it fits); the last is E2B's LM head, the first two
    // E2B's [gate; up] of its double-wide and its other layers as decode runs them (residual
    // step folded in, GeGLU after).
    let shapes = [
        (GgmlType::Q4_K, 24576usize, 1536usize, 8usize, true),
        (GgmlType::Q4_K, 12288, 1536, 16, true),
        (GgmlType::Q4_K, 2048, 1536, 96, false),
        (GgmlType::Q5_0, 1024, 640, 384, false),
        (GgmlType::Q6_K, 1536, 6144, 32, false),
        (GgmlType::Q6_K, 1536, 12288, 16, false),
        (GgmlType::Q6_K, 262144, 1536, 2, false),
    ];
    for (ty, rows, cols, copies, pair) in shapes {
        let bytes = rows * cols / ty.block_elems() * ty.block_bytes();
        let mut data = vec![0u8; bytes];
        let at = if ty == GgmlType::Q6_K { 208 } else { 0 };
        for b in data.chunks_exact_mut(ty.block_bytes()) {
            b[at..at + 2].copy_from_slice(&half::f16::from_f32(0.01).to_le_bytes());
        }
        let ws: Vec<GpuMatrix> = (0..copies).map(|_| GpuMatrix::upload(&k, "w", ty, cols, rows, &data)).collect::<rullama::Result<_>>()?;
        let (a, x, x2, y, nw) = (f(cols, 0.3), f(cols, 1.0), empty(cols), empty(rows), f(cols, 1.1));
        let folded = MatvecIn::Residual(ResidualIn { a: (&a, 0), x_in: (&x, 0), x_out: (&x2, 0), post: &nw, pre: Some(&nw), scale: 1.0, eps: 1e-6 });
        let per = |n: usize| {
            let i = std::cell::Cell::new(0usize);
            time(&k, (4 * copies).max(reps), &|b| {
                let w = &ws[i.get() % n];
                if pair {
                    matvec_geglu(&k, b, w, folded, &y, 0).unwrap();
                } else {
                    matvec_input(&k, b, w, MatvecIn::Vector(&x, 0), &y, 0).unwrap();
                }
                i.set(i.get() + 1);
            })
        };
        // Each timed warm (`time`), so neither gains from going second.
        let (mem, one) = (per(copies), per(1));
        let what = if pair { " [gate; up], folded" } else { "" };
        println!("matvec {ty} {rows}x{cols}{what} from memory: {:7.2} us  {:7.1} GB/s; one copy read again: {:7.2} us", mem * 1e6, bytes as f64 / mem / 1e9, one * 1e6);
    }
    Ok(())
}
