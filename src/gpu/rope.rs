//! Rotary position embedding on the GPU (`shaders/rope/rope_neox.wgsl`; CPU twin:
//! `cpu::ops::rope_neox`), and the fused per-head norm + RoPE of a layer's q, k and v
//! (`shaders/rope/head_norm_rope.wgsl`; CPU twin: `cpu::ops::rms_norm` then `rope_neox`).

use bytemuck::{Pod, Zeroable};

use super::kernel::{Access, Batch, Kernels};
use super::{check_fits, launch, shaders, u32_of};
use crate::cpu::ops::rope_inv_freq;
use crate::{Error, Result};

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    n_tokens: u32,
    n_heads: u32,
    head_dim: u32,
    pos0: u32,
    x_off: u32,
    has_factors: u32,
    scale: f32,
    groups_x: u32,
}

/// NeoX RoPE in place on `x[x_off..]`, laid out `[n_tokens][n_heads][head_dim]`; token `t` is
/// at position `pos0 + t`. Pair `j` turns by `pos · pos_scale · base^(-2j/head_dim) / factor_j`
/// (`factors`: `rope_freqs`, `head_dim/2` values, or None for all ones).
#[allow(clippy::too_many_arguments)]
pub fn rope_neox(
    k: &Kernels,
    b: &mut Batch,
    x: &wgpu::Buffer,
    x_off: usize,
    n_tokens: usize,
    n_heads: usize,
    head_dim: usize,
    pos0: usize,
    base: f32,
    factors: Option<&wgpu::Buffer>,
    pos_scale: f32,
) -> Result<()> {
    if !head_dim.is_multiple_of(2) {
        return Err(Error::Input(format!("rope_neox: head_dim {head_dim} is odd")));
    }
    let half = head_dim / 2;
    check_fits("rope_neox", &[(x, x_off + n_tokens * n_heads * head_dim)])?;
    if let Some(f) = factors {
        check_fits("rope_neox factors", &[(f, half)])?;
    }
    // Positions go through f32 in the reference too; past 2^24 they stop being exact.
    if pos0 + n_tokens > 1 << 24 {
        return Err(Error::Input(format!("rope_neox: position {} is beyond 2^24", pos0 + n_tokens)));
    }
    let inv_freq = inv_freq_table(k, head_dim, base);
    let p = Params {
        n_tokens: u32_of(n_tokens, "rope_neox n_tokens")?,
        n_heads: u32_of(n_heads, "rope_neox n_heads")?,
        head_dim: u32_of(head_dim, "rope_neox head_dim")?,
        pos0: pos0 as u32,
        x_off: u32_of(x_off, "rope_neox x_off")?,
        has_factors: factors.is_some() as u32,
        scale: pos_scale,
        groups_x: 0,
    };
    let items = u32_of(n_tokens * n_heads * half, "rope_neox pairs")? as usize;
    let access = [Access::ReadWrite, Access::Read, Access::Read];
    let buffers = [x, &inv_freq, factors.unwrap_or(&k.dummy)];
    launch(k, b, "rope_neox", &[shaders::ROPE_NEOX, shaders::SIN_COS], &access, &buffers, items.div_ceil(256), |groups_x| Params { groups_x, ..p })
}

/// The RoPE frequencies for `head_dim` and `base`, made on the host so they are
/// bit-identical to the reference's (a GPU pow is a few ulp off, which at position 1e5
/// moves the angle by ~0.05 rad).
pub(crate) fn inv_freq_table(k: &Kernels, head_dim: usize, base: f32) -> wgpu::Buffer {
    k.table(&format!("rope_inv_freq/{head_dim}/{:08x}", base.to_bits()), || {
        (0..head_dim / 2).map(|j| rope_inv_freq(base, head_dim, j)).collect()
    })
}

/// One group of heads for `head_norm_rope`: `heads` heads of `dim` values per token from
/// element `off` of `buf`; `norm`: None (no norm), Some(None) (unweighted) or Some(Some(w));
/// `rope`: rotate after the norm; `f16_out`: for k and v, write the result rounded to f16
/// into an f16 cache (`attention::KvCaches` layout) from element `.1` (even) instead of back
/// into `buf`.
pub struct HeadGroup<'a> {
    pub buf: &'a wgpu::Buffer,
    pub off: usize,
    pub heads: usize,
    pub dim: usize,
    pub norm: Option<Option<&'a wgpu::Buffer>>,
    pub rope: bool,
    pub f16_out: Option<(&'a wgpu::Buffer, usize)>,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct HeadParams {
    g: [[u32; 4]; 3],
    n_tokens: u32,
    pos0: u32,
    eps: f32,
    scale: f32,
    has_factors: u32,
    groups_x: u32,
    k16_off: u32,
    v16_off: u32,
}

/// Per-head RMSNorm then NeoX RoPE for the q group and the optional k and v groups of
/// `n_tokens` tokens at positions `pos0..` in one dispatch (k's weight must not be given
/// to v: group 2 is unweighted). Rotating groups share `q.dim`; RoPE as in `rope_neox`.
#[allow(clippy::too_many_arguments)]
pub fn head_norm_rope(
    k: &Kernels,
    b: &mut Batch,
    q: HeadGroup,
    kg: Option<HeadGroup>,
    vg: Option<HeadGroup>,
    n_tokens: usize,
    pos0: usize,
    eps: f32,
    base: f32,
    factors: Option<&wgpu::Buffer>,
    pos_scale: f32,
) -> Result<()> {
    const MAX_DIM: usize = 2 * 128 * 4;
    if vg.as_ref().is_some_and(|v| matches!(v.norm, Some(Some(_))) || v.rope) {
        return Err(Error::Input("head_norm_rope: the v group is normed without weights and not rotated".into()));
    }
    if q.f16_out.is_some() {
        return Err(Error::Input("head_norm_rope: q is written in place".into()));
    }
    let groups = [Some(&q), kg.as_ref(), vg.as_ref()];
    let mut g = [[0u32; 4]; 3];
    let mut f16_offs = [0u32; 2];
    let mut weights = [&k.dummy, &k.dummy];
    for (i, grp) in groups.iter().enumerate() {
        let Some(grp) = grp else { continue };
        if grp.dim % 2 != 0 || grp.dim > MAX_DIM || (grp.rope && grp.dim != q.dim) {
            return Err(Error::Input(format!("head_norm_rope: head size {} (at most {MAX_DIM}, even, rotated groups as q's {})", grp.dim, q.dim)));
        }
        check_fits("head_norm_rope", &[(grp.buf, grp.off + n_tokens * grp.heads * grp.dim)])?;
        let mut flags = 0;
        if let Some(w) = grp.norm {
            flags |= 1;
            if let Some(w) = w {
                check_fits("head_norm_rope weights", &[(w, grp.dim)])?;
                weights[i.min(1)] = w;
                flags |= 2;
            }
        }
        if grp.rope {
            flags |= 4;
        }
        if let Some((cache, off)) = grp.f16_out {
            if off % 2 != 0 {
                return Err(Error::Input(format!("head_norm_rope: f16 output at odd element {off}")));
            }
            check_fits("head_norm_rope f16 output", &[(cache, (off + n_tokens * grp.heads * grp.dim) / 2)])?;
            f16_offs[i - 1] = u32_of(off, "head_norm_rope f16 offset")?;
            flags |= 8;
        }
        g[i] = [u32_of(grp.off, "head_norm_rope offset")?, grp.heads as u32, grp.dim as u32, flags];
    }
    if pos0 + n_tokens > 1 << 24 {
        return Err(Error::Input(format!("head_norm_rope: position {} is beyond 2^24", pos0 + n_tokens)));
    }
    if let Some(f) = factors {
        check_fits("head_norm_rope factors", &[(f, q.dim / 2)])?;
    }
    let inv_freq = inv_freq_table(k, q.dim, base);
    // Absent groups bind stand-ins: two writable bindings may not share a buffer.
    let kb = kg.as_ref().map(|g| g.buf.clone()).unwrap_or_else(|| k.scratch("head_norm_rope/k", 4));
    let vb = vg.as_ref().map(|g| g.buf.clone()).unwrap_or_else(|| k.scratch("head_norm_rope/v", 4));
    let out16 = |g: &Option<HeadGroup>, stand: &str| g.as_ref().and_then(|g| g.f16_out).map(|o| o.0.clone()).unwrap_or_else(|| k.scratch(stand, 4));
    let (k16, v16) = (out16(&kg, "head_norm_rope/k16"), out16(&vg, "head_norm_rope/v16"));
    let p = HeadParams {
        g,
        n_tokens: n_tokens as u32,
        pos0: pos0 as u32,
        eps,
        scale: pos_scale,
        has_factors: factors.is_some() as u32,
        groups_x: 0,
        k16_off: f16_offs[0],
        v16_off: f16_offs[1],
    };
    let heads = n_tokens * groups.iter().flatten().map(|g| g.heads).sum::<usize>();
    let (r, rw) = (Access::Read, Access::ReadWrite);
    let access = [rw, rw, rw, r, r, r, r, rw, rw];
    let buffers = [q.buf, &kb, &vb, weights[0], weights[1], &inv_freq, factors.unwrap_or(&k.dummy), &k16, &v16];
    let (red, tag) = super::reduce(k);
    let code = [shaders::HEAD_NORM_ROPE, shaders::SIN_COS, red[0], red[1]];
    launch(k, b, &format!("head_norm_rope{tag}"), &code, &access, &buffers, heads, |groups_x| HeadParams { groups_x, ..p })
}
