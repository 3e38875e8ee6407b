// The experts' combination and post-norm added into the FFN output (spec §6.6), one
// workgroup per token: out = Σ_s weights[t*top_k + s] · expert_out[t*top_k + s] (slot
// order), then ffn[t] += RMS(out) · post_w. One dispatch where moe_combine and
// rms_norm_to took two, and out never goes to memory.
// Rows of d (a multiple of 4, up to 16 · WG) as common/row_words.wgsl holds them. Slots
// are summed eight at a time in one expression, so a group's loads (and ffn's and
// post_w's, made before the reduction) are in flight together whatever the compiler does
// with loops. The norm kernel this replaces in decode (rms_norm_to) cost 13.6 µs a layer
// on an H200 (Gemma 4 26B-A4B decode 240 -> 267 tok/s with it left out, timing only).
// Composed with common/row_words.wgsl and a workgroup reduction (common/reduce*.wgsl).
// CPU twin: cpu::ops::moe_combine, then cpu::ops::rms_norm_to accumulating.
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

// Slot s's weight (slots end before `end`), zero past the end.
fn wt(s: u32, end: u32) -> f32 {
    return select(0.0, weights[min(s, end - 1u)], s < end);
}

// Slot s's words k (clamped: past the end a slot weighs zero).
fn slot(s: u32, end: u32, k: vec4<u32>, d4: u32) -> mat4x4<f32> {
    let r = min(s, end - 1u) * d4;
    return mat4x4<f32>(expert_out[r + k.x], expert_out[r + k.y], expert_out[r + k.z], expert_out[r + k.w]);
}

fn put(ok: bool, o: u32, v: vec4<f32>) {
    if (ok) {
        ffn[o] = v;
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
    let f = mat4x4<f32>(ffn[r.b + k.x], ffn[r.b + k.y], ffn[r.b + k.z], ffn[r.b + k.w]);
    let w = mat4x4<f32>(post_w[k.x], post_w[k.y], post_w[k.z], post_w[k.w]);
    var a = mat4x4<f32>();
    let end = (t + 1u) * p.top_k;
    for (var s = t * p.top_k; s < end; s += 8u) {
        a += wt(s, end) * slot(s, end, k, r.d4) + wt(s + 1u, end) * slot(s + 1u, end, k, r.d4)
            + wt(s + 2u, end) * slot(s + 2u, end, k, r.d4) + wt(s + 3u, end) * slot(s + 3u, end, k, r.d4)
            + wt(s + 4u, end) * slot(s + 4u, end, k, r.d4) + wt(s + 5u, end) * slot(s + 5u, end, k, r.d4)
            + wt(s + 6u, end) * slot(s + 6u, end, k, r.d4) + wt(s + 7u, end) * slot(s + 7u, end, k, r.d4);
    }
    let n = inverseSqrt(wg_sum(row_sq(a, r.ok), lid) / f32(p.d) + p.eps);
    put(r.ok.x, r.b + r.c.x, f[0] + a[0] * n * w[0]);
    put(r.ok.y, r.b + r.c.y, f[1] + a[1] * n * w[1]);
    put(r.ok.z, r.b + r.c.z, f[2] + a[2] * n * w[2]);
    put(r.ok.w, r.b + r.c.w, f[3] + a[3] * n * w[3]);
}
