//! Elementwise ops on f32 activations, in place on their first buffer
//! (`shaders/elementwise/<op>.wgsl`); CPU twins of the same names in `cpu::ops`.
//! Offsets and strides are in elements. One invocation per output element.

use bytemuck::{Pod, Zeroable};

use super::kernel::{Access, Batch, Kernels};
use super::{check_fits, launch, shaders, u32_of};
use crate::Result;

/// Invocations per workgroup in every shader of this family.
const WG: usize = 256;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct GegluParams {
    rows: u32,
    width: u32,
    gate_off: u32,
    gate_stride: u32,
    up_off: u32,
    up_stride: u32,
    groups_x: u32,
}

/// `gate[r*gate_stride + i] = gelu_tanh(gate[..]) * up[r*up_stride + i]` for `rows` rows of
/// `width` (strides allow slices of wider rows, e.g. one layer's part of the PLE inputs).
/// `gate` and `up` must be different buffers; see `geglu_fused` for one buffer.
#[allow(clippy::too_many_arguments)]
pub fn geglu(
    k: &Kernels,
    b: &mut Batch,
    gate: &wgpu::Buffer,
    gate_off: usize,
    gate_stride: usize,
    up: &wgpu::Buffer,
    up_off: usize,
    up_stride: usize,
    rows: usize,
    width: usize,
) -> Result<()> {
    if rows == 0 || width == 0 {
        return Ok(());
    }
    let end = |off: usize, stride: usize| off + (rows - 1) * stride + width;
    check_fits("geglu", &[(gate, end(gate_off, gate_stride)), (up, end(up_off, up_stride))])?;
    let p = GegluParams {
        rows: u32_of(rows, "geglu rows")?,
        width: u32_of(width, "geglu width")?,
        gate_off: u32_of(gate_off, "geglu gate_off")?,
        gate_stride: u32_of(gate_stride, "geglu gate_stride")?,
        up_off: u32_of(up_off, "geglu up_off")?,
        up_stride: u32_of(up_stride, "geglu up_stride")?,
        groups_x: 0,
    };
    u32_of(rows * width, "geglu rows*width")?;
    let code = [shaders::GEGLU, shaders::MATH];
    let groups = (rows * width).div_ceil(WG);
    launch(k, b, "geglu", &code, &[Access::ReadWrite, Access::Read], &[gate, up], groups, |groups_x| GegluParams {
        groups_x,
        ..p
    })
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct GegluFusedParams {
    rows: u32,
    width: u32,
    off: u32,
    groups_x: u32,
}

/// Rows of `[gate(width) | up(width)]` from element `off`: the gate half of each row becomes
/// `gelu_tanh(gate) * up` (the up half is left as it was).
pub fn geglu_fused(k: &Kernels, b: &mut Batch, x: &wgpu::Buffer, off: usize, rows: usize, width: usize) -> Result<()> {
    check_fits("geglu_fused", &[(x, off + rows * 2 * width)])?;
    let (rows_u, width_u, off_u) =
        (u32_of(rows, "geglu_fused rows")?, u32_of(width, "geglu_fused width")?, u32_of(off, "geglu_fused off")?);
    u32_of(rows * 2 * width, "geglu_fused rows*2*width")?;
    let code = [shaders::GEGLU_FUSED, shaders::MATH];
    launch(k, b, "geglu_fused", &code, &[Access::ReadWrite], &[x], (rows * width).div_ceil(WG), |groups_x| {
        GegluFusedParams { rows: rows_u, width: width_u, off: off_u, groups_x }
    })
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct BinaryParams {
    n: u32,
    x_off: u32,
    y_off: u32,
    groups_x: u32,
}

/// `x[x_off..][..n] += y[y_off..][..n]` (`x` and `y` different buffers).
pub fn add(k: &Kernels, b: &mut Batch, x: &wgpu::Buffer, x_off: usize, y: &wgpu::Buffer, y_off: usize, n: usize) -> Result<()> {
    check_fits("add", &[(x, x_off + n), (y, y_off + n)])?;
    let (n_u, xo, yo) = (u32_of(n, "add n")?, u32_of(x_off, "add x_off")?, u32_of(y_off, "add y_off")?);
    launch(k, b, "add", &[shaders::ADD], &[Access::ReadWrite, Access::Read], &[x, y], n.div_ceil(WG), |groups_x| {
        BinaryParams { n: n_u, x_off: xo, y_off: yo, groups_x }
    })
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct UnaryParams {
    n: u32,
    x_off: u32,
    /// The op's scalar: the factor of `scale`, the cap of `softcap`.
    a: f32,
    groups_x: u32,
}

/// The kernels whose only input is `x` and one scalar.
#[allow(clippy::too_many_arguments)]
fn unary(k: &Kernels, b: &mut Batch, name: &str, code: &[&str], x: &wgpu::Buffer, x_off: usize, n: usize, a: f32) -> Result<()> {
    check_fits(name, &[(x, x_off + n)])?;
    let (n_u, xo) = (u32_of(n, "n")?, u32_of(x_off, "x_off")?);
    launch(k, b, name, code, &[Access::ReadWrite], &[x], n.div_ceil(WG), |groups_x| UnaryParams { n: n_u, x_off: xo, a, groups_x })
}

/// `x *= s` over `n` elements.
pub fn scale(k: &Kernels, b: &mut Batch, x: &wgpu::Buffer, x_off: usize, n: usize, s: f32) -> Result<()> {
    unary(k, b, "scale", &[shaders::SCALE], x, x_off, n, s)
}

/// `x = cap * tanh(x / cap)` over `n` elements.
pub fn softcap(k: &Kernels, b: &mut Batch, x: &wgpu::Buffer, x_off: usize, n: usize, cap: f32) -> Result<()> {
    unary(k, b, "softcap", &[shaders::SOFTCAP, shaders::MATH], x, x_off, n, cap)
}


