//! The GPU text forward pass for Gemma 3 and Gemma 4, step for step the same as
//! `cpu::forward` (its oracle), recorded as batches of dispatches: one submission per decode
//! step (a few per prefill chunk, so cancel takes effect between layer groups), no host
//! round-trip inside a step. Weights are uploaded as stored (quantized blocks); activations
//! live in buffers sized once for the largest batch.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::kernel::{self, Batch, Kernels};
use super::rope::HeadGroup;
use super::weights::GpuMatrix;
use super::{attention, elementwise, matmul, moe, norm, rope, sample};
use crate::cpu::forward::Logits;
use crate::gguf::{GgufFile, TensorInfo};
use crate::model::{AttnKind, Config, ExpertGateUp};
use crate::runtime::{Sampler, TextModel};
use crate::{Error, Result};

mod decode;
mod residual;

use residual::{Residual, Step};

/// Largest number of tokens evaluated in one pass; longer prompts run in chunks.
/// 512 rather than 256: twice the workgroups per prefill matmul, which the smaller layer
/// matrices need to fill a large GPU (H100, 512-token prompt: Gemma 3 270M layout 20.0k ->
/// 33.7k tok/s, Gemma 4 E2B 3.0k -> 4.4k); activations take twice the memory. 1024 rather
/// than 512: each weight is split into f16 parts once per chunk, and the products get
/// larger grids (H100, 4096-token prompt: E2B 10.4k -> 11.3k tok/s, 270M 86.8k -> 103.9k;
/// E2B activations 203 -> 308 MB with a 4096-token cache). 2048 gave E2B 12.8k for 518 MB.
const MAX_BATCH: usize = 1024;
/// Rows of logits computed at once for teacher-forced evaluation.
const LOGIT_ROWS: usize = 8;
/// Layers per submission during prefill (cancel is checked between submissions).
const LAYERS_PER_SUBMIT: usize = 4;

struct MoeLayer {
    router: GpuMatrix,
    router_scale: wgpu::Buffer,
    gate_up: Vec<GpuMatrix>,
    down: GpuMatrix,
    per_expert_scale: wgpu::Buffer,
    pre_norm_2: wgpu::Buffer,
    post_norm_1: wgpu::Buffer,
    post_norm_2: wgpu::Buffer,
}

struct PleLayer {
    inp_gate: GpuMatrix,
    /// inp_gate transposed in f32, for decode's gate through the down projection
    /// (`matmul::PleAcc`), where the device takes that.
    gate_t: Option<wgpu::Buffer>,
    proj: GpuMatrix,
    post_norm: wgpu::Buffer,
}

struct Layer {
    attn_norm: wgpu::Buffer,
    qkv: Qkv,
    q_norm: Option<wgpu::Buffer>,
    k_norm: Option<wgpu::Buffer>,
    o: GpuMatrix,
    post_attn_norm: wgpu::Buffer,
    ffn_norm: wgpu::Buffer,
    gate_up: GateUp,
    down: GpuMatrix,
    post_ffw_norm: wgpu::Buffer,
    moe: Option<MoeLayer>,
    ple: Option<PleLayer>,
    /// The layer scale, on the GPU and its value.
    output_scale: Option<(wgpu::Buffer, f32)>,
}

/// The attention input projections. Where k (and v) have q's type they are stacked under
/// it in one matrix at load ([q; k] or [q; k; v]), and decode computes them in one
/// dispatch that writes each part to its place (q, the K and V caches).
struct Qkv {
    /// `[q; k; v]`, `[q; k]` or q alone.
    m: GpuMatrix,
    /// Rows of q, k and v in `m` (0 for a part stored apart or absent).
    rows: [usize; 3],
    /// k and v where stored apart.
    k: Option<GpuMatrix>,
    v: Option<GpuMatrix>,
}

/// The FFN's gate and up projections: stacked as [gate; up] in one matrix where they have
/// the same type and fit one binding (decode then runs gate, up and GeGLU as one matvec),
/// else as they are stored.
enum GateUp {
    Stacked(GpuMatrix),
    Split(GpuMatrix, GpuMatrix),
}

struct Ple {
    token_embd: GpuMatrix,
    model_proj: GpuMatrix,
    proj_norm: wgpu::Buffer,
}

/// f32 activation values a session allocates (for up to MAX_BATCH tokens at once).
fn scratch_floats(c: &Config) -> usize {
    let (qmax, fmax) = widest(c);
    // x, y, a, ffn; q, attn; gate (room for [gate | up] rows), up; one row each of x2 and zeros.
    MAX_BATCH * (4 * c.hidden + 2 * qmax + 3 * fmax) + LOGIT_ROWS * c.vocab + 2 * c.hidden
}

/// Widest per-token attention row (all heads) and FFN row over the layers: the sizes of the
/// q/attn and gate/up activation buffers.
fn widest(c: &Config) -> (usize, usize) {
    (layer_max(c, |l| c.n_heads * l.head_dim.max(l.v_head_dim)), layer_max(c, |l| l.ffn_width))
}

/// The widest K and V rows of one token over the layers (floats).
fn kv_row(c: &Config) -> (usize, usize) {
    (layer_max(c, |l| l.n_kv_heads * l.head_dim), layer_max(c, |l| l.n_kv_heads * l.v_head_dim))
}

/// The largest `f(layer)` over the layers (0 for none).
fn layer_max(c: &Config, f: impl Fn(&crate::model::LayerPlan) -> usize) -> usize {
    c.layers.iter().map(f).max().unwrap_or(0)
}

/// GPU memory a model needs before it is loaded: the text weights as stored (towers and
/// projectors are not uploaded), the KV cache for `context` tokens and the activations.
/// Not counted: the scratch of tensor-core prefill, on devices that have it (f16 splits of
/// x and of up to 128 MiB of weight rows in each of two parts, split-K partials, attention
/// scores up to 64 MiB: ~380 MB for Gemma 4 E2B), made on first use.
pub fn estimate_bytes(file: &GgufFile, context: usize) -> Result<u64> {
    let cfg = Config::from_gguf(&file.gguf)?;
    let tower = |n: &str| n.starts_with("v.") || n.starts_with("a.") || n.starts_with("mm.");
    let weights: u64 = file.tensors.iter().filter(|t| !tower(&t.name)).map(|t| t.n_bytes).sum();
    Ok(weights + ple_gate_t_bytes(&cfg) + cache_bytes(&cfg, context, 4, kv_row(&cfg)))
}

/// Bytes of the transposed per-layer-embedding gates (`PleLayer::gate_t`) where the layout
/// takes them; a device without 64-bit atomics loads none, so there the estimate is that
/// much high (E2B: 55 MB).
fn ple_gate_t_bytes(c: &Config) -> u64 {
    if ple_gate_fits(c) { (c.n_layers * c.hidden * c.ple_dim * 4) as u64 } else { 0 }
}

/// Whether the layout's per-layer-embedding gate fits `matmul::PleAcc` (`ple_acc_usable`
/// then asks the device) and no MoE branch adds to the down projection's output.
fn ple_gate_fits(c: &Config) -> bool {
    matmul::ple_acc_fits(c.ple_dim, c.hidden) && c.moe.is_none()
}

/// Bytes a cache of `capacity` tokens takes with K/V elements of `elem` bytes and f32
/// staging rows of `kv_new` = (K, V) floats: the KV cache, the activations and the decode
/// parameter buffers.
fn cache_bytes(c: &Config, capacity: usize, elem: usize, kv_new: (usize, usize)) -> u64 {
    let params = kernel::Reuse::bytes(param_slots(c));
    c.kv_cache_bytes(capacity, capacity, elem) + (scratch_floats(c) + kv_new.0 + kv_new.1) as u64 * 4 + params + ple_acc_bytes(c)
}

/// The per-layer-embedding gate's i64 sums, one region a layer (`PleScratch::acc`).
fn ple_acc_bytes(c: &Config) -> u64 {
    if c.ple_dim > 0 { (c.n_layers * matmul::ple_acc_words(c.ple_dim) * 8) as u64 } else { 0 }
}

/// Dispatches a cache's parameter buffers (`kernel::Reuse`) have slots for: a group of
/// decode steps' (E2B: 2 × 7 MB of buffers).
fn param_slots(c: &Config) -> usize {
    GpuModel::max_dispatches(c.n_layers) * decode::MAX_GROUP
}

/// A model loaded onto the GPU.
pub struct GpuModel {
    pub cfg: Config,
    pub k: Arc<Kernels>,
    token_embd: Arc<GpuMatrix>,
    output: Arc<GpuMatrix>,
    output_norm: wgpu::Buffer,
    rope_freqs: Option<wgpu::Buffer>,
    ple: Option<Ple>,
    layers: Vec<Layer>,
    /// Bytes of weights on the GPU.
    pub weight_bytes: u64,
    /// New caches hold K and V in f16 (half the memory; see `set_kv_f16`).
    kv_f16: bool,
    /// The buffers of the last cache dropped (see `Spare`).
    spare: Spare,
    /// Decode folds residual steps into the matvecs that read them (`forward::residual`).
    fold_residual: bool,
    /// Decode attention does the new token's head norms and RoPE (`attention::attention_decode`).
    decode_prep: bool,
    /// Decode takes the per-layer-embedding gate through the down projection
    /// (`matmul::PleAcc`: one dispatch a layer fewer).
    ple_acc: bool,
}

/// Activation buffers for up to MAX_BATCH tokens.
struct Scratch {
    ids: wgpu::Buffer,
    x: wgpu::Buffer,
    /// One row: where a folded residual step moves the residual (`forward::residual`).
    x2: wgpu::Buffer,
    /// One row of zeros (never written): the step `Residual::start` leaves pending.
    zeros: wgpu::Buffer,
    y: wgpu::Buffer,
    q: wgpu::Buffer,
    attn: wgpu::Buffer,
    a: wgpu::Buffer,
    gate: wgpu::Buffer,
    up: wgpu::Buffer,
    ffn: wgpu::Buffer,
    logits: wgpu::Buffer,
    picked: wgpu::Buffer,
    /// The last tokens of the history (a ring of sample::PENALTY_RING ids, logical index i at
    /// i % PENALTY_RING) for the repetition penalty.
    hist: wgpu::Buffer,
    /// Token ids of pipelined decode steps (`decode::RING` slots): step i reads slot i and
    /// writes the token it picks into slot i + 1.
    ring: wgpu::Buffer,
    cand_ids: wgpu::Buffer,
    cand_vals: wgpu::Buffer,
    moe: Option<MoeScratch>,
    ple: Option<PleScratch>,
    /// The step's raw K and V rows in f32, where the projections write them before
    /// `head_norm_rope` rounds them into an f16 cache (a batch of rows), or decode attention
    /// preps them (`attention::attention_decode`, one row).
    kv_new: (wgpu::Buffer, wgpu::Buffer),
}

struct MoeScratch {
    router_logits: wgpu::Buffer,
    ids: wgpu::Buffer,
    weights: wgpu::Buffer,
    gate_up: wgpu::Buffer,
    up: wgpu::Buffer,
    down: wgpu::Buffer,
    out: wgpu::Buffer,
    z: wgpu::Buffer,
}

struct PleScratch {
    inputs: wgpu::Buffer,
    tok: wgpu::Buffer,
    g: wgpu::Buffer,
    p: wgpu::Buffer,
    /// The gate's sums for each layer (`matmul::PleAcc`), zeroed before each decode step.
    acc: wgpu::Buffer,
}

/// A conversation's state on the GPU: the KV cache and the activation buffers.
pub struct GpuCache {
    len: usize,
    /// Some until dropped, when they become the model's spare.
    bufs: Option<CacheBuffers>,
    spare: Spare,
}

/// The buffers of a dropped cache, which the model's next cache of the same size takes
/// over: a chat makes a cache per reply, and a new one makes every bind group again on its
/// first decode step (~0.9 ms of recording on the 270M layout, with an H100 waiting for it).
type Spare = Arc<std::sync::Mutex<Option<CacheBuffers>>>;

/// A cache's GPU buffers (`GpuCache` derefs to them).
pub struct CacheBuffers {
    reuse: Arc<std::sync::Mutex<kernel::Reuse>>,
    k: Vec<Option<wgpu::Buffer>>,
    v: Vec<Option<wgpu::Buffer>>,
    /// K and V are stored in f16, two per u32 (attention::KvCaches).
    kv_f16: bool,
    capacity: usize,
    s: Scratch,
}

impl std::ops::Deref for GpuCache {
    type Target = CacheBuffers;
    fn deref(&self) -> &CacheBuffers {
        self.bufs.as_ref().expect("a cache has its buffers until it is dropped")
    }
}

impl Drop for GpuCache {
    fn drop(&mut self) {
        // Work still queued on the buffers runs before anything a later cache records.
        if let (Some(b), Ok(mut spare)) = (self.bufs.take(), self.spare.lock()) {
            *spare = Some(b);
        }
    }
}

impl GpuCache {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn capacity(&self) -> usize {
        self.capacity
    }
    /// Keep only the first `n` positions (the rest is overwritten by the next forward).
    pub fn truncate(&mut self, n: usize) {
        self.len = self.len.min(n);
    }

    /// Copy the cache back to the host (for a snapshot; f16 caches are widened to f32, so a
    /// snapshot loads into a cache of either type).
    pub fn export(&self, k: &Kernels) -> Result<crate::runtime::snapshot::KvState> {
        let mut layers = Vec::with_capacity(self.k.len());
        for (kb, vb) in self.k.iter().zip(&self.v) {
            layers.push(match (kb, vb) {
                (Some(kb), Some(vb)) => Some((self.read(k, kb)?, self.read(k, vb)?)),
                _ => None,
            });
        }
        Ok(crate::runtime::snapshot::KvState { len: self.len, layers })
    }

    /// The first `len` positions of one cache buffer, as f32.
    fn read(&self, k: &Kernels, buf: &wgpu::Buffer) -> Result<Vec<f32>> {
        let per_pos = self.elems(buf) / self.capacity.max(1);
        let n = self.len * per_pos;
        if !self.kv_f16 {
            return kernel::read_f32(&k.gpu, buf, 0, n);
        }
        let bytes = kernel::read_back(&k.gpu, buf, 0, (n.div_ceil(2) * 4) as u64)?;
        Ok(bytes.chunks_exact(2).take(n).map(|h| half::f16::from_le_bytes([h[0], h[1]]).to_f32()).collect())
    }

    /// Elements a cache buffer holds.
    fn elems(&self, buf: &wgpu::Buffer) -> usize {
        (buf.size() / if self.kv_f16 { 2 } else { 4 }) as usize
    }

    /// Load a snapshot's K/V (layout already checked against the model).
    pub fn import(&mut self, k: &Kernels, s: crate::runtime::snapshot::KvState) -> Result<()> {
        if s.len > self.capacity || s.layers.len() != self.k.len() {
            return Err(Error::Input(format!("a snapshot of {} tokens does not fit this cache of {}", s.len, self.capacity)));
        }
        for ((kb, vb), l) in self.k.iter().zip(&self.v).zip(&s.layers) {
            if let (Some(kb), Some(vb), Some((kd, vd))) = (kb, vb, l) {
                for (buf, data) in [(kb, kd), (vb, vd)] {
                    if self.kv_f16 {
                        let mut h: Vec<half::f16> = data.iter().map(|&v| half::f16::from_f32(v)).collect();
                        h.resize(h.len().next_multiple_of(2), half::f16::ZERO);
                        k.gpu.queue.write_buffer(buf, 0, bytemuck::cast_slice(&h));
                    } else {
                        k.gpu.queue.write_buffer(buf, 0, bytemuck::cast_slice(data));
                    }
                }
            }
        }
        self.len = s.len;
        Ok(())
    }
}

fn f32_buf(k: &Kernels, label: &str, n: usize) -> wgpu::Buffer {
    kernel::storage(&k.gpu, label, (n * 4) as u64)
}

struct Loader<'a> {
    k: &'a Kernels,
    file: &'a GgufFile,
    bytes: u64,
}

impl Loader<'_> {
    fn info(&self, name: &str) -> Result<&TensorInfo> {
        self.file.gguf.tensor(name).ok_or_else(|| Error::MissingTensor(format!("{name} (in {})", self.file.path.display())))
    }

    fn first(&self, names: &[String]) -> Result<String> {
        names
            .iter()
            .find(|n| self.file.gguf.has_tensor(n))
            .cloned()
            .ok_or_else(|| Error::MissingTensor(format!("{} (in {})", names[0], self.file.path.display())))
    }

    fn matrix(&mut self, name: &str) -> Result<GpuMatrix> {
        self.stacked(name, 1)
    }

    /// A matrix whose rows form groups that must not straddle a binding tile (stacked experts).
    fn stacked(&mut self, name: &str, rows_per_group: usize) -> Result<GpuMatrix> {
        let t = self.info(name)?.clone();
        let data = self.file.tensor_data(&t);
        self.bytes += data.len() as u64;
        GpuMatrix::upload_stacked(self.k, name, t.ty, t.row_len() as usize, t.n_rows() as usize, rows_per_group, data)
    }

    /// A matrix expanded to f32 and transposed (`matmul::gate_transposed`).
    fn transposed(&mut self, name: &str) -> Result<wgpu::Buffer> {
        let t = self.info(name)?.clone();
        let v = matmul::gate_transposed(&self.file.view(name)?.to_f32()?, t.n_rows() as usize, t.row_len() as usize);
        self.bytes += (v.len() * 4) as u64;
        Ok(kernel::upload(&self.k.gpu, name, bytemuck::cast_slice(&v)))
    }

    /// A small vector (norm weights, scales) expanded to f32.
    fn vector(&mut self, name: &str) -> Result<wgpu::Buffer> {
        self.vector_map(name, |v| v)
    }

    /// `vector` with `f` applied to each element.
    fn vector_map(&mut self, name: &str, f: impl Fn(f32) -> f32) -> Result<wgpu::Buffer> {
        let v: Vec<f32> = self.file.view(name)?.to_f32()?.into_iter().map(f).collect();
        self.bytes += (v.len() * 4) as u64;
        Ok(kernel::upload(&self.k.gpu, name, bytemuck::cast_slice(&v)))
    }

    fn gate_up(&mut self, gate: &str, up: &str) -> Result<GateUp> {
        let (g, u) = (self.info(gate)?.clone(), self.info(up)?.clone());
        let fits = 2 * g.n_bytes <= self.k.gpu.max_binding();
        if g.ty != u.ty || g.dims != u.dims || !fits {
            return Ok(GateUp::Split(self.matrix(gate)?, self.matrix(up)?));
        }
        Ok(GateUp::Stacked(self.stack(gate, &[&g, &u])?))
    }

    /// Tensors of one type and row length as one matrix (their rows one after another) in
    /// one binding tile, named after the first.
    fn stack(&mut self, name: &str, parts: &[&TensorInfo]) -> Result<GpuMatrix> {
        let data: Vec<u8> = parts.iter().flat_map(|t| self.file.tensor_data(t).iter().copied()).collect();
        self.bytes += data.len() as u64;
        let rows: usize = parts.iter().map(|t| t.n_rows() as usize).sum();
        GpuMatrix::upload_stacked(self.k, name, parts[0].ty, parts[0].row_len() as usize, rows, rows, &data)
    }

    /// q, k and v (k and v absent on layers reading another layer's KV; v absent where V
    /// is K), stacked where their types allow (see `Qkv`).
    fn qkv(&mut self, q: &str, k: Option<&str>, v: Option<&str>) -> Result<Qkv> {
        let qi = self.info(q)?.clone();
        let like_q = |l: &Self, name: &str| -> Result<Option<TensorInfo>> {
            let t = l.info(name)?.clone();
            Ok((t.ty == qi.ty && t.row_len() == qi.row_len()).then_some(t))
        };
        let Some(kn) = k else { return Ok(Qkv { rows: [qi.n_rows() as usize, 0, 0], m: self.matrix(q)?, k: None, v: None }) };
        let (ki, vi) = (like_q(self, kn)?, match v {
            Some(vn) => like_q(self, vn)?,
            None => None,
        });
        let parts: Vec<&TensorInfo> = [Some(&qi), ki.as_ref(), ki.as_ref().and(vi.as_ref())].into_iter().flatten().collect();
        let bytes: u64 = parts.iter().map(|t| t.n_bytes).sum();
        if ki.is_none() || bytes > self.k.gpu.max_binding() {
            return Ok(Qkv {
                rows: [qi.n_rows() as usize, 0, 0],
                m: self.matrix(q)?,
                k: Some(self.matrix(kn)?),
                v: v.map(|vn| self.matrix(vn)).transpose()?,
            });
        }
        let mut rows = [0; 3];
        for (i, t) in parts.iter().enumerate() {
            rows[i] = t.n_rows() as usize;
        }
        let m = self.stack(q, &parts)?;
        let v_apart = match (v, rows[2]) {
            (Some(vn), 0) => Some(self.matrix(vn)?),
            _ => None,
        };
        Ok(Qkv { m, rows, k: None, v: v_apart })
    }

    /// A one-element tensor (the layer scale): on the GPU, and its value.
    fn scalar_alias(&mut self, names: [String; 2]) -> Result<(wgpu::Buffer, f32)> {
        let name = self.first(&names)?;
        let v = self.file.view(&name)?.to_f32()?;
        let value = *v.first().ok_or_else(|| Error::Gguf(format!("{name} is empty")))?;
        Ok((self.vector(&name)?, value))
    }

    fn vector_alias(&mut self, names: [String; 2]) -> Result<wgpu::Buffer> {
        let n = self.first(&names)?;
        self.vector(&n)
    }
}

impl GpuModel {
    pub fn load(file: Arc<GgufFile>) -> Result<GpuModel> {
        Self::load_with_progress(file, &mut |_| {})
    }

    /// Upload every weight; `progress` gets the fraction of layers done.
    pub fn load_with_progress(file: Arc<GgufFile>, progress: &mut dyn FnMut(f32)) -> Result<GpuModel> {
        let gpu = super::Gpu::get()?;
        // Out-of-memory during upload is reported with the estimate instead of aborting.
        let scope = gpu.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let loaded = Self::upload(file.clone(), gpu.clone(), progress);
        let oom = pollster::block_on(scope.pop());
        match (loaded, oom) {
            (Ok(m), None) => Ok(m),
            (Err(e), None) => Err(e),
            (_, Some(e)) => {
                let need = estimate_bytes(&file, 4096)?;
                Err(Error::Gpu(format!(
                    "the model does not fit in GPU memory: it needs about {:.2} GB (weights and a 4096-token cache) on {} ({e})",
                    need as f64 / 1e9,
                    gpu.info.name
                )))
            }
        }
    }

    fn upload(file: Arc<GgufFile>, gpu: Arc<super::Gpu>, progress: &mut dyn FnMut(f32)) -> Result<GpuModel> {
        let cfg = Config::from_gguf(&file.gguf)?;
        let k = Arc::new(Kernels::new(gpu));
        let mut l = Loader { k: &k, file: &file, bytes: 0 };
        let token_embd = Arc::new(l.matrix("token_embd.weight")?);
        let output = match file.gguf.has_tensor("output.weight") {
            true => Arc::new(l.matrix("output.weight")?),
            false => token_embd.clone(),
        };
        let output_norm = l.vector("output_norm.weight")?;
        let rope_freqs = match file.gguf.has_tensor("rope_freqs.weight") {
            true => Some(l.vector("rope_freqs.weight")?),
            false => None,
        };
        let ple = match cfg.ple_dim > 0 {
            true => Some(Ple {
                token_embd: l.matrix("per_layer_token_embd.weight")?,
                model_proj: l.matrix("per_layer_model_proj.weight")?,
                proj_norm: l.vector("per_layer_proj_norm.weight")?,
            }),
            false => None,
        };
        let mut layers = Vec::with_capacity(cfg.n_layers);
        // The per-layer-embedding gate through the down projection (`matmul::PleAcc`) needs
        // W_gate transposed.
        let ple_acc = ple_gate_fits(&cfg) && matmul::ple_acc_usable(&k, cfg.ple_dim, cfg.hidden);
        for (done, p) in cfg.layers.iter().enumerate() {
            let i = p.index;
            let n = |s: &str| format!("blk.{i}.{s}");
            let alias = |a: &str, b: &str| [n(a), n(b)];
            let own = p.stores_kv();
            let moe = match &cfg.moe {
                None => None,
                Some(m) => Some(MoeLayer {
                    router: l.matrix(&n("ffn_gate_inp.weight"))?,
                    // The router's input is RMS(x) · scale · D^-½ (spec §6.6): D^-½ goes
                    // into the scale here, as the CPU path does, not a dispatch a layer.
                    router_scale: l.vector_map(&n("ffn_gate_inp.scale"), |s| s / (cfg.hidden as f32).sqrt())?,
                    gate_up: match m.gate_up {
                        ExpertGateUp::Fused => vec![l.stacked(&n("ffn_gate_up_exps.weight"), 2 * m.expert_ffn)?],
                        ExpertGateUp::Split => vec![
                            l.stacked(&n("ffn_gate_exps.weight"), m.expert_ffn)?,
                            l.stacked(&n("ffn_up_exps.weight"), m.expert_ffn)?,
                        ],
                    },
                    down: l.stacked(&n("ffn_down_exps.weight"), cfg.hidden)?,
                    per_expert_scale: l.vector(&m.per_expert_scale_name(i))?,
                    pre_norm_2: l.vector_alias(alias("pre_ffw_norm_2.weight", "ffn_pre_norm_2.weight"))?,
                    post_norm_1: l.vector_alias(alias("post_ffw_norm_1.weight", "ffn_post_norm_1.weight"))?,
                    post_norm_2: l.vector_alias(alias("post_ffw_norm_2.weight", "ffn_post_norm_2.weight"))?,
                }),
            };
            let ple = match cfg.ple_dim > 0 {
                true => Some(PleLayer {
                    inp_gate: l.matrix(&n("inp_gate.weight"))?,
                    gate_t: match ple_acc {
                        true => Some(l.transposed(&n("inp_gate.weight"))?),
                        false => None,
                    },
                    proj: l.matrix(&n("proj.weight"))?,
                    post_norm: l.vector(&n("post_norm.weight"))?,
                }),
                false => None,
            };
            layers.push(Layer {
                attn_norm: l.vector(&n("attn_norm.weight"))?,
                qkv: l.qkv(
                    &n("attn_q.weight"),
                    own.then(|| n("attn_k.weight")).as_deref(),
                    (own && p.has_v).then(|| n("attn_v.weight")).as_deref(),
                )?,
                q_norm: if cfg.qk_norm { Some(l.vector(&n("attn_q_norm.weight"))?) } else { None },
                k_norm: if cfg.qk_norm && own { Some(l.vector(&n("attn_k_norm.weight"))?) } else { None },
                o: l.matrix(&n("attn_output.weight"))?,
                post_attn_norm: l.vector_alias(alias("post_attention_norm.weight", "attn_post_norm.weight"))?,
                ffn_norm: l.vector_alias(alias("ffn_norm.weight", "ffn_pre_norm.weight"))?,
                gate_up: l.gate_up(&n("ffn_gate.weight"), &n("ffn_up.weight"))?,
                down: l.matrix(&n("ffn_down.weight"))?,
                post_ffw_norm: l.vector_alias(alias("post_ffw_norm.weight", "ffn_post_norm.weight"))?,
                moe,
                ple,
                output_scale: match p.has_output_scale {
                    true => Some(l.scalar_alias(alias("layer_output_scale.weight", "layer_scalar.weight"))?),
                    false => None,
                },
            });
            progress((done + 1) as f32 / cfg.n_layers as f32);
        }
        let weight_bytes = l.bytes;
        k.gpu.wait()?;
        // The matvec binds 11 storage buffers; a folding one stages one residual row in
        // workgroup memory (beside its reductions' few hundred bytes).
        let fold_residual = k.gpu.limits.max_storage_buffers_per_shader_stage >= 11
            && cfg.hidden <= matmul::RESIDUAL_IN_MAX
            && 4 * cfg.hidden + 2048 <= k.gpu.limits.max_compute_workgroup_storage_size as usize
            && cfg.hidden.is_multiple_of(4)
            && std::env::var_os("RULLAMA_NO_FOLD").is_none();
        let mut m = GpuModel { cfg, k, token_embd, output, output_norm, rope_freqs, ple, layers, weight_bytes, kv_f16: false, spare: Spare::default(), fold_residual, decode_prep: false, ple_acc: false };
        m.set_decode_prep(std::env::var_os("RULLAMA_NO_DECODE_PREP").is_none());
        m.set_ple_acc(std::env::var_os("RULLAMA_NO_PLE_ACC").is_none());
        Ok(m)
    }

    /// Bytes a cache of `capacity` tokens plus the activation and parameter buffers take.
    pub fn cache_bytes(&self, capacity: usize) -> u64 {
        cache_bytes(&self.cfg, capacity, if self.kv_f16 { 2 } else { 4 }, self.kv_new_sizes())
    }

    /// Store the K/V of caches made from now on in f16 (`true`) or f32. f16 halves the
    /// cache; attention then reads K and V rounded to f16 (the CPU reference's
    /// `KvCache::f16_storage` rounds the same way).
    pub fn set_kv_f16(&mut self, on: bool) {
        self.kv_f16 = on;
    }

    /// Prefill's tensor-core products round their inputs to f16 (`true`: one product a
    /// result) or keep f32 accuracy (three). Decode's matvecs are f32 either way.
    pub fn set_prefill_f16(&mut self, on: bool) {
        self.k.set_coop_f16(on);
    }

    /// Whether decode attention does the new token's head norms and RoPE itself (the
    /// default where the device binds enough storage buffers) or a `head_norm_rope` dispatch
    /// does them first (`false`). Same results up to rounding; for comparison and tests.
    pub fn set_decode_prep(&mut self, on: bool) {
        self.decode_prep = on && self.k.gpu.limits.max_storage_buffers_per_shader_stage >= attention::DECODE_PREP_BUFFERS;
    }

    /// Whether decode takes the per-layer-embedding gate through the down projection (the
    /// default where the device and layout allow it, `matmul::PleAcc`) or in a matvec of
    /// its own (`false`). Same results up to rounding; for comparison and tests.
    pub fn set_ple_acc(&mut self, on: bool) {
        self.ple_acc = on && self.fold_residual && self.layers.iter().all(|l| l.ple.as_ref().is_some_and(|p| p.gate_t.is_some()));
    }

    /// f32 staging for K and V rows: one batch's for an f16 cache, else one token's for
    /// decode attention's prep. Floats for K, for V.
    fn kv_new_sizes(&self) -> (usize, usize) {
        let (k, v) = kv_row(&self.cfg);
        let rows = if self.kv_f16 { MAX_BATCH } else { 1 };
        (rows * k, rows * v)
    }


    pub fn new_cache(&self, capacity: usize) -> GpuCache {
        let spare = self.spare.lock().ok().and_then(|mut s| s.take());
        let bufs = match spare {
            Some(b) if b.capacity == capacity && b.kv_f16 == self.kv_f16 => b,
            other => {
                // Freed before the new buffers are made (the match would hold it till its end).
                drop(other);
                self.new_buffers(capacity)
            }
        };
        GpuCache { len: 0, bufs: Some(bufs), spare: self.spare.clone() }
    }

    fn new_buffers(&self, capacity: usize) -> CacheBuffers {
        let c = &self.cfg;
        let k = &self.k;
        let b = MAX_BATCH;
        let (qmax, fmax) = widest(c);
        let mut kc = Vec::new();
        let mut vc = Vec::new();
        let cache_buf = |label: &str, elems: usize| kernel::storage(&k.gpu, label, (attention::cache_words(elems, self.kv_f16) * 4) as u64);
        for l in &c.layers {
            let own = l.stores_kv();
            kc.push(own.then(|| cache_buf("k_cache", capacity * l.n_kv_heads * l.head_dim)));
            vc.push(own.then(|| cache_buf("v_cache", capacity * l.n_kv_heads * l.v_head_dim)));
        }
        let kv_new = {
            let (kn, vn) = self.kv_new_sizes();
            (f32_buf(k, "k_new", kn), f32_buf(k, "v_new", vn))
        };
        let moe = c.moe.as_ref().map(|m| {
            let slots = b * m.n_used;
            MoeScratch {
                router_logits: f32_buf(k, "router_logits", b * m.n_experts),
                ids: f32_buf(k, "expert_ids", slots),
                weights: f32_buf(k, "expert_weights", slots),
                gate_up: f32_buf(k, "expert_gate_up", slots * 2 * m.expert_ffn),
                up: f32_buf(k, "expert_up", slots * m.expert_ffn),
                down: f32_buf(k, "expert_down", slots * c.hidden),
                out: f32_buf(k, "moe_out", b * c.hidden),
                z: f32_buf(k, "router_in", b * c.hidden),
            }
        });
        let ple = (c.ple_dim > 0).then(|| PleScratch {
            inputs: f32_buf(k, "ple_inputs", b * c.ple_dim * c.n_layers),
            tok: f32_buf(k, "ple_tok", b * c.ple_dim * c.n_layers),
            g: f32_buf(k, "ple_g", b * c.ple_dim),
            p: f32_buf(k, "ple_p", b * c.hidden),
            acc: kernel::storage(&k.gpu, "ple_acc", ple_acc_bytes(c)),
        });
        let s = Scratch {
            ids: kernel::storage(&k.gpu, "ids", (b * 4) as u64),
            x: f32_buf(k, "x", b * c.hidden),
            x2: f32_buf(k, "x2", c.hidden),
            zeros: f32_buf(k, "zeros", c.hidden),
            y: f32_buf(k, "y", b * c.hidden),
            q: f32_buf(k, "q", b * qmax),
            attn: f32_buf(k, "attn", b * qmax),
            a: f32_buf(k, "a", b * c.hidden),
            gate: f32_buf(k, "gate", b * 2 * fmax),
            up: f32_buf(k, "up", b * fmax),
            ffn: f32_buf(k, "ffn", b * c.hidden),
            logits: f32_buf(k, "logits", LOGIT_ROWS * c.vocab),
            picked: kernel::storage(&k.gpu, "picked", 4),
            ring: kernel::storage(&k.gpu, "ring", (decode::RING * 4) as u64),
            hist: kernel::storage(&k.gpu, "hist", (sample::PENALTY_RING * 4) as u64),
            cand_ids: kernel::storage(&k.gpu, "cand_ids", (sample::MAX_CANDIDATES * 4) as u64),
            cand_vals: f32_buf(k, "cand_vals", sample::MAX_CANDIDATES),
            moe,
            ple,
            kv_new,
        };
        let reuse = Arc::new(std::sync::Mutex::new(kernel::Reuse::new(&k.gpu, param_slots(c))));
        CacheBuffers { reuse, k: kc, v: vc, kv_f16: self.kv_f16, capacity, s }
    }

    fn check(&self, tokens: &[u32], cache: &GpuCache) -> Result<()> {
        if tokens.is_empty() {
            return Err(Error::Input("no tokens to evaluate".into()));
        }
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= self.cfg.vocab) {
            return Err(Error::Input(format!("token id {bad} is outside the vocabulary of {} tokens", self.cfg.vocab)));
        }
        if cache.len + tokens.len() > cache.capacity {
            return Err(Error::Input(format!(
                "{} tokens do not fit in the context of {} ({} already used)",
                tokens.len(),
                cache.capacity,
                cache.len
            )));
        }
        Ok(())
    }

    /// Dispatches a batch of `layers` layers (plus embedding, PLE and head) can record.
    fn max_dispatches(layers: usize) -> usize {
        64 + layers * 48
    }

    fn batch(&self, cache: &GpuCache) -> Batch {
        Batch::reusing(self.k.gpu.clone(), &cache.reuse)
    }

    /// Run `tokens` through every layer, leaving the final norm of the hidden states in `s.y`.
    /// Chunks of MAX_BATCH; the cache grows only if everything succeeds.
    fn run_layers(&self, tokens: &[u32], cache: &mut GpuCache, cancel: &AtomicBool) -> Result<()> {
        let t0 = Instant::now();
        let pos0 = cache.len;
        let n = tokens.len();
        self.k.gpu.queue.write_buffer(&cache.s.ids, 0, bytemuck::cast_slice(tokens));
        let b = self.record_layers(self.batch(cache), &cache.s.ids, 0, n, cache, pos0, Some(cancel))?;
        let recorded = Instant::now();
        b.submit()?;
        if super::kernel::step_profile() {
            eprintln!("profile: {n} tokens: record {:?}, submit {:?}", recorded - t0, recorded.elapsed());
        }
        cache.len = pos0 + n;
        Ok(())
    }

    /// Record the embedding of the `n` token ids at `ids[ids_off..]` (u32, on the GPU) and
    /// every layer at positions `pos0..` into `b`, and return the open batch. With `cancel`
    /// (prefill) a batch is submitted every LAYERS_PER_SUBMIT layers and the flag checked in
    /// between; without it (decode) everything goes into one batch.
    #[allow(clippy::too_many_arguments)]
    fn record_layers(
        &self,
        mut b: Batch,
        ids: &wgpu::Buffer,
        ids_off: usize,
        n: usize,
        cache: &GpuCache,
        pos0: usize,
        cancel: Option<&AtomicBool>,
    ) -> Result<Batch> {
        let c = &self.cfg;
        matmul::embed(&self.k, &mut b, &self.token_embd, ids, ids_off, n, c.embed_scale, &cache.s.x, 0)?;
        self.per_layer_inputs(&mut b, cache, ids, ids_off, n)?;
        let mut r = Residual::new(&cache.s.x, &cache.s.x2, self.fold_residual, n, c.hidden, c.eps);
        r.start(&cache.s.zeros);
        // With `cancel`, one layer group runs on the GPU while the next is recorded: the
        // host waits for group i - 1 after submitting group i, so the GPU never idles on
        // recording and a cancel takes effect within two groups. (Waiting for each group
        // right after submitting it left the GPU idle while the next was recorded.) Two
        // groups in flight at most is also what the session's two alternating parameter
        // buffers allow.
        let mut in_flight = None;
        for (li, chunk) in c.layers.chunks(LAYERS_PER_SUBMIT).enumerate() {
            for l in chunk {
                self.layer(&mut b, l.index, cache, n, pos0, &mut r)?;
            }
            if let Some(cancel) = cancel
                && (li + 1) * LAYERS_PER_SUBMIT < c.n_layers
            {
                let index = std::mem::replace(&mut b, self.batch(cache)).submit_indexed()?;
                if let Some(previous) = in_flight.replace(index) {
                    self.k.gpu.wait_for(previous)?;
                }
                if cancel.load(Ordering::Relaxed) {
                    return Err(Error::Cancelled);
                }
            }
        }
        // The head reads the final norm from s.y.
        r.flush(&self.k, &mut b, Some((&cache.s.y, &self.output_norm)))?;
        Ok(b)
    }

    fn per_layer_inputs(&self, b: &mut Batch, cache: &GpuCache, ids: &wgpu::Buffer, ids_off: usize, n: usize) -> Result<()> {
        let (Some(p), Some(ps)) = (&self.ple, &cache.s.ple) else { return Ok(()) };
        let c = &self.cfg;
        let k = &self.k;
        if n == 1 && self.ple_acc {
            b.clear(&ps.acc);
        }
        matmul::matmul(k, b, &p.model_proj, &cache.s.x, 0, n, &ps.inputs, 0)?;
        // Ids past the PLE table (none for the published models) would read out of bounds:
        // the CPU reference maps them to 0; here the table covers the vocabulary (checked in Config).
        matmul::embed(k, b, &p.token_embd, ids, ids_off, n, (c.ple_dim as f32).sqrt(), &ps.tok, 0)?;
        // (RMS(proj · hidden^-½) + E_ple · √P) · 2^-½, per layer's P values, in one dispatch.
        let add = Some((&ps.tok, 0, std::f32::consts::FRAC_1_SQRT_2));
        norm::rms_norm_add(k, b, &ps.inputs, 0, n * c.n_layers, c.ple_dim, (c.hidden as f32).powf(-0.5), Some(&p.proj_norm), add, c.eps)
    }

    /// Record layer `li`. The residual stream `r` may hold the previous layer's last step,
    /// and holds this layer's when it returns.
    #[allow(clippy::too_many_arguments)]
    fn layer<'a>(&'a self, b: &mut Batch, li: usize, cache: &'a GpuCache, n: usize, pos0: usize, r: &mut Residual<'a>) -> Result<()> {
        let c = &self.cfg;
        let k = &self.k;
        let s = &cache.s;
        let w = &self.layers[li];
        let plan = &c.layers[li];
        let (hd, vhd, kvh, nh) = (plan.head_dim, plan.v_head_dim, plan.n_kv_heads, c.n_heads);
        let rope = match plan.kind {
            AttnKind::Sliding => &c.rope_sliding,
            AttnKind::Global => &c.rope_global,
        };
        let factors = if rope.freq_factors { self.rope_freqs.as_ref() } else { None };

        // Attention, on RMS(x; attn_norm). One token: every projection gets `input`, which may
        // fold in the pending residual step (each matvec then makes it, with the same result;
        // s.y is not written); several: they read s.y.
        let qkv = &w.qkv;
        let input = r.input(k, b, Some(&w.attn_norm), &s.y, n == 1)?;
        let proj = |b: &mut Batch, m: &GpuMatrix, dst: &wgpu::Buffer, off: usize| match n {
            1 => matmul::matvec_input(k, b, m, input, dst, off),
            _ => matmul::matmul(k, b, m, &s.y, 0, n, dst, off),
        };
        let [qr, kr, vr] = qkv.rows;
        // One token: attention norms and rotates q (and the new K and V) itself
        // (`attention::attention_decode`), from K and V rows staged in s.kv_new.
        let prep = n == 1 && self.decode_prep;
        let qg = HeadGroup { buf: &s.q, off: 0, heads: nh, dim: hd, norm: w.q_norm.as_ref().map(Some), rope: true, f16_out: None };
        let (mut kg, mut vg) = (None, None);
        let mut fresh = None;
        if !plan.stores_kv() {
            proj(b, &qkv.m, &s.q, 0)?;
        } else {
            let (kc, vc) = (cache.k[li].as_ref().expect("own KV"), cache.v[li].as_ref().expect("own KV"));
            // This batch's K and V go straight into an f32 cache, or into f32 staging rows
            // that head_norm_rope rounds into an f16 cache once normed (`f16`: the caches
            // and where the batch's rows start in them), or that attention preps.
            let (kp, vp) = (pos0 * kvh * hd, pos0 * kvh * vhd);
            let (kn, vn) = (&s.kv_new.0, &s.kv_new.1);
            let (((kc, ko), (vc, vo)), f16) = match (prep, cache.kv_f16) {
                (true, _) => (((kn, 0), (vn, 0)), None),
                (false, true) => (((kn, 0), (vn, 0)), Some(((kc, kp), (vc, vp)))),
                (false, false) => (((kc, kp), (vc, vp)), None),
            };
            match (&qkv.k, n) {
                // Stacked, one token: q, k (and v) in one dispatch.
                (None, 1) => matmul::matvec_routed(k, b, &qkv.m, input, [(&s.q, 0, qr), (kc, ko, kr), (vc, vo, vr)])?,
                (None, _) => matmul::matmul_routed(k, b, &qkv.m, &s.y, 0, n, [(&s.q, 0, qr), (kc, ko, kr), (vc, vo, vr)])?,
                (Some(kw), _) => {
                    proj(b, &qkv.m, &s.q, 0)?;
                    proj(b, kw, kc, ko)?;
                }
            }
            // V is raw K where the layer has no V projection.
            let v_is_k = qkv.v.is_none() && vr == 0 && !plan.has_v;
            match &qkv.v {
                Some(vw) => proj(b, vw, vc, vo)?,
                // V := raw K, before the K norm and RoPE (attention's prep reads it from K's row).
                None if v_is_k && !prep => b.copy(kc, (ko * 4) as u64, vc, (vo * 4) as u64, (n * kvh * hd * 4) as u64),
                None => {}
            }
            if prep {
                let v = if v_is_k { kc } else { vc };
                fresh = Some(attention::FreshKv { k: kc, v, k_norm: w.k_norm.as_ref().map(Some), v_norm: c.v_norm });
            } else {
                kg = Some(HeadGroup { buf: kc, off: ko, heads: kvh, dim: hd, norm: w.k_norm.as_ref().map(Some), rope: true, f16_out: f16.map(|f| f.0) });
                // V takes the unweighted norm (Gemma 4) and, with an f16 cache, the rounding.
                if c.v_norm || f16.is_some() {
                    let norm = c.v_norm.then_some(None);
                    vg = Some(HeadGroup { buf: vc, off: vo, heads: kvh, dim: vhd, norm, rope: false, f16_out: f16.map(|f| f.1) });
                }
            }
        }
        let src = plan.kv_donor.unwrap_or(li);
        let (kc, vc) = match (&cache.k[src], &cache.v[src]) {
            (Some(kc), Some(vc)) => (kc, vc),
            _ => return Err(Error::Gguf(format!("layer {li} reads the KV of layer {src}, which stores none"))),
        };
        let window = match plan.kind {
            AttnKind::Sliding => c.sliding_window,
            AttnKind::Global => 0,
        };
        let caches = attention::KvCaches { k: kc, v: vc, f16: cache.kv_f16 };
        if prep {
            let dp = attention::DecodePrep { q_norm: w.q_norm.as_ref().map(Some), fresh, eps: c.eps, base: rope.base, factors, pos_scale: 1.0 / rope.linear_scale };
            attention::attention_decode(k, b, &s.q, nh, hd, caches, kvh, vhd, pos0, window, c.attn_scale, &s.attn, &dp)?;
        } else {
            // q/k norms, RoPE on q and k, the v norm: one dispatch.
            rope::head_norm_rope(k, b, qg, kg, vg, n, pos0, c.eps, rope.base, factors, 1.0 / rope.linear_scale)?;
            attention::attention_split(k, b, &s.q, 0, n, nh, hd, caches, kvh, vhd, pos0, window, c.attn_scale, &s.attn, 0)?;
        }
        matmul::matmul(k, b, &w.o, &s.attn, 0, n, &s.a, 0)?;
        // x += RMS(a; post_attention_norm); the FFN reads RMS(x; ffn_norm).
        r.push(k, b, Step { a: &s.a, post: &w.post_attn_norm, scale: None })?;
        // One token with [gate; up] stacked: one matvec, which takes the folded input.
        let one_matvec = n == 1 && matches!(w.gate_up, GateUp::Stacked(_));
        let input = r.input(k, b, Some(&w.ffn_norm), &s.y, one_matvec)?;

        // Feed-forward: dense, plus the MoE branch on MoE models.
        let f = plan.ffn_width;
        // GeGLU(gate, up) lands in s.gate, rows `stride` apart.
        let stride = match &w.gate_up {
            GateUp::Stacked(m) if n == 1 => {
                matmul::matvec_geglu(k, b, m, input, &s.gate, 0)?;
                f
            }
            GateUp::Stacked(m) => {
                matmul::matmul_geglu(k, b, m, &s.y, 0, n, &s.gate, 0)?;
                2 * f
            }
            GateUp::Split(gate, up) => {
                matmul::matmul(k, b, gate, &s.y, 0, n, &s.gate, 0)?;
                matmul::matmul(k, b, up, &s.y, 0, n, &s.up, 0)?;
                elementwise::geglu(k, b, &s.gate, 0, f, &s.up, 0, f, n, f)?;
                f
            }
        };
        // One token: the down projection also adds up the per-layer-embedding gate's sums
        // (`matmul::PleAcc`), and the gate's matvec leaves the chain.
        let ple_acc = match (&w.ple, &s.ple) {
            (Some(pw), Some(ps)) if n == 1 && self.ple_acc => pw.gate_t.as_ref().map(|gt| (ps, gt)),
            _ => None,
        };
        let acc_off = li * matmul::ple_acc_words(c.ple_dim);
        match ple_acc {
            Some((ps, gate_t)) => {
                let sums = matmul::PleAcc { gate_t, h: r.x(), post: &w.post_ffw_norm, acc: &ps.acc, acc_off, pd: c.ple_dim };
                matmul::matvec_ple_acc(k, b, &w.down, &s.gate, &s.ffn, sums)?;
            }
            None => matmul::matmul_strided(k, b, &w.down, &s.gate, 0, stride, n, &s.ffn, 0)?,
        }
        if let (Some(m), Some(ms)) = (&w.moe, &s.moe) {
            self.moe(b, m, ms, s, r.x(), n)?;
        }
        // The layer ends with x += RMS(ffn; post_ffw_norm) (then the PLE injection) and the
        // layer scale; the next layer (or the head) normalises x.
        let scale = w.output_scale.as_ref().map(|(buf, v)| (buf, *v));
        match (&w.ple, &s.ple) {
            (Some(pw), Some(ps)) if ple_acc.is_some() => {
                // The projection's workgroups make the gate, and its first stores
                // x + RMS(ffn; post_ffw_norm), the residual the PLE step adds to.
                let (h, h2) = r.advance();
                let e = (&ps.inputs, li * c.ple_dim);
                let g = matmul::PleGate { acc: &ps.acc, acc_off, e, d: &s.ffn, h, post: &w.post_ffw_norm, h2, eps: c.eps };
                matmul::matvec_ple_gate(k, b, &pw.proj, g, &ps.p)?;
                r.push(k, b, Step { a: &ps.p, post: &pw.post_norm, scale })
            }
            (Some(pw), Some(ps)) => {
                r.push(k, b, Step { a: &s.ffn, post: &w.post_ffw_norm, scale: None })?;
                let (pd, lp) = (c.ple_dim, c.ple_dim * c.n_layers);
                let input = r.input(k, b, None, &s.y, n == 1)?;
                if n == 1 {
                    matmul::matvec_gelu_mul(k, b, &pw.inp_gate, input, &ps.inputs, li * pd, &ps.g, 0)?;
                } else {
                    matmul::matmul(k, b, &pw.inp_gate, r.x(), 0, n, &ps.g, 0)?;
                    elementwise::geglu(k, b, &ps.g, 0, pd, &ps.inputs, li * pd, lp, n, pd)?;
                }
                matmul::matmul(k, b, &pw.proj, &ps.g, 0, n, &ps.p, 0)?;
                r.push(k, b, Step { a: &ps.p, post: &pw.post_norm, scale })
            }
            _ => r.push(k, b, Step { a: &s.ffn, post: &w.post_ffw_norm, scale }),
        }
    }

    /// MoE branch (spec §6.6), added to the dense branch's output in `s.ffn` after both
    /// are post-normed. `x` (the residual after attention) is the router input.
    fn moe(&self, b: &mut Batch, m: &MoeLayer, ms: &MoeScratch, s: &Scratch, x: &wgpu::Buffer, n: usize) -> Result<()> {
        let c = &self.cfg;
        let k = &self.k;
        let mc = c.moe.as_ref().expect("MoE layer implies MoE config");
        let (d, fe, kk) = (c.hidden, mc.expert_ffn, mc.n_used);
        // The dense output's post-norm (in place); the router's input RMS0(x) ⊙ (scale ·
        // D^-½, made at load); the experts' input RMS(x; pre_ffw_norm_2). One dispatch
        // (moe_norms) where rows fit it. The router's input waits in ms.out for the combine.
        if moe::norms_fit(d) {
            moe::moe_norms(k, b, x, &s.ffn, (&ms.out, &m.router_scale), (&ms.z, &m.pre_norm_2), &m.post_norm_1, (n, d), c.eps)?;
        } else {
            norm::rms_norm(k, b, &s.ffn, 0, n, d, Some(&m.post_norm_1), c.eps)?;
            norm::rms_norm_to(k, b, x, 0, &ms.out, 0, n, d, Some(&m.router_scale), c.eps, false)?;
            norm::rms_norm_to(k, b, x, 0, &ms.z, 0, n, d, Some(&m.pre_norm_2), c.eps, false)?;
        }
        // Router: logits, softmax, top-k, renormalise, × expert scale.
        matmul::matmul(k, b, &m.router, &ms.out, 0, n, &ms.router_logits, 0)?;
        moe::moe_route(k, b, &ms.router_logits, 0, n, mc.n_experts, kk, &m.per_expert_scale, &ms.ids, &ms.weights)?;
        match m.gate_up.as_slice() {
            [fused] => {
                // One token: the matvec applies GeGLU itself and writes rows of fe. Else the
                // product's rows are [gate | up], and geglu_fused leaves GeGLU in the gate half.
                let one = match n {
                    1 => matmul::matvec_experts_geglu(k, b, fused, fe, &ms.ids, kk, &ms.z, 0, &ms.gate_up, 0).transpose()?,
                    _ => None,
                };
                let stride = match one {
                    Some(()) => fe,
                    None => {
                        matmul::matmul_experts(k, b, fused, 2 * fe, &ms.ids, kk, &ms.z, 0, false, n, &ms.gate_up, 0)?;
                        elementwise::geglu_fused(k, b, &ms.gate_up, 0, n * kk, fe)?;
                        2 * fe
                    }
                };
                matmul::matmul_experts_strided(k, b, &m.down, d, &ms.ids, kk, &ms.gate_up, 0, stride, true, n, &ms.down, 0)?;
            }
            [gate, up] => {
                matmul::matmul_experts(k, b, gate, fe, &ms.ids, kk, &ms.z, 0, false, n, &ms.gate_up, 0)?;
                matmul::matmul_experts(k, b, up, fe, &ms.ids, kk, &ms.z, 0, false, n, &ms.up, 0)?;
                elementwise::geglu(k, b, &ms.gate_up, 0, fe, &ms.up, 0, fe, n * kk, fe)?;
                matmul::matmul_experts(k, b, &m.down, d, &ms.ids, kk, &ms.gate_up, 0, true, n, &ms.down, 0)?;
            }
            _ => unreachable!("one fused or two split gate/up tensors"),
        }
        // ffn += RMS(Σ weighted experts; post_ffw_norm_2): one dispatch where rows fit it.
        if moe::norms_fit(d) {
            return moe::moe_combine_norm(k, b, &ms.down, &ms.weights, (n, kk, d), &s.ffn, &m.post_norm_2, c.eps);
        }
        moe::moe_combine(k, b, &ms.down, &ms.weights, n, kk, d, &ms.out, 0)?;
        norm::rms_norm_to(k, b, &ms.out, 0, &s.ffn, 0, n, d, Some(&m.post_norm_2), c.eps, true)
    }

    /// LM head + softcap for rows `[r0, r0+rows)` of `s.y` (the final norm, which the last
    /// layer's residual step leaves there) into `s.logits`.
    fn head(&self, b: &mut Batch, s: &Scratch, r0: usize, rows: usize) -> Result<()> {
        let c = &self.cfg;
        let k = &self.k;
        matmul::matmul(k, b, &self.output, &s.y, r0 * c.hidden, rows, &s.logits, 0)?;
        if let Some(cap) = c.final_logit_softcap {
            elementwise::softcap(k, b, &s.logits, 0, rows * c.vocab, cap)?;
        }
        Ok(())
    }

    /// Head for row `row` of `s.y` (the final norm), the repetition penalty over the history in `s.hist`
    /// that ends at logical index `hist_end`, then the next token by the rules of `o`
    /// (greedy, or temperature sampling for the draw `u`), written as a u32 at `out[out_idx]`.
    #[allow(clippy::too_many_arguments)]
    fn record_pick(
        &self,
        b: &mut Batch,
        s: &Scratch,
        row: usize,
        o: &crate::runtime::SamplingOptions,
        u: f32,
        hist_end: usize,
        out: &wgpu::Buffer,
        out_idx: usize,
    ) -> Result<()> {
        self.head(b, s, row, 1)?;
        let v = self.cfg.vocab;
        if o.repeat_penalty != 1.0 {
            let window = o.repeat_last_n.min(hist_end);
            sample::repeat_penalty(&self.k, b, &s.logits, v, &s.hist, hist_end, window, o.repeat_penalty)?;
        }
        if o.temperature <= 0.0 {
            return sample::argmax(&self.k, b, &s.logits, 0, v, out, out_idx);
        }
        sample::top_k_candidates(&self.k, b, &s.logits, 0, v, o.top_k, &s.cand_ids, &s.cand_vals)?;
        sample::sample_pick(&self.k, b, &s.cand_ids, &s.cand_vals, o, u, out, out_idx)
    }

    /// Put the last tokens of `history` (logical indices `0..history.len()`) into `s.hist`.
    fn upload_history(&self, cache: &GpuCache, history: &[u32]) {
        let ring = sample::PENALTY_RING;
        let start = history.len().saturating_sub(ring);
        let tail = &history[start..];
        // Entries from `start` on sit at start % ring onwards, wrapping to 0 once.
        let split = (ring - start % ring).min(tail.len());
        let q = &self.k.gpu.queue;
        if tail.is_empty() {
            return;
        }
        q.write_buffer(&cache.s.hist, ((start % ring) * 4) as u64, bytemuck::cast_slice(&tail[..split]));
        if split < tail.len() {
            q.write_buffer(&cache.s.hist, 0, bytemuck::cast_slice(&tail[split..]));
        }
    }

    /// Run `tokens` in chunks of MAX_BATCH, calling `after` with each chunk's length once its
    /// final norms are in `s.y`. On any error the cache is left as it was.
    fn evaluate(
        &self,
        tokens: &[u32],
        cache: &mut GpuCache,
        cancel: &AtomicBool,
        mut after: impl FnMut(&GpuCache, usize) -> Result<()>,
    ) -> Result<()> {
        self.check(tokens, cache)?;
        let start = cache.len;
        for chunk in tokens.chunks(MAX_BATCH) {
            if let Err(e) = self.run_layers(chunk, cache, cancel).and_then(|_| after(cache, chunk.len())) {
                cache.len = start;
                return Err(e);
            }
        }
        Ok(())
    }

    /// Logits of rows `rows` of the current chunk, LOGIT_ROWS at a time.
    fn logits_of(&self, cache: &GpuCache, rows: std::ops::Range<usize>, out: &mut Vec<f32>) -> Result<()> {
        let v = self.cfg.vocab;
        for r0 in rows.clone().step_by(LOGIT_ROWS) {
            let n = LOGIT_ROWS.min(rows.end - r0);
            let mut b = self.batch(cache);
            self.head(&mut b, &cache.s, r0, n)?;
            b.submit()?;
            out.extend(kernel::read_f32(&self.k.gpu, &cache.s.logits, 0, n * v)?);
        }
        Ok(())
    }
}

impl TextModel for GpuModel {
    type Cache = GpuCache;

    fn config(&self) -> &Config {
        &self.cfg
    }

    fn new_cache(&self, capacity: usize) -> GpuCache {
        GpuModel::new_cache(self, capacity)
    }

    fn cache_len(&self, cache: &GpuCache) -> usize {
        cache.len
    }

    fn forward(&self, tokens: &[u32], cache: &mut GpuCache, which: Logits, cancel: &AtomicBool) -> Result<Vec<f32>> {
        let mut out = Vec::new();
        let total = tokens.len();
        let mut done = 0;
        self.evaluate(tokens, cache, cancel, |cache, n| {
            done += n;
            match which {
                Logits::All => self.logits_of(cache, 0..n, &mut out),
                Logits::Last if done == total => self.logits_of(cache, n - 1..n, &mut out),
                Logits::Last => Ok(()),
            }
        })?;
        Ok(out)
    }

    /// Evaluate `tokens` and pick the next token on the GPU, so only its id comes back.
    /// Repetition penalty and top-k beyond 64 need every logit: then all of them are read.
    fn next_token(
        &self,
        tokens: &[u32],
        cache: &mut GpuCache,
        sampler: &mut Sampler,
        history: &[u32],
        cancel: &AtomicBool,
    ) -> Result<u32> {
        let o = sampler.opts.clone();
        if !samples_on_gpu(&o) {
            let logits = self.forward(tokens, cache, Logits::Last, cancel)?;
            return Ok(sampler.sample(&logits, history));
        }
        let mut last = 0;
        self.evaluate(tokens, cache, cancel, |_, n| {
            last = n - 1;
            Ok(())
        })?;
        let u = if o.temperature > 0.0 { sampler.draw() } else { 0.0 };
        let mut b = self.batch(cache);
        if o.repeat_penalty != 1.0 {
            self.upload_history(cache, history);
        }
        self.record_pick(&mut b, &cache.s, last, &o, u, history.len(), &cache.s.picked, 0)?;
        b.submit()?;
        let id = kernel::read_back(&self.k.gpu, &cache.s.picked, 0, 4)?;
        Ok(u32::from_le_bytes([id[0], id[1], id[2], id[3]]))
    }

    fn decode(
        &self,
        first: u32,
        cache: &mut GpuCache,
        sampler: &mut Sampler,
        history: &[u32],
        cancel: &AtomicBool,
        on: &mut dyn FnMut(u32) -> Result<bool>,
    ) -> Result<()> {
        if !samples_on_gpu(&sampler.opts) {
            return crate::runtime::generate::decode_stepwise(self, first, cache, sampler, history, cancel, on);
        }
        self.decode_pipelined(first, cache, sampler, history, cancel, on)
    }
}

/// Whether the GPU can apply these sampling rules itself: top-k up to the candidates it
/// keeps (sample::MAX_CANDIDATES), a repetition penalty over up to the history it keeps.
fn samples_on_gpu(o: &crate::runtime::SamplingOptions) -> bool {
    o.repeat_last_n <= sample::PENALTY_RING && (o.temperature <= 0.0 || (1..=sample::MAX_CANDIDATES).contains(&o.top_k))
}
