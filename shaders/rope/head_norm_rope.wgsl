// The per-head work between a layer's q/k/v projections and attention, in one dispatch:
// for up to three groups of heads (0: q, 1: k, 2: v; each [token][head][dim] from `off`
// in its own buffer), RMSNorm over each head (weighted by wq / wk, or not) and then NeoX
// RoPE, each when the group's flags ask. Same arithmetic, in the same order, as
// rms_norm.wgsl followed by rope_neox.wgsl. One workgroup per (token, head); invocation
// lid holds the pairs (j, j + dim/2) for j = lid + WG * i, i < KEEP (dim ≤ 2 * WG * KEEP).
// Groups 1 and 2 with F16_OUT go to an f16 KV cache (kv_f16.wgsl's layout: two halves per
// u32, element 2m low) at half offset k16_off / v16_off instead of back in place, rounded to
// nearest (pack2x16float) as the CPU's f16 cache rounds: the head passes through workgroup
// memory so that each invocation packs two neighbours.
const WG: u32 = 128u;
const KEEP: u32 = 4u;
const NORM: u32 = 1u;
const WEIGHTED: u32 = 2u;
const ROPE: u32 = 4u;
const F16_OUT: u32 = 8u;

struct Group {
    off: u32,
    heads: u32,
    dim: u32,
    flags: u32,
}

struct Params {
    g: array<Group, 3>,
    n_tokens: u32,
    pos0: u32,
    eps: f32,
    scale: f32,
    has_factors: u32,
    groups_x: u32,
    k16_off: u32,
    v16_off: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> q: array<f32>;
@group(0) @binding(2) var<storage, read_write> k: array<f32>;
@group(0) @binding(3) var<storage, read_write> v: array<f32>;
@group(0) @binding(4) var<storage, read> wq: array<f32>;
@group(0) @binding(5) var<storage, read> wk: array<f32>;
@group(0) @binding(6) var<storage, read> inv_freq: array<f32>;
@group(0) @binding(7) var<storage, read> factors: array<f32>;
@group(0) @binding(8) var<storage, read_write> k16: array<u32>;
@group(0) @binding(9) var<storage, read_write> v16: array<u32>;

var<workgroup> head_s: array<f32, 2u * WG * KEEP>;

fn ld(g: u32, i: u32) -> f32 {
    switch (g) {
        case 0u: { return q[i]; }
        case 1u: { return k[i]; }
        default: { return v[i]; }
    }
}

fn st(g: u32, i: u32, x: f32) {
    switch (g) {
        case 0u: { q[i] = x; }
        case 1u: { k[i] = x; }
        default: { v[i] = x; }
    }
}

fn weight(g: u32, i: u32) -> f32 {
    if (g == 0u) {
        return wq[i];
    }
    return wk[i];
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let per_token = p.g[0].heads + p.g[1].heads + p.g[2].heads;
    let lin = wg.x + wg.y * p.groups_x;
    let t = lin / per_token;
    if (t >= p.n_tokens) {
        return;
    }
    var h = lin % per_token;
    var g = 0u;
    for (; g < 2u && h >= p.g[g].heads; g++) {
        h -= p.g[g].heads;
    }
    let gr = p.g[g];
    let half = gr.dim / 2u;
    let base = gr.off + (t * gr.heads + h) * gr.dim;
    var a: array<f32, KEEP>;
    var b: array<f32, KEEP>;
    var ss = 0.0;
    for (var i = 0u; i < KEEP; i++) {
        let j = lid + WG * i;
        if (j < half) {
            a[i] = ld(g, base + j);
            b[i] = ld(g, base + j + half);
            ss += a[i] * a[i] + b[i] * b[i];
        }
    }
    // Uniform per workgroup: the group decides.
    if ((gr.flags & NORM) != 0u) {
        let r = inverseSqrt(wg_sum(ss, lid) / f32(gr.dim) + p.eps);
        for (var i = 0u; i < KEEP; i++) {
            let j = lid + WG * i;
            if (j < half) {
                a[i] *= r;
                b[i] *= r;
                if ((gr.flags & WEIGHTED) != 0u) {
                    a[i] *= weight(g, j);
                    b[i] *= weight(g, j + half);
                }
            }
        }
    }
    for (var i = 0u; i < KEEP; i++) {
        let j = lid + WG * i;
        if (j >= half) {
            break;
        }
        var x0 = a[i];
        var x1 = b[i];
        if ((gr.flags & ROPE) != 0u) {
            var theta = f32(p.pos0 + t) * p.scale * inv_freq[j];
            if (p.has_factors != 0u) {
                let f = factors[j];
                if (f != 1.0) {
                    theta = theta / f;
                }
            }
            let sc = sin_cos(theta);
            x0 = a[i] * sc.y - b[i] * sc.x;
            x1 = b[i] * sc.y + a[i] * sc.x;
        }
        if ((gr.flags & F16_OUT) != 0u) {
            head_s[j] = x0;
            head_s[j + half] = x1;
        } else {
            st(g, base + j, x0);
            st(g, base + j + half, x1);
        }
    }
    // Uniform per workgroup, as above.
    if ((gr.flags & F16_OUT) != 0u) {
        workgroupBarrier();
        let at = select(p.v16_off, p.k16_off, g == 1u) / 2u + (t * gr.heads + h) * half;
        for (var m = lid; m < half; m += WG) {
            let word = pack2x16float(vec2<f32>(head_s[2u * m], head_s[2u * m + 1u]));
            if (g == 1u) {
                k16[at + m] = word;
            } else {
                v16[at + m] = word;
            }
        }
    }
}
