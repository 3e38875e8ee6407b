//! Mixture-of-experts routing and combination (`shaders/moe/moe_route.wgsl`,
//! `moe_combine.wgsl`); CPU twins: `cpu::ops::moe_route`, `cpu::ops::moe_combine`.
//! The expert matmuls between them belong to the matmul family.

use bytemuck::{Pod, Zeroable};

use super::kernel::{Access, Batch, Kernels};
use super::{check_fits, launch, shaders, u32_of};
use crate::{Error, Result};

/// Limits of the routing kernel (one invocation an expert: moe_route.wgsl's WG) and of
/// moe_sort.wgsl's workgroup arrays (Gemma 4 MoE: 128 experts, 8 used).
pub(crate) const MAX_EXPERTS: usize = 256;
const MAX_TOP_K: usize = 32;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct RouteParams {
    n: u32,
    n_experts: u32,
    top_k: u32,
    logits_off: u32,
    groups_x: u32,
}

/// Route `n` tokens (spec §6.6): `logits` `[n][n_experts]` from element `logits_off` →
/// `ids` (u32) and `weights` (f32), each `[n][top_k]` from element 0, most probable first
/// (ties: lower index), weights = renormalised probability × `per_expert_scale[e]`
/// (ranked by logit, weights softmax over the chosen: moe_route.wgsl says why).
#[allow(clippy::too_many_arguments)]
pub fn moe_route(
    k: &Kernels,
    b: &mut Batch,
    logits: &wgpu::Buffer,
    logits_off: usize,
    n: usize,
    n_experts: usize,
    top_k: usize,
    per_expert_scale: &wgpu::Buffer,
    ids: &wgpu::Buffer,
    weights: &wgpu::Buffer,
) -> Result<()> {
    if n_experts == 0 || n_experts > MAX_EXPERTS || top_k == 0 || top_k > n_experts.min(MAX_TOP_K) {
        return Err(Error::Input(format!(
            "moe_route: {top_k} of {n_experts} experts (supported: up to {MAX_TOP_K} of up to {MAX_EXPERTS})"
        )));
    }
    check_fits(
        "moe_route",
        &[(logits, logits_off + n * n_experts), (per_expert_scale, n_experts), (ids, n * top_k), (weights, n * top_k)],
    )?;
    let p = RouteParams {
        n: u32_of(n, "moe_route n")?,
        n_experts: n_experts as u32,
        top_k: top_k as u32,
        logits_off: u32_of(logits_off, "moe_route logits_off")?,
        groups_x: 0,
    };
    u32_of(logits_off + n * n_experts, "moe_route logits end")?;
    let access = [Access::Read, Access::Read, Access::ReadWrite, Access::ReadWrite];
    let code = [shaders::MOE_ROUTE];
    launch(k, b, "moe_route", &code, &access, &[logits, per_expert_scale, ids, weights], n, |groups_x| RouteParams {
        groups_x,
        ..p
    })
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct CombineParams {
    n: u32,
    top_k: u32,
    d: u32,
    out_off: u32,
    groups_x: u32,
}

/// `out[t] = Σ_s weights[t*top_k + s] · expert_out[t*top_k + s]` for rows of `d`
/// (`expert_out` `[n*top_k][d]` from element 0), overwriting `out` from element `out_off`.
#[allow(clippy::too_many_arguments)]
pub fn moe_combine(
    k: &Kernels,
    b: &mut Batch,
    expert_out: &wgpu::Buffer,
    weights: &wgpu::Buffer,
    n: usize,
    top_k: usize,
    d: usize,
    out: &wgpu::Buffer,
    out_off: usize,
) -> Result<()> {
    check_fits("moe_combine", &[(expert_out, n * top_k * d), (weights, n * top_k), (out, out_off + n * d)])?;
    u32_of(n * top_k * d, "moe_combine expert_out size")?;
    let p = CombineParams {
        n: n as u32,
        top_k: top_k as u32,
        d: d as u32,
        out_off: u32_of(out_off, "moe_combine out_off")?,
        groups_x: 0,
    };
    let access = [Access::Read, Access::Read, Access::ReadWrite];
    let code = [shaders::MOE_COMBINE];
    launch(k, b, "moe_combine", &code, &access, &[expert_out, weights, out], (n * d).div_ceil(256), |groups_x| {
        CombineParams { groups_x, ..p }
    })
}

/// A bound on the rows `pairs` pairs over `experts` experts take in runs of whole
/// `bm`-row tiles: each expert with pairs rounds its run up by less than a tile.
pub fn padded_rows(pairs: usize, experts: usize, bm: usize) -> usize {
    (pairs + experts.min(pairs) * (bm - 1)).div_ceil(bm) * bm
}

/// Where `moe_sort` writes in its `info` buffer (u32 words): the map of `rows` padded
/// rows from `map_off`, the experts' first rows (experts + 1) from `poff_off`, the tiles'
/// experts (rows / bm) from `tile_off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SortLayout {
    pub map_off: usize,
    pub poff_off: usize,
    pub tile_off: usize,
    pub rows: usize,
    pub bm: usize,
    pub experts: usize,
}

impl SortLayout {
    /// The layout from word `base` for `pairs` pairs over `experts` experts in tiles of
    /// `bm` rows (`padded_rows` of them).
    pub fn new(base: usize, pairs: usize, experts: usize, bm: usize) -> SortLayout {
        let rows = padded_rows(pairs, experts, bm);
        SortLayout { map_off: base, poff_off: base + rows, tile_off: base + rows + experts + 1, rows, bm, experts }
    }

    /// One past the last word.
    pub fn end(&self) -> usize {
        self.tile_off + self.rows / self.bm
    }
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct SortParams {
    pairs: u32,
    n_experts: u32,
    bm: u32,
    rows: u32,
    map_off: u32,
    poff_off: u32,
    tile_off: u32,
}

/// moe_sort.wgsl: the `pairs` token-expert pairs of `ids` grouped by expert into padded
/// runs of whole `l.bm`-row tiles, written to `info` as `l` says.
pub fn moe_sort(k: &Kernels, b: &mut Batch, ids: &wgpu::Buffer, pairs: usize, info: &wgpu::Buffer, l: SortLayout) -> Result<()> {
    if l.experts == 0 || l.experts > MAX_EXPERTS || l.bm == 0 || l != SortLayout::new(l.map_off, pairs, l.experts, l.bm) {
        return Err(Error::Input(format!("moe_sort: {pairs} pairs over {} experts (up to {MAX_EXPERTS}) in tiles of {} do not fit {l:?}", l.experts, l.bm)));
    }
    check_fits("moe_sort", &[(ids, pairs), (info, l.end())])?;
    let p = SortParams {
        pairs: u32_of(pairs, "moe_sort pairs")?,
        n_experts: l.experts as u32,
        bm: u32_of(l.bm, "moe_sort tile")?,
        rows: u32_of(l.rows, "moe_sort rows")?,
        map_off: u32_of(l.map_off, "moe_sort offset")?,
        poff_off: u32_of(l.poff_off, "moe_sort offset")?,
        tile_off: u32_of(l.tile_off, "moe_sort offset")?,
    };
    u32_of(l.end(), "moe_sort end")?;
    launch(k, b, "moe_sort", &[shaders::MOE_SORT], &[Access::Read, Access::ReadWrite], &[ids, info], 1, |_| p)
}

/// What moe_sort.wgsl writes but the map (whose order within a run is the GPU's):
/// each expert's first padded row (and the end), and each tile's expert.
pub fn moe_sort_cpu(ids: &[u32], experts: usize, bm: usize) -> (Vec<u32>, Vec<u32>) {
    let mut count = vec![0usize; experts];
    for &e in ids {
        if (e as usize) < experts {
            count[e as usize] += 1;
        }
    }
    let mut poff = vec![0u32];
    let mut tiles = Vec::new();
    for (e, c) in count.iter().enumerate() {
        let run = c.div_ceil(bm);
        tiles.extend(std::iter::repeat_n(e as u32, run));
        poff.push(poff[e] + (run * bm) as u32);
    }
    (poff, tiles)
}

/// Longest row moe_norms.wgsl and moe_combine_norm.wgsl hold (common/row_words.wgsl:
/// 256 invocations × 4 vec4 words).
pub const NORMS_MAX_D: usize = 4096;

/// Whether rows of `d` fit the one-workgroup-a-token kernels (`moe_norms`,
/// `moe_combine_norm`): whole vec4 words, up to NORMS_MAX_D.
pub fn norms_fit(d: usize) -> bool {
    d > 0 && d.is_multiple_of(4) && d <= NORMS_MAX_D
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct NormsParams {
    n: u32,
    d: u32,
    eps: f32,
    groups_x: u32,
}

/// moe_norms.wgsl over `n` rows of `d` (from element 0 of every buffer): `router.0 =
/// RMS(x) ⊙ router.1`, `experts.0 = RMS(x) ⊙ experts.1`, and `ffn = RMS(ffn) ⊙ post_w`
/// in place; rows as `norms_fit` allows.
#[allow(clippy::too_many_arguments)]
pub fn moe_norms(
    k: &Kernels,
    b: &mut Batch,
    x: &wgpu::Buffer,
    ffn: &wgpu::Buffer,
    router: (&wgpu::Buffer, &wgpu::Buffer),
    experts: (&wgpu::Buffer, &wgpu::Buffer),
    post_w: &wgpu::Buffer,
    (n, d): (usize, usize),
    eps: f32,
) -> Result<()> {
    if !norms_fit(d) {
        return Err(Error::Input(format!("moe_norms: rows of {d} (a multiple of 4 up to {NORMS_MAX_D})")));
    }
    check_fits("moe_norms", &[(x, n * d), (ffn, n * d), (router.0, n * d), (experts.0, n * d), (router.1, d), (experts.1, d), (post_w, d)])?;
    let p = NormsParams { n: u32_of(n, "moe_norms rows")?, d: d as u32, eps, groups_x: 0 };
    u32_of(n * d, "moe_norms size")?;
    let (r, rw) = (Access::Read, Access::ReadWrite);
    let (red, tag) = super::reduce(k);
    launch(k, b, &format!("moe_norms{tag}"), &[shaders::MOE_NORMS, shaders::ROW_WORDS, red[0], red[1]], &[r, rw, rw, rw, r, r, r], &[x, ffn, router.0, experts.0, router.1, experts.1, post_w], n, |groups_x| NormsParams { groups_x, ..p })
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct CombineNormParams {
    n: u32,
    top_k: u32,
    d: u32,
    eps: f32,
    groups_x: u32,
}

/// moe_combine_norm.wgsl: `ffn[t] += RMS(Σ_s weights[t*top_k + s] · expert_out[t*top_k +
/// s]) ⊙ post_w` for `n` rows of `d` (every buffer from element 0); rows as `norms_fit`
/// allows. `moe_combine` then `norm::rms_norm_to` accumulating, in one dispatch.
#[allow(clippy::too_many_arguments)]
pub fn moe_combine_norm(
    k: &Kernels,
    b: &mut Batch,
    expert_out: &wgpu::Buffer,
    weights: &wgpu::Buffer,
    (n, top_k, d): (usize, usize, usize),
    ffn: &wgpu::Buffer,
    post_w: &wgpu::Buffer,
    eps: f32,
) -> Result<()> {
    if !norms_fit(d) || top_k == 0 {
        return Err(Error::Input(format!("moe_combine_norm: {top_k} slots of rows of {d} (a multiple of 4 up to {NORMS_MAX_D})")));
    }
    check_fits("moe_combine_norm", &[(expert_out, n * top_k * d), (weights, n * top_k), (ffn, n * d), (post_w, d)])?;
    u32_of(n * top_k * d, "moe_combine_norm expert_out size")?;
    let p = CombineNormParams { n: n as u32, top_k: top_k as u32, d: d as u32, eps, groups_x: 0 };
    let (r, rw) = (Access::Read, Access::ReadWrite);
    let (red, tag) = super::reduce(k);
    let code = [shaders::MOE_COMBINE_NORM, shaders::ROW_WORDS, red[0], red[1]];
    launch(k, b, &format!("moe_combine_norm{tag}"), &code, &[r, r, rw, r], &[expert_out, weights, ffn, post_w], n, |groups_x| CombineNormParams { groups_x, ..p })
}
