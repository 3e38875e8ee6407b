//! Prefill matmul on cooperative matrices (tensor cores): x and the weight rows are split
//! into f16 hi and lo parts (`shaders/matmul/split_f16.wgsl`), then multiplied three
//! products per result (`shaders/matmul/matmul_coop.wgsl`) for f32 accuracy. Splitting
//! once per matmul keeps dequantization and conversion out of the product kernel's loop,
//! which then only loads fragments and multiplies. The split scales each x row by a power
//! of two of its own, so activations of any size fit f16. CPU twins: `row_scale_cpu`,
//! `split_f16_cpu`, and `cpu::ops::matmul` for the product (tests/gpu_matmul.rs).

use super::kernel::{Access, Batch, KernelSource, Kernels};
use super::weights::GpuMatrix;
use super::{check_fits, compose, grid_1d, launch, shaders, u32_of};
use crate::gguf::GgmlType;
use crate::{Error, Result};

/// A tile shape of matmul_coop.wgsl: `bm` tokens x `bn` rows per workgroup, `fr` row
/// fragments (of 16) per subgroup; `overlap`: split weights are staged a half-step ahead,
/// while the products of the half-step before run (the kernel's OVERLAP).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoopTile {
    pub bm: usize,
    pub bn: usize,
    pub fr: usize,
    pub overlap: bool,
}

/// The default tile: four subgroups of 32 x 32. Measured on the H100 (Q4_K, 512 tokens):
/// 25-39 TFLOP/s on Gemma 4 E2B's layer matrices, against 9-23 with 64 x 128 (eight
/// subgroups) and 13-16 with 128 x 64 of 32 x 64 subgroups. Its 24 KB of workgroup memory
/// set how many share an SM: declaring more (two staging buffers, 45 KB; or the same
/// kernel padded to 28-48 KB) cost the Gemma 3 270M layout's prefill 19% on an H200
/// (docs/performance-log.md, forty-second session).
/// Two of them share an SM, so one's staging overlaps the other's products already: staging
/// the next half-step during the products (`overlap`) cost the 270M layout's prefill 2.5-3.5%
/// (H200, forty-fifth session).
pub const COOP_SMALL: CoopTile = CoopTile { bm: 64, bn: 64, fr: 2, overlap: false };
/// For tall matrices over many tokens: eight subgroups of 32 x 64, which share each staged
/// row among more products (E2B's [gate; up], 12288 rows: 49 TFLOP/s against 39); smaller
/// matrices leave too few workgroups with it (~20 TFLOP/s). One workgroup holds an SM (200
/// registers, 48 KB), so nothing overlapped its staging with its products until `overlap`:
/// H200, E2B prefill of 512 tokens +2.2-2.5% (docs/performance-log.md, forty-fifth session).
pub const COOP_LARGE: CoopTile = CoopTile { bm: 128, bn: 128, fr: 4, overlap: true };

impl CoopTile {
    /// Workgroup memory the kernel declares: staged hi and lo rows (10 vec4<f16> each)
    /// and one 16 x 16 f32 slot per subgroup.
    pub fn workgroup_bytes(&self) -> usize {
        self.workgroup_bytes_of(false)
    }

    /// The same for the variant of f16-rounded inputs (`f16`), which stages no lo rows
    /// (two vec4s stand in for them).
    pub fn workgroup_bytes_of(&self, f16: bool) -> usize {
        let subgroups = (self.bm / 32) * (self.bn / (16 * self.fr));
        let staged = (self.bm + self.bn) * 10 * 8;
        staged + if f16 { 16 } else { staged } + subgroups * 1024
    }

    /// The kernel's source for this tile, `geglu` for the variant that writes
    /// gelu_tanh(gate) · up of interleaved [gate; up] rows. Its weights come split
    /// (split_f16.wgsl).
    pub fn source(&self, geglu: bool) -> String {
        self.source_of(geglu, false, None, false)
    }

    /// A variant's source: GEGLU's epilogue, GROUPED's experts, the weights staged from
    /// blocks of type `blocks` (matmul_coop_w_quant.wgsl) rather than split, and `f16`:
    /// one product of f16-rounded inputs (no lo parts) rather than three.
    pub fn source_variant(&self, geglu: bool, grouped: bool, blocks: Option<GgmlType>, f16: bool) -> Result<String> {
        let parts = blocks.map(quant16_parts).transpose()?;
        Ok(self.source_of(geglu, grouped, parts.as_deref(), f16))
    }

    /// `blocks`: the weights come as a type's blocks (its shaders), not split.
    fn source_of(&self, geglu: bool, grouped: bool, blocks: Option<&[&str]>, f16: bool) -> String {
        let header = format!(
            "enable f16;\nenable wgpu_cooperative_matrix;\nconst BM: u32 = {}u;\nconst BN: u32 = {}u;\nconst FR: u32 = {}u;\nconst GEGLU: bool = {geglu};\nconst GROUPED: bool = {grouped};\nconst OVERLAP: bool = {};\n{}",
            self.bm, self.bn, self.fr, self.overlap && blocks.is_none(), lo_header(f16)
        );
        let mut parts = vec![header.as_str()];
        match blocks {
            Some(q) => parts.extend(q.iter().copied().chain([shaders::MATMUL_COOP_W_QUANT])),
            None => parts.push(shaders::MATMUL_COOP_W_SPLIT),
        }
        parts.extend([shaders::MATMUL_COOP, shaders::HI_LO, shaders::MATH]);
        compose(&parts)
    }

    /// Gate rows (and as many up rows) in each subgroup's interleave block with GEGLU.
    fn pair_half(&self) -> usize {
        8 * self.fr
    }
}

/// The tile for `rows` output rows and `n` tokens on `k`'s device, `routed` when the
/// product cannot be split over its columns (split-K). 128 × 128 tiles read each staged
/// element for twice the products of 64 × 64 ones but leave a matrix fewer workgroups, so
/// they take tall matrices, and from 1536 rows those whose 64 × 64 tiles would be too few
/// anyway (split-K then restores the workgroups). H100, 512 / 2048-token prefill, Gemma 4
/// E2B layout (tok/s, two runs): 128 × 128 only from 8192 rows 8.75–8.81k / 8.20–8.21k;
/// also for E2B's o and down projections (1536 rows) 9.05–9.06k / 8.39–8.44k. Taking every
/// matrix from 1536 rows cost the 270M layout 2–6% (its routed q/k/v in 48 workgroups).
/// Unrouted matrices from 1536 rows and 2048 columns take them too (Gemma 4 26B-A4B's o,
/// down and dense [gate; up]: 26B-A4B prefill 512 4,832-4,850 -> 5,030-5,097 tok/s, 2048
/// tokens 5,132 -> 5,272; no E2B or 270M matrix changes tile). Rows shorter than
/// LARGE_MIN_COLS stay on 64 × 64 tiles: too few steps for the staged rows' reuse to pay
/// for a grid of a third of the SMs, and too few columns to split (E2B's per-layer
/// projection, 1536 × 256: 48 workgroups of 128 × 128 against 192 of 64 × 64).
/// Products of f16-rounded inputs (`Kernels::coop_f16`) take the small tile at every
/// shape: at 90 registers and 14 KB several of its workgroups share an SM, where the large
/// one (119-144 registers) held one or two. H200, f16 products, prefill tok/s (best of 5 /
/// 3, two alternated rounds): E2B 512 tokens 15,252 / 15,270 with the rule above against
/// 17,431 / 17,624 (only [gate; up] small: 16,765 / 16,877); E2B 2048 tokens 16,645 /
/// 16,662 against 21,144 / 21,133; E4B 512 tokens 7,931 / 7,958 against 9,835 / 9,776.
fn tile_for(k: &Kernels, rows: usize, cols: usize, n: usize, routed: bool) -> CoopTile {
    if k.coop_f16() {
        return COOP_SMALL;
    }
    let few = rows.div_ceil(COOP_SMALL.bn) * n.div_ceil(COOP_SMALL.bm) < SPLIT_BELOW;
    let tall = cols >= LARGE_MIN_COLS && (rows >= 8192 || (rows >= 1536 && !routed && (few || cols >= 2048)));
    let large = tall && n >= 256 && COOP_LARGE.workgroup_bytes() <= k.gpu.limits.max_compute_workgroup_storage_size as usize;
    if large { COOP_LARGE } else { COOP_SMALL }
}

/// Fewest columns a matrix takes 128 × 128 tiles at (see `tile_for`). H200, prefill of
/// 512 tokens, Gemma 4 E2B layout, three alternated rounds (tok/s, best of 5): 12,137-12,246
/// with the per-layer projection on 128 × 128 tiles, 12,290-12,304 on 64 × 64 (+0.5%); 2048
/// tokens 12,749-12,769 against 12,748-12,774; the logits bit for bit the same.
const LARGE_MIN_COLS: usize = 512;

/// Columns must be a multiple of this (the kernel steps 16 at a time; 32 keeps rows of
/// f16 pairs whole).
pub(crate) const COLS_MULTIPLE: usize = 32;
/// w is scaled by 2^4 before the split, so small weights stay out of f16's subnormals
/// (x by its rows' own scales, `row_scale_cpu`); the product divides both out.
pub(crate) const WS: f32 = 16.0;
/// Largest split weight chunk (each of hi and lo), bounded further by the binding limit.
/// A matrix split in two chunks is two split and product dispatches, each grid a few
/// waves with a partial last one. 128 MiB takes E2B's double-wide [gate; up] (24576 x
/// 1536: 75 MB a part) in one: H100, prefill 512, four alternated rounds (tok/s, best of
/// 5), 11,843-11,939 at 64 MiB, 12,165-12,237 at 128 (256: the same), for 134 MB more
/// scratch (each part's buffer is rounded up to a power of two).
const SPLIT_MAX_BYTES: u64 = 128 << 20;

#[repr(C)]
#[derive(Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
struct SplitParams {
    cols8: u32,
    rows: u32,
    byte0: u32,
    row_bytes: u32,
    total: u32,
    groups_x: u32,
    scale: f32,
    x_cols8: u32,
    x_rows: u32,
    x_off: u32,
    x_stride: u32,
    x_rows_pad: u32,
    x_scale: f32,
    /// Whether x rows are also multiplied by their scales (`SplitJob::row_scale`).
    x_row_scale: u32,
    tile_rows: u32,
    x_tile_rows: u32,
    x_col_stride: u32,
    pair_half: u32,
    pair_off: u32,
    x_map: u32,
    x_map_div: u32,
    x_map_off: u32,
    x_poff_off: u32,
    x_e0: u32,
    x_e1: u32,
    w_rpe: u32,
    x_pairs: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
struct CoopParams {
    cols: u32,
    rows: u32,
    n: u32,
    y_off: u32,
    y_stride: u32,
    row0: u32,
    row_groups: u32,
    groups_x: u32,
    splits: u32,
    split_cols: u32,
    split_stride: u32,
    route_a: u32,
    route_b: u32,
    route_end: u32,
    y2_off: u32,
    y3_off: u32,
    y_row_stride: u32,
    /// The products are divided by this and by their x row's scale.
    w_scale: f32,
    e0: u32,
    e1: u32,
    rpe: u32,
    map_off: u32,
    poff_off: u32,
    tile_off: u32,
    w_byte0: u32,
    w_row_bytes: u32,
    w_pair_half: u32,
    w_pair_off: u32,
    /// GROUPED: pairs from this on are padding (u32::MAX: only the map's NONE is).
    pairs: u32,
}

impl CoopParams {
    /// A product of `rows` rows of `cols` columns over `n` tokens into y rows of
    /// `y_stride` from `y_off`, in `row_groups` row tiles, one column range, not routed:
    /// what every caller sets before its own fields.
    fn new(cols: usize, rows: usize, n: usize, (y_off, y_stride): (usize, usize), row_groups: usize, groups_x: u32) -> Result<CoopParams> {
        Ok(CoopParams {
            cols: u32_of(cols, "matmul columns")?,
            rows: u32_of(rows, "matmul rows")?,
            n: u32_of(n, "matmul tokens")?,
            y_off: u32_of(y_off, "matmul output offset")?,
            y_stride: u32_of(y_stride, "matmul output stride")?,
            row_groups: u32_of(row_groups, "matmul row tiles")?,
            groups_x,
            splits: 1,
            split_cols: cols as u32,
            route_a: u32::MAX,
            route_b: u32::MAX,
            route_end: rows as u32,
            pairs: u32::MAX,
            y_row_stride: 1,
            w_scale: WS,
            ..Default::default()
        })
    }
}

/// Where a tensor-core matmul writes: y rows of `y_stride` from `y_off` (see `matmul_coop`),
/// or for a stacked [a; b; c] matrix rows from `split_a` to `y2` and from `split_b` to
/// `y3`, each part's rows packed (`route`). `geglu`: the matrix stacks [gate; up] (2F
/// rows) and y rows of 2F get gelu_tanh(gate) · up in their first F (the rest untouched).
#[derive(Clone, Copy)]
pub(crate) struct CoopOut<'a> {
    pub y: &'a wgpu::Buffer,
    pub y_off: usize,
    pub route: Option<CoopRoute<'a>>,
    pub geglu: bool,
}

/// `y3` None: no third part (`split_b` is the matrix's last row).
#[derive(Clone, Copy)]
pub(crate) struct CoopRoute<'a> {
    pub split_a: usize,
    pub split_b: usize,
    pub y2: (&'a wgpu::Buffer, usize),
    pub y3: Option<(&'a wgpu::Buffer, usize)>,
}

#[repr(C)]
#[derive(Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
struct SumParams {
    n: u32,
    rows: u32,
    splits: u32,
    y_off: u32,
    y_stride: u32,
    row0: u32,
    groups_x: u32,
}

/// Grids of fewer workgroups than this leave the GPU idle: their columns are split
/// (split-K), each split keeping at least SPLIT_MIN_COLS columns. Measured on the H100
/// (512-token prefill, tok/s, Gemma 3 270M / Gemma 4 E2B layouts, before q/k/v were routed
/// into one matmul): no split 48.7k / 7.85k, 256 groups 52.4k / 8.04k, 512: 53.4k / 7.60k,
/// 1024: 43.8k / 7.82k. A split costs a second dispatch and a pass over the partials, so
/// only the smallest grids gain (E2B's o and down projections, 48 workgroups of 128 x 128;
/// the 270M layout's 640-row matrices, 80 of 64 x 64).
const SPLIT_BELOW: usize = 256;
/// The workgroups a split grid aims at. A 128 x 128 workgroup has an SM to itself, so a
/// grid runs in waves of one workgroup per SM, and the last wave's emptiness is lost: E2B's
/// 48-workgroup matrices split 6 ways (aiming at 256) made 288 workgroups, 2.2 waves on an
/// H100's 132 SMs. Aiming higher leaves a smaller part of the work to a partial wave on any
/// number of SMs. H100, E2B prefill 512 (two alternated rounds, best of 5): 6 splits
/// 10.84-10.87k tok/s; 5, 8 and 11 (this target: o 8, down 11) 11.20-11.35k; the 270M
/// unchanged (its splits are capped by the columns). Splitting grids of 256-511 too
/// (aiming at 512 for every grid) gave 11.00-11.03k: [gate; up]'s 384 workgroups lose more
/// to the partials than to waves.
const SPLIT_TARGET: usize = 512;
/// The target for products of f16-rounded inputs: all on the 64 × 64 tile (90 registers,
/// several workgroups an SM), so a grid fills the GPU only at more workgroups. H200, E2B
/// prefill 512, two alternated rounds (tok/s, best of 5): 512: 17,929 / 18,056; 1024:
/// 18,504 / 18,423; 2048: 18,084 / 18,077 (it moves only o and down, 192 workgroups: 3
/// splits -> 6). The same 1024 with f32-accurate products: 12,133 / 12,164 against
/// 12,696 / 12,660, hence two targets.
const SPLIT_TARGET_F16: usize = 1024;
const SPLIT_MIN_COLS: usize = 256;

/// The workgroups a split grid aims at for products of f16-rounded inputs (`f16`) or
/// f32-accurate ones.
pub fn split_target(f16: bool) -> usize {
    if f16 { SPLIT_TARGET_F16 } else { SPLIT_TARGET }
}

/// Column ranges for a product of `groups` workgroups over `cols` columns, aiming at
/// `target` workgroups (`split_target`): `(splits, columns per split)`, the latter a
/// multiple of COLS_MULTIPLE.
pub fn split_k_plan(groups: usize, cols: usize, target: usize) -> (usize, usize) {
    let want = if groups < SPLIT_BELOW { target.div_ceil(groups.max(1)).min(cols / SPLIT_MIN_COLS).max(1) } else { 1 };
    let per = cols.div_ceil(want).div_ceil(COLS_MULTIPLE) * COLS_MULTIPLE;
    (cols.div_ceil(per), per)
}

/// The CPU twin of split_k_sum.wgsl: the partials `part[s][t][r]` (`splits` x `n` x
/// `rows`) added in order.
pub fn split_k_sum_cpu(part: &[f32], splits: usize, n: usize, rows: usize) -> Vec<f32> {
    (0..n * rows).map(|i| (1..splits).fold(part[i], |acc, s| acc + part[s * n * rows + i])).collect()
}

/// Record split_k_sum.wgsl: `y[y_off + t · y_stride + row0 + r] = Σ_s part[s][t][r]`.
#[allow(clippy::too_many_arguments)]
pub fn split_k_sum(k: &Kernels, b: &mut Batch, part: &wgpu::Buffer, (splits, n, rows): (usize, usize, usize), y: &wgpu::Buffer, (y_off, y_stride, row0): (usize, usize, usize)) -> Result<()> {
    check_fits("split_k_sum", &[(part, splits * n * rows), (y, y_off + n.saturating_sub(1) * y_stride + row0 + rows)])?;
    if row0 + rows > y_stride {
        return Err(Error::Input(format!("split_k_sum: rows {row0}..{} past the y row of {y_stride}", row0 + rows)));
    }
    let p = SumParams {
        n: u32_of(n, "split_k_sum tokens")?,
        rows: u32_of(rows, "split_k_sum rows")?,
        splits: u32_of(splits, "split_k_sum splits")?,
        y_off: u32_of(y_off, "split_k_sum offset")?,
        y_stride: u32_of(y_stride, "split_k_sum stride")?,
        row0: u32_of(row0, "split_k_sum row")?,
        groups_x: 0,
    };
    u32_of(splits * n * rows, "split_k_sum size")?;
    launch(k, b, "split_k_sum", &[shaders::SPLIT_K_SUM], &[Access::Read, Access::ReadWrite], &[part, y], (n * rows).div_ceil(256), |gx| SumParams { groups_x: gx, ..p })
}

/// hi_lo.wgsl's hi_part: `v` with its significand cut to f16's 10 bits (first rounded to
/// the nearest f16, ties away from zero, with `round`, below f16's range), 0 below f16's
/// smallest normal.
fn hi_part_cpu(v: f32, round: bool) -> f32 {
    let up = if round && v.abs() < 65504.0 { 0x1000 } else { 0 };
    let cut = f32::from_bits(v.to_bits().wrapping_add(up) & 0xFFFF_E000);
    if v.abs() < 6.103_515_6e-5 { 0.0 } else { cut }
}

/// What `split_f16.wgsl` computes for one value already scaled: `(hi, lo)` with
/// `v = hi + lo · 2^-11` to ~2^-22 relative.
pub fn split_f16_cpu(v: f32) -> (half::f16, half::f16) {
    let hi = hi_part_cpu(v, false);
    (half::f16::from_f32(hi), half::f16::from_f32((v - hi) * 2048.0))
}

/// The hi part alone where products take f16-rounded inputs (`Kernels::coop_f16`): `v`
/// rounded to the nearest f16, ties away from zero, 0 below f16's smallest normal; past
/// f16's range only cut, as `split_f16_cpu` does.
pub fn round_f16_cpu(v: f32) -> half::f16 {
    half::f16::from_f32(hi_part_cpu(v, true))
}

/// One job of split_f16.wgsl: `rows` rows of `cols` elements of type `ty` in `src` (row `i`
/// at byte `byte0 + i · row_bytes`), scaled by `scale`, into `hi` and `lo`, with zero rows
/// up to `rows_pad`: row-major, or for `tile_rows` > 0 in tiles of that many rows by 32
/// columns, each tile row-major, tiles along the columns, then down.
#[derive(Clone, Copy)]
pub struct SplitJob<'a> {
    pub src: &'a wgpu::Buffer,
    pub ty: GgmlType,
    pub byte0: usize,
    pub row_bytes: usize,
    pub cols: usize,
    pub rows: usize,
    pub rows_pad: usize,
    pub scale: f32,
    pub hi: &'a wgpu::Buffer,
    pub lo: &'a wgpu::Buffer,
    pub tile_rows: usize,
    /// Elements between a row's columns: 1, or more for f32 rows read across a matrix
    /// (the second job only).
    pub col_stride: usize,
    /// Where the split writes the power of two it scales each row by besides `scale`
    /// (`row_scale_cpu`; f32 per row; the second job only). None: `scale` alone.
    pub row_scale: Option<&'a wgpu::Buffer>,
    /// `(half, offset)`: rows interleaved in pairs (the first job only, tiled): output rows
    /// come in blocks of 2 · half, the block's first half rows `pair` and the rest rows
    /// `offset + pair` of src, for its pairs `block · half + i` below `rows` (which then
    /// counts pairs). None: rows in order.
    pub pairs: Option<(usize, usize)>,
}

impl SplitJob<'_> {
    /// 8-element groups the job writes; checks the shape against the output buffers.
    fn groups(&self) -> Result<usize> {
        if !self.cols.is_multiple_of(8) || self.rows > self.rows_pad {
            return Err(Error::Input(format!("split_f16: {} rows of {} columns into {} (columns must be a multiple of 8)", self.rows, self.cols, self.rows_pad)));
        }
        if let Some((half, _)) = self.pairs
            && (self.tile_rows == 0 || half == 0 || self.rows.div_ceil(half) * 2 * half > self.rows_pad)
        {
            return Err(Error::Input(format!("split_f16: {} pairs in blocks of {half} need tiles and {} rows or more", self.rows, self.rows.div_ceil(half.max(1)) * 2 * half)));
        }
        if self.tile_rows > 0 && (!self.cols.is_multiple_of(32) || !self.rows_pad.is_multiple_of(self.tile_rows)) {
            return Err(Error::Input(format!("split_f16: tiles of {} rows need whole tiles and columns a multiple of 32 ({} rows, {} columns)", self.tile_rows, self.rows_pad, self.cols)));
        }
        let total = self.rows_pad * self.cols / 8;
        if (total as u64) * 16 > self.hi.size().min(self.lo.size()) {
            return Err(Error::Input(format!("split_f16: {} rows of {} do not fit the output buffers", self.rows_pad, self.cols)));
        }
        Ok(total)
    }
}

/// Record split_f16.wgsl for `job` and, in the same dispatch, for `x` (f32 rows, at 4-byte
/// offsets and strides, one workgroup a row, each scaled by its own power of two where
/// `x.row_scale` says where to write it) when given.
pub fn split_f16(k: &Kernels, b: &mut Batch, job: &SplitJob, x: Option<&SplitJob>) -> Result<()> {
    split_f16_mapped(k, b, job, x, None)
}

/// x rows of `split_f16_mapped` read through moe_sort.wgsl's map: x row r of the job is
/// padded row poff[e0] + r of `layout` (in the job's row-scale buffer, which must be
/// given), whose pair's source row is pair / `div`; the chunk holds experts e0 .. e1.
/// With `rpe` > 0 the first job's rows are those experts' (rpe rows each), and the rows
/// of experts without pairs are skipped. With `fixed_scale` the x rows keep the job's
/// `scale` alone rather than powers of two of their own (the row-scale buffer then holds
/// only the map): rows gathered for a product's weight side, which takes one scale. A
/// map made once for the longest block serves shorter ones with `pairs` set.
#[derive(Clone, Copy)]
pub struct XMap {
    pub layout: super::moe::SortLayout,
    pub div: usize,
    pub experts: (usize, usize),
    pub rpe: usize,
    pub fixed_scale: bool,
    /// Pairs from this on are padding too, as the map's NONE is (None: no bound).
    pub pairs: Option<usize>,
}

/// `split_f16` with the second job's rows mapped (`map`).
pub fn split_f16_mapped(k: &Kernels, b: &mut Batch, job: &SplitJob, x: Option<&SplitJob>, map: Option<XMap>) -> Result<()> {
    let total = job.groups()?;
    if job.col_stride != 1 || job.row_scale.is_some() {
        return Err(Error::Input("split_f16: the first job reads whole rows, scaled alike".into()));
    }
    if x.is_some_and(|x| x.pairs.is_some()) {
        return Err(Error::Input("split_f16: only the first job takes pairs".into()));
    }
    let x_rows_pad = match x {
        None => 0,
        Some(x) if x.ty != GgmlType::F32 || !x.byte0.is_multiple_of(4) || !x.row_bytes.is_multiple_of(4) => {
            return Err(Error::Input("split_f16: the second job takes f32 rows at 4-byte offsets".into()));
        }
        Some(x) => {
            x.groups()?;
            x.rows_pad
        }
    };
    let (red, tag) = super::reduce(k);
    let f16 = k.coop_f16();
    let header = lo_header(f16);
    let mut parts = vec![header.as_str()];
    parts.extend(super::matmul::quant_parts(job.ty)?);
    parts.extend([red[0], red[1], shaders::SPLIT_F16, shaders::HI_LO]);
    let p = SplitParams {
        cols8: u32_of(job.cols / 8, "split_f16 columns")?,
        rows: u32_of(job.rows, "split_f16 rows")?,
        byte0: u32_of(job.byte0, "split_f16 offset")?,
        row_bytes: u32_of(job.row_bytes, "split_f16 row stride")?,
        total: u32_of(total, "split_f16 size")?,
        groups_x: 0,
        scale: job.scale,
        x_cols8: u32_of(x.map_or(0, |x| x.cols / 8), "split_f16 columns")?,
        x_rows: u32_of(x.map_or(0, |x| x.rows), "split_f16 rows")?,
        x_off: u32_of(x.map_or(0, |x| x.byte0 / 4), "split_f16 offset")?,
        x_stride: u32_of(x.map_or(0, |x| x.row_bytes / 4), "split_f16 row stride")?,
        x_rows_pad: u32_of(x_rows_pad, "split_f16 rows")?,
        x_scale: x.map_or(1.0, |x| x.scale),
        x_row_scale: (x.is_some_and(|x| x.row_scale.is_some()) && !map.is_some_and(|m| m.fixed_scale)) as u32,
        tile_rows: u32_of(job.tile_rows, "split_f16 tile rows")?,
        x_tile_rows: u32_of(x.map_or(0, |x| x.tile_rows), "split_f16 tile rows")?,
        x_col_stride: u32_of(x.map_or(1, |x| x.col_stride), "split_f16 column stride")?,
        pair_half: u32_of(job.pairs.map_or(0, |p| p.0), "split_f16 pairs")?,
        pair_off: u32_of(job.pairs.map_or(0, |p| p.1), "split_f16 pairs")?,
        x_map: map.is_some() as u32,
        x_map_div: u32_of(map.map_or(1, |m| m.div), "split_f16 map")?,
        x_map_off: u32_of(map.map_or(0, |m| m.layout.map_off), "split_f16 map")?,
        x_poff_off: u32_of(map.map_or(0, |m| m.layout.poff_off), "split_f16 map")?,
        x_e0: u32_of(map.map_or(0, |m| m.experts.0), "split_f16 map")?,
        x_e1: u32_of(map.map_or(0, |m| m.experts.1), "split_f16 map")?,
        w_rpe: u32_of(map.map_or(0, |m| m.rpe), "split_f16 map")?,
        x_pairs: pair_bound(map.and_then(|m| m.pairs), "split_f16 pairs")?,
    };
    if let Some(m) = map {
        let xf = x.and_then(|x| x.row_scale);
        let whole = m.rpe == 0 || (job.pairs.is_none() && job.rows == (m.experts.1 - m.experts.0) * m.rpe);
        if xf.is_none() || m.div == 0 || m.experts.0 >= m.experts.1 || m.experts.1 > m.layout.experts || !whole {
            return Err(Error::Input("split_f16: a mapped x job needs its row scales (where the map lies), a divisor and experts of the map".into()));
        }
        check_fits("split_f16 map", &[(xf.unwrap_or(&k.dummy), m.layout.end())])?;
    }
    let groups = total.div_ceil(256) + x_rows_pad;
    if let Some(x) = x {
        check_fits("split_f16 row scales", &[(x.row_scale.unwrap_or(&k.dummy), x.row_scale.map_or(0, |_| x.rows))])?;
    }
    let none;
    let (xs, xh, xl) = match x {
        Some(x) => (x.src, x.hi, x.lo),
        None => {
            // Stand-ins bound where there is no second job.
            none = [k.scratch("split_f16/none_x", 16), k.scratch("split_f16/none_hi", 16), k.scratch("split_f16/none_lo", 16)];
            (&none[0], &none[1], &none[2])
        }
    };
    let xf = x.and_then(|x| x.row_scale).unwrap_or(&k.dummy);
    let name = format!("split_f16/{}{tag}{}", job.ty, if f16 { "/f16" } else { "" });
    let access = [Access::Read, Access::ReadWrite, Access::ReadWrite, Access::Read, Access::ReadWrite, Access::ReadWrite, Access::ReadWrite];
    launch(k, b, &name, &parts, &access, &[job.src, job.hi, job.lo, xs, xh, xl, xf], groups, |gx| SplitParams { groups_x: gx, ..p })
}

/// The x job of `split_f16_mapped` alone (`map` as there), for products that stage their
/// weights from blocks (the experts' with a map).
pub fn split_x(k: &Kernels, b: &mut Batch, x: &SplitJob, map: Option<XMap>) -> Result<()> {
    let [src, hi, lo] = ["split_f16/none_w", "split_f16/none_hi", "split_f16/none_lo"].map(|name| k.scratch(name, 16));
    let none = SplitJob { src: &src, ty: GgmlType::F32, byte0: 0, row_bytes: 0, cols: x.cols, rows: 0, rows_pad: 0, scale: 1.0, hi: &hi, lo: &lo, tile_rows: 0, col_stride: 1, row_scale: None, pairs: None };
    // No weight rows, so none of an expert's.
    split_f16_mapped(k, b, &none, Some(x), map.map(|m| XMap { rpe: 0, ..m }))
}

/// The power of two split_f16.wgsl scales an x row by: 2^(13 - e), e the exponent of its
/// largest magnitude (1 for a row of zeros and subnormals; the exponent clamped to ±100).
pub fn row_scale_cpu(row: impl IntoIterator<Item = f32>) -> f32 {
    let m = row.into_iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let e = ((m.to_bits() >> 23) & 0xFF) as i32 - 127;
    let s = if m < f32::MIN_POSITIVE { 0 } else { (13 - e).clamp(-100, 100) };
    f32::from_bits(((s + 127) as u32) << 23)
}

/// Whether the tensor-core matmul takes a matrix of `cols` columns on `k`.
pub(crate) fn usable(k: &Kernels, cols: usize) -> bool {
    k.use_coop
        && k.gpu.coop
        && cols.is_multiple_of(COLS_MULTIPLE)
        && COOP_SMALL.workgroup_bytes() <= k.gpu.limits.max_compute_workgroup_storage_size as usize
}

/// Whether the product kernel stages weights of type `ty` from their blocks
/// (matmul_coop_w_quant.wgsl, the type's dq16) for a product whose weight row tiles each
/// meet one token tile: an expert's pairs (`rows` None) or a prompt of at most a tile of
/// tokens. Staging from blocks costs the product's steps the dequantization that a split
/// pass spreads over the whole GPU, and saves that pass and its 8 bytes an element of
/// traffic. H100, prefill, split pass against blocks (tok/s or TTFT, two rounds):
/// Gemma 4 26B-A4B 512 tokens 4,961-4,999 against 5,723-5,749 (the K-quants alone
/// 5,567-5,587); E2B 16 / 64 tokens 15.9 / 16.5 ms against 14.2 / 14.7-15.0 ms; the 270M
/// layout 64 tokens 3.3-3.5 against 3.5-3.6 ms with its K-quant down projections (640
/// rows) from blocks, and 3.3 against 3.9-4.1 ms with its Q5_0 / Q8_0 matrices too. So
/// a plain product stages K-quants from blocks from 1024 rows; experts stage every type
/// that has a dq16.
fn stages_blocks(k: &Kernels, ty: GgmlType, rows: Option<usize>) -> bool {
    k.coop_blocks
        && shaders::has_dq16(ty)
        && rows.is_none_or(|r| r >= BLOCKS_MIN_ROWS && matches!(ty, GgmlType::Q4_K | GgmlType::Q6_K))
}

/// Fewest rows of a plain product that `stages_blocks` takes.
const BLOCKS_MIN_ROWS: usize = 1024;

/// The shaders defining `dq16` for weights of type `ty`.
fn quant16_parts(ty: GgmlType) -> Result<Vec<&'static str>> {
    shaders::quant16(ty).ok_or_else(|| Error::UnsupportedType(format!("{ty} (no GPU matmul kernel for this type)")))
}

/// The header constants of the kernels that hold lo parts (matmul_coop.wgsl, split_f16.wgsl
/// and hi_lo.wgsl's hi_part): LO, and LON (1 or 0) to size the lo staging.
fn lo_header(f16: bool) -> String {
    format!("const LO: bool = {};\nconst LON: u32 = {}u;\n", !f16, !f16 as u32)
}

/// The product kernel for `tile`, `geglu` for its GEGLU variant, `grouped` for GROUPED,
/// with the weights staged from blocks of type `blocks` or read split; of f16-rounded
/// inputs where `k` says so (`Kernels::coop_f16`).
fn product_kernel(k: &Kernels, tile: CoopTile, geglu: bool, grouped: bool, blocks: Option<GgmlType>) -> Result<std::sync::Arc<super::kernel::Kernel>> {
    let f16 = k.coop_f16();
    let name = format!("matmul_coop/{}x{}{}{}{}{}", tile.bm, tile.bn, if geglu { "/geglu" } else { "" }, if grouped { "/grouped" } else { "" }, blocks.map_or(String::new(), |ty| format!("/{ty}")), if f16 { "/f16" } else { "" });
    let parts = blocks.map(quant16_parts).transpose()?;
    k.get(&name, || KernelSource {
        name: name.clone(),
        code: tile.source_of(geglu, grouped, parts.as_deref(), f16),
        entry: "main",
        buffers: vec![Access::Read, Access::Read, Access::Read, Access::Read, Access::ReadWrite, Access::ReadWrite, Access::ReadWrite, Access::Read],
    })
}

/// One grouped product (matmul_coop.wgsl's GROUPED, COOP_SMALL tiles): x's `x_rows`
/// padded rows grouped by expert as `map` says (its layout in `info`, each row's scale
/// from word 0; the map x was split through, so its experts and pair count are the
/// product's too), against those experts' `rpe` rows of `cols` columns each; `w_blocks`:
/// where row 0 lies and the row stride, for weights staged from their blocks.
pub(crate) struct Grouped<'a> {
    pub info: &'a wgpu::Buffer,
    pub map: XMap,
    pub rpe: usize,
    pub cols: usize,
    pub x_rows: usize,
    pub w_blocks: (usize, usize),
}

/// A pair count as the kernels take it: u32::MAX, past every pair (and NONE), for none.
fn pair_bound(pairs: Option<usize>, what: &str) -> Result<u32> {
    pairs.map_or(Ok(u32::MAX), |n| u32_of(n, what))
}

/// Record `kernel` (a GROUPED product kernel) for `g`: result (pair, r) goes to
/// `y[y_off + pair · y_stride + r]`.
#[allow(clippy::too_many_arguments)]
fn grouped_dispatch(k: &Kernels, b: &mut Batch, kernel: &std::sync::Arc<super::kernel::Kernel>, (xh, xl): (&wgpu::Buffer, &wgpu::Buffer), (wh, wl): (&wgpu::Buffer, &wgpu::Buffer), g: &Grouped, y: &wgpu::Buffer, (y_off, y_stride): (usize, usize)) -> Result<()> {
    let (bm, bn) = (COOP_SMALL.bm, COOP_SMALL.bn);
    let (grid, groups_x) = grid_1d((g.x_rows / bm) * (g.rpe / bn), k.gpu.limits.max_compute_workgroups_per_dimension);
    let (layout, (e0, e1)) = (g.map.layout, g.map.experts);
    let p = CoopParams {
        e0: e0 as u32,
        e1: e1 as u32,
        rpe: u32_of(g.rpe, "grouped product rows")?,
        map_off: u32_of(layout.map_off, "grouped product map")?,
        poff_off: u32_of(layout.poff_off, "grouped product map")?,
        tile_off: u32_of(layout.tile_off, "grouped product map")?,
        w_byte0: u32_of(g.w_blocks.0, "grouped product weight offset")?,
        w_row_bytes: u32_of(g.w_blocks.1, "grouped product row stride")?,
        pairs: pair_bound(g.map.pairs, "grouped product pairs")?,
        ..CoopParams::new(g.cols, (e1 - e0) * g.rpe, g.x_rows, (y_off, y_stride), g.rpe / bn, groups_x)?
    };
    let (s2, s3) = (k.scratch("matmul_coop/y2", 4), k.scratch("matmul_coop/y3", 4));
    b.dispatch(kernel, &[xh, xl, wh, wl, y, &s2, &s3, g.info], &p, grid)
}

/// `grouped_dispatch` with x and w already split (x through `g`'s map, w in COOP_SMALL's
/// tiles), on f32 operands: attention's products over several KV heads.
pub(crate) fn grouped_split(k: &Kernels, b: &mut Batch, (xh, xl): (&wgpu::Buffer, &wgpu::Buffer), (wh, wl): (&wgpu::Buffer, &wgpu::Buffer), g: &Grouped, y: &wgpu::Buffer, y_at: (usize, usize)) -> Result<()> {
    if !g.x_rows.is_multiple_of(COOP_SMALL.bm) || !g.rpe.is_multiple_of(COOP_SMALL.bn) || !g.cols.is_multiple_of(COLS_MULTIPLE) {
        return Err(Error::Input(format!("grouped product: {} x rows, experts of {} x {} do not fill whole tiles", g.x_rows, g.rpe, g.cols)));
    }
    grouped_dispatch(k, b, &product_kernel(k, COOP_SMALL, false, true, None)?, (xh, xl), (wh, wl), g, y, y_at)
}

/// x of `matmul_coop_f32`: rows of f32 from element `off`, `stride` apart, their columns
/// `col_stride` apart.
#[derive(Clone, Copy)]
pub(crate) struct CoopX<'a> {
    pub buf: &'a wgpu::Buffer,
    pub off: usize,
    pub stride: usize,
    pub col_stride: usize,
}

/// Scratch for x's split parts (hi, lo: `n_pad` rows of `cols` f16) and its rows' scales.
fn x_scratch(k: &Kernels, cols: usize, n_pad: usize) -> (wgpu::Buffer, wgpu::Buffer, wgpu::Buffer) {
    let x_bytes = (n_pad * cols * 2) as u64;
    let (xh, xl) = (k.scratch("matmul_coop/x_hi", x_bytes), k.scratch("matmul_coop/x_lo", x_bytes));
    (xh, xl, k.scratch("matmul_coop/x_scale", (n_pad * 4) as u64))
}

/// `y[y_off + t · y_stride + r · y_row_stride] = Σ_c w[r, c] · x[t, c]` on tensor cores for
/// f32 operands where they lie: w's `rows` rows of `cols` (a multiple of COLS_MULTIPLE)
/// from element `w_off` of `w`, x's `n` rows as `x` says. One weight chunk and no split-K
/// (its sum writes plain rows): the caller keeps each split within a binding.
#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul_coop_f32(k: &Kernels, b: &mut Batch, (w, w_off, rows): (&wgpu::Buffer, usize, usize), cols: usize, x: CoopX, n: usize, y: &wgpu::Buffer, (y_off, y_stride, y_row_stride): (usize, usize, usize)) -> Result<()> {
    let tile = tile_for(k, rows, cols, n, true);
    let (n_pad, rp) = (n.div_ceil(tile.bm) * tile.bm, rows.div_ceil(tile.bn) * tile.bn);
    let x_bytes = (n_pad * cols * 2) as u64;
    let w_bytes = (rp * cols * 2) as u64;
    if w_bytes.max(x_bytes) > k.gpu.max_binding() {
        return Err(Error::Input(format!("matmul_coop_f32: {rows} x {cols} by {n} rows is past one binding")));
    }
    let (xh, xl, xf) = x_scratch(k, cols, n_pad);
    let (wh, wl) = (k.scratch("matmul_coop/w_hi", w_bytes), k.scratch("matmul_coop/w_lo", w_bytes));
    let x_job = SplitJob { src: x.buf, ty: GgmlType::F32, byte0: x.off * 4, row_bytes: x.stride * 4, cols, rows: n, rows_pad: n_pad, scale: 1.0, hi: &xh, lo: &xl, tile_rows: tile.bm, col_stride: x.col_stride, row_scale: Some(&xf), pairs: None };
    let w_job = SplitJob { src: w, ty: GgmlType::F32, byte0: w_off * 4, row_bytes: cols * 4, cols, rows, rows_pad: rp, scale: WS, hi: &wh, lo: &wl, tile_rows: tile.bn, col_stride: 1, row_scale: None, pairs: None };
    split_f16(k, b, &w_job, Some(&x_job))?;
    let tiles = (rp / tile.bn) * (n_pad / tile.bm);
    let (grid, groups_x) = grid_1d(tiles, k.gpu.limits.max_compute_workgroups_per_dimension);
    let p = CoopParams {
        y_row_stride: u32_of(y_row_stride, "matmul output row stride")?,
        ..CoopParams::new(cols, rows, n, (y_off, y_stride), rp / tile.bn, groups_x)?
    };
    let (s2, s3) = (k.scratch("matmul_coop/y2", 4), k.scratch("matmul_coop/y3", 4));
    b.dispatch(&product_kernel(k, tile, false, false, None)?, &[&xh, &xl, &wh, &wl, y, &s2, &s3, &xf], &p, grid)
}

/// `y[t, r] = Σ_c w[first + r, c] · x[t, c]` on tensor cores for the rows `range` =
/// `(first, count)` of `w`'s one tile (y rows of `count`), or all rows of all tiles (`None`,
/// y rows of w.rows), written from `out.y_off`, or routed part by part (`out.route`, whole
/// matrix only); x rows `x_stride` apart from element `x_off`. The caller checked shapes
/// and buffer sizes.
#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul_coop(
    k: &Kernels,
    b: &mut Batch,
    w: &GpuMatrix,
    range: Option<(usize, usize)>,
    x: &wgpu::Buffer,
    x_off: usize,
    x_stride: usize,
    n: usize,
    out: CoopOut,
) -> Result<()> {
    let (y, y_off) = (out.y, out.y_off);
    if (out.route.is_some() || out.geglu) && (range.is_some() || w.tiles().len() != 1) {
        return Err(Error::Input("matmul_coop: a routed or GeGLU matmul takes a whole matrix of one tile".into()));
    }
    if out.geglu && (out.route.is_some() || !w.rows.is_multiple_of(2)) {
        return Err(Error::Input(format!("matmul_coop: GeGLU takes [gate; up] stacked, not {} rows{}", w.rows, if out.route.is_some() { " routed" } else { "" })));
    }
    let tile = tile_for(k, range.map_or(w.rows, |r| r.1), w.cols, n, out.route.is_some());
    let (bm, bn) = (tile.bm, tile.bn);
    let cols = w.cols;
    let n_pad = n.div_ceil(bm) * bm;
    let (xh, xl, xf) = x_scratch(k, cols, n_pad);
    let x_job = SplitJob { src: x, ty: GgmlType::F32, byte0: x_off * 4, row_bytes: x_stride * 4, cols, rows: n, rows_pad: n_pad, scale: 1.0, hi: &xh, lo: &xl, tile_rows: bm, col_stride: 1, row_scale: Some(&xf), pairs: None };
    // x is split by the first weight chunk's dispatch.
    let mut x_pending = Some(x_job);

    // One token tile: the product may stage the weights from their blocks itself
    // (`stages_blocks`), all rows in one chunk, after a split of x alone.
    let blocks = n <= bm && stages_blocks(k, w.ty, Some(range.map_or(w.rows, |r| r.1)));
    if let Some(x_job) = x_pending.take_if(|_| blocks) {
        split_x(k, b, &x_job, None)?;
    }
    // Weight rows in chunks whose split fits one binding.
    let chunk = if blocks { w.rows.div_ceil(bn) * bn } else { (split_cap(k) / (cols * 2)) / bn * bn };
    if chunk == 0 {
        return Err(Error::Input(format!("matmul: rows of {cols} columns are too long for the tensor-core kernel")));
    }
    let (kernel, half) = (product_kernel(k, tile, out.geglu, false, blocks.then_some(w.ty))?, tile.pair_half());
    // GeGLU counts pairs (gate row i and up row F + i) where others count rows: each takes
    // two rows of the split and gives one result.
    let (per, width) = if out.geglu { (2, w.rows / 2) } else { (1, 0) };
    let row_bytes = w.row_bytes();
    // Routing: y rows hold part a; stand-ins for y2 and y3 where no row reaches them.
    let (s2, s3) = (k.scratch("matmul_coop/y2", 4), k.scratch("matmul_coop/y3", 4));
    let (y_stride, y2, y3) = match out.route {
        Some(r) => (r.split_a, r.y2, r.y3.unwrap_or((&s3, 0))),
        None => (range.map_or(w.rows, |r| r.1), (&s2, 0), (&s3, 0)),
    };
    let (route_a, route_b) = out.route.map_or((u32::MAX, u32::MAX), |r| (r.split_a as u32, r.split_b as u32));
    for tile in w.tiles() {
        // Rows of this tile to compute: `first` in the tile's buffer, `count` of them, the
        // first landing at y column `out0`.
        let (first, count, out0) = match range {
            Some((f, c)) => (f, c, 0),
            None => (0, tile.rows / per, tile.row0),
        };
        let mut c0 = 0;
        while c0 < count {
            let rc = (chunk / per).min(count - c0);
            let rp = if out.geglu { rc.div_ceil(half) * 2 * half } else { rc }.div_ceil(bn) * bn;
            let (wh, wl) = if blocks {
                (tile.buffer.clone(), k.dummy.clone())
            } else {
                let w_bytes = (rp * cols * 2) as u64;
                let (wh, wl) = (k.scratch("matmul_coop/w_hi", w_bytes), k.scratch("matmul_coop/w_lo", w_bytes));
                let w_job = SplitJob { src: &tile.buffer, ty: w.ty, byte0: (first + c0) * row_bytes, row_bytes, cols, rows: rc, rows_pad: rp, scale: WS, hi: &wh, lo: &wl, tile_rows: bn, col_stride: 1, row_scale: None, pairs: out.geglu.then_some((half, width)) };
                split_f16(k, b, &w_job, x_pending.take().as_ref())?;
                (wh, wl)
            };
            let tiles = (rp / bn) * (n_pad / bm);
            let (mut splits, mut split_cols) = split_k_plan(tiles, cols, split_target(k.coop_f16()));
            // Partials must fit one binding; split_k_sum does not route, and GeGLU needs
            // whole sums.
            if (splits * n * rc * 4) as u64 > k.gpu.max_binding() || out.route.is_some() || out.geglu {
                (splits, split_cols) = (1, cols);
            }
            let (grid, groups_x) = grid_1d(tiles * splits, k.gpu.limits.max_compute_workgroups_per_dimension);
            let mut p = CoopParams {
                row0: u32_of(out0 + c0, "matmul output row")?,
                splits: splits as u32,
                split_cols: split_cols as u32,
                route_a,
                route_b,
                route_end: w.rows as u32,
                y2_off: u32_of(y2.1, "matmul output offset")?,
                y3_off: u32_of(y3.1, "matmul output offset")?,
                w_byte0: u32_of((first + c0) * row_bytes, "matmul weight offset")?,
                w_row_bytes: u32_of(row_bytes, "matmul row stride")?,
                w_pair_half: if out.geglu { half as u32 } else { 0 },
                w_pair_off: width as u32,
                ..CoopParams::new(cols, rc, n, (y_off, y_stride), rp / bn, groups_x)?
            };
            if splits == 1 {
                b.dispatch(&kernel, &[&xh, &xl, &wh, &wl, y, y2.0, y3.0, &xf], &p, grid)?;
            } else {
                // Partials [split][token][row] in scratch, then their sum into y.
                let part = k.scratch("matmul_coop/partials", (splits * n * rc * 4) as u64);
                (p.y_off, p.y_stride, p.row0, p.split_stride) = (0, rc as u32, 0, (n * rc) as u32);
                b.dispatch(&kernel, &[&xh, &xl, &wh, &wl, &part, y2.0, y3.0, &xf], &p, grid)?;
                split_k_sum(k, b, &part, (splits, n, rc), y, (y_off, y_stride, out0 + c0))?;
            }
            c0 += rc;
        }
    }
    Ok(())
}

/// Whether `matmul_experts_coop` takes experts of `rpe` rows of `w` over `n` tokens of
/// `top_k` pairs on `k`: tensor cores, whole row tiles per expert, no more experts than
/// moe_sort holds, and one expert's splits within the scratch.
pub(crate) fn experts_usable(k: &Kernels, w: &GpuMatrix, rpe: usize, n: usize, top_k: usize) -> bool {
    usable(k, w.cols) && rpe.is_multiple_of(COOP_SMALL.bn) && w.rows / rpe <= super::moe::MAX_EXPERTS && expert_chunk(k, w, rpe, (n, top_k)) > 0
}

/// The most experts one product takes: their pairs' x split (hi or lo), as their padded
/// rows would fill it at most, and where the weights are split too their split, must
/// each fit one scratch part.
fn expert_chunk(k: &Kernels, w: &GpuMatrix, rpe: usize, (n, top_k): (usize, usize)) -> usize {
    let (cols, cap, blocks) = (w.cols, split_cap(k), stages_blocks(k, w.ty, None));
    let fits = |c: usize| super::moe::padded_rows((n * top_k).min(c * n), c, COOP_SMALL.bm) * cols * 2 <= cap && (blocks || c * rpe * cols * 2 <= cap);
    (1..=w.rows / rpe).rev().find(|&c| fits(c)).unwrap_or(0)
}

/// Bytes of one split part (hi or lo) a weight chunk may take: SPLIT_MAX_BYTES within one
/// binding, rounded down to a power of two, as scratch buffers are sized up to one.
fn split_cap(k: &Kernels) -> usize {
    (1u64 << (63 - k.gpu.max_binding().min(SPLIT_MAX_BYTES).leading_zeros())) as usize
}

/// The experts' products for many tokens on tensor cores (ggml's mul_mat_id): for each of
/// the `n · top_k` pairs, `y[y_off + pair · rpe + r] = Σ_c w[ids[pair] · rpe + r, c] ·
/// x[row, c]`, x rows `x_stride` apart from element `x_off`, one per token (row = pair /
/// top_k) or one per pair (`x_per_slot`). moe_sort groups the pairs by expert into runs of
/// whole tiles, so each expert's row tile meets its pairs in one or a few token tiles
/// instead of being read once per pair. Where the type allows (`stages_blocks`) the
/// product splits the experts' weights into f16 parts itself as it stages them (an
/// expert's row tile mostly meets one token tile), else one split pass per chunk splits
/// the experts that pairs pick. Experts go in chunks whose splits fit the scratch
/// (`expert_chunk`); each chunk's x rows are split through the sort's map, then one
/// product covers the chunk. The caller checked `experts_usable` and the shapes.
#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul_experts_coop(
    k: &Kernels,
    b: &mut Batch,
    w: &GpuMatrix,
    rpe: usize,
    ids: &wgpu::Buffer,
    top_k: usize,
    (x, x_off, x_stride, x_per_slot): (&wgpu::Buffer, usize, usize, bool),
    n: usize,
    y: &wgpu::Buffer,
    y_off: usize,
) -> Result<()> {
    // 64 x 64 tiles: at 512 tokens (~32 pairs an expert) half of each expert's token tile
    // is padding, yet 32-token tiles measured slower (H100, Gemma 4 26B-A4B layout,
    // prefill 512, two rounds: 4,775 / 4,813 tok/s against 3,936 / 3,938 for 32 x 128
    // and 4,113 / 4,117 for 32 x 64): each weight tile then meets half the tokens.
    let tile = COOP_SMALL;
    let (bm, bn, cols) = (tile.bm, tile.bn, w.cols);
    let (experts, pairs) = (w.rows / rpe, n * top_k);
    let chunk = expert_chunk(k, w, rpe, (n, top_k));
    if chunk == 0 {
        return Err(Error::Input(format!("matmul_experts: the splits of {n} tokens' pairs and an expert of {rpe} x {cols} do not fit the scratch")));
    }
    // A chunk of c experts holds at most min(pairs, c · n) pairs.
    let chunk_rows = |c: usize| super::moe::padded_rows(pairs.min(c * n), c, bm);
    let x_rows = chunk_rows(chunk);
    // Row scales first (x_rows words), then the sort's words.
    let layout = super::moe::SortLayout::new(x_rows, pairs, experts, bm);
    let info = k.scratch("matmul_coop/experts_info", (layout.end() * 4) as u64);
    super::moe::moe_sort(k, b, ids, pairs, &info, layout)?;
    let x_bytes = (x_rows * cols * 2) as u64;
    let (xh, xl) = (k.scratch("matmul_coop/x_hi", x_bytes), k.scratch("matmul_coop/x_lo", x_bytes));
    let blocks = stages_blocks(k, w.ty, None);
    let kernel = product_kernel(k, tile, false, true, blocks.then_some(w.ty))?;
    let row_bytes = w.row_bytes();
    for t in w.tiles() {
        let (first, count) = (t.row0 / rpe, t.rows / rpe);
        let mut e = first;
        while e < first + count {
            let c = chunk.min(first + count - e);
            let xr = chunk_rows(c);
            let x_job = SplitJob { src: x, ty: GgmlType::F32, byte0: x_off * 4, row_bytes: x_stride * 4, cols, rows: xr, rows_pad: xr, scale: 1.0, hi: &xh, lo: &xl, tile_rows: bm, col_stride: 1, row_scale: Some(&info), pairs: None };
            let map = XMap { layout, div: if x_per_slot { 1 } else { top_k }, experts: (e, e + c), rpe, fixed_scale: false, pairs: None };
            let (wh, wl) = if blocks {
                split_x(k, b, &x_job, Some(map))?;
                (t.buffer.clone(), k.dummy.clone())
            } else {
                let w_bytes = (c * rpe * cols * 2) as u64;
                let (wh, wl) = (k.scratch("matmul_coop/w_hi", w_bytes), k.scratch("matmul_coop/w_lo", w_bytes));
                let w_job = SplitJob { src: &t.buffer, ty: w.ty, byte0: (e - first) * rpe * row_bytes, row_bytes, cols, rows: c * rpe, rows_pad: c * rpe, scale: WS, hi: &wh, lo: &wl, tile_rows: bn, col_stride: 1, row_scale: None, pairs: None };
                split_f16_mapped(k, b, &w_job, Some(&x_job), Some(map))?;
                (wh, wl)
            };
            let g = Grouped { info: &info, map, rpe, cols, x_rows: xr, w_blocks: ((e - first) * rpe * row_bytes, row_bytes) };
            grouped_dispatch(k, b, &kernel, (&xh, &xl), (&wh, &wl), &g, y, (y_off, rpe))?;
            e += c;
        }
    }
    Ok(())
}
