//! What a dependent step costs when consecutive dispatches hand over through memory
//! instead of a pipeline barrier, on the raw Vulkan driver. A chain of `stages` dispatches,
//! each `per` workgroups that read the whole previous vector (as a decode matvec reads x)
//! and write their slice of the next, runs either with a compute barrier after every
//! dispatch, or with no barriers at all: each workgroup first loads its own slice of an
//! independent "weights" buffer (k 16-byte loads an invocation), then its first invocation
//! spins until the previous dispatch's workgroups have all arrived (an atomic counter per
//! stage, or eight that its workgroups take in turn, incremented after a device-scope
//! storage barrier), and only then reads the vector, through `@coherent` storage. The
//! vectors ping-pong between two halves of one buffer and the final one is checked against
//! the host, so stale reads show (without `@coherent` an H200 served stale lines). A spin
//! gives up after 2^24 rounds and counts a failure, so a launch order that starved a
//! producer would show as an error, not a hang. Prints µs per dispatch.
//!
//! What it found on an H200 (docs/performance-log.md, forty-sixth session): with weights loaded
//! before the wait a hand-over saves 1.3-2.4 µs a dispatch against a barrier, without them
//! it loses 0.3-0.6 µs past ~100 workgroups; the same scheme in the engine's decode lost.
//!
//! `cargo run --release --example handover_bench [stages]`

use ash::vk;

#[path = "common/vk_device.rs"]
mod vk_device;
#[path = "common/vk_timed.rs"]
mod vk_timed;

const N: u32 = 2048;
/// Size of the weights buffer the stages read from in turn, larger than any L2.
const W_BYTES: u64 = 512 << 20;

fn shader(per: u32, k: u32, chain: bool, coherent: bool, spread: u32) -> String {
    let wlen = W_BYTES / 16;
    format!(
        r#"
const N: u32 = {N}u;
const PER: u32 = {per}u;
const K: u32 = {k}u;
const CHAIN: bool = {chain};
const WLEN: u32 = {wlen}u;
const SPREAD: u32 = {spread}u;
@group(0) @binding(0) var<storage, read_write> ctr: array<atomic<u32>>;
@group(0) @binding(1) {coh} var<storage, read_write> buf: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<vec4<u32>>;
var<workgroup> red: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    let s = wg.x / PER;
    let g = wg.x % PER;
    // The weights do not depend on the previous stage: loaded before the wait.
    var wv = vec4<u32>(0u);
    for (var i = 0u; i < K; i++) {{
        wv ^= w[(((s * PER + g) * K + i) * 256u + lid) % WLEN];
    }}
    if (CHAIN && s > 0u) {{
        if (lid < SPREAD) {{
            var spins = 0u;
            while (atomicLoad(&ctr[s * SPREAD + lid + 1u]) < PER / SPREAD && spins < (1u << 24u)) {{
                spins += 1u;
            }}
            if (spins >= (1u << 24u)) {{
                atomicAdd(&ctr[0], 1u);
            }}
        }}
        storageBarrier();
    }}
    let src = (s % 2u) * N;
    let dst = ((s + 1u) % 2u) * N;
    var acc = 0.0;
    for (var i = lid; i < N; i += 256u) {{
        acc += buf[src + i];
    }}
    red[lid] = acc;
    workgroupBarrier();
    for (var h = 128u; h > 0u; h >>= 1u) {{
        if (lid < h) {{
            red[lid] += red[lid + h];
        }}
        workgroupBarrier();
    }}
    let total = u32(red[0]) + (wv.x ^ wv.y ^ wv.z ^ wv.w);
    let chunk = N / PER;
    for (var i = lid; i < chunk; i += 256u) {{
        let j = g * chunk + i;
        buf[dst + j] = f32((j * 3u + total) % 5u);
    }}
    if (CHAIN) {{
        storageBarrier();
        if (lid == 0u) {{
            atomicAdd(&ctr[(s + 1u) * SPREAD + g % SPREAD + 1u], 1u);
        }}
    }}
}}
"#,
        coh = if coherent { "@coherent" } else { "" },
    )
}

/// The final vector a chain of `stages` leaves, computed on the host.
fn expected(stages: u32) -> Vec<f32> {
    let mut x = vec![0f32; N as usize];
    for _ in 0..stages {
        let total = x.iter().sum::<f32>() as u32;
        x = (0..N).map(|j| ((j * 3 + total) % 5) as f32).collect();
    }
    x
}

fn main() {
    let stages: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(400);
    unsafe { run(stages) }
}

unsafe fn run(stages: u32) {
    unsafe {
        let (_entry, instance, pd) = vk_device::pick(vk::API_VERSION_1_2);
        let t = vk_timed::timed(&instance, pd, vk::QueueFlags::COMPUTE);
        let (device, cb, qp) = (&t.device, t.cb, t.qp);
        let make = |size: u64, host: bool| {
            let usage = vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::TRANSFER_DST | vk::BufferUsageFlags::TRANSFER_SRC;
            let want = if host { vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT } else { vk::MemoryPropertyFlags::DEVICE_LOCAL };
            vk_timed::buffer(&instance, pd, device, size, usage, &[want])
        };
        let ctr = make(4 * (8 * stages as u64 + 16), false);
        let vec = make(8 * N as u64, false);
        let weights = make(W_BYTES, false);
        let readback = make(8 * N as u64 + 16, true);

        let binding = |i: u32| vk::DescriptorSetLayoutBinding::default().binding(i).descriptor_type(vk::DescriptorType::STORAGE_BUFFER).descriptor_count(1).stage_flags(vk::ShaderStageFlags::COMPUTE);
        let bindings = [binding(0), binding(1), binding(2)];
        let dsl = device.create_descriptor_set_layout(&vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings), None).unwrap();
        let layouts = [dsl];
        let pl = device.create_pipeline_layout(&vk::PipelineLayoutCreateInfo::default().set_layouts(&layouts), None).unwrap();
        let sizes = [vk::DescriptorPoolSize { ty: vk::DescriptorType::STORAGE_BUFFER, descriptor_count: 3 }];
        let pool = device.create_descriptor_pool(&vk::DescriptorPoolCreateInfo::default().max_sets(1).pool_sizes(&sizes), None).unwrap();
        let set = device.allocate_descriptor_sets(&vk::DescriptorSetAllocateInfo::default().descriptor_pool(pool).set_layouts(&layouts)).unwrap()[0];
        for (i, b) in [&ctr, &vec, &weights].iter().enumerate() {
            let bi = [vk::DescriptorBufferInfo { buffer: b.buffer, offset: 0, range: b.size }];
            device.update_descriptor_sets(&[vk::WriteDescriptorSet::default().dst_set(set).dst_binding(i as u32).descriptor_type(vk::DescriptorType::STORAGE_BUFFER).buffer_info(&bi)], &[]);
        }
        let pipeline = |src: &str| -> vk::Pipeline {
            let code = vk_timed::spirv(src);
            let module = device.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&code), None).unwrap();
            let stage = vk::PipelineShaderStageCreateInfo::default().stage(vk::ShaderStageFlags::COMPUTE).module(module).name(c"main");
            let info = vk::ComputePipelineCreateInfo::default().stage(stage).layout(pl).flags(vk::PipelineCreateFlags::DISPATCH_BASE);
            device.create_compute_pipelines(vk::PipelineCache::null(), &[info], None).unwrap()[0]
        };

        let rw = vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE | vk::AccessFlags::TRANSFER_READ;
        let all = vk::PipelineStageFlags::ALL_COMMANDS;
        let global = [vk::MemoryBarrier::default().src_access_mask(rw).dst_access_mask(rw)];
        let cs = vk::PipelineStageFlags::COMPUTE_SHADER;

        // One timed chain; returns (µs a dispatch, failed spins, whether the result is right).
        let time = |pipes: &[vk::Pipeline], per: u32, chain: bool| -> (f64, u32, bool) {
            t.begin();
            device.cmd_fill_buffer(cb, ctr.buffer, 0, vk::WHOLE_SIZE, 0);
            device.cmd_fill_buffer(cb, vec.buffer, 0, vk::WHOLE_SIZE, 0);
            device.cmd_pipeline_barrier(cb, all, all, vk::DependencyFlags::empty(), &global, &[], &[]);
            device.cmd_bind_descriptor_sets(cb, vk::PipelineBindPoint::COMPUTE, pl, 0, &[set], &[]);
            device.cmd_write_timestamp(cb, vk::PipelineStageFlags::TOP_OF_PIPE, qp, 0);
            for s in 0..stages {
                device.cmd_bind_pipeline(cb, vk::PipelineBindPoint::COMPUTE, pipes[s as usize % pipes.len()]);
                device.cmd_dispatch_base(cb, s * per, 0, 0, per, 1, 1);
                if !chain {
                    device.cmd_pipeline_barrier(cb, cs, cs, vk::DependencyFlags::empty(), &global, &[], &[]);
                }
            }
            device.cmd_write_timestamp(cb, vk::PipelineStageFlags::BOTTOM_OF_PIPE, qp, 1);
            device.cmd_pipeline_barrier(cb, all, all, vk::DependencyFlags::empty(), &global, &[], &[]);
            let src = (stages % 2) as u64 * 4 * N as u64;
            device.cmd_copy_buffer(cb, vec.buffer, readback.buffer, &[vk::BufferCopy { src_offset: src, dst_offset: 0, size: 4 * N as u64 }]);
            device.cmd_copy_buffer(cb, ctr.buffer, readback.buffer, &[vk::BufferCopy { src_offset: 0, dst_offset: 8 * N as u64, size: 4 }]);
            let us = t.submit();
            let ptr = device.map_memory(readback.memory, 0, readback.size, vk::MemoryMapFlags::empty()).unwrap() as *const u8;
            let out = std::slice::from_raw_parts(ptr as *const f32, N as usize).to_vec();
            let failed = *(ptr.add(8 * N as usize) as *const u32);
            device.unmap_memory(readback.memory);
            (us / stages as f64, failed, out == expected(stages))
        };

        println!("{stages} dispatches a chain; µs a dispatch (best of 5); k = 16-byte weight loads an invocation before the wait");
        for per in [8u32, 32, 128, 256, 512, 1024] {
            for k in [0u32, 4] {
                for (name, chain, coherent, spread) in [("barriers", false, false, 1), ("handover, coherent", true, true, 1), ("handover, 8 counters", true, true, 8)] {
                    let src = shader(per, k, chain, coherent, spread);
                    let pipes = [pipeline(&src), pipeline(&src)];
                    let mut best = f64::MAX;
                    let mut failed = 0;
                    let mut right = true;
                    for _ in 0..6 {
                        let (t, f, ok) = time(&pipes, per, chain);
                        best = best.min(t);
                        failed += f;
                        right &= ok;
                    }
                    println!("per {per:>4} k {k} {name:<20}: {best:6.2} us  failed spins {failed}  result {}", if right { "right" } else { "WRONG" });
                }
            }
        }
        device.device_wait_idle().unwrap();
    }
}
