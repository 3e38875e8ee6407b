//! Causal (optionally sliding-window) GQA attention over a KV cache, flash style
//! (`shaders/attention/`); CPU twin: `cpu::ops::attention`.
//!
//! Several query tokens (prefill) go by blocks of query rows (`attention_tiled.wgsl`): a
//! workgroup takes a KV head's query heads for a few consecutive tokens, so each K and V
//! element it reads serves all of them, and splits long key ranges over workgroups whose
//! partial softmax states `attention_merge.wgsl` combines. Shapes it does not take (odd
//! v_head_dim, more query heads per KV head than a block holds) and
//! `Kernels::tiled_attention` off go by `attention.wgsl`: one workgroup per (token, up to
//! 4 heads of one KV head). On tensor cores, prefill over an f32 cache goes by
//! `attention_coop` instead: two products around a softmax, each over all KV heads.
//!
//! A single query token (decode) gets `attention_decode.wgsl`, which spreads each key's
//! dot product over several invocations and each query's keys over several workgroups
//! (`attention_split`, merged likewise): one token's few heads would leave most of a large
//! GPU idle over a long history. `attention_decode` is that split decode attention doing
//! the new token's per-head norms and RoPE itself (`DecodePrep`), which saves the
//! `rope::head_norm_rope` dispatch a decode step otherwise spends per layer.

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

impl KvCaches<'_> {
    /// The kv shader the kernels compose with for this cache type, and its name tag.
    fn shader(&self) -> (&'static str, &'static str) {
        if self.f16 { (shaders::KV_F16, "f16") } else { (shaders::KV_F32, "f32") }
    }
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
    q_flags: u32,
    k_flags: u32,
    v_flags: u32,
    eps: f32,
    rope_scale: f32,
    has_factors: u32,
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
    if let Some(shape) = tiled_shape(k, &p) {
        return tiled(k, b, p, q, kv, out, out_off, shape, false);
    }
    p.out_off = u32_of(out_off, "attention out_off")?;
    run(k, b, p, q, kv, out, n_tokens * n_heads, None, None)
}

/// The new token's per-head work for `attention_decode`, with `rope::head_norm_rope`'s
/// arithmetic: q normed (`q_norm`, as `HeadGroup::norm`: None, unweighted or weighted) and
/// rotated (NeoX RoPE, as in `rope::rope_neox`: `base`, `factors`, `pos_scale`); with `fresh`,
/// the new position's K and V as well.
pub struct DecodePrep<'a> {
    pub q_norm: Option<Option<&'a wgpu::Buffer>>,
    pub fresh: Option<FreshKv<'a>>,
    pub eps: f32,
    pub base: f32,
    pub factors: Option<&'a wgpu::Buffer>,
    pub pos_scale: f32,
}

/// The new position's raw K and V rows (`[kv_head][head_dim]`, `[kv_head][v_head_dim]` from
/// element 0; the same buffer for both where V is K): K normed (`k_norm`) and rotated, V
/// normed without weights where `v_norm`, then stored into the caches (rounded to f16 for
/// an f16 cache) and used for that key.
pub struct FreshKv<'a> {
    pub k: &'a wgpu::Buffer,
    pub v: &'a wgpu::Buffer,
    pub k_norm: Option<Option<&'a wgpu::Buffer>>,
    pub v_norm: bool,
}

/// Storage buffers `attention_decode` binds; devices with fewer take head_norm_rope and
/// `attention_split` instead.
pub const DECODE_PREP_BUFFERS: u32 = 10;

// attention_decode_prep.wgsl's flags.
const NORM: u32 = 1;
const WEIGHTED: u32 = 2;
const ROPE: u32 = 4;
const K_FRESH: u32 = 8;

fn norm_flags(norm: Option<Option<&wgpu::Buffer>>) -> u32 {
    match norm {
        None => 0,
        Some(None) => NORM,
        Some(Some(_)) => NORM | WEIGHTED,
    }
}

/// Decode attention (one query token at `pos`, q from element 0 of `q`, output from element
/// 0 of `out`) split as `attention_split` splits it, on the raw q (and K and V) that `prep`
/// turns into what `attention_split` takes after `rope::head_norm_rope`: the same result up
/// to rounding, one dispatch fewer.
#[allow(clippy::too_many_arguments)]
pub fn attention_decode(
    k: &Kernels,
    b: &mut Batch,
    q: &wgpu::Buffer,
    n_heads: usize,
    head_dim: usize,
    kv: KvCaches,
    kv_heads: usize,
    v_head_dim: usize,
    pos: usize,
    window: usize,
    scale: f32,
    out: &wgpu::Buffer,
    prep: &DecodePrep,
) -> Result<()> {
    let mut p = params(q, 0, 1, n_heads, head_dim, kv, kv_heads, v_head_dim, pos, window, scale)?;
    check_fits("attention_decode out", &[(out, n_heads * v_head_dim)])?;
    if pos >= 1 << 24 {
        return Err(Error::Input(format!("attention_decode: position {pos} is beyond 2^24")));
    }
    for w in [prep.q_norm, prep.fresh.as_ref().and_then(|f| f.k_norm)].into_iter().flatten().flatten() {
        check_fits("attention_decode norm weights", &[(w, head_dim)])?;
    }
    if let Some(f) = prep.factors {
        check_fits("attention_decode rope factors", &[(f, head_dim / 2)])?;
    }
    if let Some(f) = &prep.fresh {
        check_fits("attention_decode new K and V", &[(f.k, kv_heads * head_dim), (f.v, kv_heads * v_head_dim)])?;
    }
    p.q_flags = norm_flags(prep.q_norm) | ROPE;
    if let Some(f) = &prep.fresh {
        p.k_flags = norm_flags(f.k_norm) | ROPE | K_FRESH;
        p.v_flags = if f.v_norm { NORM } else { 0 };
    }
    (p.eps, p.rope_scale, p.has_factors) = (prep.eps, prep.pos_scale, prep.factors.is_some() as u32);
    split_run(k, b, p, q, kv, out, 0, Some(prep))
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
    let p = params(q, q_off, n_tokens, n_heads, head_dim, kv, kv_heads, v_head_dim, pos0, window, scale)?;
    check_fits("attention_split out", &[(out, out_off + n_tokens * n_heads * v_head_dim)])?;
    split_run(k, b, p, q, kv, out, out_off, None)
}

/// The split passes of `attention_split` / `attention_decode` for checked parameters `p`.
#[allow(clippy::too_many_arguments)]
fn split_run(k: &Kernels, b: &mut Batch, mut p: Params, q: &wgpu::Buffer, kv: KvCaches, out: &wgpu::Buffer, out_off: usize, prep: Option<&DecodePrep>) -> Result<()> {
    let (n_tokens, v_head_dim) = (p.n_tokens as usize, p.v_head_dim as usize);
    let rows = n_tokens * p.n_heads as usize;
    let positions = p.pos0 as usize + n_tokens;
    let keys = match p.window {
        0 => positions,
        w => (w as usize).min(positions),
    };
    if prep.is_none() {
        let shape = crate::cpu::ops::AttnShape {
            n_tokens,
            n_heads: p.n_heads as usize,
            head_dim: p.head_dim as usize,
            kv_heads: p.kv_heads as usize,
            v_head_dim,
            pos0: p.pos0 as usize,
            window: p.window as usize,
            scale: p.scale,
        };
        let a = super::attention_coop::CoopAttention { shape, q_off: p.q_off as usize, out_off, max_score_bytes: super::attention_coop::MAX_SCORE_BYTES };
        if n_tokens >= super::attention_coop::MIN_TOKENS && super::attention_coop::usable(k, &a, &kv) && super::attention_coop::attention(k, b, &a, q, kv, out)? {
            return Ok(());
        }
    }
    if let Some(shape) = tiled_shape(k, &p) {
        return tiled(k, b, p, q, kv, out, out_off, shape, true);
    }
    let (splits, chunk) = match n_tokens {
        1 if keys <= DECODE_ONE_SPLIT_KEYS => (1, keys),
        1 => split_plan(TARGET_GROUPS, rows, keys, decode_tile(p.head_dim as usize)),
        _ => split_plan(TARGET_GROUPS, rows, keys, CHUNK_ALIGN),
    };
    p.out_off = u32_of(out_off, "attention out_off")?;
    if splits <= 1 {
        return run(k, b, p, q, kv, out, rows, prep, None);
    }
    let part = partials(k, rows, splits, v_head_dim)?;
    (p.splits, p.chunk) = (splits as u32, chunk as u32);
    if prep.is_some() && decode_merges(k) {
        // The kernel merges its own splits into `out` from `out_off`.
        return run(k, b, p, q, kv, &part, rows * splits, prep, Some(out));
    }
    p.out_off = 0;
    run(k, b, p, q, kv, &part, rows * splits, prep, None)?;
    merge(k, b, &part, out, out_off, rows, splits, v_head_dim)
}

/// Storage buffers attention_decode binds when it also merges its splits.
const DECODE_MERGE_BUFFERS: u32 = DECODE_PREP_BUFFERS + 2;

/// Whether `attention_decode` merges its splits itself (attention_decode_merge.wgsl):
/// `Kernels::decode_merge`, on a device that binds enough storage buffers and has
/// `@coherent` storage (its workgroups read each other's partials).
fn decode_merges(k: &Kernels) -> bool {
    k.decode_merge && k.gpu.coherent && k.gpu.limits.max_storage_buffers_per_shader_stage >= DECODE_MERGE_BUFFERS
}

/// Scratch for the partial states of `rows` query rows split `splits` ways
/// (attention_common.wgsl's layout: m, l and v_head_dim sums each).
fn partials(k: &Kernels, rows: usize, splits: usize, v_head_dim: usize) -> Result<wgpu::Buffer> {
    let len = rows * splits * (v_head_dim + 2);
    u32_of(len, "attention_split partials")?;
    Ok(k.scratch("attention_split/partials", len as u64 * 4))
}

/// Splits attention_merge_row.wgsl loads a batch (its MB) for a merge of `splits`: each
/// batch loads MB splits whatever the count, repeating the last, and holds
/// MB × (2 + MERGE_PER) registers for them. Decode merges 3-4 splits at depths 65-128 and
/// 16-20 at 512-640 (the split plan). H200, decode tg128 (tok/s, two or four alternated
/// runs) after 16 tokens / after 512 with one MB everywhere, 32, 16, 8, 4, 2: E2B
/// 476.3-476.7, 486.5-488.7, 492.0-493.8, 496.1-497.0, 495.4-496.2 / 456.3-456.7,
/// 471.8-473.4, 476.2-477.8, 477.1-478.0, 472.7-473.3; the 270M (16, 8, 4) 1,631-1,635,
/// 1,642-1,649, 1,644-1,652 / 1,586.1-1,586.4, 1,584.5-1,589.4, 1,571.8-1,572.1. So 4 up
/// to four splits (one round), 8 past them: against 8 everywhere, E2B +0.4% after 16
/// tokens (488.5-488.8 -> 490.2-491.3), the 270M +0.7% (1,610-1,619 -> 1,625-1,631), the
/// same after 512 (both take 8 there; thirty-ninth session, three / two alternated runs).
/// 16 or 32 past 8 splits (E2B after 512: one or two batches instead of two to four) -1.3%
/// / -4.5% (fifty-first session). With the pairs in workgroup memory (MB × MERGE_PER
/// registers, MB 16 for 16-32 splits) -1.8% (fifty-second session).
fn merge_batch(splits: usize) -> usize {
    if splits <= 4 { 4 } else { 8 }
}

/// attention_merge.wgsl: `rows` rows of `splits` partial states each from `part` into
/// `out` from element `out_off`.
#[allow(clippy::too_many_arguments)]
fn merge(k: &Kernels, b: &mut Batch, part: &wgpu::Buffer, out: &wgpu::Buffer, out_off: usize, rows: usize, splits: usize, v_head_dim: usize) -> Result<()> {
    let mp = MergeParams {
        rows: rows as u32,
        splits: splits as u32,
        v_head_dim: v_head_dim as u32,
        out_off: u32_of(out_off, "attention_split out_off")?,
        groups_x: 0,
    };
    let access = [Access::Read, Access::ReadWrite];
    let mb = merge_batch(splits);
    let header = format!("const MB: u32 = {mb}u;\n");
    let code = [header.as_str(), shaders::ATTENTION_MERGE, shaders::ATTENTION_MERGE_ROW];
    launch(k, b, &format!("attention_merge/mb{mb}"), &code, &access, &[part, out], rows, |groups_x| MergeParams {
        groups_x,
        ..mp
    })
}

/// attention_tiled.wgsl's 128 invocations: 8 row groups × 16 column groups.
const TILED_ROW_GROUPS: usize = 8;
const TILED_COL_GROUPS: usize = 16;
/// Keys per column group and tile (the kernel's SK): tiles of 16 keys. On an H100 (E2B
/// sliding layers, 512 / 2048 tokens) 16-key tiles beat 32 (181 / 892 µs against 247 /
/// 1,218) and 64 (853 / 5,428: registers run out).
const TILED_SK: usize = 1;
/// Widest V rows for which attention_tiled.wgsl loads the next chunk of q and K while it
/// multiplies the current one. H100, µs per call at 512 / 2048 tokens: 270M 133.7 / 494.7
/// → 114.6 / 423.2, E2B sliding 195.5 / 911.4 → 163.0 / 784.2; but E2B global (512-wide
/// V, twice the registers for V) 297.9 / 3,645 → 354.6 / 3,867.
const TILED_PREFETCH_MAX_VHD: usize = 256;
/// Workgroups the tiled kernel's key splits aim for: several per SM of a large GPU. H100,
/// prefill tok/s at 512 / 2048 tokens (270M, E2B): 128 groups 58.9k / 54.5k, 7.6k / 7.3k;
/// 256: 65.6k / 66.7k, 8.1k / 7.8k; 512: 71.0k / 66.9k, 8.5k / 8.2k; 1024: 68.3k / 67.4k,
/// 8.8k / 8.2k. At least 128 or 256 keys per split instead of one tile did not help.
const TILED_TARGET_GROUPS: usize = 1024;

/// attention_tiled.wgsl's rows per invocation (SR) and keys per column group (SK) for
/// multi-token attention with `p`'s shapes, or None where that kernel does not apply: one
/// token (decode has its own kernels), V rows not in 4-element words, a KV head's query
/// heads more than a block holds, or too little workgroup memory.
fn tiled_shape(k: &Kernels, p: &Params) -> Option<(usize, usize)> {
    let (vhd, group) = (p.v_head_dim as usize, (p.n_heads / p.kv_heads) as usize);
    if p.n_tokens < 2 || !k.tiled_attention || !vhd.is_multiple_of(4) {
        return None;
    }
    // At most 64 accumulators per invocation: 32 rows per block for v_head_dim 256, 16
    // for 512.
    let nv = (vhd / 4).div_ceil(TILED_COL_GROUPS);
    let sr = (16 / nv).clamp(1, 4);
    let rows = TILED_ROW_GROUPS * sr;
    let kt = TILED_COL_GROUPS * TILED_SK;
    // Staged q and K chunks (64 floats a row, padded by 4), the tile's scores and weights.
    let shared = 4 * ((rows + kt) * 68 + 2 * rows * kt);
    (group <= rows && shared as u64 <= k.gpu.limits.max_compute_workgroup_storage_size as u64).then_some((sr, TILED_SK))
}

/// Multi-token attention by attention_tiled.wgsl (checked parameters `p`, rows per
/// invocation and keys per column group `shape`), its keys split over several workgroups
/// and merged where `may_split` and the blocks alone leave the GPU idle.
#[allow(clippy::too_many_arguments)]
fn tiled(k: &Kernels, b: &mut Batch, mut p: Params, q: &wgpu::Buffer, kv: KvCaches, out: &wgpu::Buffer, out_off: usize, shape: (usize, usize), may_split: bool) -> Result<()> {
    let (sr, sk) = shape;
    let (hd, vhd, n) = (p.head_dim as usize, p.v_head_dim as usize, p.n_tokens as usize);
    let (rows, kt) = (TILED_ROW_GROUPS * sr, TILED_COL_GROUPS * sk);
    let tokens = rows / (p.n_heads / p.kv_heads) as usize;
    let groups = p.kv_heads as usize * n.div_ceil(tokens);
    // The most keys one block sees: a window's worth plus the block's own tokens, or all.
    let positions = p.pos0 as usize + n;
    let keys = match p.window as usize {
        0 => positions,
        w => (w + tokens - 1).min(positions),
    };
    let (splits, chunk) = split_plan(if may_split { TILED_TARGET_GROUPS } else { 1 }, groups, keys, kt);
    let header = format!(
        "const HD4: u32 = {}u;\nconst VHD4: u32 = {}u;\nconst SR: u32 = {sr}u;\nconst SK: u32 = {sk}u;\nconst NV: u32 = {}u;\nconst VFULL: bool = {};\nconst PREFETCH: bool = {};\n",
        hd / 4,
        vhd / 4,
        (vhd / 4).div_ceil(TILED_COL_GROUPS),
        (vhd / 4).is_multiple_of(TILED_COL_GROUPS),
        vhd <= TILED_PREFETCH_MAX_VHD
    );
    let (cache, ty) = kv.shader();
    let name = format!("attention_tiled/{ty}/hd{hd}/v{vhd}/r{rows}/k{kt}");
    let code = [header.as_str(), shaders::ATTENTION_TILED, shaders::ATTENTION_COMMON, shaders::ATTENTION_OUT, cache];
    let (r, rw) = (Access::Read, Access::ReadWrite);
    let access = [r, r, r, rw, r];
    (p.splits, p.chunk) = (splits as u32, u32_of(chunk, "attention chunk")?);
    if splits == 1 {
        p.out_off = u32_of(out_off, "attention out_off")?;
        return launch(k, b, &name, &code, &access, &[q, kv.k, kv.v, out, q], groups, |groups_x| Params { groups_x, ..p });
    }
    let qrows = n * p.n_heads as usize;
    let part = partials(k, qrows, splits, vhd)?;
    p.out_off = 0;
    launch(k, b, &name, &code, &access, &[q, kv.k, kv.v, &part, q], groups * splits, |groups_x| Params { groups_x, ..p })?;
    merge(k, b, &part, out, out_off, qrows, splits, vhd)
}

/// Keys per split are a multiple of this. Shorter than a tile: in decode a few query rows
/// must fill the GPU, and each invocation's work (one key's dot product, then the tile's
/// keys for its output dimensions) is a chain of memory reads whose length the chunk bounds.
const CHUNK_ALIGN: usize = 16;

/// Invocations per key of attention_decode.wgsl (its S) for head size `hd`; its tiles
/// are DECODE_WG / S keys and its splits whole tiles. Splitting decode attention as
/// finely as this pays on an H100: at least 128 keys per split cost the 270M layout 453 →
/// 360 tok/s. At head size 256, 8 per key (32-key tiles) beat 4 and 16 (E2B decode, three
/// alternated runs: 426.6–426.8 tok/s against 419.6–420.5 and 421.0–421.2; 270M
/// 1,513–1,518 against 1,476 and 1,481–1,488); at 512, 16 (16-key tiles: half the K and
/// V each invocation holds) beat 8 (E2B 426.6–426.8 against 422.1–424.0; the kernel
/// 21.1 against 23.6 µs). 32 at 512 gained 0.2% with f32 caches at 512 keys and lost
/// 1.5% with f16 caches at 4096 (8-key tiles: twice the tiles per split). With the
/// kernel's own merge (fifty-first session, H200, E2B tg128 after 512 tokens): 4 at 256
/// (64-key tiles, 8 splits: one merge batch) -1.1%, 8 at 512 -1.5%.
fn decode_s(hd: usize) -> usize {
    if hd >= 512 { 16 } else { 8 }
}

/// Decode attention over at most this many keys runs unsplit, one workgroup a head taking
/// its tiles (up to two of 32 keys at head size 256, four of 16 at 512) in turn, so no
/// merge waits on the splits' last arrival. H100, decode tg128 after 16 tokens (depths
/// 16-144), three alternated rounds (tok/s): E2B 461.7-462.8 -> 464.7-465.4, the 270M
/// 1,540.7-1,548.5 -> 1,555.8-1,558.3 (two); up to 128 keys 462.0-463.0 / 1,539.8-1,543.0,
/// up to 256 459.4-460.4 / 1,522.1-1,526.5 (longer chains cost more than the merge). The
/// thirty-first session's floor of 64 or 128 keys a split at every depth lost past 512
/// keys; past 64 keys the split plan is as before.
const DECODE_ONE_SPLIT_KEYS: usize = 64;

fn decode_tile(hd: usize) -> usize {
    DECODE_WG / decode_s(hd)
}

/// Invocations per workgroup of attention_decode.wgsl (its WG). 512 or 1024 (tiles of 64
/// or 128 keys at head size 256, half or a quarter of the splits to merge) cost E2B decode
/// 2.5% / 16% after 512 tokens on an H200: reductions and barriers over more subgroups.
const DECODE_WG: usize = 256;

/// How many splits of how many keys (a multiple of `align`) for `groups` workgroups of up
/// to `keys` keys each, aiming at `target` workgroups in all.
fn split_plan(target: usize, groups: usize, keys: usize, align: usize) -> (usize, usize) {
    let want = target.div_ceil(groups.max(1)).min(keys.div_ceil(align)).max(1);
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
    if head_dim == 0 || head_dim > MAX_HEAD_DIM || !head_dim.is_multiple_of(4) || v_head_dim == 0 || v_head_dim > MAX_HEAD_DIM || !v_head_dim.is_multiple_of(4) {
        return Err(Error::Input(format!(
            "attention: head_dim {head_dim} and v_head_dim {v_head_dim} must be multiples of 4 up to {MAX_HEAD_DIM}"
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
        q_flags: 0,
        k_flags: 0,
        v_flags: 0,
        eps: 0.0,
        rope_scale: 0.0,
        has_factors: 0,
    })
}

/// Record attention.wgsl (several tokens) or attention_decode.wgsl (one) over `groups`
/// workgroups. With `merged`, attention_decode (with `prep`) writes its split partials to
/// `out` and merges them into `merged` from `p.out_off` itself.
#[allow(clippy::too_many_arguments)]
fn run(k: &Kernels, b: &mut Batch, p: Params, q: &wgpu::Buffer, kv: KvCaches, out: &wgpu::Buffer, groups: usize, prep: Option<&DecodePrep>, merged: Option<&wgpu::Buffer>) -> Result<()> {
    let (r, rw) = (Access::Read, Access::ReadWrite);
    let access = [r, r, r, rw];
    let (cache, ty) = kv.shader();
    let buffers = [q, kv.k, kv.v, out];
    if p.n_tokens == 1 {
        // Shapes as constants, so the kernel's loops unroll (one kernel per head shape).
        let (hd, vhd) = (p.head_dim as usize, p.v_head_dim as usize);
        let s = decode_s(hd);
        let mut header = format!("const HD4: u32 = {}u;\nconst VHD4: u32 = {}u;\nconst S: u32 = {s}u;\n", hd / 4, vhd / 4);
        let mb = merge_batch(p.splits as usize);
        match merged {
            // The splits' partials go to attention_merge.wgsl: nothing to finish.
            None => header += "fn finish(th: u32, lid: u32) {}\n",
            Some(_) => header += &format!("const MB: u32 = {mb}u;\n"),
        }
        // A key's S partial scores meet by subgroup shuffles where a subgroup holds them.
        let (sum, sum_tag) = match super::uniform_subgroups(k) {
            Some(sgs) if sgs as usize >= s => (shaders::ATTENTION_DECODE_SUM_SUBGROUP, "/ks"),
            _ => (shaders::ATTENTION_DECODE_SUM_SHARED, ""),
        };
        let name = format!("attention_decode/{ty}/hd{hd}/v{vhd}/s{s}{sum_tag}");
        let Some(prep) = prep else {
            let code = [header.as_str(), shaders::ATTENTION_DECODE, shaders::ATTENTION_COMMON, shaders::ATTENTION_OUT, cache, shaders::ATTENTION_DECODE_LOAD, sum];
            return launch(k, b, &name, &code, &access, &buffers, groups, |groups_x| Params { groups_x, ..p });
        };
        let (red, tag) = super::reduce(k);
        let mut code = vec![header.as_str(), shaders::ATTENTION_DECODE, shaders::ATTENTION_COMMON, cache, shaders::ATTENTION_DECODE_PREP, shaders::SIN_COS, red[0], red[1], sum];
        let inv_freq = super::rope::inv_freq_table(k, hd, prep.base);
        let weight = |n: Option<Option<&wgpu::Buffer>>| n.flatten().unwrap_or(&k.dummy).clone();
        let (kn, vn) = prep.fresh.as_ref().map_or((&k.dummy, &k.dummy), |f| (f.k, f.v));
        let (wq, wk) = (weight(prep.q_norm), weight(prep.fresh.as_ref().and_then(|f| f.k_norm)));
        let mut buffers = vec![q, kv.k, kv.v, out, &wq, &wk, &inv_freq, prep.factors.unwrap_or(&k.dummy), kn, vn];
        // The caches are writable here: the prep stores the new row. (Read-only bindings
        // elsewhere: on an H100 writable caches cost prefill attention ~10%.)
        let mut access = vec![r, rw, rw, rw, r, r, r, r, r, r];
        let arrivals;
        let mut name = format!("{name}/prep{tag}");
        if let Some(merged) = merged {
            // One arrival counter per query row, zero between dispatches. (`attention_decode`,
            // the only caller with `prep`, checked that `merged` holds the output.)
            let rows = p.n_tokens as usize * p.n_heads as usize;
            arrivals = k.scratch("attention_decode/arrivals", (rows * 4) as u64);
            code.extend([shaders::ATTENTION_MERGE_ROW, shaders::ATTENTION_DECODE_MERGE]);
            buffers.extend([merged, &arrivals]);
            access.extend([rw, rw]);
            name += &format!("/merge/mb{mb}");
        } else {
            code.push(shaders::ATTENTION_OUT);
        }
        return launch(k, b, &name, &code, &access, &buffers, groups, |groups_x| Params { groups_x, ..p });
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
    let code = [header.as_str(), shaders::ATTENTION, shaders::ATTENTION_COMMON, shaders::ATTENTION_OUT, cache, red[0], red[1]];
    launch(k, b, &format!("attention/{ty}/g{g}{tag}"), &code, &access, &buffers, groups / g, |groups_x| Params { groups_x, ..p })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_plan_covers_every_key_with_whole_tiles() {
        for target in [TARGET_GROUPS, TILED_TARGET_GROUPS] {
            for (rows, align) in [(1, decode_tile(256)), (8, decode_tile(256)), (8, decode_tile(512)), (3, CHUNK_ALIGN), (8, CHUNK_ALIGN), (64, CHUNK_ALIGN), (300, CHUNK_ALIGN), (128, 16)] {
                for keys in [1, 63, 64, 65, 200, 4096, 131072] {
                    let (splits, chunk) = split_plan(target, rows, keys, align);
                    assert_eq!(chunk % align, 0);
                    assert!(splits * chunk >= keys, "rows {rows} keys {keys}");
                    assert!((splits - 1) * chunk < keys, "no empty split: rows {rows} keys {keys}");
                    assert!(rows * splits < target + rows, "rows {rows} keys {keys}");
                }
            }
        }
    }
}
