// Matrix-vector product for decoding one token, y[r] = Σ_c w[r, c] · x[c], over one tile of
// weight rows stored as raw GGUF blocks. Composed after a header (WG, TPR, CPT, RN, PAIR,
// PRELOAD, TILES, XN, EXPERTS), the weight type's shaders/quant files, quant/span.wgsl, its chunk loads and dot product
// (`CH`, `Chunk`, `chunk_load(row_byte, c)`: chunk c's raw words — CH elements, laid out
// as the type likes — of the row at byte row_byte, loads only; `chunk_dot(chunk,
// row_byte, c, xo)`: its dot product with x from vec4 xo, read through `xin`;
// shaders/quant/dot_generic.wgsl builds them from dq4) and a workgroup reduction
// (common/reduce*.wgsl). With XN (> 0, the row length) the input is staged as integer
// limbs instead, by the prologue or without one (matvec_x_limbs.wgsl, composed into every
// matvec), for the chunk dot products that take them (quant/q*_idot.wgsl).
//
// With PRELOAD (set only with a prologue or PLE_GATE), every chunk of an invocation's rows is loaded
// before the prologue, so the weights' trip from memory overlaps its reads and reductions
// instead of following them (H100 decode, three alternated runs: 270M 1,150-1,194 ->
// 1,210-1,219 tok/s); the encoder keeps that to short rows, where the registers it holds
// through the prologue do not cost residency (see PRELOAD_MAX_COLS in matmul.rs). Without
// a prologue, loads stay in the loop: loading every chunk first there too cost E2B 6%
// (298-301 against 318-320 tok/s).
//
// Prologue (RN > 0, RN = the row length): the residual step of norm/residual_norm.wgsl is
// done here instead of in a dispatch of its own. Every workgroup computes
//   x' = (x_in + RMS(a) · w_post) · scale,   input = RMS(x') · w_pre (with p.pre) or x'
// into workgroup memory, in the same arithmetic order, and the first workgroup of the
// first tile also stores x' to x_out (a different buffer from x_in: the others still read
// x_in). In decode a dispatch costs ~5 µs on an H100 whatever it does; this costs each
// workgroup a few reads from L2 and two reductions.
//
// TPR invocations share a row and stride over its chunks, so each reads whole blocks with
// several loads in flight; WG / TPR rows per row tile, and TILES row tiles per workgroup,
// one after another after the one prologue (the encoder sets TILES > 1 only where the
// workgroups would otherwise not all fit on the GPU at once, and never with PRELOAD).
// The TPR partial sums of a row meet in `row_sums` (matvec_reduce_tree.wgsl: workgroup memory, any subgroup size; or
// matvec_reduce_subgroup.wgsl: subgroup sums, for subgroups of exactly 32).
//
// Epilogues (`mode`): 0 none; 1 (GELU_PAIR, with the PAIR constant: the up chunks take
// registers of their own) the tile holds [gate; up] (2 × rows rows) and the invocations
// of a row also take its up row: y[r] = gelu_tanh(gate · x) · (up · x) (the FFN's GeGLU);
// 2 (GELU_MUL) y[r] = gelu_tanh(w_r · x) · other[other_off + r] (the
// per-layer-embedding gate); 3 (ROUTE) the tile stacks [q; k; v]: rows below split_a go
// to y, rows below split_b to y2 from y2_off, the rest to y3 from y3_off (the attention
// input projections, straight into q and the KV cache). With EXPERTS (a header constant,
// so the other matvecs carry none of it; ggml's mul_mat_id for one token) output row r is row r % rpe of expert ids[r / rpe] (read from `other` from
// other_off, as u32 bits), the tile holding experts e0 .. e0 + e_count (rows of experts
// elsewhere are not written), against x from x_off4 + (r / rpe) · x_slot4 (x_slot4 0: one
// x for every slot). The input is read from its buffer (XN = 0, no prologue). With PAIR
// too, each expert stacks [gate; up] and row r gets GeGLU of its gate and up rows.
//
// Gemma 4's per-layer-embedding gate (matvec_ple.wgsl with matvec_ple_acc.wgsl or
// matvec_ple_gate.wgsl, or the stubs of matvec_ple_none.wgsl, composed after this file):
// with PLE_ACC the matvec (the down projection) also adds its rows' terms of the gate's
// sums into accumulators; with PLE_GATE the input is the gate made from them (no
// prologue, XN = 0).

struct Params {
    chunks: u32,     // chunks per row
    rows: u32,       // output rows
    row_bytes: u32,
    x_off4: u32,     // x offset in vec4s
    y_off: u32,
    row0: u32,       // y index of the tile's first row
    groups_x: u32,
    mode: u32,
    other_off: u32,
    split_a: u32,
    split_b: u32,
    y2_off: u32,
    y3_off: u32,
    // Prologue (RN > 0): offsets of a, x_in (floats) and x_out, whether to store x'
    // (first tile) and to apply w_pre, the layer scale and the norm epsilon.
    a_off: u32,
    xin_off: u32,
    xout_off: u32,
    store_x: u32,
    pre: u32,
    scale: f32,
    eps: f32,
    // EXPERTS: rows per expert, the tile's experts, x's stride per slot in vec4s.
    rpe: u32,
    e0: u32,
    e_count: u32,
    x_slot4: u32,
    // PLE_ACC / PLE_GATE: the layer's accumulators (in i64s).
    acc_off: u32,
}

const GELU_MUL: u32 = 2u;
const ROUTE: u32 = 3u;

// EXPERTS: the tile's byte offset of output row r's weights (r within the rows), and
// whether its expert lies in this tile. With PAIR each expert stacks [gate; up] (2 · rpe
// rows) and the row's up row follows its gate row by rpe rows.
fn expert_row(r: u32) -> vec2<u32> {
    let e = bitcast<u32>(other[p.other_off + r / p.rpe]) - p.e0;
    let here = e < p.e_count;
    let block = select(1u, 2u, PAIR) * p.rpe;
    return vec2<u32>((select(0u, e, here) * block + r % p.rpe) * p.row_bytes, u32(here));
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read> other: array<f32>;
@group(0) @binding(5) var<storage, read_write> y2: array<f32>;
@group(0) @binding(6) var<storage, read_write> y3: array<f32>;
@group(0) @binding(7) var<storage, read> ra: array<f32>;
@group(0) @binding(8) var<storage, read_write> x_out: array<f32>;
@group(0) @binding(9) var<storage, read> w_post: array<f32>;
@group(0) @binding(10) var<storage, read> w_pre: array<f32>;

const ROWS: u32 = WG / TPR;
// Preloaded chunks belong to the first row tile.
const_assert !PRELOAD || TILES == 1u;
// The staged input (RN > 0) in vec4s (none where it is staged as integers), and how many
// of them each invocation computes.
const RN4: u32 = max(RN / 4u, 1u);
const RKEEP: u32 = max((RN4 + WG - 1u) / WG, 1u);
var<workgroup> xs: array<vec4<f32>, select(RN4, 1u, IDOT)>;

fn xin(i: u32) -> vec4<f32> {
    if (PLE_GATE) {
        return ple_x(i);
    }
    if (RN > 0u) {
        return xs[i];
    }
    return x[i];
}

// Each invocation takes whole vec4s (vec4 q = lid + j · WG), so the integer staging has
// a word of four elements at hand.
fn prologue(lid: u32, first: bool) {
    // Every input is read up front: one wait on memory, not one per phase.
    var av: array<vec4<f32>, RKEEP>;
    var xv: array<vec4<f32>, RKEEP>;
    var wa: array<vec4<f32>, RKEEP>;
    var wb: array<vec4<f32>, RKEEP>;
    var ss = 0.0;
    for (var j = 0u; j < RKEEP; j++) {
        let i = 4u * min(lid + j * WG, RN4 - 1u);
        // Element by element: the offsets need not be multiples of 4.
        for (var t = 0u; t < 4u; t++) {
            let xi = p.xin_off + i + t;
            av[j][t] = ra[p.a_off + i + t];
            xv[j][t] = x[xi >> 2u][xi & 3u];
            wa[j][t] = w_post[i + t];
            wb[j][t] = w_pre[i + t];
        }
        ss += select(0.0, dot(av[j], av[j]), lid + j * WG < RN4);
    }
    let r = inverseSqrt(wg_sum(ss, lid) / f32(RN) + p.eps);
    ss = 0.0;
    for (var j = 0u; j < RKEEP; j++) {
        let q = lid + j * WG;
        if (q < RN4) {
            var t = av[j] * r;
            t *= wa[j];
            let v = (xv[j] + t) * p.scale;
            if (first) {
                let o = p.xout_off + 4u * q;
                x_out[o] = v.x;
                x_out[o + 1u] = v.y;
                x_out[o + 2u] = v.z;
                x_out[o + 3u] = v.w;
            }
            xv[j] = v;
            ss += dot(v, v);
        }
    }
    var r2 = 1.0;
    if (p.pre != 0u) {
        r2 = inverseSqrt(wg_sum(ss, lid) / f32(RN) + p.eps);
    }
    for (var j = 0u; j < RKEEP; j++) {
        let q = lid + j * WG;
        var v = xv[j];
        if (p.pre != 0u) {
            v = v * r2;
            v *= wb[j];
        }
        if (IDOT) {
            // Every invocation takes part (the run's largest is shared among four).
            stage_word(q, select(vec4<f32>(0.0), v, q < RN4), lid);
        } else if (q < RN4) {
            xs[q] = v;
        }
    }
    workgroupBarrier();
}

fn gelu_tanh(v: f32) -> f32 {
    return 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let lin = wg.x + wg.y * p.groups_x;
    let lane = lid % TPR;
    // Rows past the end compute the last row again and are not written. rb0: the first
    // row tile's row, whose chunks PRELOAD loads before the prologue.
    let rb0 = min(lin * TILES * ROWS + lid / TPR, p.rows - 1u) * p.row_bytes;
    // CPT (the encoder's ceil(chunks / TPR)) is a constant, so the loops unroll; a step
    // past the row's end reads the last chunk again and adds nothing. With a prologue the
    // chunks are loaded before it (into wr and wu), otherwise as the loop takes them.
    let last = p.chunks - 1u;
    var wr: array<Chunk, CPT>;
    var wu: array<Chunk, CPT>;
    if (PRELOAD) {
        for (var i = 0u; i < CPT; i++) {
            let cc = min(lane + i * TPR, last);
            wr[i] = chunk_load(rb0, cc);
            if (PAIR) {
                wu[i] = chunk_load(rb0 + p.rows * p.row_bytes, cc);
            }
        }
    }
    ple_preload(lin, lid);
    if (PLE_GATE) {
        ple_gate(lin, lid);
    } else if (RN > 0u) {
        prologue(lid, lin == 0u && p.store_x != 0u);
    } else if (IDOT) {
        stage_input(lid);
    }
    for (var tile = 0u; tile < TILES; tile++) {
        let row = (lin * TILES + tile) * ROWS + lid / TPR;
        let rr = min(row, p.rows - 1u);
        var rb = rr * p.row_bytes;
        var xo = p.x_off4;
        var here = true;
        if (EXPERTS) {
            let er = expert_row(rr);
            rb = er.x;
            here = er.y != 0u;
            xo += (rr / p.rpe) * p.x_slot4;
        }
        let rb_up = rb + select(p.rows, p.rpe, EXPERTS) * p.row_bytes;
        var acc = 0.0;
        var acc2 = 0.0;
        for (var i = 0u; i < CPT; i++) {
            let c = lane + i * TPR;
            let cc = min(c, last);
            var t: Chunk;
            if (PRELOAD) {
                t = wr[i];
            } else {
                t = chunk_load(rb, cc);
            }
            acc += select(0.0, chunk_dot(t, rb, cc, xo), c <= last);
            if (PAIR) {
                if (PRELOAD) {
                    t = wu[i];
                } else {
                    t = chunk_load(rb_up, cc);
                }
                acc2 += select(0.0, chunk_dot(t, rb_up, cc, xo), c <= last);
            }
        }
        let sums = row_sums(acc, acc2, lid, lane);
        ple_row(lid, lane, row, sums.x);
        if (lane == 0u && row < p.rows && here) {
            var v = sums.x;
            if (PAIR) {
                v = gelu_tanh(v) * sums.y;
            } else if (p.mode == GELU_MUL) {
                v = gelu_tanh(v) * other[p.other_off + row];
            }
            if (p.mode == ROUTE && row >= p.split_a) {
                if (row < p.split_b) {
                    y2[p.y2_off + row - p.split_a] = v;
                } else {
                    y3[p.y3_off + row - p.split_b] = v;
                }
            } else {
                y[p.y_off + p.row0 + row] = v;
            }
        }
    }
    ple_accumulate(lin, lid);
}
