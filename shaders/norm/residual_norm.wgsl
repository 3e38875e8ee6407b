// The residual step between two blocks of a layer, in one dispatch per row:
//   x = (x + RMS(a) · w_post) [· scale[0]]      (post-norm, residual add, layer scale)
//   y = RMS(x) · w_pre                          (the next block's input norm; optional)
// Same arithmetic, in the same order, as rms_norm_to (accumulate), a scale and
// rms_norm_to again. Each invocation keeps its KEEP values of a row in registers, so a row
// (up to WG · KEEP) is read once and written once. WG and KEEP come from the encoder: 512
// invocations where the device allows (faster than 256 or 1024 on an H100), else 256.
const SCALE: u32 = 1u;
const PRE_NORM: u32 = 2u;

struct Params {
    rows: u32,
    n: u32,
    eps: f32,
    a_off: u32,
    x_off: u32,
    y_off: u32,
    flags: u32,
    groups_x: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read_write> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read> w_post: array<f32>;
@group(0) @binding(5) var<storage, read> w_pre: array<f32>;
@group(0) @binding(6) var<storage, read> scale: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row = wg.x + wg.y * p.groups_x;
    if (row >= p.rows) {
        return;
    }
    let ab = p.a_off + row * p.n;
    let xb = p.x_off + row * p.n;
    let pre = (p.flags & PRE_NORM) != 0u;
    // Every input is read up front, so the kernel waits on memory once rather than once
    // per phase (it is latency-bound: one row per workgroup in decode).
    var v: array<f32, KEEP>;
    var xs: array<f32, KEEP>;
    var wa: array<f32, KEEP>;
    var wb: array<f32, KEEP>;
    var sc = 1.0;
    if ((p.flags & SCALE) != 0u) {
        sc = scale[0];
    }
    var ss = 0.0;
    for (var j = 0u; j < KEEP; j++) {
        let i = lid + j * WG;
        if (i < p.n) {
            v[j] = a[ab + i];
            xs[j] = x[xb + i];
            wa[j] = w_post[i];
            if (pre) {
                wb[j] = w_pre[i];
            }
            ss += v[j] * v[j];
        }
    }
    let r = inverseSqrt(wg_sum(ss, lid) / f32(p.n) + p.eps);
    ss = 0.0;
    for (var j = 0u; j < KEEP; j++) {
        let i = lid + j * WG;
        if (i < p.n) {
            var t = v[j] * r;
            t *= wa[j];
            var xv = xs[j] + t;
            if ((p.flags & SCALE) != 0u) {
                xv *= sc;
            }
            x[xb + i] = xv;
            v[j] = xv;
            ss += xv * xv;
        }
    }
    if (!pre) {
        return;
    }
    let r2 = inverseSqrt(wg_sum(ss, lid) / f32(p.n) + p.eps);
    for (var j = 0u; j < KEEP; j++) {
        let i = lid + j * WG;
        if (i < p.n) {
            var t = v[j] * r2;
            t *= wb[j];
            y[p.y_off + row * p.n + i] = t;
        }
    }
}
