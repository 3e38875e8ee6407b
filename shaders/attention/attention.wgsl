// Causal attention with an online softmax (flash style): memory stays O(head_dim) whatever
// the number of keys. One workgroup per (token, head, split); it streams its keys in tiles
// of WG: each invocation scores one key of the tile, the tile's max and sum update the
// running (m, l), then each invocation accumulates the output dimensions it owns
// (d = lid + i*WG) over the tile's keys.
//
// splits == 1: out[out_off + (t*n_heads + h)*v_head_dim + d] = softmax-weighted sum of V.
// splits > 1: split s covers keys [first + s*chunk, first + (s+1)*chunk) of the query's
// range and writes the unnormalised partial (m, l, acc[v_head_dim]) at
// out[((t*n_heads + h)*splits + s)*(v_head_dim + 2)]; attention_merge.wgsl combines them.
const WG: u32 = 64u;
const MAX_HD: u32 = 512u;
const PER: u32 = 8u; // MAX_HD / WG output dimensions per invocation
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
@group(0) @binding(2) var<storage, read> kc: array<f32>;
@group(0) @binding(3) var<storage, read> vc: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

var<workgroup> q_s: array<f32, MAX_HD>;
var<workgroup> w_s: array<f32, WG>;

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

    for (var i = lid; i < p.head_dim; i += WG) {
        q_s[i] = q[p.q_off + th * p.head_dim + i];
    }
    workgroupBarrier();

    var m = NEG;
    var l = 0.0;
    var acc: array<f32, PER>;
    for (var t0 = k0; t0 < k1; t0 += WG) {
        let key = t0 + lid;
        var s = NEG;
        if (key < k1) {
            let kb = (key * p.kv_heads + kvh) * p.head_dim;
            var d = 0.0;
            for (var i = 0u; i < p.head_dim; i++) {
                d += q_s[i] * kc[kb + i];
            }
            s = d * p.scale;
        }
        let m_new = max(m, wg_max(s, lid));
        let alpha = exp(m - m_new);
        var e = 0.0;
        if (key < k1) {
            e = exp(s - m_new);
        }
        w_s[lid] = e;
        // wg_sum's barriers also publish w_s.
        l = l * alpha + wg_sum(e, lid);
        m = m_new;
        let count = min(WG, k1 - t0);
        for (var i = 0u; i < PER; i++) {
            let d = lid + i * WG;
            if (d < p.v_head_dim) {
                var a = acc[i] * alpha;
                for (var j = 0u; j < count; j++) {
                    a += w_s[j] * vc[((t0 + j) * p.kv_heads + kvh) * p.v_head_dim + d];
                }
                acc[i] = a;
            }
        }
        workgroupBarrier();
    }

    if (p.splits == 1u) {
        let ob = p.out_off + th * p.v_head_dim;
        for (var i = 0u; i < PER; i++) {
            let d = lid + i * WG;
            if (d < p.v_head_dim) {
                out[ob + d] = acc[i] / l;
            }
        }
    } else {
        let ob = g * (p.v_head_dim + 2u);
        if (lid == 0u) {
            out[ob] = m;
            out[ob + 1u] = l;
        }
        for (var i = 0u; i < PER; i++) {
            let d = lid + i * WG;
            if (d < p.v_head_dim) {
                out[ob + 2u + d] = acc[i];
            }
        }
    }
}
