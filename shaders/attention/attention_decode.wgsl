// Attention for one query token (decode): the same contract, parameters and outputs as
// attention.wgsl (including split partials for attention_merge.wgsl), arranged for a
// single query row. attention.wgsl gives each invocation a whole key: a chain of
// head_dim / 4 reads per key. Here S invocations share a key (each a strided slice of
// its dimensions), so a tile of KT keys is scored with a few independent reads per
// invocation, and the V pass reads each key's row with all WG invocations at once.
// Composed after a header (HD4 = head_dim / 4, VPER = ceil(v_head_dim / WG)) and with
// attention_common.wgsl (parameters, bindings, key range, output) and the new token's hooks:
// attention_decode_load.wgsl (q, K and V already normed and rotated, K and V in the caches)
// or attention_decode_prep.wgsl (this kernel does that per-head work itself, which saves a
// dispatch per layer). load_q fills q_s; new_kv returns where the keys read from the
// caches end: before the new position when it prepared that key's K and V itself, which
// fresh_key then adds after the cached keys (the loops over the caches stay as they are).
// finish(th, lid) runs after the store: attention_decode_merge.wgsl's merge of the
// row's splits by the last of them, or nothing (defined in the header).
//
// Every loop has a constant trip count, so each can unroll and issue all its loads before
// the first is used; keys past the range read the range's last key again and weigh 0.
// (On an H100 this did not change the kernel's time, ~19 µs per layer in decode: with
// one tile per workgroup it is bound by the workgroup's memory round trips.)
const WG: u32 = 256u;
const S: u32 = 8u;
const KT: u32 = WG / S;
const PER: u32 = MAX_HD / WG;
const KI: u32 = (HD4 + S - 1u) / S;

var<workgroup> q_s: array<vec4<f32>, HD4>;
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
    load_q(th, lid);
    let kend = new_kv(sp, lid);
    workgroupBarrier();

    let j = lid / S;
    let sl = lid % S;
    let stride = p.kv_heads * p.v_head_dim;
    var m = NEG;
    var l = 0.0;
    var acc: array<f32, PER>;
    for (var t0 = k0; t0 < kend; t0 += KT) {
        let last = kend - 1u;
        // Scores: invocations j*S .. j*S+S-1 take key t0 + j.
        let kb = (min(t0 + j, last) * p.kv_heads + kvh) * HD4;
        var d = 0.0;
        for (var ii = 0u; ii < KI; ii++) {
            let i = sl + ii * S;
            d += select(0.0, dot(q_s[min(i, HD4 - 1u)], k4(kb + min(i, HD4 - 1u))), i < HD4);
        }
        part[lid] = d;
        workgroupBarrier();
        if (lid < KT) {
            var t = 0.0;
            for (var u = 0u; u < S; u++) {
                t += part[lid * S + u];
            }
            sc[lid] = select(NEG, t * p.scale, t0 + lid <= last);
        }
        workgroupBarrier();
        var tm = NEG;
        for (var u = 0u; u < KT; u++) {
            tm = max(tm, sc[u]);
        }
        let m_new = max(m, tm);
        let alpha = exp(m - m_new);
        if (lid < KT) {
            ew[lid] = select(0.0, exp(sc[lid] - m_new), t0 + lid <= last);
        }
        workgroupBarrier();
        var tl = 0.0;
        for (var u = 0u; u < KT; u++) {
            tl += ew[u];
        }
        l = l * alpha + tl;
        m = m_new;
        for (var i = 0u; i < VPER; i++) {
            let dd = lid + i * WG;
            if (dd < p.v_head_dim) {
                let vb = kvh * p.v_head_dim + dd;
                var a0 = acc[i] * alpha;
                var a1 = 0.0;
                for (var u = 0u; u < KT; u += 2u) {
                    a0 += ew[u] * v1(vb + min(t0 + u, last) * stride);
                    a1 += ew[u + 1u] * v1(vb + min(t0 + u + 1u, last) * stride);
                }
                acc[i] = a0 + a1;
            }
        }
        workgroupBarrier();
    }
    if (kend < k1) {
        fresh_key(lid, &m, &l, &acc);
    }

    store(g, th, lid, m, l, &acc);
    finish(th, lid);
}
