// RMSNorm in place over `rows` rows of `n` values starting at element x_off:
// x * (mean(x²) + eps)^-½ (* w when weighted). One workgroup per row.
const WG: u32 = 64u;

struct Params {
    rows: u32,
    n: u32,
    weighted: u32,
    eps: f32,
    x_off: u32,
    groups_x: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row = wg.x + wg.y * p.groups_x;
    if (row >= p.rows) {
        return;
    }
    let base = p.x_off + row * p.n;
    var ss = 0.0;
    for (var i = lid; i < p.n; i += WG) {
        let v = x[base + i];
        ss += v * v;
    }
    let s = inverseSqrt(wg_sum(ss, lid) / f32(p.n) + p.eps);
    for (var i = lid; i < p.n; i += WG) {
        var v = x[base + i] * s;
        if (p.weighted != 0u) {
            v *= w[i];
        }
        x[base + i] = v;
    }
}
