// Causal attention with an online softmax (flash style): memory stays O(head_dim) whatever
// the number of keys. One workgroup per (token, head, split); it streams its keys in tiles
// of WG: each invocation scores one key of the tile, the tile's max and sum update the
// running (m, l), then each invocation accumulates the output dimensions it owns
// (d = lid + i*WG) over the tile's keys. Composed with attention_common.wgsl (parameters,
// bindings, key range, output).
const WG: u32 = 64u;
const PER: u32 = 8u; // MAX_HD / WG output dimensions per invocation

var<workgroup> q_s: array<vec4<f32>, MAX_HD / 4u>;
var<workgroup> w_s: array<f32, WG>;

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
    for (var i = lid; i < hd4; i += WG) {
        let qb = p.q_off + th * p.head_dim + 4u * i;
        q_s[i] = vec4<f32>(q[qb], q[qb + 1u], q[qb + 2u], q[qb + 3u]);
    }
    workgroupBarrier();

    var m = NEG;
    var l = 0.0;
    var acc: array<f32, PER>;
    for (var t0 = k0; t0 < k1; t0 += WG) {
        let key = t0 + lid;
        var s = NEG;
        if (key < k1) {
            let kb = (key * p.kv_heads + kvh) * hd4;
            // Two accumulators let consecutive loads overlap.
            var d0 = vec4<f32>(0.0);
            var d1 = vec4<f32>(0.0);
            var i = 0u;
            for (; i + 1u < hd4; i += 2u) {
                d0 += q_s[i] * k4(kb + i);
                d1 += q_s[i + 1u] * k4(kb + i + 1u);
            }
            if (i < hd4) {
                d0 += q_s[i] * k4(kb + i);
            }
            let dv = d0 + d1;
            s = (dv.x + dv.y + dv.z + dv.w) * p.scale;
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
                let stride = p.kv_heads * p.v_head_dim;
                var vb = (t0 * p.kv_heads + kvh) * p.v_head_dim + d;
                var a0 = acc[i] * alpha;
                var a1 = 0.0;
                var j = 0u;
                for (; j + 1u < count; j += 2u) {
                    a0 += w_s[j] * v1(vb);
                    a1 += w_s[j + 1u] * v1(vb + stride);
                    vb += 2u * stride;
                }
                if (j < count) {
                    a0 += w_s[j] * v1(vb);
                }
                acc[i] = a0 + a1;
            }
        }
        workgroupBarrier();
    }

    store(g, th, lid, m, l, &acc);
}
