// Matrix multiply on cooperative matrices (tensor cores) for prefill:
// y[t, r] = Σ_c w[r, c] · x[t, c], from x split into f16 hi and lo parts by split_f16.wgsl
// and w split likewise (by it, or as it is staged): x row t scaled by xf[t] (a power of
// two, found by the split, that brings its largest element to [2^13, 2^14)), w by w_scale
// (2^4, which keeps small weights out of f16's subnormals); both are divided out of each
// result, exactly.
// Composed after a header (`enable f16; enable wgpu_cooperative_matrix;`, BM, BN, FR,
// GEGLU, GROUPED), with hi_lo.wgsl and how w reaches workgroup memory: `stage_w(lid, w0,
// rb, c0)` stages a step's BN rows from rb (32 columns from vec4 c0; w0: where the split
// laid that step out) into s_hi / s_lo from staged row BM, and declares bindings 3 and 4.
// matmul_coop_w_split.wgsl copies split_f16's parts; matmul_coop_w_quant.wgsl splits the
// weight type's blocks itself (after the type's shaders/quant files), where a row tile
// meets one token tile and a split pass would only add its traffic (gpu::matmul_coop's
// stages_blocks).
//
// f32 accuracy from f16 inputs: hi·hi goes to one accumulator and lo·hi + hi·lo to
// another, y = acc_hi + acc_lo · 2^-11 (lo·lo is below f32 rounding): ~2^-22 relative
// per product instead of f16's 2^-11. With LO false (a model set to f16 prefill,
// `Kernels::coop_f16`) the inputs are hi alone, rounded to the nearest f16, and each
// result is one product summed in f32: no lo rows staged, loaded or multiplied (the lo
// staging shrinks to two vec4s, LON = 0), and every shape takes the small tile
// (`gpu::matmul_coop::tile_for`). H200, E2B prefill of 512 tokens: +39% (forty-eighth
// session).
//
// A workgroup computes BM tokens x BN rows. Each subgroup of 32 owns 32 tokens x 16·FR
// rows (FR = 2 or 4) as 2 x FR fragments of 16 x 16, in named variables: arrays of
// cooperative matrices measured 3x slower on the H100 (they leave registers), and FR is a
// constant, so the fragments past FR = 2 fold away there. Per 32 columns the workgroup
// stages its x rows (hi and lo) in workgroup memory, waits, then its w rows, each loaded
// and stored in turn. Fetching a whole step into registers one step ahead, to overlap the
// loads with the previous step's products, was slower: H100, E2B prefill 512 10.39-10.56k
// tok/s against 10.73-10.75k (the 128 x 128 kernel's registers 235 -> 200, still one
// workgroup an SM); the wait between x and w is worth ~2% of it. Half a step ahead, into
// the half of the staged rows the products are not reading (OVERLAP, below), pays on the
// large tile: its registers stay at 202 (H200, forty-fifth session). x rows are padded to
// whole BM tiles and w rows to whole BN tiles with zeros, so no load needs a check; both
// are split in tiles of BM (BN) rows (split_f16.wgsl's tile_rows), each step's rows
// contiguous.
// Matrices whose tiles alone would leave the GPU idle are split along their columns too
// (split-K): each range writes a partial y that split_k_sum.wgsl adds up.
// With GEGLU the weights are a stacked [gate; up] whose split interleaved them (split_f16's
// pairs): each subgroup's 16·FR rows are 8·FR gate rows and then their up rows, so the
// subgroup holds both halves of each result and writes gelu_tanh(gate) · up for the pair
// (y[y_off + t · y_stride + row0 + pair], p.rows counting pairs), where a GeGLU dispatch
// would read both halves back and write the product again. No split-K (the product is
// not linear).
//
// GROUPED (the experts of a mixture-of-experts layer, ggml's mul_mat_id): x rows are the
// token-expert pairs that moe_sort.wgsl grouped by expert in runs of whole BM-row tiles,
// split from padded row poff[e0] on; w holds experts e0 .. e1 (rpe rows each, a multiple
// of BN), split or as blocks from byte w_byte0. Workgroup g takes token tile g /
// row_groups (row_groups: row tiles of an expert) and that tile's expert's row tile g %
// row_groups; tiles past the chunk's runs return. Result (pair, row) goes to y[y_off + pair · y_stride + row]; padding rows
// go nowhere. Padding is multiplied like the rest: cooperative-matrix operations must run in
// workgroup-uniform control flow, so a subgroup whose rows are all padding cannot skip its
// products, and skipping only their x loads gained nothing (forty-second session).
//
// naga 30 writes coopStore before its operands unless they are already evaluated: every
// coopStore argument is a `let` made before an ordinary assignment (`flush`), which makes
// naga emit them first.

struct Params {
    cols: u32,       // K, a multiple of 32
    rows: u32,       // output rows that exist
    n: u32,          // tokens that exist
    y_off: u32,
    y_stride: u32,   // y row length
    row0: u32,       // y column of row 0
    row_groups: u32,
    groups_x: u32,
    splits: u32,       // column ranges (split-K); each writes its own partial y
    split_cols: u32,   // columns per range, a multiple of 32
    split_stride: u32, // y elements between ranges' partials (0 when splits == 1)
    // Routing of a stacked [a; b; c] matrix (one range): rows from route_a go to y2 (rows
    // of route_b - route_a elements from y2_off), from route_b to y3 (the rest). Both are
    // past every row when the matrix is not routed.
    route_a: u32,
    route_b: u32,
    route_end: u32, // the matrix's rows
    y2_off: u32,
    y3_off: u32,
    y_row_stride: u32, // y elements between rows r and r + 1 (1 but for a transposed y)
    w_scale: f32,
    // GROUPED: the chunk's experts e0 .. e1 of rpe rows each, and where moe_sort.wgsl's
    // map, experts' first rows and tiles' experts lie in xf (u32 words).
    e0: u32,
    e1: u32,
    rpe: u32,
    map_off: u32,
    poff_off: u32,
    tile_off: u32,
    // w as blocks (matmul_coop_w_quant.wgsl): row 0's byte, the row stride, and GEGLU's
    // pairs (half a subgroup's interleave block, and where the up rows start; 0: none).
    w_byte0: u32,
    w_row_bytes: u32,
    w_pair_half: u32,
    w_pair_off: u32,
    // GROUPED: pairs from `pairs` on are padding too (NONE is past every count).
    pairs: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> xh: array<vec4<f16>>;
@group(0) @binding(2) var<storage, read> xl: array<vec4<f16>>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
@group(0) @binding(6) var<storage, read_write> y2: array<f32>;
@group(0) @binding(7) var<storage, read_write> y3: array<f32>;
@group(0) @binding(8) var<storage, read> xf: array<f32>;

const SGM: u32 = BM / 32u;        // subgroups along tokens
const SGN: u32 = BN / (16u * FR); // subgroups along rows
const WG: u32 = 32u * SGM * SGN;
// Staged rows (x then w), each 32 columns = 8 vec4s plus 2 of padding, so the 16 rows a
// fragment load reads start in different memory banks.
const ROWS: u32 = BM + BN;
const SKV: u32 = 10u;
// vec4s of each x part (hi, lo) and each w part an invocation stages per step: slot
// i = lid + s · WG is staged row i / 8, vec4 column i % 8.
const XV: u32 = BM * 8u / WG;
const WV: u32 = BN * 8u / WG;
const_assert BM * 8u % WG == 0u && BN * 8u % WG == 0u;

// OVERLAP (the large tile, split weights): the loop takes 16-column half-steps, each
// staged in its half of the staged rows (vec4 columns 0-3 or 4-7) while the products read
// the other half. A half-step's loads are issued before the products of the one before
// and stored after them, one barrier a half-step; the products and their order are those
// of the whole steps. Two vec4s of each part an invocation, in a struct's named fields
// (arrays of staged values went to local memory, forty-second session).
const_assert !OVERLAP || (BM * 4u == 2u * WG && BN * 4u == 2u * WG);

struct Staged {
    x0h: vec4<f16>,
    x0l: vec4<f16>,
    x1h: vec4<f16>,
    x1l: vec4<f16>,
    w0h: vec4<f16>,
    w0l: vec4<f16>,
    w1h: vec4<f16>,
    w1l: vec4<f16>,
}

// Half-step c0 (a vec4 column, a multiple of 4) of token tile tb and row tile rb: slot
// i = lid (+ WG) is staged row i / 4, vec4 column c0 % 8 + i % 4.
fn fetch_half(tb: u32, rb: u32, k4: u32, c0: u32, lid: u32) -> Staged {
    let c8 = c0 - c0 % 8u;
    let xb = ((tb / BM) * (k4 / 8u) + c8 / 8u) * (BM * 8u) + c0 % 8u;
    let wb = ((rb / BN) * (k4 / 8u) + c8 / 8u) * (BN * 8u) + c0 % 8u;
    let o0 = (lid / 4u) * 8u + lid % 4u;
    let o1 = ((lid + WG) / 4u) * 8u + lid % 4u;
    if (!LO) {
        let z = vec4<f16>();
        return Staged(xh[xb + o0], z, xh[xb + o1], z, w_hi_at(wb + o0), z, w_hi_at(wb + o1), z);
    }
    return Staged(xh[xb + o0], xl[xb + o0], xh[xb + o1], xl[xb + o1], w_hi_at(wb + o0), w_lo_at(wb + o0), w_hi_at(wb + o1), w_lo_at(wb + o1));
}

fn put_half(v: Staged, c0: u32, lid: u32) {
    let a0 = (lid / 4u) * SKV + c0 % 8u + lid % 4u;
    let a1 = ((lid + WG) / 4u) * SKV + c0 % 8u + lid % 4u;
    s_hi[a0] = v.x0h;
    s_hi[a1] = v.x1h;
    s_hi[a0 + BM * SKV] = v.w0h;
    s_hi[a1 + BM * SKV] = v.w1h;
    if (LO) {
        s_lo[a0] = v.x0l;
        s_lo[a1] = v.x1l;
        s_lo[a0 + BM * SKV] = v.w0l;
        s_lo[a1 + BM * SKV] = v.w1l;
    }
}

var<workgroup> s_hi: array<vec4<f16>, ROWS * SKV>;
// Without lo parts (LON = 0) two vec4s stand in: out_s's cooperative stores need their
// slots 16-byte aligned, and with one (8 bytes) every result came out wrong on an H200.
var<workgroup> s_lo: array<vec4<f16>, ROWS * SKV * LON + 2u * (1u - LON)>;
// One 16 x 16 slot per subgroup for the results on their way out.
var<workgroup> out_s: array<f32, SGM * SGN * 256u>;
const NONE: u32 = 0xFFFFFFFFu;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_id) sg: u32,
    @builtin(subgroup_invocation_id) lane: u32,
) {
    let tiles = p.row_groups * ((p.n + BM - 1u) / BM);
    let g = wg.x + wg.y * p.groups_x;
    if (g >= tiles * p.splits) {
        return;
    }
    let split = g / tiles;
    let lin = g % tiles;
    let tm = sg / SGN;
    let tn = sg % SGN;
    // Neighbouring workgroups take the token tiles of one row tile, so each weight tile is
    // read from memory once while they run, rather than once per token tile (a large
    // matrix's split weights outgrow L2 between visits). H100: E2B prefill +1-2%.
    let token_tiles = (p.n + BM - 1u) / BM;
    var tb = (lin % token_tiles) * BM;
    var rb = (lin / token_tiles) * BN;
    // GROUPED: the expert's first split row, and the padded row of x row 0.
    var er0 = 0u;
    var g0 = 0u;
    if (GROUPED) {
        tb = (lin / p.row_groups) * BM;
        // The tile's expert (-1 past the chunk's runs) and the chunk's first padded row,
        // made uniform through out_s (as exact f32 integers: the large tile has no
        // workgroup memory to spare).
        if (lid == 0u) {
            let first = bitcast<u32>(xf[p.poff_off + p.e0]);
            let live = first + tb < bitcast<u32>(xf[p.poff_off + p.e1]);
            let e = bitcast<u32>(xf[p.tile_off + (first + tb) / BM]);
            out_s[0] = select(-1.0, f32(e), live);
            out_s[1] = f32(first);
        }
        let ge = workgroupUniformLoad(&out_s[0]);
        let gf = workgroupUniformLoad(&out_s[1]);
        if (ge < 0.0) {
            return;
        }
        g0 = u32(gf);
        er0 = (u32(ge) - p.e0) * p.rpe;
        rb = er0 + (lin % p.row_groups) * BN;
    }
    let t0 = tb + tm * 32u;
    let r0 = rb + tn * 16u * FR;
    let k4 = p.cols / 4u;
    // This workgroup's columns, in vec4s.
    let c_begin = split * (p.split_cols / 4u);
    let c_end = min(k4, c_begin + p.split_cols / 4u);

    // h<i><j>, l<i><j>: hi and lo accumulators of token fragment i, row fragment j.
    var h00 = coop_mat16x16<f32, C>();
    var h01 = coop_mat16x16<f32, C>();
    var h02 = coop_mat16x16<f32, C>();
    var h03 = coop_mat16x16<f32, C>();
    var h10 = coop_mat16x16<f32, C>();
    var h11 = coop_mat16x16<f32, C>();
    var h12 = coop_mat16x16<f32, C>();
    var h13 = coop_mat16x16<f32, C>();
    var l00 = coop_mat16x16<f32, C>();
    var l01 = coop_mat16x16<f32, C>();
    var l02 = coop_mat16x16<f32, C>();
    var l03 = coop_mat16x16<f32, C>();
    var l10 = coop_mat16x16<f32, C>();
    var l11 = coop_mat16x16<f32, C>();
    var l12 = coop_mat16x16<f32, C>();
    var l13 = coop_mat16x16<f32, C>();
    // OVERLAP: the first half-step staged before the loop.
    var next: Staged;
    if (OVERLAP) {
        put_half(fetch_half(tb, rb, k4, c_begin, lid), c_begin, lid);
        workgroupBarrier();
    }
    for (var c0 = c_begin; c0 < c_end; c0 += select(8u, 4u, OVERLAP)) {
        let more = c0 + 4u < c_end;
        if (OVERLAP) {
            if (more) {
                next = fetch_half(tb, rb, k4, c0 + 4u, lid);
            }
        } else {
            // x and w come in split_f16's tiled layout: this step of this token (row)
            // tile is BM (BN) x 8 vec4s, contiguous.
            let x0 = ((tb / BM) * (k4 / 8u) + c0 / 8u) * (BM * 8u);
            for (var s = 0u; s < XV; s++) {
                let i = lid + s * WG;
                let at = (i / 8u) * SKV + i % 8u;
                s_hi[at] = xh[x0 + i];
                if (LO) {
                    s_lo[at] = xl[x0 + i];
                }
            }
            workgroupBarrier();
            let w0 = ((rb / BN) * (k4 / 8u) + c0 / 8u) * (BN * 8u);
            stage_w(lid, w0, rb, c0);
            workgroupBarrier();
        }
        let k_first = select(0u, c0 % 8u, OVERLAP);
        for (var kk = k_first; kk < select(8u, k_first + 4u, OVERLAP); kk += 4u) {
            let ia = tm * 32u * SKV + kk;
            let ib = (BM + tn * 16u * FR) * SKV + kk;
            let a0h = coopLoadT<coop_mat16x16<f16, A>>(&s_hi[ia], SKV);
            let a1h = coopLoadT<coop_mat16x16<f16, A>>(&s_hi[ia + 16u * SKV], SKV);
            // B = W^T: element (k, r) at r * SKV (vec4s) + k / 4, column-major.
            let b0h = coopLoad<coop_mat16x16<f16, B>>(&s_hi[ib], SKV);
            let b1h = coopLoad<coop_mat16x16<f16, B>>(&s_hi[ib + 16u * SKV], SKV);
            h00 = coopMultiplyAdd(a0h, b0h, h00);
            h01 = coopMultiplyAdd(a0h, b1h, h01);
            h10 = coopMultiplyAdd(a1h, b0h, h10);
            h11 = coopMultiplyAdd(a1h, b1h, h11);
            // x's lo parts serve both groups of row fragments; without lo parts they stay
            // unread copies of hi.
            var a0l = a0h;
            var a1l = a1h;
            if (LO) {
                a0l = coopLoadT<coop_mat16x16<f16, A>>(&s_lo[ia], SKV);
                a1l = coopLoadT<coop_mat16x16<f16, A>>(&s_lo[ia + 16u * SKV], SKV);
                let b0l = coopLoad<coop_mat16x16<f16, B>>(&s_lo[ib], SKV);
                let b1l = coopLoad<coop_mat16x16<f16, B>>(&s_lo[ib + 16u * SKV], SKV);
                l00 = coopMultiplyAdd(a0l, b0h, coopMultiplyAdd(a0h, b0l, l00));
                l01 = coopMultiplyAdd(a0l, b1h, coopMultiplyAdd(a0h, b1l, l01));
                l10 = coopMultiplyAdd(a1l, b0h, coopMultiplyAdd(a1h, b0l, l10));
                l11 = coopMultiplyAdd(a1l, b1h, coopMultiplyAdd(a1h, b1l, l11));
            }
            if (FR == 4u) {
                let b2h = coopLoad<coop_mat16x16<f16, B>>(&s_hi[ib + 32u * SKV], SKV);
                let b3h = coopLoad<coop_mat16x16<f16, B>>(&s_hi[ib + 48u * SKV], SKV);
                h02 = coopMultiplyAdd(a0h, b2h, h02);
                h03 = coopMultiplyAdd(a0h, b3h, h03);
                h12 = coopMultiplyAdd(a1h, b2h, h12);
                h13 = coopMultiplyAdd(a1h, b3h, h13);
                if (LO) {
                    let b2l = coopLoad<coop_mat16x16<f16, B>>(&s_lo[ib + 32u * SKV], SKV);
                    let b3l = coopLoad<coop_mat16x16<f16, B>>(&s_lo[ib + 48u * SKV], SKV);
                    l02 = coopMultiplyAdd(a0l, b2h, coopMultiplyAdd(a0h, b2l, l02));
                    l03 = coopMultiplyAdd(a0l, b3h, coopMultiplyAdd(a0h, b3l, l03));
                    l12 = coopMultiplyAdd(a1l, b2h, coopMultiplyAdd(a1h, b2l, l12));
                    l13 = coopMultiplyAdd(a1l, b3h, coopMultiplyAdd(a1h, b3l, l13));
                }
            }
        }
        if (OVERLAP && more) {
            put_half(next, c0 + 4u, lid);
        }
        workgroupBarrier();
    }

    // Fragment f (token fragment f / FR, row fragment f % FR) goes out through this
    // subgroup's slot, hi and lo added as matrices, and is written where the token and row
    // exist. With GEGLU, output f is the gate fragment (f / H, f % H) and then its up
    // fragment (f / H, f % H + H), H = FR / 2, through the slot in turn (m = 0, 1).
    var flush = 0u;
    let slot = sg * 256u;
    let H = FR / 2u;
    for (var f = 0u; f < select(2u * FR, FR, GEGLU); f++) {
        let ti = select(f / FR, f / H, GEGLU);
        let j = select(f % FR, f % H, GEGLU);
        // This lane's 8 results: element q = lane + 32 e of the fragment.
        var v: array<f32, 8>;
        for (var m = 0u; m < select(1u, 2u, GEGLU); m++) {
            var fh = h00;
            var fl = l00;
            switch (ti * 4u + j + m * H) {
                case 1u: { fh = h01; fl = l01; }
                case 2u: { fh = h02; fl = l02; }
                case 3u: { fh = h03; fl = l03; }
                case 4u: { fh = h10; fl = l10; }
                case 5u: { fh = h11; fl = l11; }
                case 6u: { fh = h12; fl = l12; }
                case 7u: { fh = h13; fl = l13; }
                default: {}
            }
            // Without lo parts fl is a zero the loop never touched.
            let o = fh + fl * (1.0 / LS);
            let stride = 16u;
            flush = slot;
            coopStoreT(o, &out_s[slot], stride);
            workgroupBarrier();
            for (var e = 0u; e < 8u; e++) {
                let q = lane + 32u * e;
                let t = min(t0 + ti * 16u + q / 16u, p.n - 1u);
                // 1 / (w_scale · xf[t]) exactly: for a power of two, the reciprocal's
                // exponent field is 254 less its own (a device's division may round).
                let r = out_s[slot + q] * bitcast<f32>((254u << 23u) - bitcast<u32>(p.w_scale * xf[t]));
                if (m == 0u) {
                    v[e] = r;
                } else {
                    v[e] = gelu_tanh(v[e]) * r;
                }
            }
            workgroupBarrier();
        }
        for (var e = 0u; e < 8u; e++) {
            let q = lane + 32u * e;
            let t = t0 + ti * 16u + q / 16u;
            // GEGLU: the pair's index, from the subgroup's interleave block (r0 / (16 FR)).
            let r = select(r0 + j * 16u + q % 16u, (r0 / (16u * FR)) * (8u * FR) + j * 16u + q % 16u, GEGLU);
            if (GROUPED) {
                let pair = bitcast<u32>(xf[p.map_off + g0 + t]);
                if (pair < p.pairs) {
                    y[p.y_off + pair * p.y_stride + r - er0] = v[e];
                }
            } else if (t < p.n && r < p.rows) {
                let R = p.row0 + r;
                if (R < p.route_a) {
                    y[p.y_off + split * p.split_stride + t * p.y_stride + R * p.y_row_stride] = v[e];
                } else if (R < p.route_b) {
                    y2[p.y2_off + t * (p.route_b - p.route_a) + R - p.route_a] = v[e];
                } else {
                    y3[p.y3_off + t * (p.route_end - p.route_b) + R - p.route_b] = v[e];
                }
            }
        }
    }
}
