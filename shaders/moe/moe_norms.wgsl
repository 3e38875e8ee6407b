// The three RMS norms that open a mixture-of-experts branch (spec §6.6), one workgroup per
// token, where they were three dispatches a layer: the router's input RMS(x) · router_w
// and the experts' input RMS(x) · expert_w (one reduction of x serves both), and the dense
// branch's output normed in place, ffn = RMS(ffn) · post_w. Each row is read once, into
// registers (rows up to WG · KEEP). Composed with a workgroup reduction
// (common/reduce*.wgsl). CPU twin: cpu::ops::rms_norm, three times.
const WG: u32 = 256u;
const KEEP: u32 = 16u;

struct Params {
    n: u32,
    d: u32,
    eps: f32,
    groups_x: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> ffn: array<f32>;
@group(0) @binding(3) var<storage, read_write> router_in: array<f32>;
@group(0) @binding(4) var<storage, read_write> expert_in: array<f32>;
@group(0) @binding(5) var<storage, read> router_w: array<f32>;
@group(0) @binding(6) var<storage, read> expert_w: array<f32>;
@group(0) @binding(7) var<storage, read> post_w: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = wg.x + wg.y * p.groups_x;
    if (t >= p.n) {
        return;
    }
    let b = t * p.d;
    var xv: array<f32, KEEP>;
    var fv: array<f32, KEEP>;
    var sx = 0.0;
    var sf = 0.0;
    for (var j = 0u; j < KEEP; j++) {
        let i = lid + j * WG;
        if (i < p.d) {
            xv[j] = x[b + i];
            fv[j] = ffn[b + i];
            sx += xv[j] * xv[j];
            sf += fv[j] * fv[j];
        }
    }
    let rx = inverseSqrt(wg_sum(sx, lid) / f32(p.d) + p.eps);
    let rf = inverseSqrt(wg_sum(sf, lid) / f32(p.d) + p.eps);
    for (var j = 0u; j < KEEP; j++) {
        let i = lid + j * WG;
        if (i < p.d) {
            router_in[b + i] = xv[j] * rx * router_w[i];
            expert_in[b + i] = xv[j] * rx * expert_w[i];
            ffn[b + i] = fv[j] * rf * post_w[i];
        }
    }
}
