//! What one dependent compute dispatch costs on the raw Vulkan driver, below wgpu: a chain
//! of N dispatches, each reading what the previous one wrote, recorded in one command
//! buffer and timed by GPU timestamps, with the barrier between dispatches made several
//! ways (none, compute-only, the stage masks wgpu's Vulkan backend uses for storage
//! buffers) and with 1 or 132 workgroups. Prints µs per dispatch. Compare with
//! `decode_bench`'s "one workgroup, 0 barriers" line, the same chain through wgpu.
//!
//! `cargo run --release --example barrier_bench [n]`

use ash::vk;

#[path = "common/vk_device.rs"]
mod vk_device;
#[path = "common/vk_timed.rs"]
mod vk_timed;

const SHADER: &str = "
@group(0) @binding(0) var<storage, read_write> b: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) l: u32) {
    if (l == 0u) {
        let v = b[0];
        if (wg.x == 0u) {
            b[0] = v + 1u;
        } else {
            b[wg.x] = v;
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
}

fn main() {
    let n: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(500);
    unsafe { run(n) }
}

unsafe fn run(n: u32) {
    unsafe {
        let (_entry, instance, pd) = vk_device::pick(vk::API_VERSION_1_2);
        let t = vk_timed::timed(&instance, pd, vk::QueueFlags::COMPUTE | vk::QueueFlags::GRAPHICS);
        let (device, cb, qp) = (&t.device, t.cb, t.qp);

        // A device-local storage buffer.
        let size = 1u64 << 20;
        let buffer = device
            .create_buffer(&vk::BufferCreateInfo::default().size(size).usage(vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::TRANSFER_DST), None)
            .unwrap();
        let req = device.get_buffer_memory_requirements(buffer);
        let mem_props = instance.get_physical_device_memory_properties(pd);
        let mt = (0..mem_props.memory_type_count)
            .find(|&i| req.memory_type_bits & (1 << i) != 0 && mem_props.memory_types[i as usize].property_flags.contains(vk::MemoryPropertyFlags::DEVICE_LOCAL))
            .unwrap();
        let memory = device.allocate_memory(&vk::MemoryAllocateInfo::default().allocation_size(req.size).memory_type_index(mt), None).unwrap();
        device.bind_buffer_memory(buffer, memory, 0).unwrap();

        let code = vk_timed::spirv(SHADER);
        let module = device.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&code), None).unwrap();
        let binding = [vk::DescriptorSetLayoutBinding::default()
            .binding(0)
            .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
            .descriptor_count(1)
            .stage_flags(vk::ShaderStageFlags::COMPUTE)];
        let dsl = device.create_descriptor_set_layout(&vk::DescriptorSetLayoutCreateInfo::default().bindings(&binding), None).unwrap();
        let layouts = [dsl];
        let pl = device.create_pipeline_layout(&vk::PipelineLayoutCreateInfo::default().set_layouts(&layouts), None).unwrap();
        let stage = vk::PipelineShaderStageCreateInfo::default().stage(vk::ShaderStageFlags::COMPUTE).module(module).name(c"main");
        let pipeline = device
            .create_compute_pipelines(vk::PipelineCache::null(), &[vk::ComputePipelineCreateInfo::default().stage(stage).layout(pl)], None)
            .unwrap()[0];
        let sizes = [vk::DescriptorPoolSize { ty: vk::DescriptorType::STORAGE_BUFFER, descriptor_count: 1 }];
        let pool = device.create_descriptor_pool(&vk::DescriptorPoolCreateInfo::default().max_sets(1).pool_sizes(&sizes), None).unwrap();
        let set = device.allocate_descriptor_sets(&vk::DescriptorSetAllocateInfo::default().descriptor_pool(pool).set_layouts(&layouts)).unwrap()[0];
        let bi = [vk::DescriptorBufferInfo { buffer, offset: 0, range: size }];
        device.update_descriptor_sets(&[vk::WriteDescriptorSet::default().dst_set(set).descriptor_type(vk::DescriptorType::STORAGE_BUFFER).buffer_info(&bi)], &[]);

        let graphics = vk::PipelineStageFlags::VERTEX_SHADER | vk::PipelineStageFlags::FRAGMENT_SHADER | vk::PipelineStageFlags::COMPUTE_SHADER;
        let rw = vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE;
        let time = |sync: Sync, groups: u32, rebind: bool| -> f64 {
            t.begin();
            device.cmd_bind_pipeline(cb, vk::PipelineBindPoint::COMPUTE, pipeline);
            device.cmd_bind_descriptor_sets(cb, vk::PipelineBindPoint::COMPUTE, pl, 0, &[set], &[]);
            device.cmd_write_timestamp(cb, vk::PipelineStageFlags::TOP_OF_PIPE, qp, 0);
            for _ in 0..n {
                if rebind {
                    device.cmd_bind_pipeline(cb, vk::PipelineBindPoint::COMPUTE, pipeline);
                    device.cmd_bind_descriptor_sets(cb, vk::PipelineBindPoint::COMPUTE, pl, 0, &[set], &[]);
                }
                device.cmd_dispatch(cb, groups, 1, 1);
                let global = [vk::MemoryBarrier::default().src_access_mask(rw).dst_access_mask(rw)];
                let buf = [vk::BufferMemoryBarrier::default().buffer(buffer).size(vk::WHOLE_SIZE).src_access_mask(rw).dst_access_mask(rw)];
                let cs = vk::PipelineStageFlags::COMPUTE_SHADER;
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
                    Sync::AllCommands => device.cmd_pipeline_barrier(
                        cb,
                        vk::PipelineStageFlags::ALL_COMMANDS,
                        vk::PipelineStageFlags::ALL_COMMANDS,
                        vk::DependencyFlags::empty(),
                        &global,
                        &[],
                        &[],
                    ),
                }
            }
            device.cmd_write_timestamp(cb, vk::PipelineStageFlags::BOTTOM_OF_PIPE, qp, 1);
            t.submit() / n as f64
        };
        for groups in [1u32, 132] {
            for sync in [Sync::None, Sync::ComputeGlobal, Sync::ComputeBuffer, Sync::WgpuBuffer, Sync::AllCommands] {
                for rebind in [false, true] {
                    let _ = time(sync, groups, rebind);
                    let best = (0..5).map(|_| time(sync, groups, rebind)).fold(f64::MAX, f64::min);
                    println!("{groups:>4} workgroups, barrier {sync:<14?} rebind {rebind:<5}: {best:6.2} us per dispatch");
                }
            }
        }
        device.device_wait_idle().unwrap();
    }
}
