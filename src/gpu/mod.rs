//! The GPU engine: wgpu device, kernels (WGSL under shaders/), weight upload and the
//! chained forward pass. Each op family has a module whose functions record dispatches
//! into a `Batch`; their CPU twins live in `cpu::ops` and parity tests in tests/gpu_ops.rs
//! (matmul family: tests/gpu_matmul.rs).

pub mod attention;
pub mod attention_coop;
pub mod block_groups;
pub mod device;
pub mod elementwise;
pub mod kernel;
pub mod matmul;
pub mod matmul_coop;
pub mod forward;
pub mod moe;
pub mod norm;
pub mod probe;
pub mod rope;
pub mod sample;
pub mod weights;

pub use device::Gpu;
pub use kernel::{Access, Batch, Kernel, KernelSource, Kernels};
pub use weights::GpuMatrix;

use crate::{Error, Result};

/// Shader files, embedded at build time. `common/*` snippets are prepended where used.
pub mod shaders {
    pub const REDUCE: &str = include_str!("../../shaders/common/reduce.wgsl");
    pub const REDUCE_SUBGROUP: &str = include_str!("../../shaders/common/reduce_subgroup.wgsl");
    pub const MATH: &str = include_str!("../../shaders/common/math.wgsl");
    pub const RMS_NORM: &str = include_str!("../../shaders/norm/rms_norm.wgsl");
    pub const RMS_NORM_TO: &str = include_str!("../../shaders/norm/rms_norm_to.wgsl");
    pub const RESIDUAL_NORM: &str = include_str!("../../shaders/norm/residual_norm.wgsl");
    pub const MATMUL: &str = include_str!("../../shaders/matmul/matmul.wgsl");
    pub const MATMUL_COOP: &str = include_str!("../../shaders/matmul/matmul_coop.wgsl");
    pub const SPLIT_F16: &str = include_str!("../../shaders/matmul/split_f16.wgsl");
    pub const HI_LO: &str = include_str!("../../shaders/matmul/hi_lo.wgsl");
    pub const MATMUL_COOP_W_SPLIT: &str = include_str!("../../shaders/matmul/matmul_coop_w_split.wgsl");
    pub const MATMUL_COOP_W_QUANT: &str = include_str!("../../shaders/matmul/matmul_coop_w_quant.wgsl");
    pub const SPLIT_K_SUM: &str = include_str!("../../shaders/matmul/split_k_sum.wgsl");
    pub const MATMUL_REDUCE_SUBGROUP: &str = include_str!("../../shaders/matmul/reduce_subgroup.wgsl");
    pub const MATMUL_REDUCE_WORKGROUP: &str = include_str!("../../shaders/matmul/reduce_workgroup.wgsl");
    pub const EMBED: &str = include_str!("../../shaders/matmul/embed.wgsl");
    pub const MATVEC: &str = include_str!("../../shaders/matmul/matvec.wgsl");
    pub const MATVEC_REDUCE_TREE: &str = include_str!("../../shaders/matmul/matvec_reduce_tree.wgsl");
    pub const MATVEC_REDUCE_SUBGROUP: &str = include_str!("../../shaders/matmul/matvec_reduce_subgroup.wgsl");
    /// The per-layer-embedding gate's hooks: what both of its kernels share, the down
    /// projection's part (`matmul::PleAcc`), the per-layer projection's (`matmul::PleGate`),
    /// and stubs for every other matvec.
    pub const MATVEC_PLE: &str = include_str!("../../shaders/matmul/matvec_ple.wgsl");
    pub const MATVEC_PLE_ACC: &str = include_str!("../../shaders/matmul/matvec_ple_acc.wgsl");
    pub const MATVEC_PLE_GATE: &str = include_str!("../../shaders/matmul/matvec_ple_gate.wgsl");
    pub const MATVEC_PLE_NONE: &str = include_str!("../../shaders/matmul/matvec_ple_none.wgsl");

    /// Raw-word spans for the matvec chunk loads of 2-aligned block types.
    pub const QUANT_SPAN: &str = include_str!("../../shaders/quant/span.wgsl");

    /// The staged input as integer limbs, for the integer dot products (composed into
    /// every matvec; used where the header's XN is set).
    pub const MATVEC_X_LIMBS: &str = include_str!("../../shaders/matmul/matvec_x_limbs.wgsl");

    /// Whether weights of type `ty` have an integer dot product over the limbs of a staged
    /// input (quant/q*_idot.wgsl).
    pub fn has_int_dot(ty: GgmlType) -> bool {
        matches!(ty, GgmlType::Q4_K | GgmlType::Q6_K)
    }

    /// The chunk loads and dot product matvec.wgsl uses for weights of type `ty`: the
    /// type's own where it has one (whole blocks per invocation), else four elements
    /// through its dq4. `idot`: the integer dot product over the limbs of a staged input,
    /// for the types `has_int_dot` names (the encoder sets it only for those). `ch`: the
    /// chunk's elements where a type has two (Q6_K: 16, or 64 for LM heads).
    pub fn quant_dot(ty: GgmlType, idot: bool, ch: usize) -> &'static [&'static str] {
        const Q4_K_CHUNK: &str = include_str!("../../shaders/quant/q4_k_chunk.wgsl");
        const Q6_K_CHUNK: &str = include_str!("../../shaders/quant/q6_k_chunk.wgsl");
        const Q6_K_CHUNK_WIDE: &str = include_str!("../../shaders/quant/q6_k_chunk_wide.wgsl");
        match ty {
            GgmlType::Q8_0 => &[include_str!("../../shaders/quant/q8_0_dot.wgsl")],
            GgmlType::Q5_0 => &[include_str!("../../shaders/quant/q5_0_dot.wgsl")],
            GgmlType::Q4_K if idot => &[Q4_K_CHUNK, include_str!("../../shaders/quant/q4_k_idot.wgsl")],
            GgmlType::Q4_K => &[Q4_K_CHUNK, include_str!("../../shaders/quant/q4_k_dot.wgsl")],
            GgmlType::Q6_K => {
                const IDOT: &str = include_str!("../../shaders/quant/q6_k_idot.wgsl");
                const DOT: &str = include_str!("../../shaders/quant/q6_k_dot.wgsl");
                match (ch == 64, idot) {
                    (true, true) => &[Q6_K_CHUNK_WIDE, IDOT],
                    (true, false) => &[Q6_K_CHUNK_WIDE, DOT],
                    (false, true) => &[Q6_K_CHUNK, IDOT],
                    (false, false) => &[Q6_K_CHUNK, DOT],
                }
            }
            _ => &[include_str!("../../shaders/quant/dot_generic.wgsl")],
        }
    }

    use crate::gguf::GgmlType;

    const QUANT_COMMON: &str = include_str!("../../shaders/quant/common.wgsl");
    const K4_SCALES: &str = include_str!("../../shaders/quant/k4_scales.wgsl");

    /// The WGSL defining `QK`, `QB` and `dq4` for weights of type `ty` (with their
    /// helpers), or None when the GPU has no kernel for it. This is the one list of
    /// weight types the GPU takes.
    pub fn quant(ty: GgmlType) -> Option<Vec<&'static str>> {
        let own = match ty {
            GgmlType::F32 => include_str!("../../shaders/quant/f32.wgsl"),
            GgmlType::F16 => include_str!("../../shaders/quant/f16.wgsl"),
            GgmlType::BF16 => include_str!("../../shaders/quant/bf16.wgsl"),
            GgmlType::Q4_0 => include_str!("../../shaders/quant/q4_0.wgsl"),
            GgmlType::Q4_1 => include_str!("../../shaders/quant/q4_1.wgsl"),
            GgmlType::Q5_0 => include_str!("../../shaders/quant/q5_0.wgsl"),
            GgmlType::Q5_1 => include_str!("../../shaders/quant/q5_1.wgsl"),
            GgmlType::Q8_0 => include_str!("../../shaders/quant/q8_0.wgsl"),
            GgmlType::Q4_K => include_str!("../../shaders/quant/q4_k.wgsl"),
            GgmlType::Q5_K => include_str!("../../shaders/quant/q5_k.wgsl"),
            GgmlType::Q6_K => include_str!("../../shaders/quant/q6_k.wgsl"),
            _ => return None,
        };
        let mut parts = vec![QUANT_COMMON];
        if matches!(ty, GgmlType::Q4_K | GgmlType::Q5_K) {
            parts.push(K4_SCALES);
        }
        parts.push(own);
        Some(parts)
    }
    /// Whether the type's file defines `dq16` (16 elements of a row at once).
    pub fn has_dq16(ty: GgmlType) -> bool {
        matches!(ty, GgmlType::Q4_K | GgmlType::Q5_0 | GgmlType::Q6_K | GgmlType::Q8_0)
    }
    /// `quant(ty)` for the types with a `dq16`.
    pub fn quant16(ty: GgmlType) -> Option<Vec<&'static str>> {
        has_dq16(ty).then(|| quant(ty)).flatten()
    }
    pub const ROPE_NEOX: &str = include_str!("../../shaders/rope/rope_neox.wgsl");
    pub const SIN_COS: &str = include_str!("../../shaders/rope/sin_cos.wgsl");
    pub const HEAD_NORM_ROPE: &str = include_str!("../../shaders/rope/head_norm_rope.wgsl");
    pub const GEGLU: &str = include_str!("../../shaders/elementwise/geglu.wgsl");
    pub const GEGLU_FUSED: &str = include_str!("../../shaders/elementwise/geglu_fused.wgsl");
    pub const ADD: &str = include_str!("../../shaders/elementwise/add.wgsl");
    pub const SCALE: &str = include_str!("../../shaders/elementwise/scale.wgsl");
    pub const SOFTCAP: &str = include_str!("../../shaders/elementwise/softcap.wgsl");
    pub const ATTENTION: &str = include_str!("../../shaders/attention/attention.wgsl");
    pub const ATTENTION_TILED: &str = include_str!("../../shaders/attention/attention_tiled.wgsl");
    pub const ATTENTION_COMMON: &str = include_str!("../../shaders/attention/attention_common.wgsl");
    pub const ATTENTION_OUT: &str = include_str!("../../shaders/attention/attention_out.wgsl");
    pub const ATTENTION_DECODE: &str = include_str!("../../shaders/attention/attention_decode.wgsl");
    pub const ATTENTION_DECODE_LOAD: &str = include_str!("../../shaders/attention/attention_decode_load.wgsl");
    pub const ATTENTION_DECODE_SUM_SUBGROUP: &str = include_str!("../../shaders/attention/attention_decode_sum_subgroup.wgsl");
    pub const ATTENTION_DECODE_SUM_SHARED: &str = include_str!("../../shaders/attention/attention_decode_sum_shared.wgsl");
    pub const ATTENTION_DECODE_PREP: &str = include_str!("../../shaders/attention/attention_decode_prep.wgsl");
    pub const KV_F32: &str = include_str!("../../shaders/attention/kv_f32.wgsl");
    pub const KV_F16: &str = include_str!("../../shaders/attention/kv_f16.wgsl");
    pub const ATTENTION_MERGE: &str = include_str!("../../shaders/attention/attention_merge.wgsl");
    pub const ATTENTION_SOFTMAX: &str = include_str!("../../shaders/attention/attention_softmax.wgsl");
    pub const ATTENTION_MERGE_ROW: &str = include_str!("../../shaders/attention/attention_merge_row.wgsl");
    pub const ATTENTION_DECODE_MERGE: &str = include_str!("../../shaders/attention/attention_decode_merge.wgsl");
    pub const MOE_ROUTE: &str = include_str!("../../shaders/moe/moe_route.wgsl");
    pub const MOE_COMBINE: &str = include_str!("../../shaders/moe/moe_combine.wgsl");
    pub const MOE_SORT: &str = include_str!("../../shaders/moe/moe_sort.wgsl");
    pub const MOE_NORMS: &str = include_str!("../../shaders/moe/moe_norms.wgsl");
    pub const MOE_COMBINE_NORM: &str = include_str!("../../shaders/moe/moe_combine_norm.wgsl");
    pub const ROW_WORDS: &str = include_str!("../../shaders/common/row_words.wgsl");
    pub const TOP_K_CANDIDATES: &str = include_str!("../../shaders/sample/top_k_candidates.wgsl");
    pub const REPEAT_PENALTY: &str = include_str!("../../shaders/sample/repeat_penalty.wgsl");
    pub const SAMPLE_PICK: &str = include_str!("../../shaders/sample/sample_pick.wgsl");
}

/// The workgroup reduction (`wg_sum`, `wg_max`) kernels compose for `k`: by subgroup
/// operations where the device's subgroups have one fixed size of at most 64 (every WG
/// using it is a multiple of that) and `k.use_subgroups` allows, else through workgroup
/// memory. Returns the source (two parts, both static: this runs for every dispatch
/// recorded) and the suffix that tells the variants' kernel names apart.
pub(crate) fn reduce(k: &Kernels) -> ([&'static str; 2], &'static str) {
    let sgs = match uniform_subgroups(k) {
        Some(4) => "const SGS: u32 = 4u;",
        Some(8) => "const SGS: u32 = 8u;",
        Some(16) => "const SGS: u32 = 16u;",
        Some(32) => "const SGS: u32 = 32u;",
        Some(64) => "const SGS: u32 = 64u;",
        _ => return (["", shaders::REDUCE], ""),
    };
    ([sgs, shaders::REDUCE_SUBGROUP], "/sg")
}

/// The subgroup size kernels may build on (subgroup i holding invocations SGS·i ..
/// SGS·i + SGS - 1): where the device's subgroups have one fixed size and
/// `k.use_subgroups` allows them.
pub(crate) fn uniform_subgroups(k: &Kernels) -> Option<u32> {
    let g = &k.gpu;
    (k.use_subgroups && g.subgroups && g.subgroup_min == g.subgroup_max).then_some(g.subgroup_min)
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

/// Record one dispatch of the kernel `name` (compiled once from `parts`, entry `main`) over
/// `groups` workgroups spread by `grid_1d`; `params` receives the grid's x extent.
#[allow(clippy::too_many_arguments)]
pub(crate) fn launch<P: bytemuck::Pod>(
    k: &Kernels,
    b: &mut Batch,
    name: &str,
    parts: &[&str],
    access: &[Access],
    buffers: &[&wgpu::Buffer],
    groups: usize,
    params: impl FnOnce(u32) -> P,
) -> Result<()> {
    let kernel = k.get(name, || KernelSource {
        name: name.to_string(),
        code: compose(parts),
        entry: "main",
        buffers: access.to_vec(),
    })?;
    let (grid, groups_x) = grid_1d(groups, k.gpu.limits.max_compute_workgroups_per_dimension);
    b.dispatch(&kernel, buffers, &params(groups_x), grid)
}

/// A size or offset as the u32 the shaders index with.
pub(crate) fn u32_of(v: usize, what: &str) -> Result<u32> {
    u32::try_from(v).map_err(|_| Error::Input(format!("{what} = {v} is too large for a GPU index")))
}

/// Each `(buffer, elements)` must hold that many 4-byte elements; `op` names the caller.
pub(crate) fn check_fits(op: &str, need: &[(&wgpu::Buffer, usize)]) -> Result<()> {
    for (i, (buf, n)) in need.iter().enumerate() {
        if (*n as u64) * 4 > buf.size() {
            return Err(Error::Input(format!(
                "{op}: buffer {i} holds {} elements, the call needs {n}",
                buf.size() / 4
            )));
        }
    }
    Ok(())
}
