// Quantized matrix multiply, y[t, r] = Σ_c w[r, c] · x[t, c], over one tile of weight rows
// stored as raw GGUF blocks. Composed after a header (WG threads, RW rows per workgroup,
// T tokens per workgroup, NSG), shaders/quant/common.wgsl, one type file (QK, QB,
// `dq4(row_byte, k4)`: elements 4*k4..4*k4+3 of the row starting at byte row_byte),
// and followed by a reduce snippet (`struct Ids`, `reduce_tile`).
//
// Every thread strides over the vec4 columns of all RW rows, so each dequantized vec4 is
// used for the T tokens of the tile and neighbouring threads read neighbouring bytes.
// Workgroups are numbered row group fastest: those running together share x rows.
//
// Expert mode (top_k > 0, ggml's mul_mat_id; T is 1): workgroup "token" j is the
// token-slot pair j, whose expert ids[ids_off + j] picks the weight rows; pairs whose
// expert lies in another tile return at once.

struct Params {
    cols4: u32,      // columns / 4
    rows: u32,       // rows to compute: the tile's (matmul) or one expert's (expert mode)
    row_bytes: u32,
    n: u32,          // tokens, or token-slot pairs in expert mode
    x_off4: u32,     // x offset in vec4s
    y_off: u32,
    y_stride: u32,   // y row length
    row0: u32,       // y column of the tile's first row (matmul)
    top_k: u32,      // 0: plain matmul
    e0: u32,         // expert mode: first expert of this tile
    e_count: u32,    // experts in this tile
    x_per_slot: u32, // expert mode: x holds one row per pair (else one per token)
    ids_off: u32,
    row_groups: u32,
    groups_x: u32,
    x_stride4: u32,  // x row stride in vec4s
    w_row0: u32,     // matmul: first weight row (in the tile buffer) of row 0
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read> ids: array<u32>;

// Results of the workgroup's RW x T dot products, written by reduce_tile.
var<workgroup> sums: array<f32, RW * T>;

@compute @workgroup_size(WG)
fn main(id: Ids) {
    let lin = id.wg.x + id.wg.y * p.groups_x;
    let rg = lin % p.row_groups;
    let tok0 = (lin / p.row_groups) * T;
    // Returns below depend on the workgroup only, so barriers stay in uniform control flow.
    if (tok0 >= p.n) {
        return;
    }
    var w_row = p.w_row0; // first weight row (in the tile buffer) of the computed block
    var x_row: array<u32, T>;
    var y_row: array<u32, T>;
    if (p.top_k == 0u) {
        for (var i = 0u; i < T; i++) {
            // Tokens past n read the last token's row and are not written.
            x_row[i] = p.x_off4 + min(tok0 + i, p.n - 1u) * p.x_stride4;
            y_row[i] = p.y_off + (tok0 + i) * p.y_stride + p.row0;
        }
    } else {
        let e = ids[p.ids_off + tok0];
        if (e < p.e0 || e >= p.e0 + p.e_count) {
            return;
        }
        w_row = (e - p.e0) * p.rows;
        let xr = select(tok0 / p.top_k, tok0, p.x_per_slot != 0u);
        x_row[0] = p.x_off4 + xr * p.x_stride4;
        y_row[0] = p.y_off + tok0 * p.y_stride;
    }
    var rb: array<u32, RW>;
    for (var r = 0u; r < RW; r++) {
        // Rows past the end read the last row and are not written.
        rb[r] = (w_row + min(rg * RW + r, p.rows - 1u)) * p.row_bytes;
    }

    var acc: array<f32, RW * T>;
    for (var k4 = id.lid; k4 < p.cols4; k4 += WG) {
        var xv: array<vec4<f32>, T>;
        for (var i = 0u; i < T; i++) {
            xv[i] = x[x_row[i] + k4];
        }
        for (var r = 0u; r < RW; r++) {
            let wv = dq4(rb[r], k4);
            for (var i = 0u; i < T; i++) {
                acc[r * T + i] += dot(wv, xv[i]);
            }
        }
    }
    reduce_tile(&acc, id);

    if (id.lid < RW * T) {
        let r = rg * RW + id.lid / T;
        let i = id.lid % T;
        if (r < p.rows && tok0 + i < p.n) {
            y[y_row[i] + r] = sums[id.lid];
        }
    }
}
