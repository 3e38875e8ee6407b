// NeoX (rotate-half) RoPE in place on x[x_off..] laid out [token][head][head_dim]; token t is
// at position pos0 + t. One invocation per (token, head, pair j < head_dim/2).
//
// The angle is formed exactly as the CPU reference forms it (f32: pos * scale * inv_freq[j]
// / factor_j, with inv_freq computed on the host by the same expression), and its sine and
// cosine are computed here to ~1e-7 absolute for angles up to ~2e5 rad, because the
// hardware sin/cos lose accuracy far from zero (positions reach 131072): sin_cos.wgsl.
const WG: u32 = 256u;

struct Params {
    n_tokens: u32,
    n_heads: u32,
    head_dim: u32,
    pos0: u32,
    x_off: u32,
    has_factors: u32,
    scale: f32,
    groups_x: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> inv_freq: array<f32>;
@group(0) @binding(3) var<storage, read> factors: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let half = p.head_dim / 2u;
    let i = (wg.x + wg.y * p.groups_x) * WG + lid;
    if (i >= p.n_tokens * p.n_heads * half) {
        return;
    }
    let j = i % half;
    let th = i / half; // token * n_heads + head
    let t = th / p.n_heads;
    var theta = f32(p.pos0 + t) * p.scale * inv_freq[j];
    if (p.has_factors != 0u) {
        let f = factors[j];
        // Dividing by exactly 1 is skipped: a driver's approximate division must not
        // perturb the common case.
        if (f != 1.0) {
            theta = theta / f;
        }
    }
    let sc = sin_cos(theta);
    let base = p.x_off + th * p.head_dim;
    let a = x[base + j];
    let b = x[base + j + half];
    x[base + j] = a * sc.y - b * sc.x;
    x[base + j + half] = b * sc.y + a * sc.x;
}
