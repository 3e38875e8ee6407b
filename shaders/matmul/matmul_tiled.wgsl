// Matrix multiply for many tokens (prefill), y[t, r] = Σ_c w[r, c] · x[t, c], over one tile
// of weight rows stored as raw GGUF blocks, in 64 × 64 output tiles. Composed after the
// weight type's shaders/quant files (dq4) and uses matmul.wgsl's Params.
//
// Each step dequantizes a 64-row × 32-column slice of w and loads the matching 64 tokens ×
// 32 columns of x into workgroup memory (transposed, so a vec4 holds 4 rows or 4 tokens at
// one column); each of the 16 × 16 invocations then accumulates a 4 × 4 block of outputs
// from them. Weights are dequantized once per 64 tokens instead of once per 8 (matmul.wgsl)
// and every loaded value feeds 64 products. Columns must be a multiple of 32.
const BM: u32 = 64u;
const BN: u32 = 64u;
const BK: u32 = 32u;

struct Params {
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
    x_stride4: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read> ids: array<u32>;

// [column][row / 4] and [column][token / 4].
var<workgroup> ws: array<vec4<f32>, BK * BM / 4u>;
var<workgroup> xs: array<vec4<f32>, BK * BN / 4u>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let lin = wg.x + wg.y * p.groups_x;
    let r0 = (lin % p.row_groups) * BM;
    let t0 = (lin / p.row_groups) * BN;
    if (t0 >= p.n) {
        return;
    }
    let tx = lid % 16u; // tokens 4tx .. 4tx+3 of the tile
    let ty = lid / 16u; // rows 4ty .. 4ty+3
    var acc: array<vec4<f32>, 4>; // acc[i][j]: row 4ty+i, token 4tx+j

    // What this invocation loads: entries lid and lid + 256 of the 64 × 8 vec4 slices.
    var lrow: array<u32, 2>;
    var lk4: array<u32, 2>;
    var wrb: array<u32, 2>;
    var xrow: array<u32, 2>;
    for (var h = 0u; h < 2u; h++) {
        let e = lid + 256u * h;
        lrow[h] = e / 8u;
        lk4[h] = e % 8u;
        // Rows and tokens past the end load the last one and are not written.
        wrb[h] = min(r0 + lrow[h], p.rows - 1u) * p.row_bytes;
        xrow[h] = p.x_off4 + min(t0 + lrow[h], p.n - 1u) * p.x_stride4;
    }
    for (var k4 = 0u; k4 < p.cols4; k4 += BK / 4u) {
        for (var h = 0u; h < 2u; h++) {
            let wv = dq4(wrb[h], k4 + lk4[h]);
            let xv = x[xrow[h] + k4 + lk4[h]];
            let r = lrow[h];
            for (var c = 0u; c < 4u; c++) {
                let kk = 4u * lk4[h] + c;
                ws[kk * (BM / 4u) + r / 4u][r % 4u] = wv[c];
                xs[kk * (BN / 4u) + r / 4u][r % 4u] = xv[c];
            }
        }
        workgroupBarrier();
        for (var kk = 0u; kk < BK; kk++) {
            let a = ws[kk * (BM / 4u) + ty];
            let b = xs[kk * (BN / 4u) + tx];
            acc[0] += a.x * b;
            acc[1] += a.y * b;
            acc[2] += a.z * b;
            acc[3] += a.w * b;
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < 4u; i++) {
        let r = r0 + 4u * ty + i;
        for (var j = 0u; j < 4u; j++) {
            let t = t0 + 4u * tx + j;
            if (r < p.rows && t < p.n) {
                y[p.y_off + t * p.y_stride + p.row0 + r] = acc[i][j];
            }
        }
    }
}
