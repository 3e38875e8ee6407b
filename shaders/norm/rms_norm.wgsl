// RMSNorm in place over `rows` rows of `n` values starting at element x_off, of the row
// scaled by in_scale first: v = x · in_scale, v · (mean(v²) + eps)^-½ (* w when weighted);
// with `add`, the normed row then becomes (normed + y) · out_scale, y's rows n apart from
// y_off (the per-layer-embedding inputs: the scale, the norm and the sum with the token's
// per-layer embedding in one dispatch instead of three). One workgroup per row.
// 256 invocations, each keeping up to KEEP of its values in registers between the two
// passes: a row is read from memory once (rows up to WG * KEEP long), and each invocation
// has only a few loads in flight one after another (a 64-wide group spent most of its
// time waiting on 24 dependent loads for a 1536-wide row).
const WG: u32 = 256u;
const KEEP: u32 = 8u;

struct Params {
    rows: u32,
    n: u32,
    weighted: u32,
    eps: f32,
    x_off: u32,
    groups_x: u32,
    in_scale: f32,
    add: u32,
    y_off: u32,
    out_scale: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> y: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row = wg.x + wg.y * p.groups_x;
    if (row >= p.rows) {
        return;
    }
    let base = p.x_off + row * p.n;
    // A constant trip count lets the compiler unroll and keep `keep` in registers.
    var keep: array<f32, KEEP>;
    var ss = 0.0;
    for (var j = 0u; j < KEEP; j++) {
        let i = lid + j * WG;
        if (i < p.n) {
            keep[j] = x[base + i] * p.in_scale;
            ss += keep[j] * keep[j];
        }
    }
    for (var i = lid + KEEP * WG; i < p.n; i += WG) {
        let v = x[base + i] * p.in_scale;
        ss += v * v;
    }
    let s = inverseSqrt(wg_sum(ss, lid) / f32(p.n) + p.eps);
    for (var j = 0u; j < KEEP; j++) {
        let i = lid + j * WG;
        if (i < p.n) {
            put(row, i, keep[j] * s);
        }
    }
    for (var i = lid + KEEP * WG; i < p.n; i += WG) {
        put(row, i, (x[base + i] * p.in_scale) * s);
    }
}

// Element i of the normed row: weighted and stored.
fn put(row: u32, i: u32, normed: f32) {
    var v = normed;
    if (p.weighted != 0u) {
        v *= w[i];
    }
    if (p.add != 0u) {
        v = (v + y[p.y_off + row * p.n + i]) * p.out_scale;
    }
    x[p.x_off + row * p.n + i] = v;
}
