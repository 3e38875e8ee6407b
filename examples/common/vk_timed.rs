//! A raw Vulkan device set up to time a recorded chain of dispatches, its buffers, and WGSL
//! compiled to SPIR-V for it; shared by the driver-level benchmarks (`barrier_bench`,
//! `handover_bench`).

use ash::vk;

/// SPIR-V of a WGSL compute kernel, by naga (as wgpu would make it, less wgpu's checks).
pub fn spirv(src: &str) -> Vec<u32> {
    let module = naga::front::wgsl::parse_str(src).unwrap_or_else(|e| panic!("wgsl: {}", e.emit_to_string(src)));
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::all()).validate(&module).expect("valid");
    naga::back::spv::write_vec(&module, &info, &naga::back::spv::Options::default(), None).expect("spv")
}

/// A logical device with one queue, and what a timed chain of dispatches needs: a command
/// buffer, a fence and two timestamp queries.
pub struct Timed {
    pub device: ash::Device,
    pub queue: vk::Queue,
    pub cb: vk::CommandBuffer,
    pub qp: vk::QueryPool,
    fence: vk::Fence,
    /// Nanoseconds a timestamp tick.
    period: f64,
}

/// # Safety
/// `pd` must come from `instance`; the queue family taken is the first with `flags`.
pub unsafe fn timed(instance: &ash::Instance, pd: vk::PhysicalDevice, flags: vk::QueueFlags) -> Timed {
    unsafe {
        let period = instance.get_physical_device_properties(pd).limits.timestamp_period as f64;
        let families = instance.get_physical_device_queue_family_properties(pd);
        let qf = families.iter().position(|f| f.queue_flags.contains(flags)).expect("queue") as u32;
        let prio = [1.0f32];
        let qci = [vk::DeviceQueueCreateInfo::default().queue_family_index(qf).queue_priorities(&prio)];
        let device = instance.create_device(pd, &vk::DeviceCreateInfo::default().queue_create_infos(&qci), None).expect("device");
        let queue = device.get_device_queue(qf, 0);
        let qp = device.create_query_pool(&vk::QueryPoolCreateInfo::default().query_type(vk::QueryType::TIMESTAMP).query_count(2), None).unwrap();
        let cpool = device.create_command_pool(&vk::CommandPoolCreateInfo::default().queue_family_index(qf).flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER), None).unwrap();
        let cb = device.allocate_command_buffers(&vk::CommandBufferAllocateInfo::default().command_pool(cpool).command_buffer_count(1)).unwrap()[0];
        let fence = device.create_fence(&vk::FenceCreateInfo::default(), None).unwrap();
        Timed { device, queue, cb, qp, fence, period }
    }
}

impl Timed {
    /// Starts recording `cb` afresh, with both timestamps reset.
    ///
    /// # Safety
    /// No earlier recording of `cb` may still be running.
    pub unsafe fn begin(&self) {
        unsafe {
            self.device.reset_command_buffer(self.cb, vk::CommandBufferResetFlags::empty()).unwrap();
            self.device.begin_command_buffer(self.cb, &vk::CommandBufferBeginInfo::default()).unwrap();
            self.device.cmd_reset_query_pool(self.cb, self.qp, 0, 2);
        }
    }

    /// Ends the recording, submits it, waits for it, and returns the µs between
    /// timestamps 0 and 1.
    ///
    /// # Safety
    /// `cb` must be recording (`begin`) and write both timestamps.
    pub unsafe fn submit(&self) -> f64 {
        unsafe {
            self.device.end_command_buffer(self.cb).unwrap();
            let cbs = [self.cb];
            self.device.queue_submit(self.queue, &[vk::SubmitInfo::default().command_buffers(&cbs)], self.fence).unwrap();
            self.device.wait_for_fences(&[self.fence], true, u64::MAX).unwrap();
            self.device.reset_fences(&[self.fence]).unwrap();
            let mut ts = [0u64; 2];
            self.device.get_query_pool_results(self.qp, 0, &mut ts, vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT).unwrap();
            (ts[1] - ts[0]) as f64 * self.period / 1e3
        }
    }
}

/// A buffer and the memory bound to it. (Each bench including this module reads the
/// fields it needs.)
#[allow(dead_code)]
pub struct Buf {
    pub buffer: vk::Buffer,
    pub memory: vk::DeviceMemory,
    pub size: u64,
    /// The flags of the memory type taken.
    pub flags: vk::MemoryPropertyFlags,
}

/// A buffer of `size` bytes in memory of the first type that has every flag of one of
/// `prefer`'s sets, tried in order.
///
/// # Safety
/// `device` must come from `pd`, which must come from `instance`.
pub unsafe fn buffer(instance: &ash::Instance, pd: vk::PhysicalDevice, device: &ash::Device, size: u64, usage: vk::BufferUsageFlags, prefer: &[vk::MemoryPropertyFlags]) -> Buf {
    unsafe {
        let buffer = device.create_buffer(&vk::BufferCreateInfo::default().size(size).usage(usage), None).unwrap();
        let req = device.get_buffer_memory_requirements(buffer);
        let props = instance.get_physical_device_memory_properties(pd);
        let usable = |i: u32, f: vk::MemoryPropertyFlags| req.memory_type_bits & (1 << i) != 0 && props.memory_types[i as usize].property_flags.contains(f);
        let mt = prefer.iter().find_map(|&f| (0..props.memory_type_count).find(|&i| usable(i, f))).expect("memory type");
        let memory = device.allocate_memory(&vk::MemoryAllocateInfo::default().allocation_size(req.size).memory_type_index(mt), None).unwrap();
        device.bind_buffer_memory(buffer, memory, 0).unwrap();
        Buf { buffer, memory, size, flags: props.memory_types[mt as usize].property_flags }
    }
}
