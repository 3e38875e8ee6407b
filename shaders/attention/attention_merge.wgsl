// Combine the partials of split attention (attention.wgsl with splits > 1): for each
// (token, head) row, out = Σ_s e^(m_s - M) acc_s / Σ_s e^(m_s - M) l_s with M = max_s m_s.
// Empty splits carry l = 0 and m = -3e38 and so weigh nothing. One workgroup per row:
// the splits' (m, l) are read once, in parallel, M and the denominator reduced over the
// workgroup, and each split's weight e^(m_s - M) / L computed once into workgroup memory
// before the output dimensions are summed. (Looping over the splits three times per
// invocation, weights recomputed per dimension, made this a ~20 µs step in decode.)
// Composed with common/reduce.wgsl.
const WG: u32 = 256u;
const PER: u32 = 2u; // output dimensions per invocation: v_head_dim ≤ 512

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

var<workgroup> wts: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row = wg.x + wg.y * p.groups_x;
    if (row >= p.rows) {
        return;
    }
    let stride = p.v_head_dim + 2u;
    let base = row * p.splits * stride;
    var mx = -3.0e38;
    for (var s = lid; s < p.splits; s += WG) {
        mx = max(mx, part[base + s * stride]);
    }
    let m = wg_max(mx, lid);
    var l = 0.0;
    for (var s = lid; s < p.splits; s += WG) {
        l += exp(part[base + s * stride] - m) * part[base + s * stride + 1u];
    }
    let inv_l = 1.0 / wg_sum(l, lid);
    var acc: array<f32, PER>;
    for (var s0 = 0u; s0 < p.splits; s0 += WG) {
        if (s0 + lid < p.splits) {
            wts[lid] = exp(part[base + (s0 + lid) * stride] - m) * inv_l;
        }
        workgroupBarrier();
        let count = min(WG, p.splits - s0);
        for (var i = 0u; i < PER; i++) {
            let d = lid + i * WG;
            if (d < p.v_head_dim) {
                var a = acc[i];
                for (var s = 0u; s < count; s++) {
                    a += wts[s] * part[base + (s0 + s) * stride + 2u + d];
                }
                acc[i] = a;
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < PER; i++) {
        let d = lid + i * WG;
        if (d < p.v_head_dim) {
            out[p.out_off + row * p.v_head_dim + d] = acc[i];
        }
    }
}
