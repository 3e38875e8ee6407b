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
// dispatch per layer). pre_load reads what the per-head work needs (into registers, with
// the first tile's K and V), prepare fills q_s from it; cached_end says where the keys read
// from the caches end: before the new position when prepare makes that key's K and V (and
// returns its score) itself, which fresh_key then adds after the cached keys (the loops
// over the caches stay as they are).
// finish(th, lid) runs after the store: attention_decode_merge.wgsl's merge of the
// row's splits by the last of them, or nothing (defined in the header).
//
// Every loop has a constant trip count, so each can unroll and issue all its loads before
// the first is used; keys past the range read the range's last key again and weigh 0.
// In decode a workgroup mostly has one tile, so the kernel is bound by its chain of memory
// round trips: the first tile's K and V are read into registers before q is loaded and
// normed, not after (H100: 270M decode 1,099-1,107 → 1,141-1,181 tok/s, E2B 289-292 →
// 293-295; decode_bench, 4 heads at 256 keys with the prep, 16.8 → 15.3 µs).
const WG: u32 = 256u;
const S: u32 = 8u;
const KT: u32 = WG / S;
const PER: u32 = MAX_HD / WG;
const KI: u32 = (HD4 + S - 1u) / S;

var<workgroup> q_s: array<vec4<f32>, HD4>;
var<workgroup> part: array<f32, WG>;
var<workgroup> sc: array<f32, KT>;
var<workgroup> ew: array<f32, KT>;

// The slices of tile t0's keys (up to `last`) this invocation scores and weighs: key
// t0 + lid / S's K vec4s lid % S + S * ii, and V dimension lid + WG * i of every key.
fn load_k(t0: u32, last: u32, kvh: u32, lid: u32, kr: ptr<function, array<vec4<f32>, KI>>) {
    let kb = (min(t0 + lid / S, last) * p.kv_heads + kvh) * HD4;
    for (var ii = 0u; ii < KI; ii++) {
        (*kr)[ii] = k4(kb + min(lid % S + ii * S, HD4 - 1u));
    }
}

fn load_v(t0: u32, last: u32, kvh: u32, lid: u32, vr: ptr<function, array<array<f32, KT>, VPER>>) {
    let stride = p.kv_heads * p.v_head_dim;
    for (var i = 0u; i < VPER; i++) {
        let vb = kvh * p.v_head_dim + min(lid + i * WG, p.v_head_dim - 1u);
        for (var u = 0u; u < KT; u++) {
            (*vr)[i][u] = v1(vb + min(t0 + u, last) * stride);
        }
    }
}

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
    // The first tile's K and V are loaded before q and the new key's prep, so their reads
    // overlap; each later tile's are loaded as soon as the registers are free.
    let kend = cached_end(sp);
    var kr: array<vec4<f32>, KI>;
    var vr: array<array<f32, KT>, VPER>;
    if (k0 < kend) {
        load_k(k0, kend - 1u, kvh, lid, &kr);
        load_v(k0, kend - 1u, kvh, lid, &vr);
    }
    let pre = pre_load(sp, lid);
    let fresh_score = prepare(sp, lid, pre);
    workgroupBarrier();

    let sl = lid % S;
    var m = NEG;
    var l = 0.0;
    var acc: array<f32, PER>;
    for (var t0 = k0; t0 < kend; t0 += KT) {
        let last = kend - 1u;
        let more = t0 + KT < kend;
        // Scores: invocations j*S .. j*S+S-1 take key t0 + j.
        var d = 0.0;
        for (var ii = 0u; ii < KI; ii++) {
            let i = sl + ii * S;
            d += select(0.0, dot(q_s[min(i, HD4 - 1u)], kr[ii]), i < HD4);
        }
        if (more) {
            load_k(t0 + KT, last, kvh, lid, &kr);
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
            if (lid + i * WG < p.v_head_dim) {
                var a0 = acc[i] * alpha;
                var a1 = 0.0;
                for (var u = 0u; u < KT; u += 2u) {
                    a0 += ew[u] * vr[i][u];
                    a1 += ew[u + 1u] * vr[i][u + 1u];
                }
                acc[i] = a0 + a1;
            }
        }
        if (more) {
            load_v(t0 + KT, last, kvh, lid, &vr);
        }
        workgroupBarrier();
    }
    if (kend < k1) {
        fresh_key(lid, fresh_score, &m, &l, &acc);
    }

    store(g, th, lid, m, l, &acc);
    finish(th, lid);
}
