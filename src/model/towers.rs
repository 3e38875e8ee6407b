//! Vision and audio tower configurations (spec §3.2, §3.3). Ollama's Gemma 4 GGUFs carry
//! both towers in the model file under `gemma4.vision.*` and `gemma4.audio.*`; a block count
//! of 0 (or no key) means the tower is absent.

use super::meta::Meta;
use crate::gguf::Gguf;
use crate::{Error, Result};

/// Vision encoder (ViT with 2D RoPE, pooling and a projector into the text width).
#[derive(Debug, Clone, PartialEq)]
pub struct VisionConfig {
    pub n_layers: usize,
    pub hidden: usize,
    pub n_heads: usize,
    pub head_dim: usize,
    pub ffn_width: usize,
    pub patch_size: usize,
    pub n_channels: usize,
    /// Side of the average-pooling window applied to the patch grid.
    pub pool: usize,
    pub eps: f32,
    /// Not in the GGUF: fixed by the model (spec §3.2).
    pub rope_base: f32,
    /// Soft-token budget per image (Ollama fixes 280; spec §7.1).
    pub max_soft_tokens: usize,
    pub min_soft_tokens: usize,
    /// Rows of each position table, from `v.position_embd.weight` when present.
    pub position_table: Option<usize>,
}

/// Audio encoder (Conformer): the keys and the constants [GO] hard-codes (spec §3.3).
#[derive(Debug, Clone, PartialEq)]
pub struct AudioConfig {
    pub n_layers: usize,
    pub hidden: usize,
    pub n_heads: usize,
    pub head_dim: usize,
    pub ffn_width: usize,
    pub eps: f32,
    pub conv_kernel: usize,
    pub n_mels: usize,
    pub chunk_size: usize,
    pub max_past: usize,
    pub max_future: usize,
    pub context_size: usize,
    pub logit_cap: f32,
    pub residual_weight: f32,
    pub gradient_clip: f32,
}

fn heads_divide(key: &str, hidden: usize, heads: usize) -> Result<usize> {
    if heads == 0 || !hidden.is_multiple_of(heads) {
        return Err(Error::Gguf(format!("{key} is {heads}, which does not divide the tower width {hidden}")));
    }
    Ok(hidden / heads)
}

fn positive(m: &Meta, suffix: &str, default: usize) -> Result<usize> {
    match m.usize(suffix)? {
        None => Ok(default),
        Some(0) => Err(Error::Gguf(format!("metadata {:?} is 0", m.key(suffix)))),
        Some(v) => Ok(v),
    }
}

impl VisionConfig {
    pub fn from_gguf(gguf: &Gguf, arch: &str) -> Result<Option<VisionConfig>> {
        let m = Meta { gguf, prefix: arch };
        let n_layers = m.usize("vision.block_count")?.unwrap_or(0);
        if n_layers == 0 {
            return Ok(None);
        }
        let hidden = m.req_usize("vision.embedding_length", "vision tower width")?;
        let n_heads = m.req_usize("vision.attention.head_count", "vision attention heads")?;
        let head_dim = heads_divide(&m.key("vision.attention.head_count"), hidden, n_heads)?;
        // The converter writes 3 when pooling_kernel_size is 0 (spec §3.2).
        let pool = match m.usize("vision.projector.scale_factor")? {
            None | Some(0) => 3,
            Some(p) => p,
        };
        let eps = match m.f32("vision.attention.layer_norm_epsilon")? {
            Some(e) if e > 0.0 => e,
            _ => 1e-6,
        };
        let position_table =
            gguf.tensor("v.position_embd.weight").map(|t| t.dims.get(1).copied().unwrap_or(1) as usize);
        Ok(Some(VisionConfig {
            n_layers,
            hidden,
            n_heads,
            head_dim,
            ffn_width: m.req_usize("vision.feed_forward_length", "vision FFN width")?,
            patch_size: positive(&m, "vision.patch_size", 16)?,
            n_channels: positive(&m, "vision.num_channels", 3)?,
            pool,
            eps,
            rope_base: 100.0,
            max_soft_tokens: 280,
            min_soft_tokens: 40,
            position_table,
        }))
    }
}

impl AudioConfig {
    pub fn from_gguf(gguf: &Gguf, arch: &str) -> Result<Option<AudioConfig>> {
        let m = Meta { gguf, prefix: arch };
        let n_layers = m.usize("audio.block_count")?.unwrap_or(0);
        if n_layers == 0 {
            return Ok(None);
        }
        let hidden = m.req_usize("audio.embedding_length", "audio tower width")?;
        let n_heads = positive(&m, "audio.attention.head_count", 8)?;
        let head_dim = heads_divide(&m.key("audio.attention.head_count"), hidden, n_heads)?;
        let eps = match m.f32("audio.attention.layer_norm_epsilon")? {
            Some(e) if e > 0.0 => e,
            _ => 1e-6,
        };
        let conv_kernel = match m.usize("audio.conv_kernel_size")? {
            None | Some(0) => 5,
            Some(k) => k,
        };
        Ok(Some(AudioConfig {
            n_layers,
            hidden,
            n_heads,
            head_dim,
            ffn_width: positive(&m, "audio.feed_forward_length", 4 * hidden)?,
            eps,
            conv_kernel,
            n_mels: positive(&m, "audio.num_mel_bins", 128)?,
            chunk_size: 12,
            max_past: 12,
            max_future: 0,
            context_size: 24,
            logit_cap: 50.0,
            residual_weight: 0.5,
            gradient_clip: 1e10,
        }))
    }
}
