//! Mixture-of-experts routing and combination (`shaders/moe/moe_route.wgsl`,
//! `moe_combine.wgsl`); CPU twins: `cpu::ops::moe_route`, `cpu::ops::moe_combine`.
//! The expert matmuls between them belong to the matmul family.

use bytemuck::{Pod, Zeroable};

use super::kernel::{Access, Batch, Kernels};
use super::{check_fits, launch, shaders, u32_of};
use crate::{Error, Result};

/// Limits of the routing kernel's workgroup arrays (Gemma 4 MoE: 128 experts, 8 used).
const MAX_EXPERTS: usize = 256;
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
/// (ties: lower index), weights = renormalised probability × `per_expert_scale[e]`.
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
    let (red, tag) = super::reduce(k);
    let code = [shaders::MOE_ROUTE, red[0], red[1]];
    launch(k, b, &format!("moe_route{tag}"), &code, &access, &[logits, per_expert_scale, ids, weights], n, |groups_x| RouteParams {
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
