//! The wgpu device: one instance, adapter and device per process.
//!
//! Adapter choice: `RULLAMA_ADAPTER` (a case-insensitive substring of the adapter name)
//! when set, else discrete > integrated > virtual > software (CPU). The limits actually
//! obtained are logged to stderr once when `RULLAMA_LOG_GPU` is set, and kept in `Gpu`.

use std::sync::{Arc, OnceLock};

use crate::{Error, Result};

pub struct Gpu {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: wgpu::AdapterInfo,
    pub limits: wgpu::Limits,
    /// `enable f16;` shaders may be used.
    pub f16: bool,
    /// Subgroup builtins may be used (naga takes them without an `enable` line).
    pub subgroups: bool,
    pub subgroup_min: u32,
    pub subgroup_max: u32,
    /// GPU timestamps can be written between passes (used by `RULLAMA_PROFILE=kernels` and `=1`).
    pub timestamps: bool,
    /// Cooperative matrices (tensor cores) of 16x16x16 f16 -> f32 on subgroups of 32 may
    /// be used (`shaders/matmul/matmul_coop.wgsl`). `RULLAMA_NO_COOP` turns them off.
    pub coop: bool,
    /// Storage may be declared `@coherent`.
    pub coherent: bool,
    /// 64-bit integers and their atomic adds in storage (the per-layer-embedding gate's
    /// sums, `matmul::PleAcc`).
    pub int64_atomics: bool,
    /// The first validation error the device reported since it was last taken.
    errors: Arc<std::sync::Mutex<Option<String>>>,
}

static GPU: OnceLock<std::result::Result<Arc<Gpu>, String>> = OnceLock::new();

fn rank(t: wgpu::DeviceType) -> u8 {
    match t {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Other => 3,
        wgpu::DeviceType::Cpu => 4,
    }
}

/// Names of the adapters wgpu can see (for the settings screen and `--adapter`).
pub fn adapter_names() -> Vec<String> {
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()))
        .iter()
        .map(|a| {
            let i = a.get_info();
            format!("{} ({:?}, {:?})", i.name, i.backend, i.device_type)
        })
        .collect()
}

impl Gpu {
    /// The process-wide device, created on first use.
    pub fn get() -> Result<Arc<Gpu>> {
        GPU.get_or_init(|| Gpu::create().map(Arc::new).map_err(|e| e.to_string()))
            .clone()
            .map_err(Error::Gpu)
    }

    fn create() -> Result<Gpu> {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let mut adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
        if let Ok(want) = std::env::var("RULLAMA_ADAPTER") {
            let want = want.to_lowercase();
            adapters.retain(|a| a.get_info().name.to_lowercase().contains(&want));
            if adapters.is_empty() {
                return Err(Error::Gpu(format!(
                    "no GPU adapter matches RULLAMA_ADAPTER={want:?}; available: {}",
                    adapter_names().join("; ")
                )));
            }
        }
        // Vulkan first among equals: it is the backend the kernels are tested on.
        adapters.sort_by_key(|a| {
            let i = a.get_info();
            (rank(i.device_type), i.backend != wgpu::Backend::Vulkan)
        });
        let adapter = adapters.into_iter().next().ok_or_else(|| {
            Error::Gpu("no GPU adapter found (install a Vulkan, Metal or DX12 driver; on Linux without a GPU, mesa-vulkan-drivers)".into())
        })?;
        let info = adapter.get_info();
        let features = adapter.features();
        let mut required = wgpu::Features::empty();
        let f16 = features.contains(wgpu::Features::SHADER_F16);
        if f16 {
            required |= wgpu::Features::SHADER_F16;
        }
        let subgroups = features.contains(wgpu::Features::SUBGROUP) && std::env::var_os("RULLAMA_NO_SUBGROUPS").is_none();
        if subgroups {
            required |= wgpu::Features::SUBGROUP;
        }
        // Timestamps are only wanted by the profilers.
        let timestamps = features.contains(wgpu::Features::TIMESTAMP_QUERY) && (super::kernel::kernel_profile() || super::kernel::step_profile());
        if timestamps {
            required |= wgpu::Features::TIMESTAMP_QUERY;
        }
        // The tensor-core kernel lays whole subgroups over fixed groups of 32 invocations.
        let subgroups_32 = subgroups && info.subgroup_min_size == 32 && info.subgroup_max_size == 32;
        let coop = f16
            && subgroups_32
            && features.contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX)
            && adapter.cooperative_matrix_properties().iter().any(|p| {
                (p.m_size, p.n_size, p.k_size) == (16, 16, 16)
                    && p.ab_type == wgpu::CooperativeScalarType::F16
                    && p.cr_type == wgpu::CooperativeScalarType::F32
            })
            && std::env::var_os("RULLAMA_NO_COOP").is_none();
        if coop {
            required |= wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
        }
        // `@coherent` storage (loads that skip a per-SM cache), for data that workgroups of
        // one dispatch hand each other (examples/chain_bench.rs).
        let coherent = features.contains(wgpu::Features::MEMORY_DECORATION_COHERENT);
        if coherent {
            required |= wgpu::Features::MEMORY_DECORATION_COHERENT;
        }
        let int64 = wgpu::Features::SHADER_INT64 | wgpu::Features::SHADER_INT64_ATOMIC_ALL_OPS;
        let int64_atomics = features.contains(int64);
        if int64_atomics {
            required |= int64;
        }
        let limits = adapter.limits();
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("rullama"),
            required_features: required,
            required_limits: limits.clone(),
            // SAFETY: the one experimental feature requested is cooperative matrices, used
            // by one kernel whose results the matmul parity tests check against the CPU.
            experimental_features: if coop { unsafe { wgpu::ExperimentalFeatures::enabled() } } else { wgpu::ExperimentalFeatures::disabled() },
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        }))
        .map_err(|e| Error::Gpu(format!("cannot open {}: {e}", info.name)))?;
        let errors = Arc::new(std::sync::Mutex::new(None));
        let sink = errors.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            let mut slot = sink.lock().expect("error slot");
            if slot.is_none() {
                *slot = Some(e.to_string());
            }
        }));
        let limits = device.limits();
        let (subgroup_min, subgroup_max) = (info.subgroup_min_size, info.subgroup_max_size);
        if std::env::var_os("RULLAMA_LOG_GPU").is_some() {
            eprintln!(
                "gpu: {} ({:?}, {:?}, {}) storage binding {} MiB, buffer {} MiB, workgroup storage {} KiB, f16 {f16}, subgroups {subgroups} ({subgroup_min}..{subgroup_max}), tensor cores {coop}, int64 atomics {int64_atomics}",
                info.name,
                info.backend,
                info.device_type,
                info.driver_info,
                limits.max_storage_buffer_binding_size >> 20,
                limits.max_buffer_size >> 20,
                limits.max_compute_workgroup_storage_size >> 10,
            );
        }
        Ok(Gpu { device, queue, info, limits, f16, subgroups, subgroup_min, subgroup_max, timestamps, coop, coherent, int64_atomics, errors })
    }

    /// The first error the device reported since the last call, if any.
    pub fn take_error(&self) -> Option<String> {
        self.errors.lock().expect("error slot").take()
    }

    /// Largest storage binding, in bytes.
    pub fn max_binding(&self) -> u64 {
        self.limits.max_storage_buffer_binding_size.min(self.limits.max_buffer_size)
    }

    /// Block until the submission `index` (and all before it) is done.
    pub fn wait_for(&self, index: wgpu::SubmissionIndex) -> Result<()> {
        self.device
            .poll(wgpu::PollType::Wait { submission_index: Some(index), timeout: None })
            .map(|_| ())
            .map_err(|e| Error::Gpu(format!("GPU wait failed: {e}")))
    }

    /// Block until all submitted work is done.
    pub fn wait(&self) -> Result<()> {
        self.device
            .poll(wgpu::PollType::Wait { submission_index: None, timeout: None })
            .map(|_| ())
            .map_err(|e| Error::Gpu(format!("GPU wait failed: {e}")))
    }
}
