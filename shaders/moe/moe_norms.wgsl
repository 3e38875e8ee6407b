// The three RMS norms that open a mixture-of-experts branch (spec §6.6), one workgroup per
// token, where they were three dispatches a layer: the router's input RMS(x) · router_w
// and the experts' input RMS(x) · expert_w, and the dense branch's output normed in place,
// ffn = RMS(ffn) · post_w; x's and ffn's sums of squares are one reduction.
// Rows of d (a multiple of 4, up to 4 · 4 · WG) as vec4 words, four per invocation in named
// registers, every load issued before the first is used: clamped indices make the loads
// unconditional and select() zeroes the words past the row. In decode this runs once a
// layer on one SM, so its chain of waits is its cost: the version with the row in loops
// over arrays (and loads behind `if`s), which by the timings waited on each load in turn,
// cost ~15 µs a layer on an H200 (Gemma 4 26B-A4B decode 240 -> 270 tok/s with the
// norms left out, timing only).
// Composed with a workgroup reduction (common/reduce*.wgsl). CPU twin: cpu::ops::rms_norm,
// three times.
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

// Word i of the row from word b, or zeros past the row's d4 words.
fn lx(b: u32, i: u32, d4: u32) -> vec4<f32> {
    return select(vec4<f32>(0.0), x[b + min(i, d4 - 1u)], i < d4);
}
fn lf(b: u32, i: u32, d4: u32) -> vec4<f32> {
    return select(vec4<f32>(0.0), ffn[b + min(i, d4 - 1u)], i < d4);
}

// The weights' word i, clamped (words past the row are not stored).
fn lw(i: u32, d4: u32) -> mat3x4<f32> {
    let c = min(i, d4 - 1u);
    return mat3x4<f32>(router_w[c], expert_w[c], post_w[c]);
}

// Word c of the three outputs, where the row has it (w: lw's weights for c).
fn put(b: u32, c: u32, d4: u32, xn: vec4<f32>, fn_: vec4<f32>, w: mat3x4<f32>) {
    if (c < d4) {
        router_in[b + c] = xn * w[0];
        expert_in[b + c] = xn * w[1];
        ffn[b + c] = fn_ * w[2];
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = wg.x + wg.y * p.groups_x;
    if (t >= p.n) {
        return;
    }
    let d4 = p.d / 4u;
    let b = t * d4;
    let c0 = lid;
    let c1 = lid + WG;
    let c2 = lid + 2u * WG;
    let c3 = lid + 3u * WG;
    let x0 = lx(b, c0, d4);
    let x1 = lx(b, c1, d4);
    let x2 = lx(b, c2, d4);
    let x3 = lx(b, c3, d4);
    let f0 = lf(b, c0, d4);
    let f1 = lf(b, c1, d4);
    let f2 = lf(b, c2, d4);
    let f3 = lf(b, c3, d4);
    // The weights too are loaded before the reduction, not after it.
    let w0 = lw(c0, d4);
    let w1 = lw(c1, d4);
    let w2 = lw(c2, d4);
    let w3 = lw(c3, d4);
    let sx = dot(x0, x0) + dot(x1, x1) + dot(x2, x2) + dot(x3, x3);
    let sf = dot(f0, f0) + dot(f1, f1) + dot(f2, f2) + dot(f3, f3);
    let s = wg_sum4(vec4<f32>(sx, sf, 0.0, 0.0), lid);
    let rx = inverseSqrt(s.x / f32(p.d) + p.eps);
    let rf = inverseSqrt(s.y / f32(p.d) + p.eps);
    put(b, c0, d4, x0 * rx, f0 * rf, w0);
    put(b, c1, d4, x1 * rx, f1 * rf, w1);
    put(b, c2, d4, x2 * rx, f2 * rf, w2);
    put(b, c3, d4, x3 * rx, f3 * rf, w3);
}
