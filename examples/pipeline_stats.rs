//! What the Vulkan driver says about each compute kernel once compiled (register count,
//! shared memory, ... through VK_KHR_pipeline_executable_properties), which wgpu does not
//! expose: the register count decides how many workgroups an SM holds at once.
//!
//! Kernels come from a directory of composed WGSL: any rullama command run with
//! `RULLAMA_DUMP_WGSL=DIR` writes every kernel it compiles there, under the kernel's name.
//! Each is translated as wgpu's Vulkan backend translates it on a Vulkan 1.3 device with
//! robust buffer access (naga; local and workgroup array indices clamped, workgroup memory
//! zeroed by the driver).
//!
//! On the H100 (driver 580.159.04): E2B's folded [gate; up] Q4_K matvec holds 58 registers
//! (four 256-invocation workgroups per SM: its 384 workgroups run in one wave), decode
//! attention 122 (head dim 256) and 218 (512). On an H200 (same driver), the 128 x 128
//! tensor-core product 200-201 (one 256-invocation workgroup an SM), the 64 x 64 one 135-142.
//!
//! `cargo run --release --example pipeline_stats DIR [name filter]`

use ash::vk;

#[path = "common/vk_device.rs"]
mod vk_device;

/// A kernel's bindings: (binding, is uniform).
type Bindings = Vec<(u32, bool)>;

/// SPIR-V for `src` as wgpu's Vulkan backend would produce it, and its bindings.
fn spirv(src: &str) -> Result<(Vec<u32>, Bindings), String> {
    let module = naga::front::wgsl::parse_str(src).map_err(|e| e.emit_to_string(src))?;
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::all())
        .validate(&module)
        .map_err(|e| format!("{e:?}"))?;
    let unchecked = naga::proc::BoundsCheckPolicy::Unchecked;
    let options = naga::back::spv::Options {
        lang_version: (1, 6),
        bounds_check_policies: naga::proc::BoundsCheckPolicies {
            index: naga::proc::BoundsCheckPolicy::Restrict,
            buffer: unchecked,
            image_load: unchecked,
            binding_array: unchecked,
        },
        zero_initialize_workgroup_memory: naga::back::spv::ZeroInitializeWorkgroupMemoryMode::Native,
        emit_int_div_checks: true,
        // rullama compiles its kernels without loop bounding (kernel.rs, runtime_checks).
        force_loop_bounding: false,
        ..Default::default()
    };
    let pipeline = naga::back::spv::PipelineOptions { shader_stage: naga::ShaderStage::Compute, entry_point: "main".into() };
    let code = naga::back::spv::write_vec(&module, &info, &options, Some(&pipeline)).map_err(|e| format!("{e}"))?;
    let bindings = module
        .global_variables
        .iter()
        .filter_map(|(_, g)| g.binding.as_ref().map(|b| (b.binding, g.space == naga::AddressSpace::Uniform)))
        .collect();
    Ok((code, bindings))
}

/// The kernel at `path` translated by `spirv`, or None after printing why not.
fn translate(path: &std::path::Path) -> Option<(Vec<u32>, Bindings)> {
    let name = path.file_stem().unwrap_or_default().to_string_lossy();
    let r = std::fs::read_to_string(path).map_err(|e| format!("unreadable: {e}")).and_then(|s| spirv(&s).map_err(|e| format!("does not translate: {}", e.lines().next().unwrap_or_default())));
    r.map_err(|e| println!("{name}: {e}")).ok()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().expect("usage: pipeline_stats DIR [name filter]");
    let filter = args.next().unwrap_or_default();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("kernel directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wgsl") && p.to_string_lossy().contains(&filter))
        .collect();
    files.sort();
    unsafe { run(&files) }
}

unsafe fn run(files: &[std::path::PathBuf]) {
    unsafe {
        let (_entry, instance, pd) = vk_device::pick(vk::API_VERSION_1_3);
        let has = |name: &std::ffi::CStr| {
            instance.enumerate_device_extension_properties(pd).unwrap_or_default().iter().any(|e| e.extension_name_as_c_str() == Ok(name))
        };
        if !has(ash::khr::pipeline_executable_properties::NAME) {
            // Still worth running: every kernel is translated.
            println!("the driver does not report pipeline statistics (VK_KHR_pipeline_executable_properties)");
            for path in files {
                let _ = translate(path);
            }
            return;
        }
        let coop = has(ash::khr::cooperative_matrix::NAME);
        let mut exts = vec![ash::khr::pipeline_executable_properties::NAME.as_ptr()];
        if coop {
            exts.push(ash::khr::cooperative_matrix::NAME.as_ptr());
        }
        let families = instance.get_physical_device_queue_family_properties(pd);
        let qf = families.iter().position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE)).expect("queue") as u32;
        let prio = [1.0f32];
        let qci = [vk::DeviceQueueCreateInfo::default().queue_family_index(qf).queue_priorities(&prio)];
        // What rullama's kernels use: 16-bit storage and arithmetic, subgroups, the memory
        // model of cooperative matrices, workgroup memory the driver zeroes.
        let mut f11 = vk::PhysicalDeviceVulkan11Features::default().storage_buffer16_bit_access(true).uniform_and_storage_buffer16_bit_access(true);
        let mut f12 = vk::PhysicalDeviceVulkan12Features::default().shader_float16(true).vulkan_memory_model(true).vulkan_memory_model_device_scope(true);
        let mut f13 = vk::PhysicalDeviceVulkan13Features::default().subgroup_size_control(true).shader_zero_initialize_workgroup_memory(true);
        let mut fexe = vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default().pipeline_executable_info(true);
        let mut fcoop = vk::PhysicalDeviceCooperativeMatrixFeaturesKHR::default().cooperative_matrix(true);
        let mut dci = vk::DeviceCreateInfo::default()
            .queue_create_infos(&qci)
            .enabled_extension_names(&exts)
            .push_next(&mut f11)
            .push_next(&mut f12)
            .push_next(&mut f13)
            .push_next(&mut fexe);
        if coop {
            dci = dci.push_next(&mut fcoop);
        }
        let device = instance.create_device(pd, &dci, None).expect("device");
        let exe = ash::khr::pipeline_executable_properties::Device::new(&instance, &device);
        for path in files {
            let name = path.file_stem().unwrap_or_default().to_string_lossy();
            let Some((code, bindings)) = translate(path) else { continue };
            let layout_bindings: Vec<_> = bindings
                .iter()
                .map(|&(b, uniform)| {
                    vk::DescriptorSetLayoutBinding::default()
                        .binding(b)
                        .descriptor_type(if uniform { vk::DescriptorType::UNIFORM_BUFFER_DYNAMIC } else { vk::DescriptorType::STORAGE_BUFFER })
                        .descriptor_count(1)
                        .stage_flags(vk::ShaderStageFlags::COMPUTE)
                })
                .collect();
            let dsl = device.create_descriptor_set_layout(&vk::DescriptorSetLayoutCreateInfo::default().bindings(&layout_bindings), None).expect("set layout");
            let layouts = [dsl];
            let pl = device.create_pipeline_layout(&vk::PipelineLayoutCreateInfo::default().set_layouts(&layouts), None).expect("pipeline layout");
            let module = device.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&code), None).expect("shader module");
            let stage = vk::PipelineShaderStageCreateInfo::default()
                .flags(vk::PipelineShaderStageCreateFlags::ALLOW_VARYING_SUBGROUP_SIZE)
                .stage(vk::ShaderStageFlags::COMPUTE)
                .module(module)
                .name(c"main");
            let info = vk::ComputePipelineCreateInfo::default().flags(vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR).stage(stage).layout(pl);
            match device.create_compute_pipelines(vk::PipelineCache::null(), &[info], None) {
                Ok(p) => {
                    let pipeline = p[0];
                    let pinfo = vk::PipelineInfoKHR::default().pipeline(pipeline);
                    let mut line = String::new();
                    for (i, _) in exe.get_pipeline_executable_properties(&pinfo).unwrap_or_default().iter().enumerate() {
                        let einfo = vk::PipelineExecutableInfoKHR::default().pipeline(pipeline).executable_index(i as u32);
                        for s in exe.get_pipeline_executable_statistics(&einfo).unwrap_or_default() {
                            let v = match s.format {
                                vk::PipelineExecutableStatisticFormatKHR::BOOL32 => format!("{}", s.value.b32),
                                vk::PipelineExecutableStatisticFormatKHR::INT64 => format!("{}", s.value.i64),
                                vk::PipelineExecutableStatisticFormatKHR::UINT64 => format!("{}", s.value.u64),
                                _ => format!("{:.1}", s.value.f64),
                            };
                            line += &format!("  {}={v}", s.name_as_c_str().unwrap_or_default().to_string_lossy());
                        }
                    }
                    println!("{name}:{line}");
                    device.destroy_pipeline(pipeline, None);
                }
                Err((_, e)) => println!("{name}: pipeline creation failed: {e}"),
            }
            device.destroy_shader_module(module, None);
            device.destroy_pipeline_layout(pl, None);
            device.destroy_descriptor_set_layout(dsl, None);
        }
        device.destroy_device(None);
    }
}
