// The experts' combination and post-norm added into the FFN output (spec §6.6), one
// workgroup per token: out = Σ_s weights[t*top_k + s] · expert_out[t*top_k + s] (slot
// order), then ffn[t] += RMS(out) · post_w. One dispatch where moe_combine and
// rms_norm_to took two, and out never goes to memory.
// Rows of d (a multiple of 4, up to 4 · 4 · WG) as vec4 words, four per invocation in named
// registers. Slots are summed eight at a time in one expression, so a group's loads (and
// ffn's and post_w's, made before the reduction) are in flight together, whatever the
// compiler does with loops. The norm kernel this replaces in decode (rms_norm_to, whose
// loads by the timings were waited on in turn) cost 13.6 µs a layer on an H200 (Gemma 4
// 26B-A4B decode 240 -> 267 tok/s with it left out, timing only).
// Composed with a workgroup reduction (common/reduce*.wgsl). CPU twin:
// cpu::ops::moe_combine, then cpu::ops::rms_norm_to accumulating.
const WG: u32 = 256u;

struct Params {
    n: u32,
    top_k: u32,
    d: u32,
    eps: f32,
    groups_x: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> expert_out: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> weights: array<f32>;
@group(0) @binding(3) var<storage, read_write> ffn: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> post_w: array<vec4<f32>>;

// Slot s's weight (of slots s0 .. end), zero past the end.
fn wt(s: u32, end: u32) -> f32 {
    return select(0.0, weights[min(s, end - 1u)], s < end);
}

// Slot s's word c (both clamped: past the end a slot weighs zero; past the row nothing is
// stored).
fn ev(s: u32, end: u32, c: u32, d4: u32) -> vec4<f32> {
    return expert_out[min(s, end - 1u) * d4 + min(c, d4 - 1u)];
}

// Word c of slots s .. s + 7 weighed by w, in slot order.
fn sum8(s: u32, end: u32, c: u32, d4: u32, w: array<f32, 8>) -> vec4<f32> {
    return w[0] * ev(s, end, c, d4) + w[1] * ev(s + 1u, end, c, d4) + w[2] * ev(s + 2u, end, c, d4)
        + w[3] * ev(s + 3u, end, c, d4) + w[4] * ev(s + 4u, end, c, d4) + w[5] * ev(s + 5u, end, c, d4)
        + w[6] * ev(s + 6u, end, c, d4) + w[7] * ev(s + 7u, end, c, d4);
}

fn lf(b: u32, c: u32, d4: u32) -> vec4<f32> {
    return ffn[b + min(c, d4 - 1u)];
}

fn lp(c: u32, d4: u32) -> vec4<f32> {
    return post_w[min(c, d4 - 1u)];
}

fn put(b: u32, c: u32, d4: u32, v: vec4<f32>) {
    if (c < d4) {
        ffn[b + c] = v;
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
    let f0 = lf(b, c0, d4);
    let f1 = lf(b, c1, d4);
    let f2 = lf(b, c2, d4);
    let f3 = lf(b, c3, d4);
    let w0 = lp(c0, d4);
    let w1 = lp(c1, d4);
    let w2 = lp(c2, d4);
    let w3 = lp(c3, d4);
    var a0 = vec4<f32>(0.0);
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var a3 = vec4<f32>(0.0);
    let end = (t + 1u) * p.top_k;
    for (var s = t * p.top_k; s < end; s += 8u) {
        let w = array<f32, 8>(wt(s, end), wt(s + 1u, end), wt(s + 2u, end), wt(s + 3u, end),
            wt(s + 4u, end), wt(s + 5u, end), wt(s + 6u, end), wt(s + 7u, end));
        a0 += sum8(s, end, c0, d4, w);
        a1 += sum8(s, end, c1, d4, w);
        a2 += sum8(s, end, c2, d4, w);
        a3 += sum8(s, end, c3, d4, w);
    }
    // Words past the row hold a clamped word's sums: they count only where they exist.
    let ss = select(0.0, dot(a0, a0), c0 < d4) + select(0.0, dot(a1, a1), c1 < d4)
        + select(0.0, dot(a2, a2), c2 < d4) + select(0.0, dot(a3, a3), c3 < d4);
    let r = inverseSqrt(wg_sum(ss, lid) / f32(p.d) + p.eps);
    put(b, c0, d4, f0 + a0 * r * w0);
    put(b, c1, d4, f1 + a1 * r * w1);
    put(b, c2, d4, f2 + a2 * r * w2);
    put(b, c3, d4, f3 + a3 * r * w3);
}
