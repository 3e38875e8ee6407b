//! Rotary position embedding on the GPU (`shaders/rope/rope_neox.wgsl`); CPU twin:
//! `cpu::ops::rope_neox`.

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
    // The frequencies come from the host so they are bit-identical to the reference's
    // (a GPU pow is a few ulp off, which at position 1e5 moves the angle by ~0.05 rad).
    let inv_freq = k.table(&format!("rope_inv_freq/{head_dim}/{:08x}", base.to_bits()), || {
        (0..half).map(|j| rope_inv_freq(base, head_dim, j)).collect()
    });
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
    launch(k, b, "rope_neox", &[shaders::ROPE_NEOX], &access, &buffers, items.div_ceil(256), |groups_x| Params { groups_x, ..p })
}
