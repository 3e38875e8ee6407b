// Rows of a matrix (a weight type's blocks through its dq4, or f32 activations through
// f32.wgsl's) as f16 hi and lo parts for matmul_coop.wgsl: v · scale = hi + lo · 2^-11,
// both packed two per u32, `cols` (a multiple of 8) per row. Each invocation splits 8
// consecutive elements and stores 16 bytes of each part. Rows from `rows` up to the grid's
// end are written as zeros, so the product kernel reads whole tiles without checks.
// Rows are laid out row-major, or with `tile_rows` (`x_tile_rows`) set as the product
// kernel stages them: the tile_rows x 32 elements of one row tile and 32-column step
// contiguous (row-major within), steps in turn, then row tiles. A workgroup's step is
// then one contiguous read instead of tile_rows 64-byte pieces a row apart (H100: E2B
// prefill +2% for the weights, +2.7% more for x).
// A second job may ride along: rows of f32 activations (x of the same matmul; columns
// `x_col_stride` apart, so a matrix can be read transposed) split the same way into their
// own buffers, one workgroup a row before the first job's, so a tensor-core matmul needs
// one split dispatch rather than two (each dependent dispatch costs a few µs of barrier
// and launch; a dispatch of its own for the row scales below cost E2B / 270M prefill 6%
// / 11% on the H100).
// With x_row_scale, each x row is also multiplied by a power of two of its own, written to
// xf[r] for the product to divide out: f = 2^(13 - e), e = floor(log2(max_c |x[r, c]|)),
// which brings the row's largest element to [2^13, 2^14). Every part then stays inside
// f16's range (lo is below twice the value: 2^15) whatever the activations' size, and
// rows of small values keep all their bits; a power of two costs no accuracy. A fixed
// 2^-4 overflowed f16 from |x| ≈ 5e5: Gemma 4 E2B's per-layer projection reads values
// past 1e6 in a random-weight model, which turned every logit to inf on tensor cores.
// Rows of zeros (or subnormals) take 1; the exponent is clamped to ±100 so f stays a
// normal f32, and inf or NaN pass through as they would in f32.
// Without lo parts (LO false: products of f16-rounded inputs) hi is the value rounded to
// f16 and nothing is written to lo or x_lo.
// Composed after a header (LO), a workgroup reduction (common/reduce*.wgsl) and hi_lo.wgsl
// (how a value becomes its two parts). CPU twins: `gpu::matmul_coop::split_f16_cpu`, `row_scale_cpu`.

struct Params {
    cols8: u32,      // columns / 8
    rows: u32,       // rows that hold data; rows past it (to the padded end) are zeros
    byte0: u32,      // byte offset of row 0 in `w`
    row_bytes: u32,  // byte stride of rows in `w`
    total: u32,      // 8-element groups to write: padded rows x cols8
    groups_x: u32,
    scale: f32,
    // The f32 job (x_total 0 when there is none), in elements of `x`.
    x_cols8: u32,
    x_rows: u32,
    x_off: u32,
    x_stride: u32,
    x_rows_pad: u32, // x rows to write (a workgroup each), zeros from x_rows
    x_scale: f32,
    x_row_scale: u32, // whether x rows are scaled by their own powers of two (into xf)
    tile_rows: u32,  // 0: row-major; else the layout above (cols8 a multiple of 4)
    x_tile_rows: u32,
    x_col_stride: u32, // elements of `x` between a row's columns (1 but for a transposed read)
    // Pairs of the first job (0: none): output rows come in blocks of 2 · pair_half, the
    // first pair_half of a block rows `pair` and the rest rows pair_off + `pair` of w, for
    // the block's pairs (block · pair_half + i); `rows` counts pairs. A stacked [gate; up]
    // so interleaved puts each gate row and its up row in one subgroup of matmul_coop.wgsl
    // (its GEGLU).
    pair_half: u32,
    pair_off: u32,
    // x rows through moe_sort.wgsl's map (x_map 1; its words live in xf): row r is padded
    // row poff[x_e0] + r, which holds pair map[..] (NONE: zeros), whose x row is
    // pair / x_map_div; rows from poff[x_e1] are not written. The expert product's chunk
    // of experts x_e0 .. x_e1.
    x_map: u32,
    x_map_div: u32,
    x_map_off: u32,
    x_poff_off: u32,
    x_e0: u32,
    x_e1: u32,
    // With the map: the first job holds experts x_e0 .. of w_rpe rows each, and rows of
    // an expert no pair picks are not written (the product reads none of them).
    w_rpe: u32,
    // With the map: pairs from x_pairs on are padding too (NONE is past every count).
    x_pairs: u32,
}

// Where group i of rows of cols8 groups goes: i itself (t = 0) or in tiles of t rows.
fn tiled(i: u32, cols8: u32, t: u32) -> u32 {
    if (t == 0u) {
        return i;
    }
    let r = i / cols8;
    let c8 = i % cols8;
    return ((r / t) * (cols8 / 4u) + c8 / 4u) * (t * 4u) + (r % t) * 4u + c8 % 4u;
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read_write> hi: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> lo: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> x: array<f32>;
@group(0) @binding(5) var<storage, read_write> x_hi: array<vec4<u32>>;
@group(0) @binding(6) var<storage, read_write> x_lo: array<vec4<u32>>;
@group(0) @binding(7) var<storage, read_write> xf: array<f32>;

const WG: u32 = 256u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let g = wg.x + wg.y * p.groups_x;
    // The first x_rows_pad workgroups take an x row each, the rest the first job's groups.
    // An x row is a chain of waits (its maximum across the workgroup, then its groups):
    // started first, those chains run under the weight groups behind them; as the grid's
    // last workgroups they made the end of the dispatch.
    if (g < p.x_rows_pad) {
        x_row(g, lid);
    } else {
        weight_group((g - p.x_rows_pad) * WG + lid);
    }
}

const NONE: u32 = 0xFFFFFFFFu;

fn weight_group(i: u32) {
    if (i >= p.total) {
        return;
    }
    var a = vec4<f32>(0.0);
    var b = vec4<f32>(0.0);
    if (p.w_rpe != 0u) {
        let e = p.x_e0 + (i / p.cols8) / p.w_rpe;
        if (bitcast<u32>(xf[p.x_poff_off + e]) == bitcast<u32>(xf[p.x_poff_off + e + 1u])) {
            return;
        }
    }
    let r = split_row(i / p.cols8, p.rows, p.pair_half, p.pair_off);
    let c4 = 2u * (i % p.cols8);
    if (r != NONE) {
        a = dq4(p.byte0 + r * p.row_bytes, c4) * p.scale;
        b = dq4(p.byte0 + r * p.row_bytes, c4 + 1u) * p.scale;
    }
    let o = tiled(i, p.cols8, p.tile_rows);
    let pa = hi_lo(a);
    let pb = hi_lo(b);
    hi[o] = vec4<u32>(pa.xy, pb.xy);
    if (LO) {
        lo[o] = vec4<u32>(pa.zw, pb.zw);
    }
}

// x row r: its scale (a workgroup maximum), then its 8-element groups.
fn x_row(r: u32, lid: u32) {
    let cs = p.x_col_stride;
    var src = r;
    var real = r < p.x_rows;
    // Whether the row is written at all (past a mapped chunk's rows it is not).
    var keep = true;
    if (p.x_map != 0u) {
        let g = bitcast<u32>(xf[p.x_poff_off + p.x_e0]) + r;
        keep = g < bitcast<u32>(xf[p.x_poff_off + p.x_e1]);
        let pair = select(NONE, bitcast<u32>(xf[p.x_map_off + g]), keep);
        real = pair < p.x_pairs;
        src = select(0u, pair / p.x_map_div, real);
    }
    let base = p.x_off + src * p.x_stride;
    var f = p.x_scale;
    if (p.x_row_scale != 0u) {
        var m = 0.0;
        if (real) {
            for (var c = lid; c < 8u * p.x_cols8; c += WG) {
                m = max(m, abs(x[base + c * cs]));
            }
        }
        m = wg_max(m, lid);
        let e = i32((bitcast<u32>(m) >> 23u) & 0xFFu) - 127;
        let s = select(clamp(13 - e, -100, 100), 0, m < 1.17549435e-38);
        let rf = bitcast<f32>(u32(s + 127) << 23u);
        if (lid == 0u && real) {
            xf[r] = rf;
        }
        f *= rf;
    }
    for (var c8 = lid; c8 < p.x_cols8; c8 += WG) {
        var a = vec4<f32>(0.0);
        var b = vec4<f32>(0.0);
        if (real) {
            let e = base + 8u * c8 * cs;
            a = vec4<f32>(x[e], x[e + cs], x[e + 2u * cs], x[e + 3u * cs]) * f;
            b = vec4<f32>(x[e + 4u * cs], x[e + 5u * cs], x[e + 6u * cs], x[e + 7u * cs]) * f;
        }
        let o = tiled(r * p.x_cols8 + c8, p.x_cols8, p.x_tile_rows);
        let pa = hi_lo(a);
        let pb = hi_lo(b);
        if (keep) {
            x_hi[o] = vec4<u32>(pa.xy, pb.xy);
            if (LO) {
                x_lo[o] = vec4<u32>(pa.zw, pb.zw);
            }
        }
    }
}
