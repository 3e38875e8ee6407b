//! Prefill attention as two tensor-core products around a softmax. Query rows are
//! (token, head) pairs, so with a single KV head (all query heads share it: Gemma 4 E2B,
//! Gemma 3 270M) the scores for a block of tokens are one matrix product, S = Q·Kᵀ over
//! the block's key range, then `attention_softmax.wgsl` turns each row into weights
//! (masking keys the query does not see), then O = P·V is a second product. With several
//! KV heads (Gemma 4 26B-A4B, most Gemma 3 sizes) each product is one grouped dispatch
//! (`matmul_coop`'s GROUPED, the KV heads as its experts): the query rows are gathered by
//! their KV head into runs of whole tiles through a map made on the host, each KV head's
//! K rows (gathered likewise) and Vᵀ rows are that expert's weights, and results go back
//! to the rows' own places. Both products are `matmul_coop`'s (three f16 products per
//! f32-accurate result), so this keeps the f32 path's accuracy. The masked part of a
//! block's key range is computed and thrown away, which costs less than the SIMT kernel's
//! (`attention_tiled.wgsl`) whole work: skipping the tiles the mask empties measured no
//! faster on an H100 (E2B prefill at 512, 2048 and 4096 tokens within noise), as the
//! blocks already follow the causal boundary. Blocks of tokens are sized so S fits one
//! binding and a bounded scratch. CPU twins:
//! `attention_softmax_cpu`, and `cpu::ops::attention` for the whole (tests/gpu_ops.rs).

use bytemuck::{Pod, Zeroable};

use super::attention::KvCaches;
use super::kernel::{Access, Batch, Kernels};
use super::matmul_coop::{COLS_MULTIPLE, COOP_SMALL, CoopX, Grouped, SplitJob, WS, XMap, grouped_split, matmul_coop_f32, split_x};
use super::moe::SortLayout;
use crate::gguf::GgmlType;
use super::{compose, grid_1d, shaders, u32_of};
use crate::Result;
use crate::cpu::ops::{AttnShape, first_key};

/// Fewest tokens worth the three dispatches more than the tiled kernel's two. H100, prefill
/// tok/s, this path against the tiled kernel (E2B / 270M layouts): 128 tokens 5,669 /
/// 32,852 against 5,719 / 34,466; 256: 9,142 / 60,674 against 8,695 / 60,156; 512: ~11.0k
/// / ~91k against ~10.3k / ~83k.
pub const MIN_TOKENS: usize = 256;
/// Largest score block (bytes) by default: bounds the scratch and keeps blocks in one
/// binding.
pub const MAX_SCORE_BYTES: u64 = 64 << 20;
/// Most blocks one call takes (five dispatches each, seven with several KV heads, within
/// a layer's share of a batch: `GpuModel::max_dispatches`); longer key ranges go to the
/// tiled kernel. A 1024-token prefill chunk of eight heads stays within it up to ~8k
/// positions on a global layer (sliding layers see a window plus the chunk: one block).
const MAX_BLOCKS: usize = 4;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct SoftmaxParams {
    rows: u32,
    nk: u32,
    heads: u32,
    pos0: u32,
    k_lo: u32,
    window: u32,
    scale: f32,
    groups_x: u32,
}

/// One prefill attention call: its shapes, where q and the output start (elements), and
/// the largest score block in bytes (MAX_SCORE_BYTES; tests force several blocks).
#[derive(Clone, Copy, Debug)]
pub struct CoopAttention {
    pub shape: AttnShape,
    pub q_off: usize,
    pub out_off: usize,
    pub max_score_bytes: u64,
}

impl CoopAttention {
    /// The key range `(k_lo, nk)` tokens `t0..t1` see, nk a multiple of COLS_MULTIPLE,
    /// moved down where it would end past the cache's `capacity` positions (the keys
    /// added in front are masked); None where the cache is too short for that.
    fn keys(&self, t0: usize, t1: usize, capacity: usize) -> Option<(usize, usize)> {
        let lo = first_key(self.shape.pos0 + t0, self.shape.window);
        let nk = (self.shape.pos0 + t1 - lo).next_multiple_of(self.key_multiple());
        if nk > capacity {
            return None;
        }
        Some((lo.min(capacity - nk), nk))
    }

    /// What a block's key count is rounded up to: the product's column step, and with
    /// several KV heads a whole row tile of an expert's keys.
    fn key_multiple(&self) -> usize {
        if self.shape.kv_heads == 1 { COLS_MULTIPLE } else { COOP_SMALL.bn }
    }

    /// Tokens per block: the most (halving from all) whose largest score block fits `limit`
    /// bytes.
    fn block_tokens(&self, limit: u64) -> usize {
        let mut c = self.shape.n_tokens;
        while c > 1 {
            let keys = if self.shape.window > 0 { self.shape.window + c } else { self.shape.pos0 + self.shape.n_tokens };
            let nk = keys.next_multiple_of(self.key_multiple());
            if ((c * self.shape.n_heads * nk * 4) as u64) <= limit {
                break;
            }
            c = c.div_ceil(2);
        }
        c
    }

    /// The blocks `(t0, t1, k_lo, nk)`: tokens t0..t1 against keys k_lo..k_lo + nk, each
    /// block's scores within `limit` bytes and its keys within the cache's `capacity`
    /// positions; None where that takes more than MAX_BLOCKS blocks or the cache is too
    /// short for a padded key range.
    fn blocks(&self, limit: u64, capacity: usize) -> Option<Vec<(usize, usize, usize, usize)>> {
        let (n, c) = (self.shape.n_tokens, self.block_tokens(limit));
        let blocks: Option<Vec<_>> = (0..n).step_by(c).map(|t0| (t0, (t0 + c).min(n))).map(|(t0, t1)| self.keys(t0, t1, capacity).map(|(lo, nk)| (t0, t1, lo, nk))).collect();
        blocks.filter(|b| b.len() <= MAX_BLOCKS)
    }
}

/// Whether `attention` can take this call on `k`: an f32 cache, the tensor-core product
/// taking rows of head_dim (on, present, a multiple of its column step), and with several
/// KV heads value rows of whole row tiles. (The caller also wants MIN_TOKENS tokens.)
pub fn usable(k: &Kernels, a: &CoopAttention, kv: &KvCaches) -> bool {
    let (kvh, vhd) = (a.shape.kv_heads, a.shape.v_head_dim);
    let heads = kvh > 0 && a.shape.n_heads.is_multiple_of(kvh) && (kvh == 1 || vhd.is_multiple_of(COOP_SMALL.bn));
    k.coop_attention && !kv.f16 && heads && super::matmul_coop::usable(k, a.shape.head_dim)
}

/// Attention of `q` over `kv` into `out`, as `attention::attention_split` computes it (the
/// caller checked shapes and buffer sizes and `usable`). Returns false, having recorded
/// nothing, where the cache is too short for a block's padded key range or the keys need
/// more than MAX_BLOCKS blocks.
pub fn attention(k: &Kernels, b: &mut Batch, a: &CoopAttention, q: &wgpu::Buffer, kv: KvCaches, out: &wgpu::Buffer) -> Result<bool> {
    let (nh, hd, vhd, kvh) = (a.shape.n_heads, a.shape.head_dim, a.shape.v_head_dim, a.shape.kv_heads);
    let capacity = (kv.k.size() as usize / 4 / (kvh * hd)).min(kv.v.size() as usize / 4 / (kvh * vhd));
    let Some(blocks) = a.blocks(a.max_score_bytes.min(k.gpu.max_binding()), capacity) else {
        return Ok(false);
    };
    if kvh > 1 {
        for block in blocks {
            grouped_block(k, b, a, q, kv, out, block)?;
        }
        return Ok(true);
    }
    for (t0, t1, k_lo, nk) in blocks {
        let rows = (t1 - t0) * nh;
        let s = k.scratch("attention_coop/scores", (rows * nk * 4) as u64);
        // S[row, j] = q_row · K[k_lo + j]
        let x = CoopX { buf: q, off: a.q_off + t0 * nh * hd, stride: hd, col_stride: 1 };
        matmul_coop_f32(k, b, (kv.k, k_lo * hd, nk), hd, x, rows, &s, (0, nk, 1))?;
        let sr = ScoreRows { rows, nk, heads: nh, pos0: a.shape.pos0 + t0, k_lo, window: a.shape.window, scale: a.shape.scale };
        softmax(k, b, &s, &sr)?;
        // O[row, d] = Σ_j P[row, j] · V[k_lo + j, d]: Vᵀ read across the cache as x (its
        // rows are the output's columns), so y is written transposed.
        let v = CoopX { buf: kv.v, off: k_lo * vhd, stride: 1, col_stride: vhd };
        matmul_coop_f32(k, b, (&s, 0, rows), nk, v, vhd, out, (a.out_off + t0 * nh * vhd, 1, vhd))?;
    }
    Ok(true)
}

/// One block with several KV heads: tokens t0..t1 against keys k_lo .. k_lo + nk, seven
/// dispatches whatever the head count (four splits, two grouped products, the softmax).
fn grouped_block(k: &Kernels, b: &mut Batch, a: &CoopAttention, q: &wgpu::Buffer, kv: KvCaches, out: &wgpu::Buffer, (t0, t1, k_lo, nk): (usize, usize, usize, usize)) -> Result<()> {
    let (nh, hd, vhd, kvh) = (a.shape.n_heads, a.shape.head_dim, a.shape.v_head_dim, a.shape.kv_heads);
    let (tokens, bm, bn) = (t1 - t0, COOP_SMALL.bm, COOP_SMALL.bn);
    let pairs = tokens * nh;
    let heads = HeadRuns::new(tokens, nh, kvh, bm);
    let x_rows = heads.rows();
    // Query rows (and after the softmax, score rows) by KV head; each head's keys. The
    // maps depend on the runs' length, not the block's tokens (rows past them are cut by
    // the pair count), so few are made.
    let info = k.table(&format!("attention_coop/heads/{}/{nh}/{kvh}", heads.run), || heads.words());
    let keys = KeyRuns { nk, kvh, bm };
    let key_info = k.table(&format!("attention_coop/keys/{nk}/{kvh}"), || keys.words());
    let q_map = XMap { layout: heads.layout(), div: 1, experts: (0, kvh), rpe: 0, fixed_scale: false, pairs: Some(pairs) };
    let x_bytes = (x_rows * hd.max(nk) * 2) as u64;
    let (xh, xl) = (k.scratch("matmul_coop/x_hi", x_bytes), k.scratch("matmul_coop/x_lo", x_bytes));
    let w_bytes = (kvh * (nk * hd).max(vhd * nk) * 2) as u64;
    let (wh, wl) = (k.scratch("matmul_coop/w_hi", w_bytes), k.scratch("matmul_coop/w_lo", w_bytes));
    // S[(t, head), j] = q · K[k_lo + j] of the head's KV head.
    let q_job = SplitJob { src: q, ty: GgmlType::F32, byte0: (a.q_off + t0 * nh * hd) * 4, row_bytes: hd * 4, cols: hd, rows: pairs, rows_pad: x_rows, scale: 1.0, hi: &xh, lo: &xl, tile_rows: bm, col_stride: 1, row_scale: Some(&info), pairs: None };
    split_x(k, b, &q_job, Some(q_map))?;
    let k_job = SplitJob { src: kv.k, byte0: k_lo * kvh * hd * 4, rows: kvh * nk, rows_pad: kvh * nk, scale: WS, hi: &wh, lo: &wl, tile_rows: bn, row_scale: Some(&key_info), ..q_job };
    split_x(k, b, &k_job, Some(XMap { layout: keys.layout(), div: 1, experts: (0, kvh), rpe: 0, fixed_scale: true, pairs: None }))?;
    let s = k.scratch("attention_coop/scores", (pairs * nk * 4) as u64);
    let product = |rpe, cols| Grouped { info: &info, map: q_map, rpe, cols, x_rows, w_blocks: (0, 0) };
    grouped_split(k, b, (&xh, &xl), (&wh, &wl), &product(nk, hd), &s, (0, nk))?;
    let sr = ScoreRows { rows: pairs, nk, heads: nh, pos0: a.shape.pos0 + t0, k_lo, window: a.shape.window, scale: a.shape.scale };
    softmax(k, b, &s, &sr)?;
    // O[(t, head), d] = Σ_j P[(t, head), j] · V[k_lo + j, d] of the head's KV head: Vᵀ read
    // across the cache, KV head h's rows from h · vhd.
    let p_job = SplitJob { src: &s, byte0: 0, row_bytes: nk * 4, cols: nk, ..q_job };
    split_x(k, b, &p_job, Some(q_map))?;
    let v_job = SplitJob { src: kv.v, byte0: k_lo * kvh * vhd * 4, row_bytes: 4, cols: nk, rows: kvh * vhd, rows_pad: kvh * vhd, scale: WS, hi: &wh, lo: &wl, tile_rows: bn, col_stride: kvh * vhd, row_scale: None, ..q_job };
    split_x(k, b, &v_job, None)?;
    grouped_split(k, b, (&xh, &xl), (&wh, &wl), &product(vhd, nk), out, (a.out_off + t0 * nh * vhd, vhd))
}

/// The query rows of a block with several KV heads, gathered by KV head: head group h's
/// rows (token t, its i-th head: q row t · heads + h · g + i) from padded row h · run, in
/// runs of whole `bm`-row tiles, as `moe_sort` lays out an expert's pairs. The map holds
/// as many tokens as a run does; a block of fewer cuts the rest off by its pair count.
struct HeadRuns {
    run: usize,
    heads: usize,
    kvh: usize,
    bm: usize,
}

impl HeadRuns {
    fn new(tokens: usize, heads: usize, kvh: usize, bm: usize) -> HeadRuns {
        HeadRuns { run: (tokens * heads / kvh).next_multiple_of(bm), heads, kvh, bm }
    }

    fn rows(&self) -> usize {
        self.kvh * self.run
    }

    /// Row scales (one word a padded row) first, then the map.
    fn layout(&self) -> SortLayout {
        SortLayout::new(self.rows(), self.rows(), self.kvh, self.bm)
    }

    /// The info buffer's words (`moe_sort`'s layout after the row scales' room).
    fn words(&self) -> Vec<f32> {
        let g = self.heads / self.kvh;
        run_words(self.layout(), self.kvh, self.run, |h, i| (i / g) * self.heads + h * g + i % g)
    }
}

/// Each KV head's `nk` key rows (cache row (k_lo + j) · kvh + h, from the block's first key
/// row) as an expert's run of whole tiles, for a split that gathers them (no row scales).
struct KeyRuns {
    nk: usize,
    kvh: usize,
    bm: usize,
}

impl KeyRuns {
    fn layout(&self) -> SortLayout {
        SortLayout::new(0, self.kvh * self.nk, self.kvh, self.bm)
    }

    fn words(&self) -> Vec<f32> {
        run_words(self.layout(), self.kvh, self.nk, |h, j| j * self.kvh + h)
    }
}

/// `layout`'s words for `experts` runs of `run` padded rows each (a multiple of the tile),
/// row i of expert e holding `pair(e, i)` and rows past the runs none; words before the
/// map are left zero (row scales).
fn run_words(layout: SortLayout, experts: usize, run: usize, pair: impl Fn(usize, usize) -> usize) -> Vec<f32> {
    let none = f32::from_bits(u32::MAX);
    let word = |v: usize| f32::from_bits(v as u32);
    let mut w = vec![0.0f32; layout.end()];
    for r in 0..layout.rows {
        let (e, i) = (r / run, r % run);
        w[layout.map_off + r] = if e < experts { word(pair(e, i)) } else { none };
    }
    for e in 0..=experts {
        w[layout.poff_off + e] = word(e * run);
    }
    for t in 0..layout.rows / layout.bm {
        w[layout.tile_off + t] = word((t * layout.bm / run).min(experts - 1));
    }
    w
}

/// Rows of scores for attention_softmax.wgsl: `rows` rows of `nk` keys from position
/// `k_lo`, row r being token r / `heads` at position `pos0 + r / heads`.
#[derive(Clone, Copy, Debug)]
pub struct ScoreRows {
    pub rows: usize,
    pub nk: usize,
    pub heads: usize,
    pub pos0: usize,
    pub k_lo: usize,
    pub window: usize,
    pub scale: f32,
}

/// Record attention_softmax.wgsl over `s` (from element 0).
pub fn softmax(k: &Kernels, b: &mut Batch, s: &wgpu::Buffer, r: &ScoreRows) -> Result<()> {
    super::check_fits("attention_softmax", &[(s, r.rows * r.nk)])?;
    let (red, tag) = super::reduce(k);
    let name = format!("attention_softmax{tag}");
    let kernel = k.get(&name, || super::kernel::KernelSource {
        name: name.clone(),
        code: compose(&[shaders::ATTENTION_SOFTMAX, red[0], red[1]]),
        entry: "main",
        buffers: vec![Access::ReadWrite],
    })?;
    let (grid, groups_x) = grid_1d(r.rows, k.gpu.limits.max_compute_workgroups_per_dimension);
    let p = SoftmaxParams {
        rows: u32_of(r.rows, "attention rows")?,
        nk: u32_of(r.nk, "attention keys")?,
        heads: u32_of(r.heads, "attention heads")?,
        pos0: u32_of(r.pos0, "attention position")?,
        k_lo: u32_of(r.k_lo, "attention key")?,
        window: u32_of(r.window, "attention window")?,
        scale: r.scale,
        groups_x,
    };
    b.dispatch(&kernel, &[s], &p, grid)
}

/// What attention_softmax.wgsl makes of the scores `s` (`r.rows` rows).
pub fn attention_softmax_cpu(s: &mut [f32], r: &ScoreRows) {
    for (i, row) in s.chunks_exact_mut(r.nk).take(r.rows).enumerate() {
        let pos = r.pos0 + i / r.heads;
        let first = first_key(pos, r.window);
        let seen = |j: usize| (first..=pos).contains(&(r.k_lo + j));
        let m = (0..r.nk).filter(|&j| seen(j)).map(|j| row[j] * r.scale).fold(f32::NEG_INFINITY, f32::max);
        for (j, v) in row.iter_mut().enumerate() {
            *v = if seen(j) { (*v * r.scale - m).exp() } else { 0.0 };
        }
        let l: f32 = row.iter().sum();
        row.iter_mut().for_each(|v| *v /= l);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The block plan over prompts, windows, histories, caches and score limits: blocks
    /// cover the tokens in order, each within the limit and the cache, with a whole number
    /// of 32-key steps holding every key each of its queries sees; refused only where
    /// MAX_BLOCKS blocks or the cache cannot hold that.
    #[test]
    fn blocks_hold_every_key_their_queries_see() {
        let (mut planned, mut refused) = (0, 0);
        for n in [1, 31, 256, 300, 1024] {
            for window in [0, 16, 512] {
                for pos0 in [0, 7, 3000] {
                    for (heads, limit) in [(8, 64u64 << 20), (4, 1 << 18), (8, 1 << 16)] {
                        for extra in [0, 31, 5000] {
                            let shape = AttnShape { n_tokens: n, n_heads: heads, head_dim: 256, kv_heads: 1, v_head_dim: 256, pos0, window, scale: 1.0 };
                            let a = CoopAttention { shape, q_off: 0, out_off: 0, max_score_bytes: limit };
                            let capacity = pos0 + n + extra;
                            let Some(blocks) = a.blocks(limit, capacity) else {
                                // Refused: too many blocks, or a padded range past the cache.
                                let c = a.block_tokens(limit);
                                let too_many = n.div_ceil(c) > MAX_BLOCKS;
                                let short = (0..n).step_by(c).any(|t0| a.keys(t0, (t0 + c).min(n), capacity).is_none());
                                assert!(too_many || short, "{shape:?} capacity {capacity} limit {limit}: refused");
                                refused += 1;
                                continue;
                            };
                            planned += 1;
                            assert!(blocks.len() <= MAX_BLOCKS);
                            let mut next = 0;
                            for (t0, t1, lo, nk) in blocks {
                                let what = format!("{shape:?} capacity {capacity} limit {limit}: block {t0}..{t1} keys {lo}+{nk}");
                                assert!(t0 == next && t1 > t0, "{what}: blocks in order");
                                next = t1;
                                assert!(nk.is_multiple_of(COLS_MULTIPLE) && lo + nk <= capacity, "{what}");
                                assert!(((t1 - t0) * heads * nk * 4) as u64 <= limit || t1 - t0 == 1, "{what}: over the limit");
                                for t in t0..t1 {
                                    let pos = pos0 + t;
                                    assert!(first_key(pos, window) >= lo && pos < lo + nk, "{what}: token {t}");
                                }
                            }
                            assert_eq!(next, n, "{shape:?}: every token");
                        }
                    }
                }
            }
        }
        // Both branches run (196 and 209 of the 405 cases).
        assert!(planned > 150 && refused > 150, "planned {planned}, refused {refused}");
    }

    /// The grouped products' maps: every (token, head) row of the block once, in its KV
    /// head's run of whole tiles, in order within the run, and the run's padding rows past
    /// the block's pair count; each KV head's key rows likewise; the runs' first rows and
    /// each tile's KV head as moe_sort would write them.
    #[test]
    fn head_and_key_runs_cover_every_row_once() {
        let word = |w: &[f32], i: usize| w[i].to_bits();
        for (tokens, heads, kvh) in [(75, 8, 4), (100, 8, 2), (130, 4, 4), (1, 16, 8), (64, 2, 2)] {
            let runs = HeadRuns::new(tokens, heads, kvh, 64);
            let (l, run, g) = (runs.layout(), runs.run, heads / kvh);
            let w = runs.words();
            assert_eq!(w.len(), l.end());
            assert!(runs.rows() <= l.rows && run.is_multiple_of(64) && run >= tokens * g && run < tokens * g + 64);
            let mut seen = vec![false; tokens * heads];
            let mut last = None;
            for r in 0..l.rows {
                let p = word(&w, l.map_off + r);
                if p == u32::MAX {
                    assert!(r >= runs.rows(), "row {r} inside the runs has no pair");
                    continue;
                }
                let p = p as usize;
                // Rows past the block's tokens hold pairs past its count (cut off there).
                if r % run >= tokens * g {
                    assert!(p >= tokens * heads, "padding row {r} holds pair {p}");
                    continue;
                }
                assert!(!seen[p], "pair {p} twice");
                seen[p] = true;
                let (t, head) = (p / heads, p % heads);
                assert_eq!(r / run, head / g, "pair {p} outside its KV head's run");
                assert_eq!(r % run, t * g + head % g, "pair {p} out of order");
                assert!(last.is_none_or(|q| q < r));
                last = Some(r);
            }
            assert!(seen.iter().all(|&s| s), "a pair is missing");
            for h in 0..=kvh {
                assert_eq!(word(&w, l.poff_off + h) as usize, h * run);
            }
            for t in 0..runs.rows() / 64 {
                assert_eq!(word(&w, l.tile_off + t) as usize, t * 64 / run);
            }
            let keys = KeyRuns { nk: 128, kvh, bm: 64 };
            let (kl, kw) = (keys.layout(), keys.words());
            for h in 0..kvh {
                for j in 0..128 {
                    assert_eq!(word(&kw, kl.map_off + h * 128 + j) as usize, j * kvh + h);
                }
            }
            assert_eq!(word(&kw, kl.poff_off + kvh) as usize, kvh * 128);
        }
    }
}
