//! The reference text forward pass for Gemma 3 and Gemma 4 (spec §6), in plain f32.
//!
//! One code path serves both families: what differs (PLE, KV sharing, V := K, v-norm, MoE,
//! proportional RoPE, softcap, attention scale) is data in `Config`. The same `forward`
//! call does teacher-forced evaluation (all tokens at once) and incremental decode (one
//! token at a time against the cache).

use std::sync::Arc;

use super::ops::{self, QMatrix};
use crate::gguf::{GgufFile, TensorInfo};
use crate::model::{AttnKind, Config, ExpertGateUp, LayerPlan};
use crate::{Error, Result};

/// A weight tensor resolved at load: its table entry (data lives in the memory map).
#[derive(Debug, Clone)]
struct W(TensorInfo);

struct MoeWeights {
    router: W,
    router_scale: Vec<f32>,
    gate_up: Vec<W>,
    down: W,
    per_expert_scale: Vec<f32>,
    pre_norm_2: Vec<f32>,
    post_norm_1: Vec<f32>,
    post_norm_2: Vec<f32>,
}

struct PleWeights {
    inp_gate: W,
    proj: W,
    post_norm: Vec<f32>,
}

struct LayerWeights {
    attn_norm: Vec<f32>,
    q: W,
    k: Option<W>,
    v: Option<W>,
    q_norm: Option<Vec<f32>>,
    k_norm: Option<Vec<f32>>,
    o: W,
    post_attn_norm: Vec<f32>,
    ffn_norm: Vec<f32>,
    gate: W,
    up: W,
    down: W,
    post_ffw_norm: Vec<f32>,
    moe: Option<MoeWeights>,
    ple: Option<PleWeights>,
    output_scale: Option<f32>,
}

struct GlobalPle {
    token_embd: W,
    model_proj: W,
    proj_norm: Vec<f32>,
}

/// A loaded model for the CPU reference. Weights stay in the file's memory map.
pub struct CpuModel {
    pub file: Arc<GgufFile>,
    pub cfg: Config,
    token_embd: W,
    output: W,
    output_norm: Vec<f32>,
    rope_freqs: Option<Vec<f32>>,
    ple: Option<GlobalPle>,
    layers: Vec<LayerWeights>,
    /// New caches round K and V to f16 (see `KvCache::f16_storage`).
    kv_f16: bool,
}

/// K/V of the layers that store their own (normed and RoPE'd K; normed V), `[pos][kvh·hd]`.
pub struct KvCache {
    layers: Vec<Option<(Vec<f32>, Vec<f32>)>>,
    len: usize,
    capacity: usize,
    /// Stored K and V are rounded to f16 (to nearest), as a GPU f16 cache holds them.
    f16: bool,
}

impl KvCache {
    /// This cache with K and V rounded to f16 as they are stored (the reference for the
    /// GPU's f16 cache).
    pub fn f16_storage(mut self) -> KvCache {
        self.f16 = true;
        self
    }

    /// Number of positions held.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Copy out the cache (for a snapshot).
    pub fn export(&self) -> crate::runtime::snapshot::KvState {
        crate::runtime::snapshot::KvState { len: self.len, layers: self.layers.clone() }
    }

    /// Replace the contents with a snapshot's (layout already checked against the model).
    pub fn import(&mut self, s: crate::runtime::snapshot::KvState) -> Result<()> {
        if s.len > self.capacity || s.layers.len() != self.layers.len() {
            return Err(Error::Input(format!("a snapshot of {} tokens does not fit this cache of {}", s.len, self.capacity)));
        }
        self.layers = s.layers;
        self.len = s.len;
        Ok(())
    }

    /// Drop everything after the first `n` positions (reuse a prefix).
    pub fn truncate(&mut self, n: usize, cfg: &Config) {
        if n >= self.len {
            return;
        }
        for (l, slot) in cfg.layers.iter().zip(self.layers.iter_mut()) {
            if let Some((k, v)) = slot {
                k.truncate(n * l.n_kv_heads * l.head_dim);
                v.truncate(n * l.n_kv_heads * l.v_head_dim);
            }
        }
        self.len = n;
    }
}

/// Which positions' logits `forward` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logits {
    All,
    Last,
}

fn norm_vec(file: &GgufFile, name: &str) -> Result<Vec<f32>> {
    file.view(name)?.to_f32()
}

fn weight(file: &GgufFile, name: &str) -> Result<W> {
    file.gguf
        .tensor(name)
        .cloned()
        .map(W)
        .ok_or_else(|| Error::MissingTensor(format!("{name} (in {})", file.path.display())))
}

fn opt_weight(file: &GgufFile, name: &str) -> Option<W> {
    file.gguf.tensor(name).cloned().map(W)
}

/// The first present name among aliases (published files use both spellings).
fn weight_alias(file: &GgufFile, names: &[String]) -> Result<W> {
    names
        .iter()
        .find_map(|n| opt_weight(file, n))
        .ok_or_else(|| Error::MissingTensor(format!("{} (in {})", names[0], file.path.display())))
}

fn norm_alias(file: &GgufFile, names: &[String]) -> Result<Vec<f32>> {
    let w = weight_alias(file, names)?;
    file.view(&w.0.name)?.to_f32()
}

impl CpuModel {
    pub fn load(file: Arc<GgufFile>) -> Result<CpuModel> {
        let cfg = Config::from_gguf(&file.gguf)?;
        let f = &*file;
        let token_embd = weight(f, "token_embd.weight")?;
        let output = opt_weight(f, "output.weight").unwrap_or_else(|| token_embd.clone());
        let output_norm = norm_vec(f, "output_norm.weight")?;
        let rope_freqs = match f.gguf.has_tensor("rope_freqs.weight") {
            true => Some(norm_vec(f, "rope_freqs.weight")?),
            false => None,
        };
        let ple = if cfg.ple_dim > 0 {
            Some(GlobalPle {
                token_embd: weight(f, "per_layer_token_embd.weight")?,
                model_proj: weight(f, "per_layer_model_proj.weight")?,
                proj_norm: norm_vec(f, "per_layer_proj_norm.weight")?,
            })
        } else {
            None
        };
        let mut layers = Vec::with_capacity(cfg.n_layers);
        for l in &cfg.layers {
            layers.push(Self::load_layer(f, &cfg, l)?);
        }
        let m = CpuModel { cfg, token_embd, output, output_norm, rope_freqs, ple, layers, file: file.clone(), kv_f16: false };
        m.check_shapes()?;
        Ok(m)
    }

    fn load_layer(f: &GgufFile, cfg: &Config, l: &LayerPlan) -> Result<LayerWeights> {
        let i = l.index;
        let n = |s: &str| format!("blk.{i}.{s}");
        let alias = |a: &str, b: &str| [n(a), n(b)];
        let own_kv = l.stores_kv();
        let moe = match &cfg.moe {
            None => None,
            Some(m) => Some(MoeWeights {
                router: weight(f, &n("ffn_gate_inp.weight"))?,
                router_scale: norm_vec(f, &n("ffn_gate_inp.scale"))?,
                gate_up: match m.gate_up {
                    ExpertGateUp::Fused => vec![weight(f, &n("ffn_gate_up_exps.weight"))?],
                    ExpertGateUp::Split => {
                        vec![weight(f, &n("ffn_gate_exps.weight"))?, weight(f, &n("ffn_up_exps.weight"))?]
                    }
                },
                down: weight(f, &n("ffn_down_exps.weight"))?,
                per_expert_scale: norm_vec(f, &m.per_expert_scale_name(i))?,
                pre_norm_2: norm_alias(f, &alias("pre_ffw_norm_2.weight", "ffn_pre_norm_2.weight"))?,
                post_norm_1: norm_alias(f, &alias("post_ffw_norm_1.weight", "ffn_post_norm_1.weight"))?,
                post_norm_2: norm_alias(f, &alias("post_ffw_norm_2.weight", "ffn_post_norm_2.weight"))?,
            }),
        };
        let ple = if cfg.ple_dim > 0 {
            Some(PleWeights {
                inp_gate: weight(f, &n("inp_gate.weight"))?,
                proj: weight(f, &n("proj.weight"))?,
                post_norm: norm_vec(f, &n("post_norm.weight"))?,
            })
        } else {
            None
        };
        let output_scale = match l.has_output_scale {
            true => {
                let v = norm_alias(f, &alias("layer_output_scale.weight", "layer_scalar.weight"))?;
                Some(*v.first().ok_or_else(|| Error::Gguf(format!("blk.{i}.layer_output_scale is empty")))?)
            }
            false => None,
        };
        Ok(LayerWeights {
            attn_norm: norm_vec(f, &n("attn_norm.weight"))?,
            q: weight(f, &n("attn_q.weight"))?,
            k: if own_kv { Some(weight(f, &n("attn_k.weight"))?) } else { None },
            v: if own_kv && l.has_v { Some(weight(f, &n("attn_v.weight"))?) } else { None },
            q_norm: if cfg.qk_norm { Some(norm_vec(f, &n("attn_q_norm.weight"))?) } else { None },
            k_norm: if cfg.qk_norm && own_kv { Some(norm_vec(f, &n("attn_k_norm.weight"))?) } else { None },
            o: weight(f, &n("attn_output.weight"))?,
            post_attn_norm: norm_alias(f, &alias("post_attention_norm.weight", "attn_post_norm.weight"))?,
            ffn_norm: norm_alias(f, &alias("ffn_norm.weight", "ffn_pre_norm.weight"))?,
            gate: weight(f, &n("ffn_gate.weight"))?,
            up: weight(f, &n("ffn_up.weight"))?,
            down: weight(f, &n("ffn_down.weight"))?,
            post_ffw_norm: norm_alias(f, &alias("post_ffw_norm.weight", "ffn_post_norm.weight"))?,
            moe,
            ple,
            output_scale,
        })
    }

    /// Every matrix must have the shape the plan implies; a mismatch is a broken file,
    /// reported here rather than as a wrong answer later.
    fn check_shapes(&self) -> Result<()> {
        let c = &self.cfg;
        let expect = |w: &W, cols: usize, rows: usize| -> Result<()> {
            if w.0.row_len() as usize != cols || w.0.n_rows() as usize != rows {
                return Err(Error::Gguf(format!(
                    "tensor {} has shape {:?}; the model's settings imply [{cols}, {rows}]",
                    w.0.name, w.0.dims
                )));
            }
            Ok(())
        };
        expect(&self.token_embd, c.hidden, c.vocab)?;
        expect(&self.output, c.hidden, c.vocab)?;
        for (l, w) in c.layers.iter().zip(&self.layers) {
            expect(&w.q, c.hidden, c.n_heads * l.head_dim)?;
            if let Some(k) = &w.k {
                expect(k, c.hidden, l.n_kv_heads * l.head_dim)?;
            }
            if let Some(v) = &w.v {
                expect(v, c.hidden, l.n_kv_heads * l.v_head_dim)?;
            }
            expect(&w.o, c.n_heads * l.v_head_dim, c.hidden)?;
            expect(&w.gate, c.hidden, l.ffn_width)?;
            expect(&w.up, c.hidden, l.ffn_width)?;
            expect(&w.down, l.ffn_width, c.hidden)?;
        }
        Ok(())
    }

    fn mat(&self, w: &W) -> Result<QMatrix<'_>> {
        QMatrix::new(w.0.ty, w.0.row_len() as usize, w.0.n_rows() as usize, self.file.tensor_data(&w.0))
    }

    pub fn new_cache(&self, capacity: usize) -> KvCache {
        let layers = self.cfg.layers.iter().map(|l| l.stores_kv().then(|| (Vec::new(), Vec::new()))).collect();
        KvCache { layers, len: 0, capacity, f16: self.kv_f16 }
    }

    /// Caches made from now on round K and V to f16 as they are stored, like the GPU's f16
    /// cache (`GpuModel::set_kv_f16`).
    pub fn set_kv_f16(&mut self, on: bool) {
        self.kv_f16 = on;
    }

    /// Run `tokens` at positions `cache.len()..`, appending their K/V to `cache`, and return
    /// post-softcap logits (`[n, vocab]` for `Logits::All`, `[vocab]` for `Logits::Last`).
    pub fn forward(&self, tokens: &[u32], cache: &mut KvCache, which: Logits) -> Result<Vec<f32>> {
        self.forward_cancellable(tokens, cache, which, &|| false)
    }

    /// As `forward`, checking `cancel` between layers.
    pub fn forward_cancellable(
        &self,
        tokens: &[u32],
        cache: &mut KvCache,
        which: Logits,
        cancel: &dyn Fn() -> bool,
    ) -> Result<Vec<f32>> {
        let c = &self.cfg;
        let n = tokens.len();
        if n == 0 {
            return Err(Error::Input("no tokens to evaluate".into()));
        }
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= c.vocab) {
            return Err(Error::Input(format!("token id {bad} is outside the vocabulary of {} tokens", c.vocab)));
        }
        if cache.len + n > cache.capacity {
            return Err(Error::Input(format!(
                "{} tokens do not fit in the context of {} ({} already used)",
                n, cache.capacity, cache.len
            )));
        }
        let d = c.hidden;
        let pos0 = cache.len;

        // Embedding: rows of token_embd, scaled by √D.
        let emb = self.mat(&self.token_embd)?;
        let mut x = vec![0f32; n * d];
        for (t, &tok) in tokens.iter().enumerate() {
            emb.row_into(tok as usize, &mut x[t * d..(t + 1) * d])?;
        }
        ops::scale(&mut x, c.embed_scale);

        let ple = self.per_layer_inputs(tokens, &x)?;

        for (li, (plan, w)) in c.layers.iter().zip(&self.layers).enumerate() {
            if cancel() {
                cache.truncate(pos0, c);
                return Err(Error::Cancelled);
            }
            self.layer(li, plan, w, &mut x, n, pos0, cache, ple.as_deref())?;
        }
        cache.len = pos0 + n;

        let rows: Vec<usize> = match which {
            Logits::All => (0..n).collect(),
            Logits::Last => vec![n - 1],
        };
        let mut h: Vec<f32> = rows.iter().flat_map(|&t| x[t * d..(t + 1) * d].iter().copied()).collect();
        ops::rms_norm(&mut h, d, Some(&self.output_norm), c.eps);
        let mut logits = ops::matmul(&h, rows.len(), &self.mat(&self.output)?)?;
        if let Some(cap) = c.final_logit_softcap {
            ops::softcap(&mut logits, cap);
        }
        Ok(logits)
    }

    /// PLE (spec §6.2): `[n, L·P]`, per layer `(RMS(proj·D^-½) + E_ple·√P)·2^-½`.
    fn per_layer_inputs(&self, tokens: &[u32], h0: &[f32]) -> Result<Option<Vec<f32>>> {
        let Some(p) = &self.ple else { return Ok(None) };
        let c = &self.cfg;
        let (n, pd, lp) = (tokens.len(), c.ple_dim, c.ple_dim * c.n_layers);
        let mut proj = ops::matmul(h0, n, &self.mat(&p.model_proj)?)?;
        ops::scale(&mut proj, (c.hidden as f32).powf(-0.5));
        ops::rms_norm(&mut proj, pd, Some(&p.proj_norm), c.eps);
        let table = self.mat(&p.token_embd)?;
        let mut row = vec![0f32; lp];
        let sqrt_p = (pd as f32).sqrt();
        for (t, &tok) in tokens.iter().enumerate() {
            // Soft-token positions (multimodal) use id 0; ids past the PLE table do too.
            let id = if (tok as usize) < c.ple_vocab { tok as usize } else { 0 };
            table.row_into(id, &mut row)?;
            for (o, e) in proj[t * lp..(t + 1) * lp].iter_mut().zip(&row) {
                *o = (*o + e * sqrt_p) * std::f32::consts::FRAC_1_SQRT_2;
            }
        }
        Ok(Some(proj))
    }

    #[allow(clippy::too_many_arguments)]
    fn layer(
        &self,
        li: usize,
        plan: &LayerPlan,
        w: &LayerWeights,
        x: &mut [f32],
        n: usize,
        pos0: usize,
        cache: &mut KvCache,
        ple: Option<&[f32]>,
    ) -> Result<()> {
        let c = &self.cfg;
        let d = c.hidden;

        // Attention block.
        let mut y = x.to_vec();
        ops::rms_norm(&mut y, d, Some(&w.attn_norm), c.eps);
        let mut a = self.attention(li, plan, w, &y, n, pos0, cache)?;
        ops::rms_norm(&mut a, d, Some(&w.post_attn_norm), c.eps);
        ops::add(x, &a);

        // Feed-forward block (dense, or dense + MoE).
        let mut y = x.to_vec();
        ops::rms_norm(&mut y, d, Some(&w.ffn_norm), c.eps);
        let mut f = self.ffn(&y, n, &w.gate, &w.up, &w.down)?;
        if let Some(m) = &w.moe {
            ops::rms_norm(&mut f, d, Some(&m.post_norm_1), c.eps);
            let mut e = self.moe(m, x, n)?;
            ops::rms_norm(&mut e, d, Some(&m.post_norm_2), c.eps);
            ops::add(&mut f, &e);
        }
        ops::rms_norm(&mut f, d, Some(&w.post_ffw_norm), c.eps);
        ops::add(x, &f);

        // Per-layer embedding injection.
        if let (Some(pw), Some(ple)) = (&w.ple, ple) {
            let (pd, lp) = (c.ple_dim, c.ple_dim * c.n_layers);
            let mut g = ops::matmul(x, n, &self.mat(&pw.inp_gate)?)?;
            for t in 0..n {
                let pi = &ple[t * lp + li * pd..t * lp + (li + 1) * pd];
                ops::geglu(&mut g[t * pd..(t + 1) * pd], pi);
            }
            let mut p = ops::matmul(&g, n, &self.mat(&pw.proj)?)?;
            ops::rms_norm(&mut p, d, Some(&pw.post_norm), c.eps);
            ops::add(x, &p);
        }
        if let Some(s) = w.output_scale {
            ops::scale(x, s);
        }
        Ok(())
    }

    /// `W_down · GeGLU(W_gate·y, W_up·y)`.
    fn ffn(&self, y: &[f32], n: usize, gate: &W, up: &W, down: &W) -> Result<Vec<f32>> {
        let mut g = ops::matmul(y, n, &self.mat(gate)?)?;
        let u = ops::matmul(y, n, &self.mat(up)?)?;
        ops::geglu(&mut g, &u);
        ops::matmul(&g, n, &self.mat(down)?)
    }

    /// MoE branch (spec §6.6). `x` is the residual stream after attention (the router input).
    fn moe(&self, m: &MoeWeights, x: &[f32], n: usize) -> Result<Vec<f32>> {
        let c = &self.cfg;
        let mc = c.moe.as_ref().expect("MoE weights imply an MoE config");
        let (d, fe) = (c.hidden, mc.expert_ffn);
        let mut z = x.to_vec();
        ops::rms_norm(&mut z, d, None, c.eps);
        for row in z.chunks_exact_mut(d) {
            row.iter_mut().zip(&m.router_scale).for_each(|(v, s)| *v *= s / (d as f32).sqrt());
        }
        let router_logits = ops::matmul(&z, n, &self.mat(&m.router)?)?;
        let mut y_in = x.to_vec();
        ops::rms_norm(&mut y_in, d, Some(&m.pre_norm_2), c.eps);
        let gate_up: Vec<QMatrix> = m.gate_up.iter().map(|w| self.mat(w)).collect::<Result<_>>()?;
        let down = self.mat(&m.down)?;
        let (ids, weights) = ops::moe_route(&router_logits, mc.n_experts, mc.n_used, &m.per_expert_scale);
        let mut expert_out = vec![0f32; n * mc.n_used * d];
        for (s, &e) in ids.iter().enumerate() {
            let e = e as usize;
            let yt = &y_in[(s / mc.n_used) * d..(s / mc.n_used + 1) * d];
            let (mut g, u) = match mc.gate_up {
                ExpertGateUp::Fused => {
                    let gu = ops::matmul(yt, 1, &gate_up[0].slice_rows(e * 2 * fe, (e + 1) * 2 * fe))?;
                    (gu[..fe].to_vec(), gu[fe..].to_vec())
                }
                ExpertGateUp::Split => (
                    ops::matmul(yt, 1, &gate_up[0].slice_rows(e * fe, (e + 1) * fe))?,
                    ops::matmul(yt, 1, &gate_up[1].slice_rows(e * fe, (e + 1) * fe))?,
                ),
            };
            ops::geglu(&mut g, &u);
            let o = ops::matmul(&g, 1, &down.slice_rows(e * d, (e + 1) * d))?;
            expert_out[s * d..(s + 1) * d].copy_from_slice(&o);
        }
        Ok(ops::moe_combine(&expert_out, &weights, mc.n_used, d))
    }

    #[allow(clippy::too_many_arguments)]
    fn attention(
        &self,
        li: usize,
        plan: &LayerPlan,
        w: &LayerWeights,
        y: &[f32],
        n: usize,
        pos0: usize,
        cache: &mut KvCache,
    ) -> Result<Vec<f32>> {
        let c = &self.cfg;
        let (hd, vhd, kvh, nh) = (plan.head_dim, plan.v_head_dim, plan.n_kv_heads, c.n_heads);
        let rope = match plan.kind {
            AttnKind::Sliding => &c.rope_sliding,
            AttnKind::Global => &c.rope_global,
        };
        let factors = if rope.freq_factors { self.rope_freqs.as_deref() } else { None };
        let rope_at = |v: &mut [f32], pos: usize| {
            ops::rope_neox(v, hd, pos, rope.base, factors, 1.0 / rope.linear_scale);
        };

        let mut q = ops::matmul(y, n, &self.mat(&w.q)?)?;
        if let Some(qn) = &w.q_norm {
            ops::rms_norm(&mut q, hd, Some(qn), c.eps);
        }
        for t in 0..n {
            rope_at(&mut q[t * nh * hd..(t + 1) * nh * hd], pos0 + t);
        }

        if let Some(kw) = &w.k {
            let k_raw = ops::matmul(y, n, &self.mat(kw)?)?;
            // V := raw K (before k-norm and RoPE) when the layer has no V projection.
            let mut v = match &w.v {
                Some(vw) => ops::matmul(y, n, &self.mat(vw)?)?,
                None => k_raw.clone(),
            };
            let mut k = k_raw;
            if let Some(kn) = &w.k_norm {
                ops::rms_norm(&mut k, hd, Some(kn), c.eps);
            }
            for t in 0..n {
                rope_at(&mut k[t * kvh * hd..(t + 1) * kvh * hd], pos0 + t);
            }
            if c.v_norm {
                ops::rms_norm(&mut v, vhd, None, c.eps);
            }
            let f16 = cache.f16;
            let (ck, cv) = cache.layers[li].as_mut().expect("a layer with K weights stores KV");
            for (dst, src) in [(ck, &k), (cv, &v)] {
                match f16 {
                    true => dst.extend(src.iter().map(|&e| half::f16::from_f32(e).to_f32())),
                    false => dst.extend_from_slice(src),
                }
            }
        }
        let src = plan.kv_donor.unwrap_or(li);
        let (ck, cv) = cache.layers[src]
            .as_ref()
            .ok_or_else(|| Error::Gguf(format!("layer {li} reads the KV of layer {src}, which stores none")))?;

        let window = match plan.kind {
            AttnKind::Sliding => c.sliding_window,
            AttnKind::Global => 0,
        };
        let shape = ops::AttnShape {
            n_tokens: n,
            n_heads: nh,
            head_dim: hd,
            kv_heads: kvh,
            v_head_dim: vhd,
            pos0,
            window,
            scale: c.attn_scale,
        };
        let out = ops::attention(&q, ck, cv, &shape);
        ops::matmul(&out, n, &self.mat(&w.o)?)
    }
}

impl crate::runtime::TextModel for CpuModel {
    type Cache = KvCache;

    fn config(&self) -> &Config {
        &self.cfg
    }

    fn new_cache(&self, capacity: usize) -> KvCache {
        CpuModel::new_cache(self, capacity)
    }

    fn cache_len(&self, cache: &KvCache) -> usize {
        cache.len()
    }

    fn forward(
        &self,
        tokens: &[u32],
        cache: &mut KvCache,
        which: Logits,
        cancel: &std::sync::atomic::AtomicBool,
    ) -> Result<Vec<f32>> {
        self.forward_cancellable(tokens, cache, which, &|| cancel.load(std::sync::atomic::Ordering::Relaxed))
    }
}
