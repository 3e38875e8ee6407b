//! Causal (optionally sliding-window) GQA attention over a KV cache, flash style
//! (`shaders/attention/attention.wgsl`, `attention_merge.wgsl`); CPU twin:
//! `cpu::ops::attention`.
//!
//! `attention` runs one workgroup per (token, up to 4 heads of one KV head): right for
//! prefill, where tokens fill the GPU and the heads share each K and V read. A single query token (decode) gets `attention_decode.wgsl`, which spreads
//! each key's dot product over several invocations instead of one. `attention_split` also splits each query's keys over several workgroups and
//! merges their partial softmax states: right for decode, where one token's few heads would
//! leave most of a large GPU idle over a long history.

use bytemuck::{Pod, Zeroable};

use super::kernel::{Access, Batch, Kernels};
use super::{check_fits, launch, shaders, u32_of};
use crate::{Error, Result};

/// A layer's K and V caches (`[pos][kv_heads][head_dim]`, `[pos][kv_heads][v_head_dim]`),
/// in f32 or in f16 packed two per u32 (shaders/attention/kv_f16.wgsl; `rope::head_norm_rope` writes it).
#[derive(Clone, Copy)]
pub struct KvCaches<'a> {
    pub k: &'a wgpu::Buffer,
    pub v: &'a wgpu::Buffer,
    pub f16: bool,
}

/// 4-byte words a cache of `elems` elements takes (f16: two per word).
pub fn cache_words(elems: usize, f16: bool) -> usize {
    if f16 { elems.div_ceil(2) } else { elems }
}

/// Largest head_dim / v_head_dim the kernel holds (Gemma 4 global layers use 512).
const MAX_HEAD_DIM: usize = 512;
/// Invocations per workgroup of attention.wgsl (prefill), one key each per tile.
const ATTENTION_WG: usize = 256;
/// Workgroups `attention_split` aims for, enough to occupy every SM of a large GPU.
const TARGET_GROUPS: usize = 256;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    n_tokens: u32,
    n_heads: u32,
    head_dim: u32,
    kv_heads: u32,
    v_head_dim: u32,
    pos0: u32,
    window: u32,
    scale: f32,
    q_off: u32,
    out_off: u32,
    splits: u32,
    chunk: u32,
    groups_x: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct MergeParams {
    rows: u32,
    splits: u32,
    v_head_dim: u32,
    out_off: u32,
    groups_x: u32,
}

/// Attention of `q` (`[n_tokens][n_heads][head_dim]` from element `q_off`) over the caches
/// `kv` (`[pos][kv_heads][head_dim]` and `[pos][kv_heads][v_head_dim]`) holding positions
/// `0..pos0 + n_tokens`. Query `t` is at `pos = pos0 + t` and sees keys
/// `max(0, pos + 1 - window)..=pos` (`window` 0: all of `..=pos`); head `h` reads KV head
/// `h / (n_heads / kv_heads)`; logits are `q·k · scale`. Writes
/// `[n_tokens][n_heads][v_head_dim]` at element `out_off` of `out`.
#[allow(clippy::too_many_arguments)]
pub fn attention(
    k: &Kernels,
    b: &mut Batch,
    q: &wgpu::Buffer,
    q_off: usize,
    n_tokens: usize,
    n_heads: usize,
    head_dim: usize,
    kv: KvCaches,
    kv_heads: usize,
    v_head_dim: usize,
    pos0: usize,
    window: usize,
    scale: f32,
    out: &wgpu::Buffer,
    out_off: usize,
) -> Result<()> {
    let mut p = params(q, q_off, n_tokens, n_heads, head_dim, kv, kv_heads, v_head_dim, pos0, window, scale)?;
    check_fits("attention out", &[(out, out_off + n_tokens * n_heads * v_head_dim)])?;
    p.out_off = u32_of(out_off, "attention out_off")?;
    run(k, b, p, q, kv, out, n_tokens * n_heads)
}

/// `attention` with each query's keys split over several workgroups whose partial softmax
/// states are then merged (same arguments, same result up to rounding). Falls back to one
/// pass when tokens × heads alone give enough workgroups or the history is short.
#[allow(clippy::too_many_arguments)]
pub fn attention_split(
    k: &Kernels,
    b: &mut Batch,
    q: &wgpu::Buffer,
    q_off: usize,
    n_tokens: usize,
    n_heads: usize,
    head_dim: usize,
    kv: KvCaches,
    kv_heads: usize,
    v_head_dim: usize,
    pos0: usize,
    window: usize,
    scale: f32,
    out: &wgpu::Buffer,
    out_off: usize,
) -> Result<()> {
    let rows = n_tokens * n_heads;
    let keys = match window {
        0 => pos0 + n_tokens,
        w => w.min(pos0 + n_tokens),
    };
    let (splits, chunk) = split_plan(rows, keys, if n_tokens == 1 { DECODE_TILE } else { CHUNK_ALIGN });
    if splits <= 1 {
        return attention(
            k, b, q, q_off, n_tokens, n_heads, head_dim, kv, kv_heads, v_head_dim, pos0, window, scale, out, out_off,
        );
    }
    let mut p = params(q, q_off, n_tokens, n_heads, head_dim, kv, kv_heads, v_head_dim, pos0, window, scale)?;
    check_fits("attention_split out", &[(out, out_off + rows * v_head_dim)])?;
    let part_len = rows * splits * (v_head_dim + 2);
    u32_of(part_len, "attention_split partials")?;
    let part = k.scratch("attention_split/partials", part_len as u64 * 4);
    p.splits = splits as u32;
    p.chunk = chunk as u32;
    run(k, b, p, q, kv, &part, rows * splits)?;
    let mp = MergeParams {
        rows: rows as u32,
        splits: splits as u32,
        v_head_dim: v_head_dim as u32,
        out_off: u32_of(out_off, "attention_split out_off")?,
        groups_x: 0,
    };
    let access = [Access::Read, Access::ReadWrite];
    let (red, tag) = super::reduce(k);
    launch(k, b, &format!("attention_merge{tag}"), &[shaders::ATTENTION_MERGE, red[0], red[1]], &access, &[&part, out], rows, |groups_x| MergeParams {
        groups_x,
        ..mp
    })
}

/// Keys per split are a multiple of this. Shorter than a tile: in decode a few query rows
/// must fill the GPU, and each invocation's work (one key's dot product, then the tile's
/// keys for its output dimensions) is a chain of memory reads whose length the chunk bounds.
const CHUNK_ALIGN: usize = 16;

/// Keys per tile of attention_decode.wgsl (its KT): its splits are whole tiles. Splitting
/// decode attention as finely as this pays on an H100: at least 128 keys per split cost
/// the 270M layout 453 → 360 tok/s, and 8 invocations per key (32-key tiles) beat 4 and 16.
const DECODE_TILE: usize = 32;
/// Invocations per workgroup of attention_decode.wgsl (its WG).
const DECODE_WG: usize = 256;

/// How many splits of how many keys (a multiple of `align`) for `rows` queries of up to
/// `keys` keys each.
fn split_plan(rows: usize, keys: usize, align: usize) -> (usize, usize) {
    let want = TARGET_GROUPS.div_ceil(rows.max(1)).min(keys.div_ceil(align)).max(1);
    let chunk = keys.div_ceil(want).div_ceil(align) * align;
    (keys.div_ceil(chunk.max(1)).max(1), chunk.max(align))
}

/// Checked shapes as kernel parameters (single pass, `out_off` 0).
#[allow(clippy::too_many_arguments)]
fn params(
    q: &wgpu::Buffer,
    q_off: usize,
    n_tokens: usize,
    n_heads: usize,
    head_dim: usize,
    kv: KvCaches,
    kv_heads: usize,
    v_head_dim: usize,
    pos0: usize,
    window: usize,
    scale: f32,
) -> Result<Params> {
    // K rows are read as vec4.
    if head_dim == 0 || head_dim > MAX_HEAD_DIM || !head_dim.is_multiple_of(4) || v_head_dim == 0 || v_head_dim > MAX_HEAD_DIM {
        return Err(Error::Input(format!(
            "attention: head_dim {head_dim} must be a multiple of 4 up to {MAX_HEAD_DIM}, v_head_dim {v_head_dim} 1..={MAX_HEAD_DIM}"
        )));
    }
    if kv_heads == 0 || !n_heads.is_multiple_of(kv_heads) {
        return Err(Error::Input(format!("attention: {n_heads} query heads do not group over {kv_heads} KV heads")));
    }
    let positions = pos0 + n_tokens;
    check_fits(
        "attention",
        &[
            (q, q_off + n_tokens * n_heads * head_dim),
            (kv.k, cache_words(positions * kv_heads * head_dim, kv.f16)),
            (kv.v, cache_words(positions * kv_heads * v_head_dim, kv.f16)),
        ],
    )?;
    u32_of(positions * kv_heads * head_dim.max(v_head_dim), "attention cache size")?;
    Ok(Params {
        n_tokens: u32_of(n_tokens, "attention n_tokens")?,
        n_heads: n_heads as u32,
        head_dim: head_dim as u32,
        kv_heads: kv_heads as u32,
        v_head_dim: v_head_dim as u32,
        pos0: pos0 as u32,
        window: u32_of(window, "attention window")?,
        scale,
        q_off: u32_of(q_off, "attention q_off")?,
        out_off: 0,
        splits: 1,
        chunk: u32_of(positions, "attention positions")?,
        groups_x: 0,
    })
}

fn run(k: &Kernels, b: &mut Batch, p: Params, q: &wgpu::Buffer, kv: KvCaches, out: &wgpu::Buffer, groups: usize) -> Result<()> {
    let access = [Access::Read, Access::Read, Access::Read, Access::ReadWrite];
    let (cache, ty) = if kv.f16 { (shaders::KV_F16, "f16") } else { (shaders::KV_F32, "f32") };
    let buffers = [q, kv.k, kv.v, out];
    if p.n_tokens == 1 {
        // Shapes as constants, so the kernel's loops unroll (one kernel per head shape).
        let (hd, vhd) = (p.head_dim as usize, p.v_head_dim as usize);
        let header = format!("const HD4: u32 = {}u;\nconst VPER: u32 = {}u;\n", hd / 4, vhd.div_ceil(DECODE_WG));
        let code = [header.as_str(), shaders::ATTENTION_DECODE, shaders::ATTENTION_COMMON, cache];
        return launch(k, b, &format!("attention_decode/{ty}/hd{hd}/v{vhd}"), &code, &access, &buffers, groups, |groups_x| Params { groups_x, ..p });
    }
    // Heads per workgroup: as many of a KV head's query heads as divide its group, up to 4;
    // keys per tile (and invocations): ATTENTION_WG. H100 prefill attention per layer at
    // 512 tokens, E2B (8 heads on one KV head): 1 head x 64 keys 553 µs, 2 x 64 360, 4 x 64
    // 363, 8 x 64 1022 (registers run out); at 2048 tokens: 4 x 64 780, 4 x 128 1100,
    // 4 x 256 446, 8 x 256 1418. Gemma 3 270M (4 on 1) at 2048: 4 x 64 314, 4 x 256 211.
    let group = (p.n_heads / p.kv_heads) as usize;
    let g = [4, 2, 1].into_iter().find(|g| group.is_multiple_of(*g)).unwrap_or(1);
    let (red, tag) = super::reduce(k);
    let header = format!("const G: u32 = {g}u;\nconst WG: u32 = {ATTENTION_WG}u;\n");
    let code = [header.as_str(), shaders::ATTENTION, shaders::ATTENTION_COMMON, cache, red[0], red[1]];
    launch(k, b, &format!("attention/{ty}/g{g}{tag}"), &code, &access, &buffers, groups / g, |groups_x| Params { groups_x, ..p })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_plan_covers_every_key_with_whole_tiles() {
        for (rows, align) in [(1, DECODE_TILE), (8, DECODE_TILE), (3, CHUNK_ALIGN), (8, CHUNK_ALIGN), (64, CHUNK_ALIGN), (300, CHUNK_ALIGN)] {
            for keys in [1, 63, 64, 65, 200, 4096, 131072] {
                let (splits, chunk) = split_plan(rows, keys, align);
                assert_eq!(chunk % align, 0);
                assert!(splits * chunk >= keys, "rows {rows} keys {keys}");
                assert!((splits - 1) * chunk < keys, "no empty split: rows {rows} keys {keys}");
                assert!(rows * splits < TARGET_GROUPS + rows, "rows {rows} keys {keys}");
            }
        }
    }
}
