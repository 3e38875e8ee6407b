//! Model configuration from GGUF metadata, for the `gemma3` and `gemma4` architectures.
//!
//! One `Config` drives one forward pass for both families: everything that differs between
//! Gemma 3 and Gemma 4 (attention scale, V norm, per-layer widths, KV sharing, ...) is a value
//! here, never a branch on the architecture in the forward code.
//!
//! Sources: spec §2–§4 and §6 (Ollama's Gemma 4 keys and defaults); llama.cpp and Hugging Face
//! transformers for the Gemma 3 keys and defaults.
//!
//! # Norm weights
//!
//! Every RMSNorm multiplies by its weight **as stored** (`x · w`) for both architectures.
//! Gemma 4 checkpoints define the norm as `x · w` and the converter stores `w` (spec §6).
//! Gemma 3 checkpoints define it as `x · (1 + w)`, and the GGUF converters (llama.cpp's and
//! Ollama's) store `1 + w`. The real Gemma 3 270M Q4_K_M GGUF shows it: its norm values alone
//! cannot tell (e.g. `blk.0.attn_norm.weight` has mean 13.5, range 7.4–62.5; q/k norms mean
//! ~2), but transformers' GGUF loader subtracts 1 from every `*norm.weight` of a `gemma3` file
//! before its `(1 + w)` norm, and that run matches llama.cpp's `x · w` run on the same file
//! (same argmax, correlation ≥ 0.999; oracles.md §5). So the stored weight is already `1 + w`.

use super::meta::{Meta, PerLayer, check_len};
use super::plan::{AttnKind, LayerPlan, kv_cache_bytes, kv_donors};
use super::towers::{AudioConfig, VisionConfig};
use crate::gguf::{Gguf, MetaValue};
use crate::{Error, Result};

/// Supported model architectures (`general.architecture`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    Gemma3,
    Gemma4,
}

impl Arch {
    pub fn name(self) -> &'static str {
        match self {
            Arch::Gemma3 => "gemma3",
            Arch::Gemma4 => "gemma4",
        }
    }

    fn parse(name: &str) -> Result<Arch> {
        match name {
            "gemma3" => Ok(Arch::Gemma3),
            "gemma4" => Ok(Arch::Gemma4),
            other => Err(Error::Unsupported(format!(
                "architecture {other:?} is not supported; rullama runs Gemma 3 (\"gemma3\") and Gemma 4 (\"gemma4\") models"
            ))),
        }
    }
}

/// Rotary embedding of one attention kind (NeoX / rotate-half pairing).
#[derive(Debug, Clone, PartialEq)]
pub struct Rope {
    pub base: f32,
    /// Dimensions the frequencies are computed over (`θ_j = pos · base^(−2j/dims)`).
    pub dims: usize,
    /// Linear position scaling: positions are divided by this (1 = none).
    pub linear_scale: f32,
    /// Whether `rope_freqs.weight` divides the frequencies (Gemma 4 proportional RoPE).
    pub freq_factors: bool,
}

/// How the expert gate and up projections are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpertGateUp {
    /// `ffn_gate_up_exps.weight`: gate rows first, then up rows.
    Fused,
    /// `ffn_gate_exps.weight` and `ffn_up_exps.weight`.
    Split,
}

/// Mixture-of-experts block (every layer has one when present).
#[derive(Debug, Clone, PartialEq)]
pub struct MoeConfig {
    pub n_experts: usize,
    pub n_used: usize,
    pub expert_ffn: usize,
    pub gate_up: ExpertGateUp,
    /// Tensor suffix of the per-expert output scale: `ffn_down_exps.scale`, or the
    /// alternative name `ffn_gate_inp.per_expert_scale` used by published files.
    pub per_expert_scale: &'static str,
}

impl MoeConfig {
    pub fn per_expert_scale_name(&self, layer: usize) -> String {
        format!("blk.{layer}.{}", self.per_expert_scale)
    }
}

/// Token ids the runtime needs.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenIds {
    pub bos: u32,
    pub eos: u32,
    /// End of turn (`<turn|>` in Gemma 4, `<end_of_turn>` in Gemma 3).
    pub eot: Option<u32>,
    /// Generation stops on any of these: eos ∪ eos_token_ids ∪ eot, first-seen order,
    /// without ids outside the vocabulary (they can never be sampled).
    pub stop: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub arch: Arch,
    pub n_layers: usize,
    /// Model width D.
    pub hidden: usize,
    pub n_heads: usize,
    pub vocab: usize,
    pub context_length: usize,
    pub eps: f32,
    /// Keys a sliding-window query sees, itself included (0 when no layer slides).
    pub sliding_window: usize,
    /// The last `shared_kv_layers` layers reuse earlier layers' KV caches.
    pub shared_kv_layers: usize,
    pub rope_sliding: Rope,
    pub rope_global: Rope,
    /// Per-layer-embedding width P (0 = no PLE).
    pub ple_dim: usize,
    /// Rows of `per_layer_token_embd` (the vocabulary when the tensor is absent).
    pub ple_vocab: usize,
    pub moe: Option<MoeConfig>,
    pub final_logit_softcap: Option<f32>,
    /// Token embeddings are multiplied by √D.
    pub embed_scale: f32,
    /// Multiplier of q·k before softmax.
    pub attn_scale: f32,
    /// Per-head weighted RMSNorm on q and k.
    pub qk_norm: bool,
    /// Per-head unweighted RMSNorm on v (Gemma 4 only).
    pub v_norm: bool,
    /// No `output.weight`: the LM head is `token_embd.weight`.
    pub tied_output: bool,
    pub tokens: TokenIds,
    pub vision: Option<VisionConfig>,
    pub audio: Option<AudioConfig>,
    pub layers: Vec<LayerPlan>,
}

impl Config {
    pub fn from_gguf(gguf: &Gguf) -> Result<Config> {
        let arch_name = gguf.architecture().ok_or_else(|| {
            Error::Unsupported(
                "the file names no architecture (general.architecture is missing); it is not a model rullama can run"
                    .into(),
            )
        })?;
        let arch = Arch::parse(arch_name)?;
        let m = Meta { gguf, prefix: arch.name() };

        let n_layers = nonzero(&m, "block_count", "number of layers")?;
        let hidden = nonzero(&m, "embedding_length", "model width")?;
        let n_heads = nonzero(&m, "attention.head_count", "attention heads")?;
        let kinds = layer_kinds(&m, arch, n_layers)?;

        let heads = head_dims(&m, arch, hidden, n_heads)?;
        let shared_kv_layers = m.usize("attention.shared_kv_layers")?.unwrap_or(0);
        let donors = kv_donors(&kinds, shared_kv_layers)?;
        let kv_heads = kv_heads(&m, &kinds, &donors, n_heads)?;
        let ffn = ffn_widths(&m, n_layers)?;

        let mut layers: Vec<LayerPlan> = Vec::with_capacity(n_layers);
        for (i, (&kind, &donor)) in kinds.iter().zip(&donors).enumerate() {
            let (head_dim, v_head_dim) = heads.of(kind);
            let has_v = match donor {
                Some(d) => layers[d].has_v,
                // attention_k_eq_v is not in the metadata: a Gemma 4 global layer that has a K
                // projection but no V projection uses raw K as V (spec §4.2).
                None => {
                    !(arch == Arch::Gemma4
                        && kind == AttnKind::Global
                        && gguf.has_tensor(&format!("blk.{i}.attn_k.weight"))
                        && !gguf.has_tensor(&format!("blk.{i}.attn_v.weight")))
                }
            };
            let has_output_scale = ["layer_output_scale.weight", "layer_scalar.weight"]
                .iter()
                .any(|s| gguf.has_tensor(&format!("blk.{i}.{s}")));
            layers.push(LayerPlan {
                index: i,
                kind,
                head_dim,
                v_head_dim,
                n_kv_heads: kv_heads[i],
                ffn_width: ffn[i],
                has_v,
                kv_donor: donor,
                has_output_scale,
            });
        }
        check_attention_shapes(gguf, hidden, n_heads, &layers)?;

        let rope_global = Rope {
            base: positive_f32(&m, &["rope.freq_base"], 1e6)?,
            dims: rope_dims(&m, arch, "rope.dimension_count", heads.global.0, true)?,
            linear_scale: rope_linear_scale(&m)?,
            freq_factors: gguf.has_tensor("rope_freqs.weight"),
        };
        if rope_global.freq_factors {
            check_shape(gguf, "rope_freqs.weight", &[rope_global.dims / 2])?;
        }
        // Sliding layers never use position scaling or frequency factors (HF puts rope
        // scaling on full attention only; llama.cpp fixes the SWA scale to 1).
        let rope_sliding = Rope {
            base: positive_f32(&m, &["rope.freq_base_swa", "rope.local.freq_base"], 1e4)?,
            dims: rope_dims(&m, arch, "rope.dimension_count_swa", heads.sliding.0, false)?,
            linear_scale: 1.0,
            freq_factors: false,
        };

        let vocab = vocab_size(gguf, hidden)?;
        let sliding_window = match m.usize("attention.sliding_window")? {
            Some(w) if w > 0 => w,
            _ if kinds.contains(&AttnKind::Sliding) => {
                return Err(Error::MissingTensor(format!(
                    "metadata key {:?} (sliding window size, needed by the sliding-window layers) is not in the file, or is 0",
                    m.key("attention.sliding_window")
                )));
            }
            _ => 0,
        };

        let ple_dim = m.usize("embedding_length_per_layer_input")?.unwrap_or(0);
        let ple_vocab = match gguf.tensor("per_layer_token_embd.weight") {
            Some(t) if ple_dim > 0 => {
                let rows = t.dims.get(1).copied().unwrap_or(1) as usize;
                check_shape(gguf, &t.name, &[n_layers * ple_dim, rows])?;
                rows
            }
            _ => vocab,
        };

        let final_logit_softcap = m.f32("final_logit_softcapping")?.filter(|&c| c > 0.0);
        let attn_scale = match arch {
            Arch::Gemma4 => 1.0,
            // Gemma 3 scales q·k by query_pre_attn_scalar^-1/2. The GGUF does not carry it:
            // it equals the head size except on the 62-layer 27B, where it is D/H (the HF
            // configs; llama.cpp keys the same rule on the layer count).
            Arch::Gemma3 => {
                let qpas = if n_layers == 62 { hidden as f32 / n_heads as f32 } else { heads.global.0 as f32 };
                1.0 / qpas.sqrt()
            }
        };

        Ok(Config {
            arch,
            n_layers,
            hidden,
            n_heads,
            vocab,
            context_length: m.usize("context_length")?.filter(|&c| c > 0).unwrap_or(131_072),
            eps: positive_f32(&m, &["attention.layer_norm_rms_epsilon"], 1e-6)?,
            sliding_window,
            shared_kv_layers,
            rope_sliding,
            rope_global,
            ple_dim,
            ple_vocab,
            moe: moe_config(&m, gguf)?,
            final_logit_softcap,
            embed_scale: (hidden as f32).sqrt(),
            attn_scale,
            qk_norm: true,
            v_norm: arch == Arch::Gemma4,
            tied_output: !gguf.has_tensor("output.weight"),
            tokens: token_ids(gguf, arch, vocab)?,
            vision: VisionConfig::from_gguf(gguf, arch.name())?,
            audio: AudioConfig::from_gguf(gguf, arch.name())?,
            layers,
        })
    }

    /// The per-layer plan.
    pub fn plan(&self) -> &[LayerPlan] {
        &self.layers
    }

    /// Index of the first KV-shared layer (`n_layers` when none is shared).
    pub fn first_shared_layer(&self) -> usize {
        self.n_layers - self.shared_kv_layers
    }

    /// KV-cache bytes for `n_ctx` tokens with `elem_bytes` per element (2 for f16). Only
    /// non-shared layers store KV; sliding layers hold at most `swa_tokens` tokens.
    pub fn kv_cache_bytes(&self, n_ctx: usize, swa_tokens: usize, elem_bytes: usize) -> u64 {
        kv_cache_bytes(&self.layers, n_ctx, swa_tokens, elem_bytes)
    }
}

fn nonzero(m: &Meta, suffix: &str, what: &str) -> Result<usize> {
    match m.req_usize(suffix, what)? {
        0 => Err(Error::Gguf(format!("metadata {:?} ({what}) is 0", m.key(suffix)))),
        v => Ok(v),
    }
}

/// The first key present among `suffixes`, which must be positive; else `default`.
fn positive_f32(m: &Meta, suffixes: &[&str], default: f32) -> Result<f32> {
    for s in suffixes {
        if let Some(v) = m.f32(s)? {
            if v <= 0.0 {
                return Err(Error::Gguf(format!("metadata {:?} is {v}, expected a positive number", m.key(s))));
            }
            return Ok(v);
        }
    }
    Ok(default)
}

/// Sliding or global per layer: a bool array (true = sliding), or an integer period p
/// (layer i is global iff (i+1) % p == 0; p = 0 makes every layer sliding, as in llama.cpp).
/// Without the key, Gemma 4 layers are all global ([GO] `isLocal`) and Gemma 3 uses period 6.
fn layer_kinds(m: &Meta, arch: Arch, n: usize) -> Result<Vec<AttnKind>> {
    let key = m.key("attention.sliding_window_pattern");
    let periodic = |p: usize| -> Vec<AttnKind> {
        (0..n).map(|i| if p != 0 && (i + 1) % p == 0 { AttnKind::Global } else { AttnKind::Sliding }).collect()
    };
    match m.gguf.get(&key) {
        None => Ok(match arch {
            Arch::Gemma4 => vec![AttnKind::Global; n],
            Arch::Gemma3 => periodic(6),
        }),
        Some(MetaValue::Array(_, items)) => {
            check_len(&key, items.len(), n)?;
            items
                .iter()
                .map(|v| match v.as_bool() {
                    Some(true) => Ok(AttnKind::Sliding),
                    Some(false) => Ok(AttnKind::Global),
                    None => Err(super::meta::bad(&key, v, "a bool (true = sliding window)")),
                })
                .collect()
        }
        Some(v) => match v.as_u64().filter(|_| !matches!(v, MetaValue::Bool(_))) {
            Some(p) => Ok(periodic(p as usize)),
            None => Err(super::meta::bad(&key, v, "a bool array or an integer period")),
        },
    }
}

/// (K, V) head sizes of each attention kind.
struct HeadDims {
    sliding: (usize, usize),
    global: (usize, usize),
}

impl HeadDims {
    fn of(&self, kind: AttnKind) -> (usize, usize) {
        match kind {
            AttnKind::Sliding => self.sliding,
            AttnKind::Global => self.global,
        }
    }
}

fn head_dims(m: &Meta, arch: Arch, hidden: usize, n_heads: usize) -> Result<HeadDims> {
    let get = |suffix: &str, default: usize| -> Result<usize> {
        match m.usize(suffix)? {
            Some(0) => Err(Error::Gguf(format!("metadata {:?} (a head size) is 0", m.key(suffix)))),
            v => Ok(v.unwrap_or(default)),
        }
    };
    // Gemma 4 defaults from [GO]; Gemma 3 uses key_length for every layer, defaulting to
    // D/H as llama.cpp does.
    let (k_default, swa_default) = match arch {
        Arch::Gemma4 => (512, Some(256)),
        Arch::Gemma3 => (hidden / n_heads, None),
    };
    let gk = get("attention.key_length", k_default)?;
    let gv = get("attention.value_length", gk)?;
    let sk = get("attention.key_length_swa", swa_default.unwrap_or(gk))?;
    let sv = get("attention.value_length_swa", sk)?;
    Ok(HeadDims { sliding: (sk, sv), global: (gk, gv) })
}

/// KV heads per layer: scalar or per-layer `head_count_kv` (default: the query heads), with
/// `global_head_count_kv` (when > 0) overriding the global layers. Shared layers take their
/// donor's count, since they attend over its cache.
fn kv_heads(m: &Meta, kinds: &[AttnKind], donors: &[Option<usize>], n_heads: usize) -> Result<Vec<usize>> {
    let n = kinds.len();
    let raw = m.per_layer("attention.head_count_kv", n)?.unwrap_or(PerLayer::Scalar(n_heads));
    let global_override = m.usize("attention.global_head_count_kv")?.filter(|&g| g > 0);
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let v = match (donors[i], kinds[i], global_override) {
            (Some(d), _, _) => out[d],
            (None, AttnKind::Global, Some(g)) => g,
            (None, _, _) => raw.at(i),
        };
        if v == 0 || !n_heads.is_multiple_of(v) {
            return Err(Error::Gguf(format!(
                "layer {i} has {v} KV heads, which does not divide the {n_heads} query heads ({:?})",
                m.key("attention.head_count_kv")
            )));
        }
        out.push(v);
    }
    Ok(out)
}

/// Dense FFN width per layer. `ffn_gate` tensor rows are authoritative ([GO] reads widths from
/// the shapes): a scalar `feed_forward_length` is only the base width (shared layers may be
/// double-wide), but a per-layer array must agree with the tensors.
fn ffn_widths(m: &Meta, n: usize) -> Result<Vec<usize>> {
    let meta = m.per_layer("feed_forward_length", n)?;
    (0..n)
        .map(|i| {
            let name = format!("blk.{i}.ffn_gate.weight");
            let from_tensor = m.gguf.tensor(&name).map(|t| t.dims.get(1).copied().unwrap_or(1) as usize);
            let width = match (&meta, from_tensor) {
                (Some(PerLayer::Array(a)), Some(rows)) if a[i] != rows => {
                    return Err(Error::Gguf(format!(
                        "layer {i}: {:?} says an FFN width of {}, but {name} has {rows} rows",
                        m.key("feed_forward_length"),
                        a[i]
                    )));
                }
                (_, Some(rows)) => rows,
                (Some(meta), None) => meta.at(i),
                (None, None) => return Err(super::meta::missing(&m.key("feed_forward_length"), "FFN width")),
            };
            if width == 0 {
                return Err(Error::Gguf(format!("layer {i} has an FFN width of 0")));
            }
            Ok(width)
        })
        .collect()
}

fn check_shape(gguf: &Gguf, name: &str, want: &[usize]) -> Result<()> {
    match gguf.tensor(name) {
        Some(t) if t.dims.iter().map(|&d| d as usize).ne(want.iter().copied()) => Err(Error::Gguf(format!(
            "tensor {name} has shape {:?}, but the metadata implies {want:?}; the file is inconsistent",
            t.dims
        ))),
        _ => Ok(()),
    }
}

/// Attention tensors that are present must match the plan (K/V only on layers that compute
/// them: shared layers may carry unused ones).
fn check_attention_shapes(gguf: &Gguf, hidden: usize, n_heads: usize, layers: &[LayerPlan]) -> Result<()> {
    for l in layers {
        let i = l.index;
        check_shape(gguf, &format!("blk.{i}.attn_q.weight"), &[hidden, n_heads * l.head_dim])?;
        check_shape(gguf, &format!("blk.{i}.attn_q_norm.weight"), &[l.head_dim])?;
        if l.stores_kv() {
            check_shape(gguf, &format!("blk.{i}.attn_k.weight"), &[hidden, l.n_kv_heads * l.head_dim])?;
            check_shape(gguf, &format!("blk.{i}.attn_k_norm.weight"), &[l.head_dim])?;
            check_shape(gguf, &format!("blk.{i}.attn_v.weight"), &[hidden, l.n_kv_heads * l.v_head_dim])?;
        }
    }
    Ok(())
}

/// RoPE dimensions: the key, else the head size (times `rope.partial_rotary_factor` for the
/// Gemma 4 global kind, as [GO] does). Gemma 4 files write the full global head size and
/// express partial rotation through `rope_freqs.weight` instead (spec §11.8).
fn rope_dims(m: &Meta, arch: Arch, suffix: &str, head_dim: usize, global: bool) -> Result<usize> {
    let dims = match m.usize(suffix)? {
        Some(d) => d,
        None if arch == Arch::Gemma4 && global => {
            let f = m.f32("rope.partial_rotary_factor")?.unwrap_or(1.0);
            (f * head_dim as f32).round() as usize
        }
        None => head_dim,
    };
    if dims == 0 || !dims.is_multiple_of(2) || dims > head_dim {
        return Err(Error::Gguf(format!(
            "RoPE over {dims} dimensions ({:?}) does not fit a head of {head_dim}",
            m.key(suffix)
        )));
    }
    Ok(dims)
}

/// Linear RoPE scaling of the global layers (Gemma 3 4B+ use factor 8). llama.cpp's
/// defaults: type "linear" when absent; a factor of 0 or none means 1.
fn rope_linear_scale(m: &Meta) -> Result<f32> {
    let factor = m.f32("rope.scaling.factor")?.filter(|&f| f != 0.0).unwrap_or(1.0);
    match m.str("rope.scaling.type")? {
        Some("none") => Ok(1.0),
        None | Some("linear") if factor > 0.0 => Ok(factor),
        None | Some("linear") => Err(Error::Gguf(format!(
            "metadata {:?} is {factor}, expected a positive factor",
            m.key("rope.scaling.factor")
        ))),
        Some(other) => Err(Error::Unsupported(format!(
            "RoPE scaling type {other:?} ({:?}); only \"linear\" is supported for Gemma models",
            m.key("rope.scaling.type")
        ))),
    }
}

/// Rows of `token_embd.weight` (whose row length must be D), else the tokenizer's size.
fn vocab_size(gguf: &Gguf, hidden: usize) -> Result<usize> {
    let n_tokens = gguf.get("tokenizer.ggml.tokens").and_then(MetaValue::as_array).map(<[_]>::len);
    let rows = match gguf.tensor("token_embd.weight") {
        Some(t) => {
            let rows = t.dims.get(1).copied().unwrap_or(1) as usize;
            check_shape(gguf, "token_embd.weight", &[hidden, rows])?;
            Some(rows)
        }
        None => None,
    };
    match (rows, n_tokens) {
        (Some(r), Some(t)) if t > r => Err(Error::Gguf(format!(
            "the tokenizer has {t} tokens but token_embd.weight only {r} rows; the file is inconsistent"
        ))),
        (Some(r), _) => Ok(r),
        (None, Some(t)) if t > 0 => Ok(t),
        _ => Err(Error::MissingTensor(
            "token_embd.weight and tokenizer.ggml.tokens are both absent, so the vocabulary size is unknown".into(),
        )),
    }
}

fn moe_config(m: &Meta, gguf: &Gguf) -> Result<Option<MoeConfig>> {
    let n_experts = m.usize("expert_count")?.unwrap_or(0);
    if n_experts == 0 {
        return Ok(None);
    }
    let n_used = m.req_usize("expert_used_count", "experts per token")?;
    if n_used == 0 || n_used > n_experts {
        return Err(Error::Gguf(format!(
            "metadata {:?} is {n_used}, expected 1 to {n_experts} (the expert count)",
            m.key("expert_used_count")
        )));
    }
    let expert_ffn = nonzero(m, "expert_feed_forward_length", "expert FFN width")?;
    let any_named = |suffix: &str| gguf.tensors.iter().any(|t| t.name.starts_with("blk.") && t.name.ends_with(suffix));
    let gate_up = if any_named(".ffn_gate_exps.weight") || any_named(".ffn_up_exps.weight") {
        ExpertGateUp::Split
    } else {
        ExpertGateUp::Fused
    };
    let per_expert_scale = if any_named(".ffn_gate_inp.per_expert_scale") {
        "ffn_gate_inp.per_expert_scale"
    } else {
        "ffn_down_exps.scale"
    };
    Ok(Some(MoeConfig { n_experts, n_used, expert_ffn, gate_up, per_expert_scale }))
}

/// BOS, EOS and end-of-turn ids. The end of turn is `tokenizer.ggml.eot_token_id`; without it,
/// Gemma 4 uses 106 ([GO] default) and Gemma 3 the id of `<end_of_turn>` in its vocabulary.
fn token_ids(gguf: &Gguf, arch: Arch, vocab: usize) -> Result<TokenIds> {
    let t = Meta { gguf, prefix: "tokenizer.ggml" };
    let id = |suffix: &str, default: u32| -> Result<u32> {
        match t.usize(suffix)? {
            None => Ok(default),
            Some(v) => {
                u32::try_from(v).map_err(|_| Error::Gguf(format!("metadata {:?} is {v}, too large", t.key(suffix))))
            }
        }
    };
    let bos = id("bos_token_id", 2)?;
    if bos as usize >= vocab {
        return Err(Error::Gguf(format!("the BOS token id {bos} is outside the {vocab}-token vocabulary")));
    }
    let eos = id("eos_token_id", 1)?;
    let eot = match t.usize("eot_token_id")? {
        Some(v) => u32::try_from(v).ok(),
        None => match arch {
            Arch::Gemma4 => Some(106),
            Arch::Gemma3 => gguf
                .get("tokenizer.ggml.tokens")
                .and_then(MetaValue::as_array)
                .and_then(|toks| toks.iter().position(|s| s.as_str() == Some("<end_of_turn>")))
                .and_then(|p| u32::try_from(p).ok()),
        },
    };
    let listed: Vec<u32> = match gguf.get("tokenizer.ggml.eos_token_ids") {
        None => Vec::new(),
        Some(v) => v
            .as_array()
            .ok_or_else(|| super::meta::bad("tokenizer.ggml.eos_token_ids", v, "an array of token ids"))?
            .iter()
            .map(|x| x.as_u32().ok_or_else(|| super::meta::bad("tokenizer.ggml.eos_token_ids", x, "a token id")))
            .collect::<Result<_>>()?,
    };
    let mut stop = Vec::new();
    for s in std::iter::once(eos).chain(listed).chain(eot) {
        if (s as usize) < vocab && !stop.contains(&s) {
            stop.push(s);
        }
    }
    Ok(TokenIds { bos, eos, eot, stop })
}
