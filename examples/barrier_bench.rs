//! What one dependent compute dispatch costs on the raw Vulkan driver, below wgpu: a chain
//! of N dispatches, each reading what the previous one wrote, recorded in one command
//! buffer and timed by GPU timestamps, with the barrier between dispatches made several
//! ways (none, compute-only, the stage masks wgpu's Vulkan backend uses for storage
//! buffers, an execution dependency with no memory barrier, an event) and with 1 or 132
//! workgroups, the buffer plain or `@coherent`. Prints µs per dispatch and whether the
//! chain's count came out right. Compare with `decode_bench`'s "one workgroup, 0 barriers"
//! line, the same chain through wgpu.
//!
//! `cargo run --release --example barrier_bench [n] [workgroups,...] [invocations]`
//! (defaults: 500 dispatches, 1 and 132 workgroups of 64 invocations)

use ash::vk;

#[path = "common/vk_device.rs"]
mod vk_device;
#[path = "common/vk_timed.rs"]
mod vk_timed;

/// The chain's kernel. Dispatch `i` (a dynamic uniform offset) has workgroup `i mod
/// workgroups` add one to b[0]; the others read b[0] too, so other SMs hold its line when
/// they write it later: b[0] ends at the dispatch count only if each write was visible to
/// the next dispatch's reads. `COHERENT` is replaced by `@coherent` or nothing.
const SHADER: &str = "
struct P { i: u32 }
@group(0) @binding(0) COHERENT var<storage, read_write> b: array<u32>;
@group(0) @binding(1) var<uniform> p: P;
@compute @workgroup_size(WG_SIZE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>, @builtin(local_invocation_index) l: u32) {
    if (l == 0u) {
        let v = b[0];
        if (wg.x == p.i % nw.x) {
            b[0] = v + 1u;
        } else {
            b[64u + wg.x] = v;
        }
    }
}
";

#[derive(Clone, Copy, Debug)]
enum Sync {
    None,
    ComputeGlobal,
    ComputeBuffer,
    WgpuBuffer,
    AllCommands,
    /// COMPUTE -> COMPUTE with no memory barrier: orders execution, makes nothing visible.
    ExecutionOnly,
    /// vkCmdSetEvent after each dispatch, vkCmdWaitEvents (with a global memory barrier)
    /// and a reset before the next.
    Event,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: u32 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(500);
    let groups: Vec<u32> = args.get(2).map_or(vec![1, 132], |a| a.split(',').filter_map(|g| g.parse().ok()).collect());
    let size: u32 = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(64);
    unsafe { run(n, &groups, size) }
}

/// A buffer from `vk_timed::buffer` and, where its memory is host-visible, that memory mapped.
unsafe fn mapped(instance: &ash::Instance, pd: vk::PhysicalDevice, device: &ash::Device, size: u64, usage: vk::BufferUsageFlags, prefer: &[vk::MemoryPropertyFlags]) -> (vk::Buffer, *mut u32) {
    unsafe {
        let b = vk_timed::buffer(instance, pd, device, size, usage, prefer);
        let host = b.flags.contains(vk::MemoryPropertyFlags::HOST_VISIBLE);
        let ptr = if host { device.map_memory(b.memory, 0, b.size, vk::MemoryMapFlags::empty()).unwrap() as *mut u32 } else { std::ptr::null_mut() };
        (b.buffer, ptr)
    }
}

unsafe fn run(n: u32, groups: &[u32], invocations: u32) {
    unsafe {
        let (_entry, instance, pd) = vk_device::pick(vk::API_VERSION_1_2);
        let t = vk_timed::timed(&instance, pd, vk::QueueFlags::COMPUTE | vk::QueueFlags::GRAPHICS);
        let (device, cb, qp) = (&t.device, t.cb, t.qp);
        let mp = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;

        // The chain's storage (device-local and host-visible where the GPU has such memory),
        // and one uniform slot of 256 bytes per dispatch holding its index.
        let size = 1u64 << 20;
        let storage = vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::TRANSFER_DST;
        let (chain, count) = mapped(&instance, pd, device, size, storage, &[mp | vk::MemoryPropertyFlags::DEVICE_LOCAL, mp]);
        let slot = 256u64.max(instance.get_physical_device_properties(pd).limits.min_uniform_buffer_offset_alignment);
        // Device-local, filled once through a host-visible copy: a uniform read from host
        // memory would put a trip over the bus into every link of the chain.
        let ubytes = slot * n as u64;
        let uniform = vk_timed::buffer(&instance, pd, device, ubytes, vk::BufferUsageFlags::UNIFORM_BUFFER | vk::BufferUsageFlags::TRANSFER_DST, &[vk::MemoryPropertyFlags::DEVICE_LOCAL, mp]).buffer;
        let (upload, index) = mapped(&instance, pd, device, ubytes, vk::BufferUsageFlags::TRANSFER_SRC, &[mp]);
        for i in 0..n {
            *index.add((i as u64 * slot / 4) as usize) = i;
        }
        // `Timed::submit` reads both timestamps, so the copy writes them too (its time unused).
        t.begin();
        device.cmd_copy_buffer(cb, upload, uniform, &[vk::BufferCopy { src_offset: 0, dst_offset: 0, size: ubytes }]);
        device.cmd_write_timestamp(cb, vk::PipelineStageFlags::TOP_OF_PIPE, qp, 0);
        device.cmd_write_timestamp(cb, vk::PipelineStageFlags::BOTTOM_OF_PIPE, qp, 1);
        t.submit();

        let bindings = [
            vk::DescriptorSetLayoutBinding::default().binding(0).descriptor_type(vk::DescriptorType::STORAGE_BUFFER).descriptor_count(1).stage_flags(vk::ShaderStageFlags::COMPUTE),
            vk::DescriptorSetLayoutBinding::default()
                .binding(1)
                .descriptor_type(vk::DescriptorType::UNIFORM_BUFFER_DYNAMIC)
                .descriptor_count(1)
                .stage_flags(vk::ShaderStageFlags::COMPUTE),
        ];
        let dsl = device.create_descriptor_set_layout(&vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings), None).unwrap();
        let layouts = [dsl];
        let pl = device.create_pipeline_layout(&vk::PipelineLayoutCreateInfo::default().set_layouts(&layouts), None).unwrap();
        let pipeline = |coherent: bool| {
            let code = vk_timed::spirv(&SHADER.replace("COHERENT", if coherent { "@coherent" } else { "" }).replace("WG_SIZE", &invocations.to_string()));
            let module = device.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&code), None).unwrap();
            let stage = vk::PipelineShaderStageCreateInfo::default().stage(vk::ShaderStageFlags::COMPUTE).module(module).name(c"main");
            device.create_compute_pipelines(vk::PipelineCache::null(), &[vk::ComputePipelineCreateInfo::default().stage(stage).layout(pl)], None).unwrap()[0]
        };
        let pipelines = [pipeline(false), pipeline(true)];
        let sizes = [
            vk::DescriptorPoolSize { ty: vk::DescriptorType::STORAGE_BUFFER, descriptor_count: 1 },
            vk::DescriptorPoolSize { ty: vk::DescriptorType::UNIFORM_BUFFER_DYNAMIC, descriptor_count: 1 },
        ];
        let pool = device.create_descriptor_pool(&vk::DescriptorPoolCreateInfo::default().max_sets(1).pool_sizes(&sizes), None).unwrap();
        let set = device.allocate_descriptor_sets(&vk::DescriptorSetAllocateInfo::default().descriptor_pool(pool).set_layouts(&layouts)).unwrap()[0];
        let bi = [vk::DescriptorBufferInfo { buffer: chain, offset: 0, range: size }];
        let ui = [vk::DescriptorBufferInfo { buffer: uniform, offset: 0, range: 16 }];
        device.update_descriptor_sets(
            &[
                vk::WriteDescriptorSet::default().dst_set(set).dst_binding(0).descriptor_type(vk::DescriptorType::STORAGE_BUFFER).buffer_info(&bi),
                vk::WriteDescriptorSet::default().dst_set(set).dst_binding(1).descriptor_type(vk::DescriptorType::UNIFORM_BUFFER_DYNAMIC).buffer_info(&ui),
            ],
            &[],
        );
        let event = device.create_event(&vk::EventCreateInfo::default(), None).unwrap();

        let graphics = vk::PipelineStageFlags::VERTEX_SHADER | vk::PipelineStageFlags::FRAGMENT_SHADER | vk::PipelineStageFlags::COMPUTE_SHADER;
        let rw = vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE;
        let cs = vk::PipelineStageFlags::COMPUTE_SHADER;
        let global = [vk::MemoryBarrier::default().src_access_mask(rw).dst_access_mask(rw)];
        let buf = [vk::BufferMemoryBarrier::default().buffer(chain).size(vk::WHOLE_SIZE).src_access_mask(rw).dst_access_mask(rw)];
        // µs a dispatch, and the count b[0] ended at (n when every write reached the next read).
        let time = |sync: Sync, groups: u32, coherent: bool| -> (f64, u32) {
            t.begin();
            device.cmd_fill_buffer(cb, chain, 0, 256, 0);
            let fill = [vk::MemoryBarrier::default().src_access_mask(vk::AccessFlags::TRANSFER_WRITE).dst_access_mask(rw)];
            device.cmd_pipeline_barrier(cb, vk::PipelineStageFlags::TRANSFER, cs, vk::DependencyFlags::empty(), &fill, &[], &[]);
            device.cmd_bind_pipeline(cb, vk::PipelineBindPoint::COMPUTE, pipelines[coherent as usize]);
            device.cmd_write_timestamp(cb, vk::PipelineStageFlags::TOP_OF_PIPE, qp, 0);
            for i in 0..n {
                device.cmd_bind_descriptor_sets(cb, vk::PipelineBindPoint::COMPUTE, pl, 0, &[set], &[(i as u64 * slot) as u32]);
                device.cmd_dispatch(cb, groups, 1, 1);
                match sync {
                    Sync::None => {}
                    Sync::ComputeGlobal => device.cmd_pipeline_barrier(cb, cs, cs, vk::DependencyFlags::empty(), &global, &[], &[]),
                    Sync::ComputeBuffer => device.cmd_pipeline_barrier(cb, cs, cs, vk::DependencyFlags::empty(), &[], &buf, &[]),
                    Sync::WgpuBuffer => device.cmd_pipeline_barrier(
                        cb,
                        vk::PipelineStageFlags::TOP_OF_PIPE | graphics,
                        vk::PipelineStageFlags::BOTTOM_OF_PIPE | graphics,
                        vk::DependencyFlags::empty(),
                        &[],
                        &buf,
                        &[],
                    ),
                    Sync::AllCommands => {
                        device.cmd_pipeline_barrier(cb, vk::PipelineStageFlags::ALL_COMMANDS, vk::PipelineStageFlags::ALL_COMMANDS, vk::DependencyFlags::empty(), &global, &[], &[])
                    }
                    Sync::ExecutionOnly => device.cmd_pipeline_barrier(cb, cs, cs, vk::DependencyFlags::empty(), &[], &[], &[]),
                    Sync::Event => {
                        device.cmd_set_event(cb, event, cs);
                        device.cmd_wait_events(cb, &[event], cs, cs, &global, &[], &[]);
                        device.cmd_reset_event(cb, event, cs);
                    }
                }
            }
            device.cmd_write_timestamp(cb, vk::PipelineStageFlags::BOTTOM_OF_PIPE, qp, 1);
            let us = t.submit() / n as f64;
            (us, if count.is_null() { u32::MAX } else { count.read_volatile() })
        };
        println!("{n} dispatches a chain of workgroups of {invocations} invocations; b[0] should end at {n}");
        for &groups in groups {
            for sync in [Sync::None, Sync::ComputeGlobal, Sync::ComputeBuffer, Sync::WgpuBuffer, Sync::AllCommands, Sync::ExecutionOnly, Sync::Event] {
                for coherent in [false, true] {
                    let _ = time(sync, groups, coherent);
                    let runs: Vec<(f64, u32)> = (0..5).map(|_| time(sync, groups, coherent)).collect();
                    let best = runs.iter().map(|r| r.0).fold(f64::MAX, f64::min);
                    let wrong = runs.iter().filter(|r| r.1 != n).count();
                    let counts: Vec<u32> = runs.iter().map(|r| r.1).collect();
                    let tag = if coherent { "@coherent" } else { "plain" };
                    println!("{groups:>4} workgroups, barrier {:<14}, {tag:<9}: {best:6.2} us per dispatch; count wrong in {wrong} of 5 {counts:?}", format!("{sync:?}"));
                }
            }
        }
        device.device_wait_idle().unwrap();
    }
}
