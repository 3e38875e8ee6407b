//! Kernels and dispatch: the one generic place where pipelines are compiled, bind groups
//! are made, parameters are uploaded and workgroups are dispatched. Op modules only say
//! which shader, which buffers and which grid.
//!
//! Binding convention for every kernel: `@group(0) @binding(0) var<uniform> p: Params;`
//! then the storage buffers at bindings 1.. in the order the op passes them. Parameters
//! of all dispatches of a batch go into one uniform buffer at 256-byte slots (dynamic
//! offsets), written once before the batch is submitted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::device::Gpu;
use crate::{Error, Result};

/// How a kernel uses a storage buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    Read,
    ReadWrite,
}

/// A compiled compute pipeline and its bind group layout.
pub struct Kernel {
    pub name: String,
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
    n_buffers: usize,
    /// Left out of every batch (`Kernels::left_out`): timing-only bounds.
    left_out: bool,
}

/// WGSL source of a kernel, assembled from shader files.
pub struct KernelSource {
    pub name: String,
    pub code: String,
    pub entry: &'static str,
    pub buffers: Vec<Access>,
}

/// Parameter slot size: the strictest `min_uniform_buffer_offset_alignment` in practice.
const PARAM_SLOT: u64 = 256;

/// Compiles each kernel once per device and hands out shared handles.
pub struct Kernels {
    pub gpu: Arc<Gpu>,
    cache: Mutex<HashMap<String, Arc<Kernel>>>,
    /// Bound where a kernel's optional input is absent (a binding cannot be left empty).
    pub dummy: wgpu::Buffer,
    /// Kernels with a subgroup variant use it. Starts as `gpu.subgroups`; clearing it
    /// selects the workgroup-memory variants (tests run both in one process).
    pub use_subgroups: bool,
    /// Prefill matmuls use the tensor-core kernel where the device has one. Starts as
    /// `gpu.coop`; clearing it selects the f32 kernel (tests compare both).
    pub use_coop: bool,
    /// Prefill attention takes query rows in blocks (`attention_tiled.wgsl`) where the head
    /// shapes allow. `RULLAMA_NO_TILED_ATTENTION` clears it at start (per-token workgroups,
    /// `attention.wgsl`); tests compare both.
    pub tiled_attention: bool,
    /// Prefill attention of one KV head runs as two tensor-core products around a softmax
    /// (`gpu::attention_coop`) where the device has them and the shapes allow.
    /// `RULLAMA_NO_COOP_ATTENTION` clears it at start; tests compare both.
    pub coop_attention: bool,
    /// Decode attention merges its own key splits (the last split of a query row to finish
    /// merges it) instead of an attention_merge dispatch. `RULLAMA_NO_DECODE_MERGE` clears
    /// it at start; tests compare both.
    pub decode_merge: bool,
    /// Prefill's [gate; up] products on tensor cores apply GeGLU themselves
    /// (`matmul::matmul_geglu`). `RULLAMA_NO_COOP_GEGLU` clears it at start; tests compare
    /// both.
    pub coop_geglu: bool,
    /// Q4_K and Q6_K matvecs that stage their input (a folded residual step; LM heads)
    /// multiply by integer dot products over it as fixed-point limbs (matvec_x_limbs.wgsl).
    /// `RULLAMA_NO_INT_DOT` clears it at start (f32 products); tests compare both.
    pub int_dot: bool,
    /// Tensor-core products whose weight row tiles each meet one token tile (an expert's
    /// pairs; prompts of up to a tile of tokens) stage Q4_K / Q6_K / Q5_0 / Q8_0 weights
    /// from their blocks (matmul_coop_w_quant.wgsl) instead of reading a split pass's f16
    /// parts. `RULLAMA_NO_COOP_BLOCKS` clears it at start; tests compare both.
    pub coop_blocks: bool,
    /// Kernels whose names start with one of these are compiled but never dispatched
    /// (`Batch::dispatch` records nothing), so results are wrong: a timing-only bound of
    /// what those dispatches cost, as docs/performance.md's "Rules for measuring" asks
    /// for before any rewrite. `RULLAMA_LEAVE_OUT=prefix,prefix` sets it at start; names
    /// are as `RULLAMA_PROFILE=kernels` prints them (e.g. `moe_route`, `matvec/Q4_K`).
    pub left_out: Vec<String>,
    /// Tensor-core products take their inputs rounded to f16 (one product a result, no lo
    /// parts) instead of f32-accurate (three): `set_coop_f16`, the prefill precision a
    /// model is set to (`GpuModel::set_prefill_f16`). Off by default.
    coop_f16: std::sync::atomic::AtomicBool,
    /// Constant tables and scratch space that encoders need beside their arguments, made
    /// on first use and reused (keyed by the encoder).
    buffers: Mutex<HashMap<String, wgpu::Buffer>>,
}

impl Kernels {
    pub fn new(gpu: Arc<Gpu>) -> Kernels {
        let dummy = storage(&gpu, "dummy", 16);
        let (use_subgroups, use_coop) = (gpu.subgroups, gpu.coop);
        let tiled_attention = std::env::var_os("RULLAMA_NO_TILED_ATTENTION").is_none();
        let coop_attention = std::env::var_os("RULLAMA_NO_COOP_ATTENTION").is_none();
        let decode_merge = std::env::var_os("RULLAMA_NO_DECODE_MERGE").is_none();
        let coop_geglu = std::env::var_os("RULLAMA_NO_COOP_GEGLU").is_none();
        let int_dot = std::env::var_os("RULLAMA_NO_INT_DOT").is_none();
        let coop_blocks = std::env::var_os("RULLAMA_NO_COOP_BLOCKS").is_none();
        let left_out = std::env::var("RULLAMA_LEAVE_OUT").map(|v| v.split(',').filter(|p| !p.is_empty()).map(String::from).collect()).unwrap_or_default();
        Kernels { gpu, cache: Mutex::new(HashMap::new()), dummy, use_subgroups, use_coop, tiled_attention, coop_attention, decode_merge, coop_geglu, int_dot, coop_blocks, left_out, coop_f16: false.into(), buffers: Mutex::new(HashMap::new()) }
    }

    /// Whether tensor-core products round their inputs to f16 (see `coop_f16`).
    pub fn coop_f16(&self) -> bool {
        self.coop_f16.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Tensor-core products recorded from now on round their inputs to f16 (`on`) or keep
    /// f32 accuracy. Their kernels differ by name, so both may be cached at once.
    pub fn set_coop_f16(&self, on: bool) {
        self.coop_f16.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// A constant f32 table cached under `key` (the key must name everything `build` reads).
    pub fn table(&self, key: &str, build: impl FnOnce() -> Vec<f32>) -> wgpu::Buffer {
        let mut m = self.buffers.lock().expect("buffer cache lock");
        m.entry(key.to_string()).or_insert_with(|| upload(&self.gpu, key, bytemuck::cast_slice(&build()))).clone()
    }

    /// Bytes of the constant tables and scratch buffers the encoders hold now (scratch
    /// grows on first use: prefill on tensor cores takes the most).
    pub fn buffer_bytes(&self) -> u64 {
        self.buffers.lock().expect("buffer cache lock").values().map(|b| b.size()).sum()
    }

    /// A scratch buffer of at least `bytes` cached under `key`; grown (replaced) when too
    /// small. Dispatches of one batch that share it run in order, so reuse is safe.
    pub fn scratch(&self, key: &str, bytes: u64) -> wgpu::Buffer {
        let mut m = self.buffers.lock().expect("buffer cache lock");
        match m.get(key) {
            Some(b) if b.size() >= bytes => b.clone(),
            _ => {
                let b = storage(&self.gpu, key, bytes.next_power_of_two());
                m.insert(key.to_string(), b.clone());
                b
            }
        }
    }

    /// Whether the kernel cached under `key` has been compiled (tests check which variant
    /// a shape took).
    pub fn compiled(&self, key: &str) -> bool {
        self.cache.lock().expect("kernel cache lock").contains_key(key)
    }

    /// Whether any kernel whose name starts with `prefix` has been compiled (for names whose
    /// tail depends on the device, such as the matvec's reduction).
    pub fn compiled_prefix(&self, prefix: &str) -> bool {
        self.cache.lock().expect("kernel cache lock").keys().any(|k| k.starts_with(prefix))
    }

    /// Whether any kernel whose name passes `pred` has been compiled.
    pub fn compiled_matching(&self, pred: impl Fn(&str) -> bool) -> bool {
        self.cache.lock().expect("kernel cache lock").keys().any(|k| pred(k))
    }

    /// The kernel cached under `key`, compiling `build()` on first use.
    pub fn get(&self, key: &str, build: impl FnOnce() -> KernelSource) -> Result<Arc<Kernel>> {
        if let Some(k) = self.cache.lock().expect("kernel cache lock").get(key) {
            return Ok(k.clone());
        }
        let k = Arc::new(self.compile(build())?);
        self.cache.lock().expect("kernel cache lock").insert(key.to_string(), k.clone());
        Ok(k)
    }

    fn compile(&self, mut src: KernelSource) -> Result<Kernel> {
        let dev = &self.gpu.device;
        if let Some(code) = super::probe::apply(&src.code, super::probe::from_env()?) {
            eprintln!("RULLAMA_PROBE: {} rewritten (timing only: results are wrong)", src.name);
            src.code = code;
        }
        // For examples/pipeline_stats.rs: every kernel's composed source, under its name.
        if let Ok(dir) = std::env::var("RULLAMA_DUMP_WGSL") {
            let file: String = src.name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '-' }).collect();
            let path = std::path::Path::new(&dir).join(format!("{file}.wgsl"));
            if let Err(e) = std::fs::write(&path, &src.code) {
                eprintln!("RULLAMA_DUMP_WGSL: cannot write {}: {e}", path.display());
            }
        }
        let scope = dev.push_error_scope(wgpu::ErrorFilter::Validation);
        let desc = wgpu::ShaderModuleDescriptor {
            label: Some(&src.name),
            source: wgpu::ShaderSource::Wgsl(src.code.as_str().into()),
        };
        // SAFETY: `runtime_checks` keeps bounds and division checks; what it drops, loop
        // bounding, needs every loop to terminate, which holds for shaders/ (see there).
        let module = unsafe { dev.create_shader_module_trusted(desc, runtime_checks()) };
        let mut entries = vec![wgpu::BindGroupLayoutEntry {
            binding: 0,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Uniform,
                has_dynamic_offset: true,
                min_binding_size: None,
            },
            count: None,
        }];
        for (i, a) in src.buffers.iter().enumerate() {
            entries.push(wgpu::BindGroupLayoutEntry {
                binding: i as u32 + 1,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Storage { read_only: *a == Access::Read },
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            });
        }
        let layout = dev.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: Some(&src.name), entries: &entries });
        let pl = dev.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(&src.name),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = dev.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(&src.name),
            layout: Some(&pl),
            module: &module,
            entry_point: Some(src.entry),
            compilation_options: Default::default(),
            cache: None,
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::Gpu(format!("kernel {} does not compile: {e}", src.name)));
        }
        let left_out = self.left_out.iter().any(|p| src.name.starts_with(p.as_str()));
        if left_out {
            eprintln!("RULLAMA_LEAVE_OUT: {} is never dispatched (timing only: results are wrong)", src.name);
        }
        Ok(Kernel { name: src.name, pipeline, layout, n_buffers: src.buffers.len(), left_out })
    }
}

/// The checks naga builds into our shaders: buffer bounds and integer division, but not
/// loop bounding (a counter and a test added to every loop to rule out infinite ones),
/// which keeps the device compiler from unrolling and pipelining loops. Measured on the
/// H100: decode 754 -> 1035 tok/s (Gemma 3 270M layout) and 210 -> 275 (Gemma 4 E2B) without
/// it, no change from the other two. Every loop in shaders/ runs over a constant or a
/// parameter the encoders check, stepping by a nonzero constant, so each terminates.
/// `RULLAMA_LOOP_BOUNDING=1` puts it back (to rule it out when chasing a hang).
fn runtime_checks() -> wgpu::ShaderRuntimeChecks {
    let mut c = wgpu::ShaderRuntimeChecks::checked();
    c.force_loop_bounding = std::env::var("RULLAMA_LOOP_BOUNDING").is_ok_and(|v| v == "1");
    c
}

/// Storage buffers of f32 (activations, caches) and raw words (weights).
pub fn storage(gpu: &Gpu, label: &str, bytes: u64) -> wgpu::Buffer {
    gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        // Bindings must be non-empty and 4-byte sized.
        size: bytes.max(4).div_ceil(4) * 4,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    })
}

/// A storage buffer holding `data` (padded to 4 bytes).
pub fn upload(gpu: &Gpu, label: &str, data: &[u8]) -> wgpu::Buffer {
    let buf = storage(gpu, label, data.len() as u64);
    let whole = data.len() / 4 * 4;
    if whole > 0 {
        gpu.queue.write_buffer(&buf, 0, &data[..whole]);
    }
    if whole < data.len() {
        let mut tail = [0u8; 4];
        tail[..data.len() - whole].copy_from_slice(&data[whole..]);
        gpu.queue.write_buffer(&buf, whole as u64, &tail);
    }
    buf
}

struct Dispatch {
    kernel: Arc<Kernel>,
    bind: wgpu::BindGroup,
    param_offset: u32,
    grid: [u32; 3],
}

enum Step {
    Dispatch(Dispatch),
    Copy { src: wgpu::Buffer, src_off: u64, dst: wgpu::Buffer, dst_off: u64, bytes: u64 },
    Clear(wgpu::Buffer),
}

/// A bind group is identified by its kernel and the buffers bound (parameters first).
type BindKey = (usize, Vec<wgpu::Buffer>);

/// What a session keeps from one batch to the next: its parameter buffers and the bind
/// groups made over them. A decode step binds the same buffers as the last one, so after
/// the first step no bind group is created again. Dropped with the session, which frees
/// the buffers the bind groups hold.
pub struct Reuse {
    params: [wgpu::Buffer; 2],
    next: usize,
    capacity: u64,
    binds: HashMap<BindKey, wgpu::BindGroup>,
}

impl Reuse {
    /// For batches of up to `max_dispatches` dispatches. Two parameter buffers alternate,
    /// since the next batch is recorded while the previous one is being submitted.
    pub fn new(gpu: &Gpu, max_dispatches: usize) -> Reuse {
        let capacity = param_capacity(max_dispatches);
        let params = [param_buffer(gpu, capacity), param_buffer(gpu, capacity)];
        Reuse { params, next: 0, capacity, binds: HashMap::new() }
    }

    /// GPU memory `new(_, max_dispatches)` takes: both parameter buffers.
    pub fn bytes(max_dispatches: usize) -> u64 {
        2 * param_capacity(max_dispatches)
    }
}

/// Bytes of a parameter buffer with slots for `max_dispatches` dispatches.
fn param_capacity(max_dispatches: usize) -> u64 {
    (max_dispatches.max(1) as u64) * PARAM_SLOT
}

fn param_buffer(gpu: &Gpu, size: u64) -> wgpu::Buffer {
    gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("params"),
        size,
        usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}

/// A sequence of dispatches recorded into one command buffer and submitted together.
pub struct Batch {
    gpu: Arc<Gpu>,
    params: Vec<u8>,
    param_buf: Option<wgpu::Buffer>,
    steps: Vec<Step>,
    /// The uniform buffer is sized ahead so bind groups can be made while recording.
    param_capacity: u64,
    reuse: Option<Arc<std::sync::Mutex<Reuse>>>,
}

impl Batch {
    /// `max_dispatches`: how many parameter slots to reserve.
    pub fn new(gpu: Arc<Gpu>, max_dispatches: usize) -> Batch {
        let cap = param_capacity(max_dispatches);
        let buf = param_buffer(&gpu, cap);
        Batch { gpu, params: Vec::new(), param_buf: Some(buf), steps: Vec::new(), param_capacity: cap, reuse: None }
    }

    /// A batch that takes its parameter buffer and bind groups from `reuse`.
    pub fn reusing(gpu: Arc<Gpu>, reuse: &Arc<std::sync::Mutex<Reuse>>) -> Batch {
        let mut r = reuse.lock().expect("reuse lock");
        let buf = r.params[r.next].clone();
        r.next = (r.next + 1) % r.params.len();
        let cap = r.capacity;
        drop(r);
        Batch { gpu, params: Vec::new(), param_buf: Some(buf), steps: Vec::new(), param_capacity: cap, reuse: Some(reuse.clone()) }
    }

    /// Record one dispatch of `k` over `grid` workgroups with `buffers` at bindings 1...
    pub fn dispatch<P: bytemuck::Pod>(&mut self, k: &Arc<Kernel>, buffers: &[&wgpu::Buffer], params: &P, grid: [u32; 3]) -> Result<()> {
        if buffers.len() != k.n_buffers {
            return Err(Error::Gpu(format!("kernel {} takes {} buffers, got {}", k.name, k.n_buffers, buffers.len())));
        }
        let bytes = bytemuck::bytes_of(params);
        if bytes.len() as u64 > PARAM_SLOT {
            return Err(Error::Gpu(format!("kernel {}: parameters larger than {PARAM_SLOT} bytes", k.name)));
        }
        let offset = self.params.len() as u64;
        if offset + PARAM_SLOT > self.param_capacity {
            return Err(Error::Gpu(format!("batch holds at most {} dispatches", self.param_capacity / PARAM_SLOT)));
        }
        let max_grid = self.gpu.limits.max_compute_workgroups_per_dimension;
        if grid.iter().any(|&g| g > max_grid) {
            return Err(Error::Gpu(format!("kernel {}: grid {grid:?} exceeds {max_grid} workgroups per dimension", k.name)));
        }
        self.params.extend_from_slice(bytes);
        self.params.resize((offset + PARAM_SLOT) as usize, 0);
        let param_buf = self.param_buf.as_ref().expect("param buffer exists until submit");
        let make = || {
            let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: param_buf,
                offset: 0,
                size: wgpu::BufferSize::new(PARAM_SLOT),
            }),
        }];
            for (i, b) in buffers.iter().enumerate() {
                entries.push(wgpu::BindGroupEntry { binding: i as u32 + 1, resource: b.as_entire_binding() });
            }
            self.gpu.device.create_bind_group(&wgpu::BindGroupDescriptor { label: None, layout: &k.layout, entries: &entries })
        };
        let bind = match &self.reuse {
            None => make(),
            Some(r) => {
                let key: BindKey = (Arc::as_ptr(k) as usize, std::iter::once(param_buf).chain(buffers.iter().copied()).cloned().collect());
                r.lock().expect("reuse lock").binds.entry(key).or_insert_with(make).clone()
            }
        };
        if grid.iter().all(|&g| g > 0) && !k.left_out {
            self.steps.push(Step::Dispatch(Dispatch { kernel: k.clone(), bind, param_offset: offset as u32, grid }));
        }
        Ok(())
    }

    /// Record a buffer-to-buffer copy (bytes, 4-aligned).
    pub fn copy(&mut self, src: &wgpu::Buffer, src_off: u64, dst: &wgpu::Buffer, dst_off: u64, bytes: u64) {
        if bytes > 0 {
            self.steps.push(Step::Copy { src: src.clone(), src_off, dst: dst.clone(), dst_off, bytes });
        }
    }

    /// Record the zeroing of all of `buf`.
    pub fn clear(&mut self, buf: &wgpu::Buffer) {
        self.steps.push(Step::Clear(buf.clone()));
    }

    /// Encode everything and submit it.
    pub fn submit(self) -> Result<()> {
        self.submit_indexed().map(|_| ())
    }

    /// `submit`, returning the submission's index (to wait for it alone).
    pub fn submit_indexed(mut self) -> Result<wgpu::SubmissionIndex> {
        let gpu = self.gpu.clone();
        let param_buf = self.param_buf.take().expect("param buffer");
        if !self.params.is_empty() {
            gpu.queue.write_buffer(&param_buf, 0, &self.params);
        }
        if kernel_profile() {
            self.submit_timed()?;
            return Ok(gpu.queue.submit([]));
        }
        let mut enc = gpu.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("batch") });
        let mut guard = span_timer(&gpu);
        let slot = guard.as_mut().and_then(|g| g.as_mut()).and_then(SpanTimer::claim);
        let spans = guard.as_ref().and_then(|g| g.as_ref());
        // Only a timed batch needs to know where its last pass begins.
        let last = slot.and_then(|_| self.steps.iter().rposition(|s| matches!(s, Step::Dispatch(_))));
        let mut first = true;
        let mut i = 0;
        while i < self.steps.len() {
            match &self.steps[i] {
                Step::Copy { src, src_off, dst, dst_off, bytes } => {
                    enc.copy_buffer_to_buffer(src, *src_off, dst, *dst_off, *bytes);
                    i += 1;
                }
                Step::Clear(dst) => {
                    enc.clear_buffer(dst, 0, None);
                    i += 1;
                }
                Step::Dispatch(_) => {
                    // Under RULLAMA_PROFILE=1 the first pass starts and the last one ends the batch's span.
                    let has_last = last.is_some_and(|l| self.steps[i..=l].iter().all(|s| matches!(s, Step::Dispatch(_))));
                    let timestamp_writes = match (slot, spans) {
                        (Some(q), Some(t)) if first || has_last => Some(wgpu::ComputePassTimestampWrites {
                            query_set: &t.set,
                            beginning_of_pass_write_index: first.then_some(2 * q),
                            end_of_pass_write_index: has_last.then_some(2 * q + 1),
                        }),
                        _ => None,
                    };
                    first = false;
                    let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes });
                    while let Some(Step::Dispatch(d)) = self.steps.get(i) {
                        pass.set_pipeline(&d.kernel.pipeline);
                        pass.set_bind_group(0, &d.bind, &[d.param_offset]);
                        pass.dispatch_workgroups(d.grid[0], d.grid[1], d.grid[2]);
                        i += 1;
                    }
                }
            }
        }
        if let (Some(q), Some(t)) = (slot, spans) {
            enc.resolve_query_set(&t.set, 2 * q..2 * q + 2, &t.resolved, wgpu::QUERY_RESOLVE_BUFFER_ALIGNMENT * q as u64);
        }
        drop(guard);
        let index = gpu.queue.submit([enc.finish()]);
        // Validation errors arrive through the device's error handler (an error scope
        // here would cost a round trip per submission).
        match gpu.take_error() {
            Some(e) => Err(Error::Gpu(format!("submission rejected: {e}"))),
            None => Ok(index),
        }
    }
}

/// `RULLAMA_PROFILE=1`: host and GPU time per batch (a decode step is one batch).
pub(crate) fn step_profile() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("RULLAMA_PROFILE").is_ok_and(|v| v == "1"))
}

/// GPU time from the start of each batch's first pass to the end of its last, under
/// `RULLAMA_PROFILE=1`: two timestamps per batch, so unlike `RULLAMA_PROFILE=kernels` the
/// batch runs as it does unprofiled. Comparing it with the host's time per step says which
/// of the two sets the pace.
struct SpanTimer {
    set: wgpu::QuerySet,
    resolved: wgpu::Buffer,
    used: u32,
}

/// Batches timed until `batch_spans` reads them.
const SPAN_SLOTS: u32 = 2048;

static SPANS: Mutex<Option<SpanTimer>> = Mutex::new(None);

impl SpanTimer {
    fn claim(&mut self) -> Option<u32> {
        (self.used < SPAN_SLOTS).then(|| {
            self.used += 1;
            self.used - 1
        })
    }
}

fn span_timer(gpu: &Gpu) -> Option<std::sync::MutexGuard<'static, Option<SpanTimer>>> {
    if !step_profile() || !gpu.timestamps {
        return None;
    }
    let mut t = SPANS.lock().expect("span lock");
    if t.is_none() {
        let set = gpu.device.create_query_set(&wgpu::QuerySetDescriptor { label: Some("batch spans"), ty: wgpu::QueryType::Timestamp, count: 2 * SPAN_SLOTS });
        let resolved = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("batch spans"),
            size: wgpu::QUERY_RESOLVE_BUFFER_ALIGNMENT * SPAN_SLOTS as u64,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        *t = Some(SpanTimer { set, resolved, used: 0 });
    }
    Some(t)
}

/// GPU (start, end) per batch (µs from the first batch's start) of the batches submitted
/// since the last call, in order (waits for the GPU); empty unless `RULLAMA_PROFILE=1` on
/// a device with timestamps.
pub fn batch_spans(gpu: &Gpu) -> Result<Vec<(f64, f64)>> {
    let Some(mut guard) = span_timer(gpu) else { return Ok(Vec::new()) };
    let t = guard.as_mut().expect("span timer made");
    let n = std::mem::take(&mut t.used);
    if n == 0 {
        return Ok(Vec::new());
    }
    // Each batch's pair sits at the start of its own resolve-aligned slot.
    let stride = wgpu::QUERY_RESOLVE_BUFFER_ALIGNMENT as usize / 8;
    let ticks: Vec<u64> = bytemuck::pod_collect_to_vec(&read_back(gpu, &t.resolved, 0, wgpu::QUERY_RESOLVE_BUFFER_ALIGNMENT * n as u64)?);
    let period = gpu.queue.get_timestamp_period() as f64;
    let t0 = ticks[0];
    let us = |t: u64| t.saturating_sub(t0) as f64 * period / 1e3;
    Ok(ticks.chunks(stride).map(|c| (us(c[0]), us(c[1]))).collect())
}

/// `RULLAMA_PROFILE=kernels`: time every dispatch (slow; for finding the kernels that
/// dominate a step). With GPU timestamps each dispatch gets its own pass bracketed by two
/// timestamps, all in one submission, so the figures are GPU time per dispatch including
/// the barrier before it; without, each dispatch is submitted and waited for on its own.
pub(crate) fn kernel_profile() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("RULLAMA_PROFILE").is_ok_and(|v| v == "kernels"))
}

static KERNEL_TIMES: Mutex<Vec<(String, u32, std::time::Duration)>> = Mutex::new(Vec::new());

fn record_time(name: &str, dt: std::time::Duration) {
    let mut times = KERNEL_TIMES.lock().expect("profile lock");
    match times.iter_mut().find(|e| e.0 == name) {
        Some(e) => {
            e.1 += 1;
            e.2 += dt;
        }
        None => times.push((name.to_string(), 1, dt)),
    }
}

fn step_name(step: &Step) -> &str {
    match step {
        Step::Copy { .. } => "copy",
        Step::Clear(_) => "clear",
        Step::Dispatch(d) => &d.kernel.name,
    }
}

fn encode_step(enc: &mut wgpu::CommandEncoder, step: &Step, timestamps: Option<wgpu::ComputePassTimestampWrites>) {
    match step {
        Step::Copy { src, src_off, dst, dst_off, bytes } => enc.copy_buffer_to_buffer(src, *src_off, dst, *dst_off, *bytes),
        Step::Clear(dst) => enc.clear_buffer(dst, 0, None),
        Step::Dispatch(d) => {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: timestamps });
            pass.set_pipeline(&d.kernel.pipeline);
            pass.set_bind_group(0, &d.bind, &[d.param_offset]);
            pass.dispatch_workgroups(d.grid[0], d.grid[1], d.grid[2]);
        }
    }
}

impl Batch {
    fn submit_timed(self) -> Result<()> {
        let gpu = self.gpu.clone();
        gpu.wait()?;
        if gpu.timestamps {
            self.submit_timestamped()?;
        } else {
            for step in &self.steps {
                let mut enc = gpu.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
                encode_step(&mut enc, step, None);
                let t = std::time::Instant::now();
                gpu.queue.submit([enc.finish()]);
                gpu.wait()?;
                record_time(step_name(step), t.elapsed());
            }
        }
        match gpu.take_error() {
            Some(e) => Err(Error::Gpu(format!("submission rejected: {e}"))),
            None => Ok(()),
        }
    }

    fn submit_timestamped(&self) -> Result<()> {
        let gpu = &self.gpu;
        let dispatches: Vec<&Step> = self.steps.iter().filter(|s| matches!(s, Step::Dispatch(_))).collect();
        let n = dispatches.len().clamp(1, 2048) as u32;
        let set = gpu.device.create_query_set(&wgpu::QuerySetDescriptor { label: None, ty: wgpu::QueryType::Timestamp, count: 2 * n });
        let resolved = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: 16 * n as u64,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let mut enc = gpu.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        let mut timed = Vec::new();
        for step in &self.steps {
            let q = timed.len() as u32;
            let ts = (matches!(step, Step::Dispatch(_)) && q < n).then(|| wgpu::ComputePassTimestampWrites {
                query_set: &set,
                beginning_of_pass_write_index: Some(2 * q),
                end_of_pass_write_index: Some(2 * q + 1),
            });
            if ts.is_some() {
                timed.push(step_name(step).to_string());
            }
            encode_step(&mut enc, step, ts);
        }
        enc.resolve_query_set(&set, 0..2 * timed.len() as u32, &resolved, 0);
        gpu.queue.submit([enc.finish()]);
        let ticks: Vec<u64> = bytemuck::pod_collect_to_vec(&read_back(gpu, &resolved, 0, 16 * timed.len() as u64)?);
        let period = gpu.queue.get_timestamp_period() as f64;
        for (i, name) in timed.iter().enumerate() {
            let ns = ticks[2 * i + 1].saturating_sub(ticks[2 * i]) as f64 * period;
            record_time(name, std::time::Duration::from_nanos(ns as u64));
        }
        // First start to last end: the gap to the sum above is what passes cost between them.
        if let (Some(first), Some(last)) = (ticks.first(), ticks.get(2 * timed.len() - 1)) {
            let ns = last.saturating_sub(*first) as f64 * period;
            record_time("(batch span, first start to last end)", std::time::Duration::from_nanos(ns as u64));
        }
        Ok(())
    }
}

/// Per-kernel totals gathered under `RULLAMA_PROFILE=kernels`, slowest first.
pub fn kernel_profile_report() -> String {
    let mut times = KERNEL_TIMES.lock().expect("profile lock").clone();
    times.sort_by_key(|t| std::cmp::Reverse(t.2));
    times
        .iter()
        .map(|(n, c, t)| format!("{:>10.3} ms {:>7} × {:>9.1} µs  {n}", t.as_secs_f64() * 1e3, c, t.as_secs_f64() * 1e6 / *c as f64))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Copy `bytes` of `buf` from `offset` back to the host (waits for the GPU).
pub fn read_back(gpu: &Gpu, buf: &wgpu::Buffer, offset: u64, bytes: u64) -> Result<Vec<u8>> {
    let staging = gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("readback"),
        size: bytes.max(4),
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut enc = gpu.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("readback") });
    enc.copy_buffer_to_buffer(buf, offset, &staging, 0, bytes);
    gpu.queue.submit([enc.finish()]);
    let (tx, rx) = std::sync::mpsc::channel();
    staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
        let _ = tx.send(r);
    });
    gpu.wait()?;
    rx.recv()
        .map_err(|_| Error::Gpu("readback callback dropped".into()))?
        .map_err(|e| Error::Gpu(format!("readback failed: {e}")))?;
    let data = staging
        .slice(..bytes)
        .get_mapped_range()
        .map_err(|e| Error::Gpu(format!("readback map failed: {e}")))?
        .to_vec();
    staging.unmap();
    Ok(data)
}

/// Read `n` f32 values starting at element `offset`.
pub fn read_f32(gpu: &Gpu, buf: &wgpu::Buffer, offset: usize, n: usize) -> Result<Vec<f32>> {
    let bytes = read_back(gpu, buf, offset as u64 * 4, n as u64 * 4)?;
    Ok(bytemuck::pod_collect_to_vec(&bytes))
}
