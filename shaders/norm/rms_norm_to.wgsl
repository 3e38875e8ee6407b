// RMSNorm from one buffer into another: dst = src · (mean(src²) + eps)^-½ (· w when
// weighted), or dst += that when `accumulate` (a residual add fused into the post-norm).
// Out of place, so the residual stream is normed into the next matmul's input without a
// copy. One workgroup per row.
const WG: u32 = 64u;

struct Params {
    rows: u32,
    n: u32,
    weighted: u32,
    eps: f32,
    src_off: u32,
    dst_off: u32,
    accumulate: u32,
    groups_x: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row = wg.x + wg.y * p.groups_x;
    if (row >= p.rows) {
        return;
    }
    let sb = p.src_off + row * p.n;
    let db = p.dst_off + row * p.n;
    var ss = 0.0;
    for (var i = lid; i < p.n; i += WG) {
        let v = src[sb + i];
        ss += v * v;
    }
    let s = inverseSqrt(wg_sum(ss, lid) / f32(p.n) + p.eps);
    for (var i = lid; i < p.n; i += WG) {
        var v = src[sb + i] * s;
        if (p.weighted != 0u) {
            v *= w[i];
        }
        if (p.accumulate != 0u) {
            v += dst[db + i];
        }
        dst[db + i] = v;
    }
}
