//! RMSNorm on the GPU: in place (`shaders/norm/rms_norm.wgsl`, CPU twin `cpu::ops::rms_norm`)
//! and from one buffer into another, optionally adding into it (`shaders/norm/rms_norm_to.wgsl`,
//! CPU twin `cpu::ops::rms_norm_to`).

use super::kernel::{Access, Batch, KernelSource, Kernels};
use super::{compose, grid_1d, shaders};
use crate::Result;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    rows: u32,
    n: u32,
    weighted: u32,
    eps: f32,
    x_off: u32,
    groups_x: u32,
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
    let kernel = k.get("rms_norm", || KernelSource {
        name: "rms_norm".into(),
        code: compose(&[shaders::RMS_NORM, shaders::REDUCE]),
        entry: "main",
        buffers: vec![Access::ReadWrite, Access::Read],
    })?;
    let (grid, groups_x) = grid_1d(rows, k.gpu.limits.max_compute_workgroups_per_dimension);
    let p = Params { rows: rows as u32, n: n as u32, weighted: w.is_some() as u32, eps, x_off: x_off as u32, groups_x };
    b.dispatch(&kernel, &[x, w.unwrap_or(&k.dummy)], &p, grid)
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
    let kernel = k.get("rms_norm_to", || KernelSource {
        name: "rms_norm_to".into(),
        code: compose(&[shaders::RMS_NORM_TO, shaders::REDUCE]),
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
