// Causal attention with an online softmax (flash style): memory stays O(head_dim) whatever
// the number of keys. One workgroup per (token, G ≤ 4 heads that share a KV head, split): each
// K and V element it reads serves all G queries (prefill reads the cache G times less
// than with one head per workgroup). It streams its keys in tiles of WG: each invocation
// scores one key for every head, each head's tile max and sum update its running (m, l),
// then each invocation accumulates the output dimensions it owns (d = lid + i*WG) over the
// tile's keys for every head. Composed after a header (G heads, WG invocations) with attention_common.wgsl
// (parameters, bindings, key range, output) and kv_f32.wgsl or kv_f16.wgsl.
const PER: u32 = MAX_HD / WG; // output dimensions per invocation
const Q4: u32 = MAX_HD / 4u;

@group(0) @binding(2) var<storage, read> kc: array<KC>;
@group(0) @binding(3) var<storage, read> vc: array<KC>;

var<workgroup> q_s: array<vec4<f32>, G * Q4>;
var<workgroup> w_s: array<f32, G * WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let groups = p.n_heads / G;
    let g = wg.x + wg.y * p.groups_x;
    if (g >= p.n_tokens * groups * p.splits) {
        return;
    }
    // The first head's row; its span gives the KV head and keys, the same for all G.
    let split = g % p.splits;
    let rg = g / p.splits;
    let th0 = (rg / groups) * p.n_heads + (rg % groups) * G;
    let sp = span(th0 * p.splits + split);
    let kvh = sp.kvh;
    let k0 = sp.k0;
    let k1 = sp.k1;

    let hd4 = p.head_dim / 4u;
    for (var gi = 0u; gi < G; gi++) {
        for (var i = lid; i < hd4; i += WG) {
            let qb = p.q_off + (th0 + gi) * p.head_dim + 4u * i;
            q_s[gi * Q4 + i] = vec4<f32>(q[qb], q[qb + 1u], q[qb + 2u], q[qb + 3u]);
        }
    }
    workgroupBarrier();

    var m: array<f32, G>;
    var l: array<f32, G>;
    var acc: array<array<f32, PER>, G>;
    for (var gi = 0u; gi < G; gi++) {
        m[gi] = NEG;
        l[gi] = 0.0;
    }
    let stride = p.kv_heads * p.v_head_dim;
    for (var t0 = k0; t0 < k1; t0 += WG) {
        let key = t0 + lid;
        var dv: array<vec4<f32>, G>;
        if (key < k1) {
            let kb = (key * p.kv_heads + kvh) * hd4;
            for (var i = 0u; i < hd4; i++) {
                let kv = k4(kb + i);
                for (var gi = 0u; gi < G; gi++) {
                    dv[gi] += q_s[gi * Q4 + i] * kv;
                }
            }
        }
        var alpha: array<f32, G>;
        for (var gi = 0u; gi < G; gi++) {
            var s = NEG;
            if (key < k1) {
                s = (dv[gi].x + dv[gi].y + dv[gi].z + dv[gi].w) * p.scale;
            }
            let m_new = max(m[gi], wg_max(s, lid));
            alpha[gi] = exp(m[gi] - m_new);
            var e = 0.0;
            if (key < k1) {
                e = exp(s - m_new);
            }
            w_s[gi * WG + lid] = e;
            // wg_sum's barriers also publish w_s.
            l[gi] = l[gi] * alpha[gi] + wg_sum(e, lid);
            m[gi] = m_new;
        }
        let count = min(WG, k1 - t0);
        for (var i = 0u; i < PER; i++) {
            let d = lid + i * WG;
            if (d < p.v_head_dim) {
                var a: array<f32, G>;
                for (var gi = 0u; gi < G; gi++) {
                    a[gi] = acc[gi][i] * alpha[gi];
                }
                var vb = (t0 * p.kv_heads + kvh) * p.v_head_dim + d;
                for (var j = 0u; j < count; j++) {
                    let v = v1(vb);
                    for (var gi = 0u; gi < G; gi++) {
                        a[gi] += w_s[gi * WG + j] * v;
                    }
                    vb += stride;
                }
                for (var gi = 0u; gi < G; gi++) {
                    acc[gi][i] = a[gi];
                }
            }
        }
        workgroupBarrier();
    }

    for (var gi = 0u; gi < G; gi++) {
        var out_acc = acc[gi];
        store((th0 + gi) * p.splits + split, th0 + gi, lid, m[gi], l[gi], &out_acc);
    }
}
