// NeoX (rotate-half) RoPE in place on x[x_off..] laid out [token][head][head_dim]; token t is
// at position pos0 + t. One invocation per (token, head, pair j < head_dim/2).
//
// The angle is formed exactly as the CPU reference forms it (f32: pos * scale * inv_freq[j]
// / factor_j, with inv_freq computed on the host by the same expression), and its sine and
// cosine are computed here to ~1e-7 absolute for angles up to ~2e5 rad, because the
// hardware sin/cos lose accuracy far from zero (positions reach 131072).
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

// pi/2 = C1 + C2 + C3 + C4 (to ~5e-15). C1..C3 have 7 significant bits, so k * Ci is exact
// for |k| < 2^17 and each subtraction below loses nothing (Cody-Waite reduction).
const C1: f32 = 1.5625;
const C2: f32 = 0.0081787109375;
const C3: f32 = 0.00011730194091796875;
const C4: f32 = 3.1391647e-07;

// (sin x, cos x): x = k*pi/2 + r with |r| <= ~pi/4, Taylor polynomials in r (truncation
// < 1e-11 there), then the quadrant k mod 4.
fn sin_cos(x: f32) -> vec2<f32> {
    let k = round(x * 0.63661975);
    var r = x - k * C1;
    r = r - k * C2;
    r = r - k * C3;
    r = r - k * C4;
    let r2 = r * r;
    let ps = -1.0 / 6.0 + r2 * (1.0 / 120.0 + r2 * (-1.0 / 5040.0 + r2 * (1.0 / 362880.0 + r2 * (-1.0 / 39916800.0))));
    let pc = -0.5 + r2 * (1.0 / 24.0 + r2 * (-1.0 / 720.0 + r2 * (1.0 / 40320.0 + r2 * (-1.0 / 3628800.0 + r2 * (1.0 / 479001600.0)))));
    let s = r + r * r2 * ps;
    let c = 1.0 + r2 * pc;
    switch (i32(k) & 3) {
        case 0: { return vec2<f32>(s, c); }
        case 1: { return vec2<f32>(c, -s); }
        case 2: { return vec2<f32>(-s, -c); }
        default: { return vec2<f32>(-c, s); }
    }
}

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
