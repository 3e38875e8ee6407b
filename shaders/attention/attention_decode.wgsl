// Attention for one query token (decode): the same contract, parameters and outputs as
// attention.wgsl (including split partials for attention_merge.wgsl), arranged for a
// single query row. attention.wgsl gives each invocation a whole key: a chain of
// head_dim / 4 reads per key. Here S invocations share a key (each a strided slice of
// its dimensions), so a tile of KT keys is scored with a few independent reads per
// invocation, and the V pass reads each key's row with all WG invocations at once.
// Composed with attention_common.wgsl (parameters, bindings, key range, output).
const WG: u32 = 256u;
const S: u32 = 8u;
const KT: u32 = WG / S;
const PER: u32 = MAX_HD / WG;

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
    let sp = span(g);
    let th = sp.th;
    let kvh = sp.kvh;
    let k0 = sp.k0;
    let k1 = sp.k1;
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
                d += dot(q_s[i], k4(kb + i));
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
                    a0 += ew[u] * v1(vb);
                    a1 += ew[u + 1u] * v1(vb + stride);
                    vb += 2u * stride;
                }
                if (u < count) {
                    a0 += ew[u] * v1(vb);
                }
                acc[i] = a0 + a1;
            }
        }
        workgroupBarrier();
    }

    store(g, th, lid, m, l, &acc);
}
