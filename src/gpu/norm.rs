//! RMSNorm on the GPU (`shaders/norm/rms_norm.wgsl`); CPU twin: `cpu::ops::rms_norm`.

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
