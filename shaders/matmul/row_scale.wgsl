// Per-row scales for the f32 operand of a tensor-core matmul (split_f16.wgsl's second
// job), one workgroup a row: f[r] = 2^(13 - e) with e = floor(log2(max_c |x[r, c]|)), so
// the row's largest element lands in [2^13, 2^14). split_f16 then keeps every part
// inside f16's range whatever the activations' size (its lo part is below twice the
// value, 2^15 at most), and rows of small values keep all their bits. A power of two
// costs no accuracy and the product divides it out exactly. A fixed 2^-4 overflowed f16
// from |x| ≈ 5e5: Gemma 4 E2B's per-layer projection reads values past 1e6 in a
// random-weight model, which turned every logit to inf on tensor cores.
// Rows that are all zero (or subnormal) take 1; the exponent is clamped to ±100 so f
// stays a normal f32, and inf or NaN pass through as they would in f32.
// Composed after a workgroup reduction (common/reduce*.wgsl). CPU twin:
// `gpu::matmul_coop::row_scale_cpu`.

struct Params {
    cols: u32,
    rows: u32,
    off: u32,         // element of x where row 0 starts
    stride: u32,      // elements between rows
    col_stride: u32,  // elements between a row's columns
    groups_x: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> f: array<f32>;

const WG: u32 = 256u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let r = wg.x + wg.y * p.groups_x;
    if (r >= p.rows) {
        return;
    }
    var m = 0.0;
    for (var c = lid; c < p.cols; c += WG) {
        m = max(m, abs(x[p.off + r * p.stride + c * p.col_stride]));
    }
    m = wg_max(m, lid);
    if (lid == 0u) {
        let e = i32((bitcast<u32>(m) >> 23u) & 0xFFu) - 127;
        let s = select(clamp(13 - e, -100, 100), 0, m < 1.17549435e-38);
        f[r] = bitcast<f32>(u32(s + 127) << 23u);
    }
}
