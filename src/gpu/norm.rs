//! RMSNorm on the GPU: in place, optionally of a scaled row and with a sum after it
//! (`shaders/norm/rms_norm.wgsl`, CPU twin `cpu::ops::rms_norm`)
//! and from one buffer into another, optionally adding into it (`shaders/norm/rms_norm_to.wgsl`,
//! CPU twin `cpu::ops::rms_norm_to`), and the residual step between blocks
//! (`shaders/norm/residual_norm.wgsl`; CPU twin: `rms_norm_to` accumulating, the layer
//! scale, `rms_norm_to`).

use super::kernel::{Access, Batch, KernelSource, Kernels};
use super::{compose, grid_1d, shaders};
use super::{check_fits, launch, u32_of};
use crate::{Error, Result};

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    rows: u32,
    n: u32,
    weighted: u32,
    eps: f32,
    x_off: u32,
    groups_x: u32,
    in_scale: f32,
    add: u32,
    y_off: u32,
    out_scale: f32,
}

/// In place: `rows` rows of `n` floats of `x` starting at element `x_off`; `w` = None for
/// the unweighted norm.
#[allow(clippy::too_many_arguments)]
pub fn rms_norm(
    k: &Kernels,
    b: &mut Batch,
    x: &wgpu::Buffer,
    x_off: usize,
    rows: usize,
    n: usize,
    w: Option<&wgpu::Buffer>,
    eps: f32,
) -> Result<()> {
    rms_norm_add(k, b, x, x_off, rows, n, 1.0, w, None, eps)
}

/// In place, `x = (RMS(x · in_scale) + y) · out_scale` row by row (`add` = (y, y_off,
/// out_scale), y's rows `n` apart), or `x = RMS(x · in_scale)` without `add`: the
/// per-layer-embedding inputs' scale, norm and sum in one dispatch. CPU twin:
/// `cpu::ops::scale`, `cpu::ops::rms_norm`, then the sum and scale, in that order.
#[allow(clippy::too_many_arguments)]
pub fn rms_norm_add(
    k: &Kernels,
    b: &mut Batch,
    x: &wgpu::Buffer,
    x_off: usize,
    rows: usize,
    n: usize,
    in_scale: f32,
    w: Option<&wgpu::Buffer>,
    add: Option<(&wgpu::Buffer, usize, f32)>,
    eps: f32,
) -> Result<()> {
    check_fits("rms_norm", &[(x, x_off + rows * n), (w.unwrap_or(x), n)])?;
    if let Some((y, y_off, _)) = add {
        check_fits("rms_norm addend", &[(y, y_off + rows * n)])?;
    }
    let (red, tag) = super::reduce(k);
    let name = format!("rms_norm{tag}");
    let kernel = k.get(&name, || KernelSource {
        name: name.clone(),
        code: compose(&[shaders::RMS_NORM, red[0], red[1]]),
        entry: "main",
        buffers: vec![Access::ReadWrite, Access::Read, Access::Read],
    })?;
    let (grid, groups_x) = grid_1d(rows, k.gpu.limits.max_compute_workgroups_per_dimension);
    let (y, y_off, out_scale) = add.unwrap_or((&k.dummy, 0, 1.0));
    let p = Params {
        rows: rows as u32,
        n: n as u32,
        weighted: w.is_some() as u32,
        eps,
        x_off: u32_of(x_off, "rms_norm x_off")?,
        groups_x,
        in_scale,
        add: add.is_some() as u32,
        y_off: u32_of(y_off, "rms_norm y_off")?,
        out_scale,
    };
    b.dispatch(&kernel, &[x, w.unwrap_or(&k.dummy), y], &p, grid)
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct ToParams {
    rows: u32,
    n: u32,
    weighted: u32,
    eps: f32,
    src_off: u32,
    dst_off: u32,
    accumulate: u32,
    groups_x: u32,
}

/// `dst = RMS(src)` (`accumulate`: `dst += RMS(src)`) over `rows` rows of `n` floats; `src`
/// and `dst` must be different buffers.
#[allow(clippy::too_many_arguments)]
pub fn rms_norm_to(
    k: &Kernels,
    b: &mut Batch,
    src: &wgpu::Buffer,
    src_off: usize,
    dst: &wgpu::Buffer,
    dst_off: usize,
    rows: usize,
    n: usize,
    w: Option<&wgpu::Buffer>,
    eps: f32,
    accumulate: bool,
) -> Result<()> {
    let (red, tag) = super::reduce(k);
    let name = format!("rms_norm_to{tag}");
    let kernel = k.get(&name, || KernelSource {
        name: name.clone(),
        code: compose(&[shaders::RMS_NORM_TO, red[0], red[1]]),
        entry: "main",
        buffers: vec![Access::Read, Access::ReadWrite, Access::Read],
    })?;
    let (grid, groups_x) = grid_1d(rows, k.gpu.limits.max_compute_workgroups_per_dimension);
    let p = ToParams {
        rows: rows as u32,
        n: n as u32,
        weighted: w.is_some() as u32,
        eps,
        src_off: src_off as u32,
        dst_off: dst_off as u32,
        accumulate: accumulate as u32,
        groups_x,
    };
    b.dispatch(&kernel, &[src, dst, w.unwrap_or(&k.dummy)], &p, grid)
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct ResidualParams {
    rows: u32,
    n: u32,
    eps: f32,
    a_off: u32,
    x_off: u32,
    y_off: u32,
    flags: u32,
    groups_x: u32,
}

/// Longest row `residual_norm` holds (WG × KEEP in the shader).
pub const RESIDUAL_MAX: usize = 6144;

/// For `rows` rows of `n`: `x += RMS(a) · w_post`, then `x *= scale[0]` when `scale` is
/// given, then `y = RMS(x) · w_pre` when `pre` is given (`Some((y, y_off, w_pre))`).
#[allow(clippy::too_many_arguments)]
pub fn residual_norm(
    k: &Kernels,
    b: &mut Batch,
    a: (&wgpu::Buffer, usize),
    x: (&wgpu::Buffer, usize),
    rows: usize,
    n: usize,
    w_post: &wgpu::Buffer,
    scale: Option<&wgpu::Buffer>,
    pre: Option<(&wgpu::Buffer, usize, &wgpu::Buffer)>,
    eps: f32,
) -> Result<()> {
    if n == 0 || n > RESIDUAL_MAX {
        return Err(Error::Input(format!("residual_norm: rows of {n} (1..={RESIDUAL_MAX})")));
    }
    check_fits("residual_norm", &[(a.0, a.1 + rows * n), (x.0, x.1 + rows * n), (w_post, n)])?;
    if let Some(s) = scale {
        check_fits("residual_norm scale", &[(s, 1)])?;
    }
    let y = match pre {
        Some((y, y_off, w)) => {
            check_fits("residual_norm output", &[(y, y_off + rows * n), (w, n)])?;
            (y.clone(), y_off, w.clone())
        }
        None => (k.scratch("residual_norm/y", 4), 0, k.dummy.clone()),
    };
    let p = ResidualParams {
        rows: u32_of(rows, "residual_norm rows")?,
        n: n as u32,
        eps,
        a_off: u32_of(a.1, "residual_norm a_off")?,
        x_off: u32_of(x.1, "residual_norm x_off")?,
        y_off: u32_of(y.1, "residual_norm y_off")?,
        flags: scale.is_some() as u32 | (pre.is_some() as u32) << 1,
        groups_x: 0,
    };
    let access = [Access::Read, Access::ReadWrite, Access::ReadWrite, Access::Read, Access::Read, Access::Read];
    let buffers = [a.0, x.0, &y.0, w_post, &y.2, scale.unwrap_or(&k.dummy)];
    let wg = if k.gpu.limits.max_compute_invocations_per_workgroup >= 512 { 512 } else { 256 };
    let header = format!("const WG: u32 = {wg}u;\nconst KEEP: u32 = {}u;\n", RESIDUAL_MAX / wg);
    let (red, tag) = super::reduce(k);
    let code = [header.as_str(), shaders::RESIDUAL_NORM, red[0], red[1]];
    launch(k, b, &format!("residual_norm{tag}"), &code, &access, &buffers, rows, |groups_x| ResidualParams { groups_x, ..p })
}
