//! The GPU engine: wgpu device, kernels (WGSL under shaders/), weight upload and the
//! chained forward pass. Each op family has a module whose functions record dispatches
//! into a `Batch`; their CPU twins live in `cpu::ops` and parity tests in tests/gpu_ops.rs.

pub mod device;
pub mod kernel;
pub mod norm;

pub use device::Gpu;
pub use kernel::{Access, Batch, Kernel, KernelSource, Kernels};

/// Shader files, embedded at build time. `common/*` snippets are prepended where used.
pub mod shaders {
    pub const REDUCE: &str = include_str!("../../shaders/common/reduce.wgsl");
    pub const RMS_NORM: &str = include_str!("../../shaders/norm/rms_norm.wgsl");
}

/// Concatenate shader parts into one module source.
pub fn compose(parts: &[&str]) -> String {
    parts.join("\n")
}

/// Spread `groups` workgroups over x (and y when x would pass the per-dimension limit).
/// Returns the grid and the x extent the shader uses to rebuild a linear index.
pub fn grid_1d(groups: usize, max_per_dim: u32) -> ([u32; 3], u32) {
    let max = max_per_dim as usize;
    if groups <= max {
        return ([groups as u32, 1, 1], groups.max(1) as u32);
    }
    let y = groups.div_ceil(max);
    let x = groups.div_ceil(y);
    ([x as u32, y as u32, 1], x as u32)
}
