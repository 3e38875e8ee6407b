// out[out_off + t*d + i] = Σ_s weights[t*top_k + s] * expert_out[(t*top_k + s)*d + i],
// summed in slot order (overwrites out). One invocation per output element.
const WG: u32 = 256u;

struct Params {
    n: u32,
    top_k: u32,
    d: u32,
    out_off: u32,
    groups_x: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> expert_out: array<f32>;
@group(0) @binding(2) var<storage, read> weights: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = (wg.x + wg.y * p.groups_x) * WG + lid;
    if (i >= p.n * p.d) {
        return;
    }
    let t = i / p.d;
    let c = i % p.d;
    var a = 0.0;
    for (var s = t * p.top_k; s < (t + 1u) * p.top_k; s++) {
        a += weights[s] * expert_out[s * p.d + c];
    }
    out[p.out_off + i] = a;
}
