//! The per-layer plan: what each decoder layer looks like and where its K/V come from.
//!
//! Gemma 3 and Gemma 4 layers differ only in data: attention kind (sliding window or
//! global), head sizes, KV head count, FFN width, whether V has its own projection, and
//! whether the layer reuses another layer's KV cache (spec §6.5).

use crate::{Error, Result};

/// Attention kind of a layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttnKind {
    /// Sliding-window attention (local).
    Sliding,
    /// Full causal attention over the whole context.
    Global,
}

impl AttnKind {
    pub fn name(self) -> &'static str {
        match self {
            AttnKind::Sliding => "sliding-window",
            AttnKind::Global => "global",
        }
    }
}

/// One decoder layer.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerPlan {
    pub index: usize,
    pub kind: AttnKind,
    /// Q and K head size.
    pub head_dim: usize,
    /// V head size.
    pub v_head_dim: usize,
    /// KV heads; on a shared layer, those of its donor's cache.
    pub n_kv_heads: usize,
    /// Dense FFN intermediate width (the dense branch on MoE layers).
    pub ffn_width: usize,
    /// False when V has no projection of its own (`attention_k_eq_v`): V := raw K. Read from
    /// the tensor table (a Gemma 4 global layer with `attn_k` but no `attn_v`), so a file that
    /// lists no attention tensors for the layer counts as having V. On a shared layer, the
    /// donor's value.
    pub has_v: bool,
    /// For a KV-shared layer, the layer whose (normed, RoPE'd) K/V cache it attends over.
    pub kv_donor: Option<usize>,
    /// Whether `blk.N.layer_output_scale.weight` (or its alias) scales the layer output.
    pub has_output_scale: bool,
}

impl LayerPlan {
    /// Whether this layer writes a KV cache of its own.
    pub fn stores_kv(&self) -> bool {
        self.kv_donor.is_none()
    }

    /// Bytes of K plus V per cached token (0 for a shared layer).
    pub fn kv_bytes_per_token(&self, elem_bytes: usize) -> u64 {
        if !self.stores_kv() {
            return 0;
        }
        (self.n_kv_heads * (self.head_dim + self.v_head_dim) * elem_bytes) as u64
    }
}

/// Donor of each layer: for the last `shared` layers, the last non-shared layer of the same
/// kind; `None` for the others. Errors when a shared layer's kind has no non-shared layer.
pub fn kv_donors(kinds: &[AttnKind], shared: usize) -> Result<Vec<Option<usize>>> {
    let n = kinds.len();
    if shared >= n && n > 0 {
        return Err(Error::Gguf(format!(
            "all {n} layers are marked KV-shared ({shared}); at least one layer must compute its own K/V"
        )));
    }
    let first = n - shared;
    let last_of = |kind: AttnKind| (0..first).rev().find(|&j| kinds[j] == kind);
    (0..n)
        .map(|i| {
            if i < first {
                return Ok(None);
            }
            last_of(kinds[i]).map(Some).ok_or_else(|| {
                Error::Gguf(format!(
                    "layer {i} is a {} layer that shares KV, but none of the {first} non-shared layers is {}; \
                     the file's sliding_window_pattern and shared_kv_layers do not fit together",
                    kinds[i].name(),
                    kinds[i].name()
                ))
            })
        })
        .collect()
}

/// Total KV-cache bytes for `n_ctx` tokens. Sliding-window layers hold at most `swa_tokens`
/// tokens (pass `n_ctx` for a flat cache); shared layers hold none.
pub fn kv_cache_bytes(layers: &[LayerPlan], n_ctx: usize, swa_tokens: usize, elem_bytes: usize) -> u64 {
    layers
        .iter()
        .map(|l| {
            let tokens = match l.kind {
                AttnKind::Sliding => n_ctx.min(swa_tokens),
                AttnKind::Global => n_ctx,
            };
            l.kv_bytes_per_token(elem_bytes) * tokens as u64
        })
        .sum()
}
