// Attention for one query token (decode): the same contract, parameters and outputs as
// attention.wgsl (including split partials for attention_merge.wgsl), arranged for a
// single query row. attention.wgsl gives each invocation a whole key: a chain of
// head_dim / 4 reads per key. Here S invocations share a key (each a strided slice of
// its dimensions), so a tile of KT keys is scored with a few independent reads per
// invocation, and the V pass reads each key's row with all WG invocations at once.
const WG: u32 = 256u;
const S: u32 = 8u;
const KT: u32 = WG / S;
const MAX_HD: u32 = 512u;
const PER: u32 = MAX_HD / WG;
const NEG: f32 = -3.0e38; // below any logit; exp(NEG - m) is 0

struct Params {
    n_tokens: u32,
    n_heads: u32,
    head_dim: u32,
    kv_heads: u32,
    v_head_dim: u32,
    pos0: u32,
    window: u32,
    scale: f32,
    q_off: u32,
    out_off: u32,
    splits: u32,
    chunk: u32,
    groups_x: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> kc: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> vc: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

var<workgroup> q_s: array<vec4<f32>, MAX_HD / 4u>;
var<workgroup> part: array<f32, WG>;
var<workgroup> sc: array<f32, KT>;
var<workgroup> ew: array<f32, KT>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let g = wg.x + wg.y * p.groups_x;
    if (g >= p.n_tokens * p.n_heads * p.splits) {
        return;
    }
    let split = g % p.splits;
    let th = g / p.splits; // token * n_heads + head
    let h = th % p.n_heads;
    let pos = p.pos0 + th / p.n_heads;
    var first = 0u;
    if (p.window > 0u && pos + 1u > p.window) {
        first = pos + 1u - p.window;
    }
    let k0 = first + split * p.chunk;
    let k1 = min(k0 + p.chunk, pos + 1u);
    let kvh = h / (p.n_heads / p.kv_heads);
    let hd4 = p.head_dim / 4u;
    if (lid < hd4) {
        let qb = p.q_off + th * p.head_dim + 4u * lid;
        q_s[lid] = vec4<f32>(q[qb], q[qb + 1u], q[qb + 2u], q[qb + 3u]);
    }
    workgroupBarrier();

    let j = lid / S;
    let sl = lid % S;
    let stride = p.kv_heads * p.v_head_dim;
    var m = NEG;
    var l = 0.0;
    var acc: array<f32, PER>;
    for (var t0 = k0; t0 < k1; t0 += KT) {
        // Scores: invocations j*S .. j*S+S-1 take key t0 + j.
        let key = t0 + j;
        var d = 0.0;
        if (key < k1) {
            let kb = (key * p.kv_heads + kvh) * hd4;
            for (var i = sl; i < hd4; i += S) {
                d += dot(q_s[i], kc[kb + i]);
            }
        }
        part[lid] = d;
        workgroupBarrier();
        if (lid < KT) {
            var s = NEG;
            if (t0 + lid < k1) {
                var t = 0.0;
                for (var u = 0u; u < S; u++) {
                    t += part[lid * S + u];
                }
                s = t * p.scale;
            }
            sc[lid] = s;
        }
        workgroupBarrier();
        var tm = NEG;
        for (var u = 0u; u < KT; u++) {
            tm = max(tm, sc[u]);
        }
        let m_new = max(m, tm);
        let alpha = exp(m - m_new);
        if (lid < KT) {
            var e = 0.0;
            if (t0 + lid < k1) {
                e = exp(sc[lid] - m_new);
            }
            ew[lid] = e;
        }
        workgroupBarrier();
        let count = min(KT, k1 - t0);
        var tl = 0.0;
        for (var u = 0u; u < count; u++) {
            tl += ew[u];
        }
        l = l * alpha + tl;
        m = m_new;
        for (var i = 0u; i < PER; i++) {
            let dd = lid + i * WG;
            if (dd < p.v_head_dim) {
                var vb = (t0 * p.kv_heads + kvh) * p.v_head_dim + dd;
                var a0 = acc[i] * alpha;
                var a1 = 0.0;
                var u = 0u;
                for (; u + 1u < count; u += 2u) {
                    a0 += ew[u] * vc[vb];
                    a1 += ew[u + 1u] * vc[vb + stride];
                    vb += 2u * stride;
                }
                if (u < count) {
                    a0 += ew[u] * vc[vb];
                }
                acc[i] = a0 + a1;
            }
        }
        workgroupBarrier();
    }

    if (p.splits == 1u) {
        let ob = p.out_off + th * p.v_head_dim;
        for (var i = 0u; i < PER; i++) {
            let dd = lid + i * WG;
            if (dd < p.v_head_dim) {
                out[ob + dd] = acc[i] / l;
            }
        }
    } else {
        let ob = g * (p.v_head_dim + 2u);
        if (lid == 0u) {
            out[ob] = m;
            out[ob + 1u] = l;
        }
        for (var i = 0u; i < PER; i++) {
            let dd = lid + i * WG;
            if (dd < p.v_head_dim) {
                out[ob + 2u + dd] = acc[i];
            }
        }
    }
}
