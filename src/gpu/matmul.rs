//! Matrix multiply with quantized weights (`shaders/matmul/matmul.wgsl`), its expert form
//! (ggml's mul_mat_id) and the row gather for embeddings (`shaders/matmul/embed.wgsl`).
//! CPU twins: `cpu::ops::{matmul, matmul_experts, embed}`.
//!
//! One kernel body serves every weight type: it is composed with the type's
//! `shaders/quant/<type>.wgsl`, which defines how to read four elements of a row.
//! Buffer offsets are in elements; x and y rows are contiguous (strides `cols` and `rows`).

use std::sync::Arc;

use super::kernel::{Access, Batch, Kernel, KernelSource, Kernels};
use super::matmul_coop::{CoopOut, CoopRoute};
use super::weights::{GpuMatrix, Tile};
use super::{compose, grid_1d, shaders};
use crate::gguf::GgmlType;
use crate::{Error, Result};

/// Threads per workgroup: enough to stream a row's blocks with coalesced reads.
const WG: u32 = 256;
/// Rows per workgroup: shares each x vec4 between rows and amortises the reduction.
const RW: u32 = 4;
/// Largest token tile (accumulators per thread = RW * T).
const MAX_T: usize = 8;

#[repr(C)]
#[derive(Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
struct MatmulParams {
    cols4: u32,
    rows: u32,
    row_bytes: u32,
    n: u32,
    x_off4: u32,
    y_off: u32,
    y_stride: u32,
    row0: u32,
    top_k: u32,
    e0: u32,
    e_count: u32,
    x_per_slot: u32,
    ids_off: u32,
    row_groups: u32,
    groups_x: u32,
    /// x row stride in vec4s (`cols4` unless x rows are wider than the matrix).
    x_stride4: u32,
    /// First weight row (in the tile buffer) of output row 0 (plain matmul).
    w_row0: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
struct MatvecParams {
    chunks: u32,
    rows: u32,
    row_bytes: u32,
    x_off4: u32,
    y_off: u32,
    row0: u32,
    groups_x: u32,
    mode: u32,
    other_off: u32,
    split_a: u32,
    split_b: u32,
    y2_off: u32,
    y3_off: u32,
    a_off: u32,
    xin_off: u32,
    xout_off: u32,
    store_x: u32,
    pre: u32,
    scale: f32,
    eps: f32,
    rpe: u32,
    e0: u32,
    e_count: u32,
    x_slot4: u32,
    acc_off: u32,
}

/// The input of a one-token matvec: a vector, or the result of a residual step that the
/// matvec's workgroups make themselves (see `ResidualIn`).
#[derive(Clone, Copy)]
pub enum MatvecIn<'a> {
    /// x at element offset (a multiple of 4).
    Vector(&'a wgpu::Buffer, usize),
    Residual(ResidualIn<'a>),
    /// The per-layer-embedding gate, made from the sums a `PleAcc` down projection left.
    PleGate(PleGate<'a>),
}

/// Gemma 4's per-layer-embedding gate through the FFN's down projection, in decode
/// (shaders/matmul/matvec_ple*.wgsl): the down projection (`matvec_ple_acc`) adds its rows'
/// terms of W_gate · h and W_gate · (w_post ⊙ d) into `acc` from `acc_off`
/// (`ple_acc_words` i64s a layer, zeroed before), and the per-layer projection's matvec
/// (`MatvecIn::PleGate`) makes g = gelu_tanh(W_gate · h2) ⊙ e from them, h2 = h + RMS(d) ⊙
/// w_post. CPU twin: `cpu::ops::rms_norm_to` accumulating, `cpu::ops::matmul` by W_gate,
/// GELU and the product with e (`cpu::ops::geglu`).
#[derive(Clone, Copy)]
pub struct PleAcc<'a> {
    /// W_gateᵀ in f32, hidden × pd (`gate_transposed`).
    pub gate_t: &'a wgpu::Buffer,
    /// The residual before the FFN, and the FFN's post-norm weights.
    pub h: &'a wgpu::Buffer,
    pub post: &'a wgpu::Buffer,
    pub acc: &'a wgpu::Buffer,
    pub acc_off: usize,
    pub pd: usize,
}

/// The input of the per-layer projection where a `PleAcc` made its sums: the sums, e (the
/// layer's per-layer inputs, from an offset), d (the down projection's output), h and
/// w_post as in `PleAcc`, and where to store h2.
#[derive(Clone, Copy)]
pub struct PleGate<'a> {
    pub acc: &'a wgpu::Buffer,
    pub acc_off: usize,
    pub e: (&'a wgpu::Buffer, usize),
    pub d: &'a wgpu::Buffer,
    pub h: &'a wgpu::Buffer,
    pub post: &'a wgpu::Buffer,
    pub h2: &'a wgpu::Buffer,
    pub eps: f32,
}

/// Copies of the per-layer-embedding gate's sums (matvec_ple.wgsl's COPIES): the down
/// projection's workgroups take them in turn, so each address takes fewer atomic adds,
/// and every workgroup of the per-layer projection reads them all. H200, E2B decode tg64
/// after 16 tokens, three alternated rounds (tok/s; the gate's own matvec 491.7-492.6):
/// 4 copies ~495 (the Q6_K down of 12288 columns 20.3 µs), 8 495.7-497.9 (18.2), 16
/// 493.6-502.1 (18.0; the projection 9.5 µs against 8.6), 32 483.8-484.8 (the projection
/// 11.4 µs); 16 with PLE_ACC_TPR 499.6-500.7, 8 with it 497.2-497.3.
const PLE_COPIES: usize = 16;

/// At most this many invocations a row for a down projection that adds the gate's sums:
/// two rows a workgroup or more, whose terms meet in the workgroup before its atomic adds
/// (E2B's Q6_K down of 12288 columns otherwise takes 256 a row, one row a workgroup).
/// Measured with PLE_COPIES, above.
const PLE_ACC_TPR: usize = 128;

/// i64 accumulators a layer's `PleAcc` takes for a gate of `pd`: the copies of the two sums.
pub fn ple_acc_words(pd: usize) -> usize {
    PLE_COPIES * 2 * pd
}

/// Whether the kernels of `PleAcc` take a gate of `pd` over a hidden size of `hidden`: at
/// most one workgroup's invocations, both in whole vec4s.
pub fn ple_acc_fits(pd: usize, hidden: usize) -> bool {
    pd > 0 && pd <= MATVEC_WG && pd.is_multiple_of(4) && hidden.is_multiple_of(4)
}

/// Whether decode can take the per-layer-embedding gate through the down projection
/// (`PleAcc`) here: the shapes fit, and the device has 64-bit atomics and a twelfth
/// storage buffer.
pub fn ple_acc_usable(k: &Kernels, pd: usize, hidden: usize) -> bool {
    ple_acc_fits(pd, hidden) && k.gpu.int64_atomics && k.gpu.limits.max_storage_buffers_per_shader_stage >= 12
}

/// W_gate (pd rows of `hidden`, dequantized) transposed, hidden × pd: `PleAcc::gate_t`.
pub fn gate_transposed(gate: &[f32], pd: usize, hidden: usize) -> Vec<f32> {
    let mut t = vec![0.0; pd * hidden];
    for (j, row) in gate.chunks_exact(hidden).enumerate() {
        for (r, &v) in row.iter().enumerate() {
            t[r * pd + j] = v;
        }
    }
    t
}

/// `norm::residual_norm` for one row, folded into the matvec that reads its result (each
/// workgroup recomputes it; dispatches, not arithmetic, dominate decode):
/// `x_out = (x_in + RMS(a) · post) · scale`, and the matvec's input is `RMS(x_out) · pre`
/// with `pre`, else `x_out`. `x_in` and `x_out` must be different buffers. CPU twin:
/// `cpu::ops::rms_norm_to` accumulating, the scale, `rms_norm_to`, then the matmul.
#[derive(Clone, Copy)]
pub struct ResidualIn<'a> {
    pub a: (&'a wgpu::Buffer, usize),
    pub x_in: (&'a wgpu::Buffer, usize),
    pub x_out: (&'a wgpu::Buffer, usize),
    pub post: &'a wgpu::Buffer,
    pub pre: Option<&'a wgpu::Buffer>,
    pub scale: f32,
    pub eps: f32,
}

/// Longest row a `ResidualIn` matvec stages (16 KiB of workgroup memory).
pub const RESIDUAL_IN_MAX: usize = 4096;

impl MatvecIn<'_> {
    /// Check the input for a matrix of `cols` columns (`op` names the caller).
    fn check(&self, op: &str, cols: usize) -> Result<()> {
        match self {
            MatvecIn::Vector(x, off) => {
                check_x_off(*off)?;
                check_len(x, &format!("{op} input"), off + cols)
            }
            MatvecIn::PleGate(g) => check_len(g.e.0, &format!("{op} per-layer inputs"), g.e.1 + cols),
            MatvecIn::Residual(r) => {
                if cols > RESIDUAL_IN_MAX || !cols.is_multiple_of(4) {
                    return Err(Error::Input(format!("{op}: a residual input of {cols} (a multiple of 4, at most {RESIDUAL_IN_MAX})")));
                }
                let x_in = (r.x_in.0, r.x_in.1 + cols);
                let mut need = vec![(r.a.0, r.a.1 + cols), x_in, (r.x_out.0, r.x_out.1 + cols), (r.post, cols)];
                if let Some(pre) = r.pre {
                    need.push((pre, cols));
                }
                super::check_fits(op, &need)
            }
        }
    }
}

/// What matvec.wgsl does with each row's dot product.
#[derive(Clone, Copy)]
enum Epilogue<'a> {
    None,
    /// `w` stacks [gate; up]: gelu_tanh(gate · x) · (up · x).
    GeluPair,
    /// gelu_tanh(w · x) · other[off + r].
    GeluMul(&'a wgpu::Buffer, usize),
    /// Rows from `split_a` go to the second output, from `split_b` to the third.
    Route { split_a: usize, split_b: usize, y2: (&'a wgpu::Buffer, usize), y3: (&'a wgpu::Buffer, usize) },
    /// Also the per-layer-embedding gate's sums (`PleAcc`).
    PleAcc(PleAcc<'a>),
    /// `w` stacks experts of `rpe` rows; output row r is row r % rpe of expert
    /// `ids[r / rpe]` (top_k slots), with x advanced `x_slot` floats a slot. `geglu`: each
    /// expert stacks [gate; up] (2 · rpe rows) and row r gets their GeGLU.
    Experts { ids: &'a wgpu::Buffer, rpe: usize, top_k: usize, x_slot: usize, geglu: bool },
}

/// From this many tokens the experts' products go to tensor cores, grouped by expert
/// (`matmul_coop::matmul_experts_coop`). H100, Gemma 4 26B-A4B layout, prefill tok/s
/// (best / median of 3), per pair against grouped: 16 tokens 395 / 274 against 313 / 313,
/// 32 tokens 502 / 325 against 483 / 468, 64 tokens 584 / 583 against 1,140 / 1,135.
const EXPERTS_COOP_TOKENS: usize = 64;

/// Threads per workgroup of matvec.wgsl.
const MATVEC_WG: usize = 256;

/// Invocations per row of matvec.wgsl for a matrix of `rows` rows of `chunks` chunks,
/// `folded` when it takes the residual step in (`MatvecIn::Residual`). Three shapes have
/// rules of their own (FOLDED_PAIR_ROWS with FOLDED_PAIR_LONG_ROWS, HEAD_ROWS, FEW_ROWS
/// below); otherwise enough that each strides over about MATVEC_STEPS chunks, from 32 (a
/// subgroup on an H100) up to the whole workgroup. Long rows (the FFN's down projection,
/// 6144-12288 columns) otherwise leave few workgroups, each walking its rows serially.
/// History on the H100:
/// with 64-element chunks 32 per row beat matching the chunk count (270M / E2B decode
/// 453 / 137 tok/s against 438 / 135; 8 per row gave 385 / 104); sharing x chunks between
/// rows (several rows per invocation, x in registers) measured slower end to end (E2B
/// 89-103 tok/s).
fn matvec_tpr(chunks: usize, rows: usize, folded: bool) -> usize {
    let few = !folded && rows <= FEW_ROWS;
    let aim = if few { FEW_ROWS_STEPS } else { MATVEC_STEPS };
    let steps = (chunks / aim).next_power_of_two().clamp(32, MATVEC_WG);
    let pair = folded && rows >= FOLDED_PAIR_ROWS && (chunks <= 3 * 16 || (rows >= FOLDED_PAIR_LONG_ROWS && chunks <= 5 * 16));
    let head = rows >= HEAD_ROWS && chunks <= HEAD_CHUNKS;
    if (head && chunks < 2 * 16) || (few && chunks <= FEW_ROWS_SHORT) {
        8
    } else if pair || head {
        16
    } else if few {
        steps.max(FEW_ROWS_TPR)
    } else {
        steps
    }
}

/// A matvec folding in the residual step loads its weight chunks before the step (so
/// their trip from memory overlaps it) only for rows up to this long. Held in registers
/// through the step's reductions, they cost the longer rows' dispatches residency: H100
/// decode, three alternated runs (tok/s), E2B (1536 columns) with every folded matvec
/// preloading 351.1-357.3, all but [gate; up] 370.8-371.2, none 372.5-378.0 ([gate; up]
/// 26.6 -> 20.5 us); the 270M layout (640 columns) lost without (1,141-1,311 against
/// 1,331-1,363).
const PRELOAD_MAX_COLS: usize = 1024;

/// A matvec that folds in the residual step takes at most about this many workgroups;
/// beyond, each workgroup takes several row tiles (matvec.wgsl's TILES) after its one
/// residual step. An H100 holds 528 of E2B's [gate; up] workgroups at once (132 SMs × 4),
/// so the 768 of its double-wide layers (24576 rows) ran in two waves, the second redoing
/// the step after the first. With two tiles each, H100 decode, three alternated runs
/// (tok/s), twice: E2B 433.5-439.0 -> 444.4-446.5 and 436.9-437.6 -> 443.1-444.9, [gate;
/// up] there 22.1 -> 20.1 us; the 270M unchanged (its rows load before the step). Two
/// tiles for the one-wave layers too (384 -> 192) lost (440.7-442.0 against
/// 443.2-444.4), three for the double-wide ones as well (439.5-442.6), and so did plain matvecs past 512 (no step to share: the Q6_K down
/// projection 17.1 -> 19.8 us, the F16 per-layer projection 16.3 -> 17.4) and the LM
/// head, whose staging of x the tiles would share (137.2 us; 136.3, 140.0 and 148.9 at
/// 2, 4 and 8 tiles).
const FOLDED_MAX_GROUPS: usize = 512;

/// Q4_K and Q6_K matvecs multiply by integer dot products (quant/q*_idot.wgsl) where their
/// input is staged anyway (a folded residual step), and without one from this many rows
/// (an LM head): there every workgroup first stages x itself, which pays only where the
/// rows are many. H100 decode, E2B layout, three alternated runs (tok/s): folded Q4_K
/// 420.7-422.8 against 398.8-399.6 in f32 ([gate; up] 21.0 -> 18.3 us, q/k/v 10.1 -> 9.9);
/// the Q6_K head 186.0 against 192.5 us (418.7-419.1 against 416.7-417.6, one run of
/// 394.5); every unfolded matvec 412.8-413.5 (7.3 -> 7.9 us for the o projection).
const INT_DOT_ROWS: usize = HEAD_ROWS;

/// Chunks each invocation of a row aims to take (see `matvec_tpr`).
const MATVEC_STEPS: usize = 6;

/// From this many rows, a matvec that folds in the residual step (which every workgroup
/// redoes) gives each subgroup two rows (16 invocations per row) when they cover a row in
/// at most 3 chunk steps: half the workgroups redo the step, and no lane idles on E2B's
/// 48-chunk rows (32 per row leave a quarter of the steps empty). H100 decode, three
/// alternated runs (tok/s): Gemma 4 E2B layout ([gate; up], 12288 rows of 48 Q4_K chunks)
/// 294.7-295.8 -> 311.4-312.4; 306.6-312.2 with every folded matvec at 16. The 270M
/// layout's [gate; up] (4096 rows of 80 Q5_0 chunks, 5 steps at 16) lost 1,149-1,161 ->
/// 1,069-1,127, as every 270M matvec did at 16 (1,047-1,077), so it keeps 32.
const FOLDED_PAIR_ROWS: usize = 4096;

/// From this many rows a folded matvec pairs its rows at up to 5 chunk steps too: at 32
/// invocations a row its row tiles are 1024 workgroups' worth or more (twice
/// FOLDED_MAX_GROUPS), each workgroup walking two or more after its residual step;
/// paired, half as many. H200 decode tg64 after 16 tokens, two alternated rounds
/// (tok/s): Gemma 4 E4B layout ([gate; up], 20480 rows of 80 Q4_K chunks: three tiles a
/// workgroup -> two) 280.6-281.9 -> 294.4-296.1 (+5%); raising FOLDED_MAX_GROUPS to 1024
/// instead (two tiles unpaired) gave 285.0-285.7. The 26B-A4B layout's folded matvecs (88
/// chunks a row: q/k/v of 8192 and 9216 rows, [gate; up] of 4224) lost paired,
/// 293.2-294.7 -> 291.7-292.4, as the 270M's [gate; up] did (above), so shorter matrices
/// keep 32 a row; rows of more than 80 chunks were not measured at this height.
const FOLDED_PAIR_LONG_ROWS: usize = 16384;

/// From this many rows (an LM head over the vocabulary) with rows of at most HEAD_CHUNKS
/// chunks, 16 invocations per row: a workgroup takes 16 rows instead of 8 and each
/// invocation more chunks. H100 decode, alternated runs (tok/s): Gemma 3 270M layout
/// (Q8_0, 80 chunks a row) 1,147-1,164 at 32 per row, 1,155-1,186 at 16 (six runs each),
/// 1,179-1,187 at 8 (three), 1,093-1,113 at 64; Gemma 4 E2B (Q6_K, then 192 chunks of 8
/// elements, then 96 of 16) 310.6-314.3 against 311.8-315.1, within noise. Rows of fewer
/// than 32 chunks take 8 a row, 3 chunks each: E2B's head in 64-element chunks (24 a row)
/// took 136.6 us at 8, 162.8 at 16 and 175.6 at 32 (kernel profile). Longer rows (wider
/// models) were not measured.
const HEAD_ROWS: usize = 65536;
const HEAD_CHUNKS: usize = 192;

/// A plain matvec of at most FEW_ROWS rows (the o and down projections: 640 rows on the
/// 270M, 1536 on E2B) takes at least FEW_ROWS_TPR invocations per row: twice the
/// workgroups where 32 per row left a few per SM (80 for the 270M's o), at the price of
/// idle lanes on short rows. H100 decode, three alternated runs (tok/s): 270M 1,116-1,145
/// -> 1,133-1,190, E2B 306.1-310.4 -> 317.7-319.6; at 128 per row 1,133-1,158 and
/// 296.8-302.0.
const FEW_ROWS: usize = 2048;
const FEW_ROWS_TPR: usize = 64;

/// Such a matvec aims at FEW_ROWS_STEPS chunks an invocation, not MATVEC_STEPS: the FFN's
/// down projections (1536 rows of 6144-12288 columns on E2B) take 128-256 invocations a
/// row instead of 64-128, twice the workgroups, each a shorter chain. Their cost beyond
/// the weights' loads is the dot products' arithmetic and x's reads (timing-only bounds
/// in docs/performance-log.md, thirty-third session), which the shorter chains spread over
/// more of the GPU. H100 decode, three alternated rounds (tok/s): E2B 450.4-451.8 ->
/// 453.8-455.3 (the Q6_K down of 12288 columns 17.0 -> 16.4 µs, Q4_K 14.4 -> 13.9, Q6_K
/// of 6144 12.6 -> 11.7); the 270M's kernels unchanged (its o and down projections, Q4_K
/// / Q6_K of 32-128 chunks, keep 64 a row). Two steps lost (452.0-452.2 against
/// 460.5-461.5: idle lanes in the second step), and so did two rows an invocation, each
/// x load serving both (438.0-438.5 against 451.0-451.5: half the workgroups). Rows of at
/// most FEW_ROWS_SHORT chunks (E2B's per-layer-embedding projection, 256 columns: 8
/// chunks) take 8 invocations a row, 32 rows a workgroup, where FEW_ROWS_TPR left 56 of a
/// row's 64 idle: with both rules E2B 455.5-457.0 (the projection 7.4 -> 7.0 µs); 16 a
/// row gave 455.0-456.3.
const FEW_ROWS_STEPS: usize = 3;
const FEW_ROWS_SHORT: usize = 16;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct EmbedParams {
    cols4: u32,
    row_bytes: u32,
    n: u32,
    ids_off: u32,
    out_off: u32,
    row0: u32,
    rows: u32,
    total_rows: u32,
    scale: f32,
    chunks: u32,
    groups_x: u32,
}

/// Threads per workgroup of embed.wgsl.
const EMBED_WG: usize = 64;

pub(super) fn quant_parts(ty: GgmlType) -> Result<Vec<&'static str>> {
    shaders::quant(ty).ok_or_else(|| Error::UnsupportedType(format!("{ty} (no GPU matmul kernel for this type)")))
}

/// The matmul kernel for weight type `ty` and token tile `t`, in the subgroup variant when
/// the device has subgroups and `k.use_subgroups` asks for them.
fn matmul_kernel(k: &Kernels, ty: GgmlType, t: usize) -> Result<Arc<Kernel>> {
    let sg = k.use_subgroups && k.gpu.subgroups;
    let variant = if sg { "sg" } else { "wg" };
    let name = format!("matmul/{ty}/t{t}/{variant}");
    let quant = quant_parts(ty)?;
    k.get(&name, || {
        // NSG bounds the subgroup count for any subgroup size wgpu can report.
        let header = format!(
            "const WG: u32 = {WG}u;\nconst RW: u32 = {RW}u;\nconst T: u32 = {t}u;\nconst NSG: u32 = {}u;\n",
            WG / wgpu::MINIMUM_SUBGROUP_MIN_SIZE
        );
        let reduce = if sg { shaders::MATMUL_REDUCE_SUBGROUP } else { shaders::MATMUL_REDUCE_WORKGROUP };
        let mut parts = vec![header.as_str()];
        parts.extend(&quant);
        parts.extend([shaders::MATMUL, reduce]);
        KernelSource {
            name: name.clone(),
            code: compose(&parts),
            entry: "main",
            buffers: vec![Access::Read, Access::Read, Access::ReadWrite, Access::Read],
        }
    })
}

/// Tokens from which prefill matmuls run on tensor cores (`gpu::matmul_coop`) where the
/// device has them; fewer stay on the f32 kernel, whose token tiles (≤ MAX_T) fit them.
const COOP_MIN_TOKENS: usize = MAX_T + 1;

/// Whether a product of `w` over `n` tokens runs on tensor cores: enough tokens, and the
/// device's tensor-core matmul takes rows of `w.cols`.
fn on_tensor_cores(k: &Kernels, w: &GpuMatrix, n: usize) -> bool {
    n >= COOP_MIN_TOKENS && super::matmul_coop::usable(k, w.cols)
}

/// Error unless `buf` holds `elems` 4-byte elements.
fn check_len(buf: &wgpu::Buffer, what: &str, elems: usize) -> Result<()> {
    if (elems as u64) * 4 > buf.size() {
        return Err(Error::Input(format!("{what}: needs {elems} elements, the buffer holds {}", buf.size() / 4)));
    }
    Ok(())
}

/// x rows `x_stride` apart must be 4-aligned and hold a whole matrix row (`cols`).
fn check_x_stride(op: &str, x_stride: usize, cols: usize) -> Result<()> {
    if x_stride < cols || !x_stride.is_multiple_of(4) {
        return Err(Error::Input(format!("{op}: x stride {x_stride} must be a multiple of 4 and at least {cols}")));
    }
    Ok(())
}

fn check_x_off(x_off: usize) -> Result<()> {
    if !x_off.is_multiple_of(4) {
        return Err(Error::Input(format!("matmul: input offset {x_off} is not a multiple of 4 elements")));
    }
    Ok(())
}

/// Record one dispatch per tile of `w`; `p` holds the fields common to all tiles and
/// `per_tile` fills in the rest, returning the number of workgroups (row groups x token
/// tiles).
fn dispatch_tiles(
    k: &Kernels,
    b: &mut Batch,
    w: &GpuMatrix,
    kernel: &Arc<Kernel>,
    bufs: [&wgpu::Buffer; 3],
    mut p: MatmulParams,
    per_tile: impl Fn(&Tile, &mut MatmulParams) -> usize,
) -> Result<()> {
    let [x, y, ids] = bufs;
    for tile in w.tiles() {
        let groups = per_tile(tile, &mut p);
        let (grid, groups_x) = grid_1d(groups, k.gpu.limits.max_compute_workgroups_per_dimension);
        p.groups_x = groups_x;
        b.dispatch(kernel, &[&tile.buffer, x, y, ids], &p, grid)?;
    }
    Ok(())
}

/// `y[t, r] = Σ_c w[r, c] · x[t, c]` for `n` tokens: x rows of `w.cols` from element
/// `x_off` (a multiple of 4), y rows of `w.rows` from element `y_off`.
#[allow(clippy::too_many_arguments)]
pub fn matmul(k: &Kernels, b: &mut Batch, w: &GpuMatrix, x: &wgpu::Buffer, x_off: usize, n: usize, y: &wgpu::Buffer, y_off: usize) -> Result<()> {
    matmul_strided(k, b, w, x, x_off, w.cols, n, y, y_off)
}

/// The FFN's gate, up and GeGLU for `n` tokens: `w` stacks [gate; up] (2F rows) and y rows
/// of 2F from element `y_off` get `gelu_tanh(gate_r · x) · (up_r · x)` at r < F; their
/// other half is left undefined. On tensor cores the product kernel applies GeGLU to its
/// results (matmul_coop.wgsl's GEGLU), which saves a dispatch and a pass over the 2F
/// results; elsewhere `matmul`, then `elementwise::geglu_fused`. H100, prefill 512, three
/// alternated rounds (tok/s, best of 5): Gemma 4 E2B layout 11,026-11,243 -> 11,786-11,908,
/// Gemma 3 270M 90.0-94.3k -> 98.0-98.6k. CPU twin: `cpu::ops::matmul` of gate and up,
/// then `cpu::ops::geglu`.
#[allow(clippy::too_many_arguments)]
pub fn matmul_geglu(k: &Kernels, b: &mut Batch, w: &GpuMatrix, x: &wgpu::Buffer, x_off: usize, n: usize, y: &wgpu::Buffer, y_off: usize) -> Result<()> {
    if !w.rows.is_multiple_of(2) {
        return Err(Error::Input(format!("matmul_geglu: [gate; up] of {} rows", w.rows)));
    }
    if !(k.coop_geglu && w.tiles().len() == 1 && on_tensor_cores(k, w, n)) {
        matmul(k, b, w, x, x_off, n, y, y_off)?;
        return super::elementwise::geglu_fused(k, b, y, y_off, n, w.rows / 2);
    }
    check_x_off(x_off)?;
    check_len(x, "matmul_geglu input", x_off + n * w.cols)?;
    check_len(y, "matmul_geglu output", y_off + n * w.rows)?;
    super::matmul_coop::matmul_coop(k, b, w, None, x, x_off, w.cols, n, CoopOut { y, y_off, route: None, geglu: true })
}

/// `matmul` with x rows `x_stride` elements apart (a multiple of 4, ≥ `w.cols`): reads the
/// first `w.cols` of each, e.g. the gate half of [gate | up] rows.
#[allow(clippy::too_many_arguments)]
pub fn matmul_strided(
    k: &Kernels,
    b: &mut Batch,
    w: &GpuMatrix,
    x: &wgpu::Buffer,
    x_off: usize,
    x_stride: usize,
    n: usize,
    y: &wgpu::Buffer,
    y_off: usize,
) -> Result<()> {
    check_x_off(x_off)?;
    check_x_stride("matmul", x_stride, w.cols)?;
    if n == 0 {
        return Ok(());
    }
    check_len(x, "matmul input", x_off + (n - 1) * x_stride + w.cols)?;
    check_len(y, "matmul output", y_off + n * w.rows)?;
    if n == 1 {
        return matvec(k, b, w, MatvecIn::Vector(x, x_off), y, y_off, Epilogue::None);
    }
    plain_matmul(k, b, w, None, x, x_off, x_stride, n, y, y_off)
}

/// The matmul kernel over every tile of `w`, or over rows `[first, first + rows)` of its one
/// tile (`range`); y rows hold the rows computed.
#[allow(clippy::too_many_arguments)]
fn plain_matmul(
    k: &Kernels,
    b: &mut Batch,
    w: &GpuMatrix,
    range: Option<(usize, usize)>,
    x: &wgpu::Buffer,
    x_off: usize,
    x_stride: usize,
    n: usize,
    y: &wgpu::Buffer,
    y_off: usize,
) -> Result<()> {
    if on_tensor_cores(k, w, n) {
        return super::matmul_coop::matmul_coop(k, b, w, range, x, x_off, x_stride, n, CoopOut { y, y_off, route: None, geglu: false });
    }
    // Small batches get the smallest token tile that fits.
    let t = n.min(MAX_T).next_power_of_two();
    let kernel = matmul_kernel(k, w.ty, t)?;
    let rw = RW as usize;
    let p = MatmulParams {
        cols4: (w.cols / 4) as u32,
        row_bytes: w.row_bytes() as u32,
        n: n as u32,
        x_off4: (x_off / 4) as u32,
        y_off: y_off as u32,
        y_stride: range.map_or(w.rows, |r| r.1) as u32,
        x_stride4: (x_stride / 4) as u32,
        w_row0: range.map_or(0, |r| r.0) as u32,
        ..Default::default()
    };
    dispatch_tiles(k, b, w, &kernel, [x, y, &k.dummy], p, |tile, p| {
        let rows = range.map_or(tile.rows, |r| r.1);
        p.rows = rows as u32;
        p.row0 = if range.is_some() { 0 } else { tile.row0 as u32 };
        p.row_groups = rows.div_ceil(rw) as u32;
        p.row_groups as usize * n.div_ceil(t)
    })
}

/// Elements per chunk of the matvec kernel for `ty` (the `CH` of its chunk dot product)
/// over `rows` rows: 32 for Q4_K (16-byte loads), for Q6_K 64 in LM heads (16-byte loads,
/// shaders/quant/q6_k_chunk_wide.wgsl) and 16 elsewhere (a byte's four 2-bit pairs; the
/// layers' shorter row counts want more chunks to spread), 8 for the other types with
/// their own (so a row's invocations read contiguously), else 4.
fn matvec_chunk(ty: GgmlType, rows: usize) -> usize {
    match ty {
        GgmlType::Q4_K => 32,
        GgmlType::Q6_K if rows >= HEAD_ROWS => 64,
        GgmlType::Q6_K => 16,
        GgmlType::Q8_0 | GgmlType::Q5_0 => 8,
        _ => 4,
    }
}

/// The FFN's gate, up and GeGLU for one token in one dispatch: `w` stacks [gate; up]
/// (2F rows, one binding tile) and `y[r] = gelu_tanh(gate_r · x) · (up_r · x)`, r < F.
/// CPU twin: `cpu::ops::matmul` of gate and up, then `cpu::ops::geglu`.
#[allow(clippy::too_many_arguments)]
pub fn matvec_geglu(k: &Kernels, b: &mut Batch, w: &GpuMatrix, x: MatvecIn, y: &wgpu::Buffer, y_off: usize) -> Result<()> {
    if w.tiles().len() != 1 || !w.rows.is_multiple_of(2) {
        return Err(Error::Input(format!("matvec_geglu: [gate; up] must be one tile of an even number of rows ({} rows in {} tiles)", w.rows, w.tiles().len())));
    }
    x.check("matvec_geglu", w.cols)?;
    check_len(y, "matvec_geglu output", y_off + w.rows / 2)?;
    matvec(k, b, w, x, y, y_off, Epilogue::GeluPair)
}

/// One token: `y[r] = gelu_tanh(w_r · x) · other[other_off + r]` (the per-layer-embedding
/// gate). CPU twin: `cpu::ops::matmul`, then `cpu::ops::geglu` with `other` as the up half.
#[allow(clippy::too_many_arguments)]
pub fn matvec_gelu_mul(
    k: &Kernels,
    b: &mut Batch,
    w: &GpuMatrix,
    x: MatvecIn,
    other: &wgpu::Buffer,
    other_off: usize,
    y: &wgpu::Buffer,
    y_off: usize,
) -> Result<()> {
    x.check("matvec_gelu_mul", w.cols)?;
    check_len(other, "matvec_gelu_mul other", other_off + w.rows)?;
    check_len(y, "matvec_gelu_mul output", y_off + w.rows)?;
    matvec(k, b, w, x, y, y_off, Epilogue::GeluMul(other, other_off))
}

/// One token: `y[r] = Σ_c w[r, c] · x[c]` for an input that may fold a residual step in.
/// CPU twin: `cpu::ops::matmul` (after the residual step's ops).
pub fn matvec_input(k: &Kernels, b: &mut Batch, w: &GpuMatrix, x: MatvecIn, y: &wgpu::Buffer, y_off: usize) -> Result<()> {
    x.check("matvec_input", w.cols)?;
    check_len(y, "matvec_input output", y_off + w.rows)?;
    matvec(k, b, w, x, y, y_off, Epilogue::None)
}

/// One token: the FFN's down projection `y[r] = Σ_c w[r, c] · x[c]`, which also adds its
/// rows' terms of the per-layer-embedding gate's sums (`PleAcc`). CPU twin: see `PleAcc`.
pub fn matvec_ple_acc(k: &Kernels, b: &mut Batch, w: &GpuMatrix, x: &wgpu::Buffer, y: &wgpu::Buffer, ple: PleAcc) -> Result<()> {
    if !ple_acc_usable(k, ple.pd, w.rows) {
        return Err(Error::Input(format!("matvec_ple_acc: a gate of {} over {} rows on a device without 64-bit atomics or the shape's rules", ple.pd, w.rows)));
    }
    let input = MatvecIn::Vector(x, 0);
    input.check("matvec_ple_acc", w.cols)?;
    check_len(y, "matvec_ple_acc output", w.rows)?;
    let words = 2 * (ple.acc_off + ple_acc_words(ple.pd));
    super::check_fits("matvec_ple_acc", &[(ple.gate_t, w.rows * ple.pd), (ple.h, w.rows), (ple.post, w.rows), (ple.acc, words)])?;
    matvec(k, b, w, input, y, 0, Epilogue::PleAcc(ple))
}

/// One token: the per-layer projection `y[r] = Σ_c w[r, c] · g[c]` of the gate that
/// `PleGate` makes from the sums a `matvec_ple_acc` left (w: hidden × pd). CPU twin: see
/// `PleAcc`, then `cpu::ops::matmul`.
pub fn matvec_ple_gate(k: &Kernels, b: &mut Batch, w: &GpuMatrix, g: PleGate, y: &wgpu::Buffer) -> Result<()> {
    if !ple_acc_usable(k, w.cols, w.rows) {
        return Err(Error::Input(format!("matvec_ple_gate: a gate of {} over {} rows on a device without 64-bit atomics or the shape's rules", w.cols, w.rows)));
    }
    let input = MatvecIn::PleGate(g);
    input.check("matvec_ple_gate", w.cols)?;
    check_len(y, "matvec_ple_gate output", w.rows)?;
    let words = 2 * (g.acc_off + ple_acc_words(w.cols));
    super::check_fits("matvec_ple_gate", &[(g.d, w.rows), (g.h, w.rows), (g.post, w.rows), (g.h2, w.rows), (g.acc, words)])?;
    matvec(k, b, w, input, y, 0, Epilogue::None)
}

/// One token through a matrix stacking [a; b; c] (one tile): rows of part i go to
/// `outs[i]` = (buffer, element offset, rows); a part of 0 rows is absent. CPU twin:
/// `cpu::ops::matmul` of each part.
pub fn matvec_routed(k: &Kernels, b: &mut Batch, w: &GpuMatrix, x: MatvecIn, outs: [(&wgpu::Buffer, usize, usize); 3]) -> Result<()> {
    let total: usize = outs.iter().map(|o| o.2).sum();
    if w.tiles().len() != 1 || total != w.rows {
        return Err(Error::Input(format!("matvec_routed: parts of {total} rows for a matrix of {} rows in {} tiles", w.rows, w.tiles().len())));
    }
    x.check("matvec_routed", w.cols)?;
    for (i, (buf, off, rows)) in outs.iter().enumerate() {
        check_len(buf, &format!("matvec_routed output {i}"), off + rows)?;
    }
    let [a, bb, c] = outs;
    let split_a = a.2;
    let split_b = a.2 + bb.2;
    // An absent part binds a stand-in (its rows are none).
    let (y2, y3) = ((bb.0, bb.1), if c.2 > 0 { (c.0, c.1) } else { (&k.scratch("matvec/y3", 4), 0) });
    matvec(k, b, w, x, a.0, a.1, Epilogue::Route { split_a, split_b, y2, y3 })
}

/// `n` tokens through a matrix stacking [a; b; c] (one tile): rows of part i go to
/// `outs[i]` = (buffer, element offset, rows), each token's rows of a part packed (part i's
/// row length is its row count); a part of 0 rows is absent. x rows are contiguous from
/// element `x_off`. CPU twin: `cpu::ops::matmul` of each part.
#[allow(clippy::too_many_arguments)]
pub fn matmul_routed(k: &Kernels, b: &mut Batch, w: &GpuMatrix, x: &wgpu::Buffer, x_off: usize, n: usize, outs: [(&wgpu::Buffer, usize, usize); 3]) -> Result<()> {
    let total: usize = outs.iter().map(|o| o.2).sum();
    if w.tiles().len() != 1 || total != w.rows {
        return Err(Error::Input(format!("matmul_routed: parts of {total} rows for a matrix of {} rows in {} tiles", w.rows, w.tiles().len())));
    }
    check_x_off(x_off)?;
    check_len(x, "matmul_routed input", x_off + n * w.cols)?;
    for (i, (buf, off, rows)) in outs.iter().enumerate() {
        check_len(buf, &format!("matmul_routed output {i}"), off + n * rows)?;
    }
    if n == 0 {
        return Ok(());
    }
    let [a, bb, c] = outs;
    if on_tensor_cores(k, w, n) {
        let route = CoopRoute { split_a: a.2, split_b: a.2 + bb.2, y2: (bb.0, bb.1), y3: (c.2 > 0).then_some((c.0, c.1)) };
        return super::matmul_coop::matmul_coop(k, b, w, None, x, x_off, w.cols, n, CoopOut { y: a.0, y_off: a.1, route: Some(route), geglu: false });
    }
    let mut first = 0;
    for (y, off, rows) in outs {
        if rows > 0 {
            plain_matmul(k, b, w, Some((first, rows)), x, x_off, w.cols, n, y, off)?;
        }
        first += rows;
    }
    Ok(())
}

/// Rows `[first, first + rows)` of `w` (one tile) for `n` tokens: `y[t, r] = Σ_c w[first + r, c] · x[t, c]`,
/// y rows of `rows` elements. CPU twin: `cpu::ops::matmul` of those rows.
#[allow(clippy::too_many_arguments)]
pub fn matmul_rows(k: &Kernels, b: &mut Batch, w: &GpuMatrix, first: usize, rows: usize, x: &wgpu::Buffer, x_off: usize, n: usize, y: &wgpu::Buffer, y_off: usize) -> Result<()> {
    if w.tiles().len() != 1 || first + rows > w.rows || rows == 0 {
        return Err(Error::Input(format!("matmul_rows: rows {first}..{} of a matrix of {} rows in {} tiles", first + rows, w.rows, w.tiles().len())));
    }
    check_x_off(x_off)?;
    check_len(x, "matmul_rows input", x_off + n * w.cols)?;
    check_len(y, "matmul_rows output", y_off + n * rows)?;
    if n == 0 {
        return Ok(());
    }
    plain_matmul(k, b, w, Some((first, rows)), x, x_off, w.cols, n, y, y_off)
}

/// One token (`matvec.wgsl`): `y[r] = Σ_c w[r, c] · x[c]`, then the epilogue.
#[allow(clippy::too_many_arguments)]
fn matvec(k: &Kernels, b: &mut Batch, w: &GpuMatrix, input: MatvecIn, y: &wgpu::Buffer, y_off: usize, epi: Epilogue) -> Result<()> {
    // Experts: rows per slot, rows of each expert's block ([gate; up] with GeGLU), x's
    // advance a slot, and the rows a dispatch computes, which the shape rules go by.
    let ex = match epi {
        Epilogue::Experts { rpe, top_k, x_slot, geglu, .. } => Some((rpe, rpe * (1 + geglu as usize), x_slot, rpe * top_k)),
        _ => None,
    };
    let (experts, shape_rows) = (ex.is_some(), ex.map_or(w.rows, |e| e.3));
    let ch = matvec_chunk(w.ty, shape_rows);
    let chunks = w.cols / ch;
    // The per-layer-embedding gate's part: its sums (PLE_ACC) or its input (PLE_GATE).
    let (ple_acc, ple_gate) = (matches!(epi, Epilogue::PleAcc(_)), matches!(input, MatvecIn::PleGate(_)));
    let mut tpr = matvec_tpr(chunks, shape_rows, matches!(input, MatvecIn::Residual(_)));
    if ple_acc {
        tpr = tpr.min(PLE_ACC_TPR);
    }
    let pd = match (epi, input) {
        (Epilogue::PleAcc(a), _) => a.pd,
        (_, MatvecIn::PleGate(_)) => w.cols,
        _ => 0,
    };
    let cpt = chunks.div_ceil(tpr);
    // Subgroup sums where subgroups are exactly 32 wide (an H100's), else the tree.
    let sg = super::uniform_subgroups(k) == Some(32);
    // RN: the staged row length of a residual input (0: x is read from its buffer).
    let rn = if matches!(input, MatvecIn::Residual(_)) { w.cols } else { 0 };
    let (wg_reduce, tag) = super::reduce(k);
    let gelu_pair = matches!(epi, Epilogue::GeluPair | Epilogue::Experts { geglu: true, .. });
    // Follows from rn and the gate's part, which the name already holds.
    let preload = (rn > 0 || ple_gate) && w.cols <= PRELOAD_MAX_COLS;
    // Row tiles per workgroup: see FOLDED_MAX_GROUPS.
    let rows_per_group = MATVEC_WG / tpr;
    let out_rows = if gelu_pair { w.rows / 2 } else { w.rows };
    let tiles = if rn > 0 && !preload { out_rows.div_ceil(rows_per_group).div_ceil(FOLDED_MAX_GROUPS) } else { 1 };
    // XN: the input staged as integers for the chunk dot products (see INT_DOT_ROWS). Its
    // limbs take workgroup memory, so rows no longer than a folded input's.
    let staged = !experts && (rn > 0 || (w.rows >= INT_DOT_ROWS && w.cols <= RESIDUAL_IN_MAX));
    let xn = if k.int_dot && staged && shaders::has_int_dot(w.ty) { w.cols } else { 0 };
    let ple = match (ple_acc, ple_gate) {
        (true, _) => format!("/ple_acc{pd}"),
        (_, true) => format!("/ple_gate{pd}x{}", w.rows),
        _ => String::new(),
    };
    let name = format!("matvec/{}/ch{ch}/tpr{tpr}/cpt{cpt}/t{tiles}/rn{rn}/{}/{}{tag}/xn{xn}{}{ple}", w.ty, if gelu_pair { "pair" } else { "one" }, if sg { "sg" } else { "wg" }, if experts { "/experts" } else { "" });
    let quant = quant_parts(w.ty)?;
    let kernel = k.get(&name, || {
        let header = format!("const WG: u32 = {MATVEC_WG}u;\nconst TPR: u32 = {tpr}u;\nconst CPT: u32 = {cpt}u;\nconst RN: u32 = {rn}u;\nconst PAIR: bool = {gelu_pair};\nconst PRELOAD: bool = {preload};\nconst TILES: u32 = {tiles}u;\nconst XN: u32 = {xn}u;\nconst EXPERTS: bool = {experts};\nconst PLE_ACC: bool = {ple_acc};\nconst PLE_GATE: bool = {ple_gate};\nconst PD: u32 = {pd}u;\nconst PH: u32 = {}u;\nconst COPIES: u32 = {PLE_COPIES}u;\n", w.rows);
        let reduce = if sg { shaders::MATVEC_REDUCE_SUBGROUP } else { shaders::MATVEC_REDUCE_TREE };
        let mut parts = vec![header.as_str()];
        parts.extend(&quant);
        parts.push(shaders::QUANT_SPAN);
        parts.extend(shaders::quant_dot(w.ty, xn > 0, ch));
        parts.push(shaders::MATVEC);
        let (r, rw) = (Access::Read, Access::ReadWrite);
        let mut buffers = vec![r, r, rw, r, rw, rw, r, rw, r, r, r];
        match (ple_acc, ple_gate) {
            (true, _) => {
                parts.extend([shaders::MATVEC_PLE, shaders::MATVEC_PLE_ACC]);
                buffers.push(rw);
            }
            (_, true) => {
                parts.extend([shaders::MATVEC_PLE, shaders::MATVEC_PLE_GATE]);
                buffers.push(r);
            }
            _ => parts.push(shaders::MATVEC_PLE_NONE),
        }
        parts.extend([shaders::MATVEC_X_LIMBS, reduce, wg_reduce[0], wg_reduce[1]]);
        KernelSource { name: name.clone(), code: compose(&parts), entry: "main", buffers }
    })?;
    let stand_x = k.scratch("matvec/x_out", 4);
    let (x, x_off, resid) = match input {
        MatvecIn::Vector(x, off) => (x, off, None),
        MatvecIn::Residual(r) => (r.x_in.0, 0, Some(r)),
        MatvecIn::PleGate(g) => (g.h, 0, None),
    };
    let (a, x_out, post, pre) = match (&resid, input, epi) {
        (Some(r), _, _) => (r.a.0, r.x_out.0, r.post, r.pre.unwrap_or(r.post)),
        (_, MatvecIn::PleGate(g), _) => (g.d, g.h2, g.post, &k.dummy),
        (_, _, Epilogue::PleAcc(a)) => (a.h, &stand_x, a.post, &k.dummy),
        _ => (&k.dummy, &stand_x, &k.dummy, &k.dummy),
    };
    // The gate's sums and where they start, and its scalar parameters.
    let (acc, acc_off, eps) = match (input, epi) {
        (MatvecIn::PleGate(g), _) => (Some(g.acc), g.acc_off, g.eps),
        (_, Epilogue::PleAcc(a)) => (Some(a.acc), a.acc_off, 0.0),
        _ => (None, 0, resid.map_or(0.0, |r| r.eps)),
    };
    // Unused outputs bind stand-ins: writable bindings may not share a buffer.
    let (stand2, stand3) = (k.scratch("matvec/y2", 4), k.scratch("matvec/y3", 4));
    let unrouted = ((&stand2, 0), (&stand3, 0));
    let (mode, (other, other_off), (split_a, split_b), (y2, y3)) = match epi {
        Epilogue::None => (0, (&k.dummy, 0), (0, 0), unrouted),
        Epilogue::GeluPair => (1, (&k.dummy, 0), (0, 0), unrouted),
        Epilogue::GeluMul(o, off) => (2, (o, off), (0, 0), unrouted),
        Epilogue::Route { split_a, split_b, y2, y3 } => (3, (&k.dummy, 0), (split_a, split_b), (y2, y3)),
        Epilogue::Experts { ids, .. } => (0, (ids, 0), (0, 0), unrouted),
        Epilogue::PleAcc(a) => (0, (a.gate_t, 0), (0, 0), unrouted),
    };
    let (other, other_off) = match input {
        MatvecIn::PleGate(g) => g.e,
        _ => (other, other_off),
    };
    let (rpe, block, x_slot, _) = ex.unwrap_or((1, 1, 0, 0));
    for tile in w.tiles() {
        let rows = if experts { shape_rows } else if gelu_pair { tile.rows / 2 } else { tile.rows };
        let (grid, groups_x) = grid_1d(rows.div_ceil(rows_per_group * tiles), k.gpu.limits.max_compute_workgroups_per_dimension);
        let p = MatvecParams {
            chunks: chunks as u32,
            rows: rows as u32,
            row_bytes: w.row_bytes() as u32,
            x_off4: (x_off / 4) as u32,
            y_off: y_off as u32,
            row0: if experts { 0 } else { tile.row0 as u32 },
            groups_x,
            mode,
            other_off: if experts { 0 } else if ple_gate { other_off as u32 } else { (other_off + tile.row0) as u32 },
            split_a: split_a as u32,
            split_b: split_b as u32,
            y2_off: y2.1 as u32,
            y3_off: y3.1 as u32,
            a_off: resid.map_or(0, |r| r.a.1 as u32),
            xin_off: resid.map_or(0, |r| r.x_in.1 as u32),
            xout_off: resid.map_or(0, |r| r.x_out.1 as u32),
            store_x: (tile.row0 == 0) as u32,
            pre: resid.is_some_and(|r| r.pre.is_some()) as u32,
            scale: resid.map_or(1.0, |r| r.scale),
            eps,
            rpe: rpe as u32,
            e0: (tile.row0 / block) as u32,
            e_count: (tile.rows / block) as u32,
            x_slot4: (x_slot / 4) as u32,
            acc_off: acc_off as u32,
        };
        // The weights are bound twice: as 4-byte words (w) and 16-byte words (w4).
        let mut bufs = vec![&tile.buffer, x, y, other, y2.0, y3.0, a, x_out, post, pre, &tile.buffer];
        bufs.extend(acc);
        b.dispatch(&kernel, &bufs, &p, grid)?;
    }
    Ok(())
}

/// Expert matmul (ggml_mul_mat_id): `w` stacks E experts of `rows_per_expert` rows
/// (uploaded with `GpuMatrix::upload_stacked(.., rows_per_expert, ..)`), `ids` holds
/// `n * top_k` u32 expert ids. For token t, slot s, e = ids[t*top_k + s]:
/// `y[t*top_k + s, r] = Σ_c w[e*rows_per_expert + r, c] · x[x_row, c]` where x_row is
/// `t*top_k + s` when `x_per_slot`, else t. y rows have `rows_per_expert` elements.
/// Ids outside `[0, E)` leave their y row unwritten.
#[allow(clippy::too_many_arguments)]
pub fn matmul_experts(
    k: &Kernels,
    b: &mut Batch,
    w: &GpuMatrix,
    rows_per_expert: usize,
    ids: &wgpu::Buffer,
    top_k: usize,
    x: &wgpu::Buffer,
    x_off: usize,
    x_per_slot: bool,
    n: usize,
    y: &wgpu::Buffer,
    y_off: usize,
) -> Result<()> {
    matmul_experts_strided(k, b, w, rows_per_expert, ids, top_k, x, x_off, w.cols, x_per_slot, n, y, y_off)
}

/// `matmul_experts` with x rows `x_stride` elements apart (a multiple of 4, ≥ `w.cols`):
/// reads the first `w.cols` of each, e.g. the gate half of fused [gate | up] rows.
#[allow(clippy::too_many_arguments)]
pub fn matmul_experts_strided(
    k: &Kernels,
    b: &mut Batch,
    w: &GpuMatrix,
    rows_per_expert: usize,
    ids: &wgpu::Buffer,
    top_k: usize,
    x: &wgpu::Buffer,
    x_off: usize,
    x_stride: usize,
    x_per_slot: bool,
    n: usize,
    y: &wgpu::Buffer,
    y_off: usize,
) -> Result<()> {
    check_x_stride("matmul_experts", x_stride, w.cols)?;
    let rpe = rows_per_expert;
    if rpe == 0 || top_k == 0 || !w.rows.is_multiple_of(rpe) || w.tiles().iter().any(|t| !t.row0.is_multiple_of(rpe) || !t.rows.is_multiple_of(rpe)) {
        return Err(Error::Input(format!(
            "matmul_experts: {} rows are not stacked experts of {rpe} rows each in whole tiles (upload with upload_stacked), or top_k is 0",
            w.rows
        )));
    }
    let pairs = n * top_k;
    check_x_off(x_off)?;
    check_len(x, "matmul_experts input", x_off + (if x_per_slot { pairs } else { n } - 1) * x_stride + w.cols)?;
    check_len(y, "matmul_experts output", y_off + pairs * rpe)?;
    check_len(ids, "matmul_experts ids", pairs)?;
    if n == 0 {
        return Ok(());
    }
    // Many tokens: pairs grouped by expert on tensor cores, each expert's weights read
    // once for all its pairs.
    if n >= EXPERTS_COOP_TOKENS && super::matmul_coop::experts_usable(k, w, rpe, n, top_k) {
        return super::matmul_coop::matmul_experts_coop(k, b, w, rpe, ids, top_k, (x, x_off, x_stride, x_per_slot), n, y, y_off);
    }
    // One token: the decode matvec over the chosen experts' rows.
    if n == 1 && x_off.is_multiple_of(4) && x_stride.is_multiple_of(4) && w.cols.is_multiple_of(matvec_chunk(w.ty, rpe * top_k)) {
        let x_slot = if x_per_slot { x_stride } else { 0 };
        return matvec(k, b, w, MatvecIn::Vector(x, x_off), y, y_off, Epilogue::Experts { ids, rpe, top_k, x_slot, geglu: false });
    }
    // One pair per workgroup.
    let kernel = matmul_kernel(k, w.ty, 1)?;
    let row_groups = rpe.div_ceil(RW as usize);
    let p = MatmulParams {
        cols4: (w.cols / 4) as u32,
        rows: rpe as u32,
        row_bytes: w.row_bytes() as u32,
        n: pairs as u32,
        x_off4: (x_off / 4) as u32,
        y_off: y_off as u32,
        y_stride: rpe as u32,
        top_k: top_k as u32,
        x_per_slot: x_per_slot as u32,
        row_groups: row_groups as u32,
        x_stride4: (x_stride / 4) as u32,
        ..Default::default()
    };
    dispatch_tiles(k, b, w, &kernel, [x, y, ids], p, |tile, p| {
        p.e0 = (tile.row0 / rpe) as u32;
        p.e_count = (tile.rows / rpe) as u32;
        row_groups * pairs
    })
}

/// One token's experts with GeGLU: `w` stacks experts of [gate; up] (`2 · fe` rows each);
/// for slot s (expert e = ids[s]) `y[y_off + s · fe + r] = gelu_tanh(gate_e[r] · x) ·
/// (up_e[r] · x)`, x the token's row at `x_off`. The decode matvec with the pair epilogue,
/// where `matmul_experts` and `geglu_fused` would take two dispatches. `None` where the
/// shapes do not suit it (the caller then takes those two).
#[allow(clippy::too_many_arguments)]
pub fn matvec_experts_geglu(k: &Kernels, b: &mut Batch, w: &GpuMatrix, fe: usize, ids: &wgpu::Buffer, top_k: usize, x: &wgpu::Buffer, x_off: usize, y: &wgpu::Buffer, y_off: usize) -> Option<Result<()>> {
    let stacked = fe > 0 && w.rows.is_multiple_of(2 * fe) && w.tiles().iter().all(|t| t.row0.is_multiple_of(2 * fe) && t.rows.is_multiple_of(2 * fe));
    if !stacked || !x_off.is_multiple_of(4) || !w.cols.is_multiple_of(matvec_chunk(w.ty, fe * top_k)) {
        return None;
    }
    let checked = check_len(x, "matvec_experts_geglu input", x_off + w.cols)
        .and_then(|_| check_len(y, "matvec_experts_geglu output", y_off + top_k * fe))
        .and_then(|_| check_len(ids, "matvec_experts_geglu ids", top_k));
    Some(checked.and_then(|_| matvec(k, b, w, MatvecIn::Vector(x, x_off), y, y_off, Epilogue::Experts { ids, rpe: fe, top_k, x_slot: 0, geglu: true })))
}

/// Row gather: `out[t, :] = scale · table[ids[ids_off + t], :]` for `n` ids (u32), rows
/// of `table.cols` from element `out_off`. Ids past the table give zero rows.
#[allow(clippy::too_many_arguments)]
pub fn embed(
    k: &Kernels,
    b: &mut Batch,
    table: &GpuMatrix,
    ids: &wgpu::Buffer,
    ids_off: usize,
    n: usize,
    scale: f32,
    out: &wgpu::Buffer,
    out_off: usize,
) -> Result<()> {
    check_len(ids, "embed ids", ids_off + n)?;
    check_len(out, "embed output", out_off + n * table.cols)?;
    if n == 0 {
        return Ok(());
    }
    let name = format!("embed/{}", table.ty);
    let quant = quant_parts(table.ty)?;
    let kernel = k.get(&name, || {
        let mut parts = quant.clone();
        parts.push(shaders::EMBED);
        KernelSource {
            name: name.clone(),
            code: compose(&parts),
            entry: "main",
            buffers: vec![Access::Read, Access::Read, Access::ReadWrite],
        }
    })?;
    let cols4 = table.cols / 4;
    let chunks = cols4.div_ceil(EMBED_WG);
    let (grid, groups_x) = grid_1d(n * chunks, k.gpu.limits.max_compute_workgroups_per_dimension);
    for tile in table.tiles() {
        let p = EmbedParams {
            cols4: cols4 as u32,
            row_bytes: table.row_bytes() as u32,
            n: n as u32,
            ids_off: ids_off as u32,
            out_off: out_off as u32,
            row0: tile.row0 as u32,
            rows: tile.rows as u32,
            total_rows: table.rows as u32,
            scale,
            chunks: chunks as u32,
            groups_x,
        };
        b.dispatch(&kernel, &[&tile.buffer, ids, out], &p, grid)?;
    }
    Ok(())
}
