// The three RMS norms that open a mixture-of-experts branch (spec §6.6), one workgroup per
// token, where they were three dispatches a layer: the router's input RMS(x) · router_w
// and the experts' input RMS(x) · expert_w, and the dense branch's output normed in place,
// ffn = RMS(ffn) · post_w; x's and ffn's sums of squares are one reduction.
// Rows of d (a multiple of 4, up to 16 · WG) as common/row_words.wgsl holds them, every
// load (x, ffn and the three weight vectors) issued before the reduction. In decode this
// runs once a layer on one SM, so its chain of waits is its cost: the version with the
// row in loops over arrays (and loads behind `if`s) cost ~15 µs a layer on an H200 (Gemma
// 4 26B-A4B decode 240 -> 270 tok/s with the norms left out, timing only).
// Composed with common/row_words.wgsl and a workgroup reduction (common/reduce*.wgsl).
// CPU twin: cpu::ops::rms_norm, three times.
const WG: u32 = 256u;

struct Params {
    n: u32,
    d: u32,
    eps: f32,
    groups_x: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> ffn: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> router_in: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> expert_in: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> router_w: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read> expert_w: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read> post_w: array<vec4<f32>>;

// Word o of the three outputs, where the row has it (w: the word's three weights).
fn put(ok: bool, o: u32, xn: vec4<f32>, fn_: vec4<f32>, w: mat3x4<f32>) {
    if (ok) {
        router_in[o] = xn * w[0];
        expert_in[o] = xn * w[1];
        ffn[o] = fn_ * w[2];
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = wg.x + wg.y * p.groups_x;
    if (t >= p.n) {
        return;
    }
    let r = row_of(t, p.d, lid);
    let k = r.k;
    let xm = mat4x4<f32>(x[r.b + k.x], x[r.b + k.y], x[r.b + k.z], x[r.b + k.w]);
    let fm = mat4x4<f32>(ffn[r.b + k.x], ffn[r.b + k.y], ffn[r.b + k.z], ffn[r.b + k.w]);
    let w0 = mat3x4<f32>(router_w[k.x], expert_w[k.x], post_w[k.x]);
    let w1 = mat3x4<f32>(router_w[k.y], expert_w[k.y], post_w[k.y]);
    let w2 = mat3x4<f32>(router_w[k.z], expert_w[k.z], post_w[k.z]);
    let w3 = mat3x4<f32>(router_w[k.w], expert_w[k.w], post_w[k.w]);
    let s = wg_sum4(vec4<f32>(row_sq(xm, r.ok), row_sq(fm, r.ok), 0.0, 0.0), lid);
    let rx = inverseSqrt(s.x / f32(p.d) + p.eps);
    let rf = inverseSqrt(s.y / f32(p.d) + p.eps);
    put(r.ok.x, r.b + r.c.x, xm[0] * rx, fm[0] * rf, w0);
    put(r.ok.y, r.b + r.c.y, xm[1] * rx, fm[1] * rf, w1);
    put(r.ok.z, r.b + r.c.z, xm[2] * rx, fm[2] * rf, w2);
    put(r.ok.w, r.b + r.c.w, xm[3] * rx, fm[3] * rf, w3);
}
