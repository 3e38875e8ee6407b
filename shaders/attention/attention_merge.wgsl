// Combine the partials of split attention (attention.wgsl with splits > 1): for each
// (token, head) row, out = Σ_s e^(m_s - M) acc_s / Σ_s e^(m_s - M) l_s with M = max_s m_s.
// Empty splits carry l = 0 and m = -3e38 and so weigh nothing. One workgroup per row.
const WG: u32 = 64u;

struct Params {
    rows: u32,
    splits: u32,
    v_head_dim: u32,
    out_off: u32,
    groups_x: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> part: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row = wg.x + wg.y * p.groups_x;
    if (row >= p.rows) {
        return;
    }
    let stride = p.v_head_dim + 2u;
    let base = row * p.splits * stride;
    var mx = -3.0e38;
    for (var s = 0u; s < p.splits; s++) {
        mx = max(mx, part[base + s * stride]);
    }
    var l = 0.0;
    for (var s = 0u; s < p.splits; s++) {
        l += exp(part[base + s * stride] - mx) * part[base + s * stride + 1u];
    }
    for (var d = lid; d < p.v_head_dim; d += WG) {
        var a = 0.0;
        for (var s = 0u; s < p.splits; s++) {
            a += exp(part[base + s * stride] - mx) * part[base + s * stride + 2u + d];
        }
        out[p.out_off + row * p.v_head_dim + d] = a / l;
    }
}
