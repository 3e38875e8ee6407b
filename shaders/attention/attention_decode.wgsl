// Attention for one query token (decode): the same contract, parameters and outputs as
// attention.wgsl (including split partials for attention_merge.wgsl), arranged for a
// single query row. attention.wgsl gives each invocation a whole key: a chain of
// head_dim / 4 reads per key. Here S invocations share a key (each a strided slice of
// its dimensions), so a tile of KT keys is scored with a few independent reads per
// invocation, and the V pass reads each key's row with all WG invocations at once.
// Composed after a header (HD4 = head_dim / 4, VHD4 = v_head_dim / 4, S = invocations
// per key: see decode_s in attention.rs) and with
// attention_common.wgsl (parameters, bindings, key range, output) and the new token's hooks:
// attention_decode_load.wgsl (q, K and V already normed and rotated, K and V in the caches)
// or attention_decode_prep.wgsl (this kernel does that per-head work itself, which saves a
// dispatch per layer). pre_load reads what the per-head work needs (into registers, with
// the first tile's K and V), prepare fills q_s from it; cached_end says where the keys read
// from the caches end: before the new position when prepare makes that key's K and V (and
// returns its score) itself, which fresh_key then adds after the cached keys (the loops
// over the caches stay as they are).
// key_sum(d, lid) adds a key's S partial dot products, right in the key's first invocation
// at least: attention_decode_sum_subgroup.wgsl (shuffles) or attention_decode_sum_shared.wgsl.
// finish(th, lid) runs after the store: attention_decode_merge.wgsl's merge of the
// row's splits by the last of them, or nothing (defined in the header).
//
// Every loop has a constant trip count, so each can unroll and issue all its loads before
// the first is used; keys past the range read the range's last key again and weigh 0.
// In decode a workgroup mostly has one tile, so the kernel is bound by its chain of memory
// round trips: the first tile's K and V are read into registers before q is loaded and
// normed, not after (H100: 270M decode 1,099-1,107 → 1,141-1,181 tok/s, E2B 289-292 →
// 293-295; decode_bench, 4 heads at 256 keys with the prep, 16.8 → 15.3 µs).
//
// V is read in 4-element words (v4): invocation lid takes word column lid % VHD4 of the
// tile's keys kg + NKG·j (key group kg = lid / VHD4), and the groups' sums meet once,
// after the last tile. One element per invocation and key took a load per element: H100,
// E2B decode attention 17.3 / 25.6 µs at head size 256 / 512 (without reading V at all,
// timing only: 14.7 / 19.5), now 16.4 / 21.1 (with S = 16 at 512); E2B decode 417.6-417.9
// -> 426.6-426.8 tok/s, 391 -> 412 at depth 4096 (docs/performance-log.md).
const WG: u32 = 256u;
const KT: u32 = WG / S;
const PER: u32 = MAX_HD / WG;
// Output dimensions this invocation holds (d = lid + i·WG): ceil(v_head_dim / WG).
const VPER: u32 = (4u * VHD4 + WG - 1u) / WG;
const KI: u32 = (HD4 + S - 1u) / S;
// Key groups of the V words (v_head_dim <= 512, so VHD4 <= WG) and keys per group.
const NKG: u32 = WG / VHD4;
const KPI: u32 = (KT + NKG - 1u) / NKG;

var<workgroup> q_s: array<vec4<f32>, HD4>;
// Scores of two tiles: a tile writes one half while slower invocations may still read the
// tile before's, so the loop needs no barrier after its reads.
var<workgroup> sc: array<f32, 2u * KT>;
var<workgroup> vsum: array<vec4<f32>, WG>;
var<workgroup> lsum: array<f32, NKG>;

// The slices of tile t0's keys (up to `last`) this invocation scores and weighs: key
// t0 + lid / S's K vec4s lid % S + S * ii, and V word lid % VHD4 of keys t0 + kg + NKG·j.
fn load_k(t0: u32, last: u32, kvh: u32, lid: u32, kr: ptr<function, array<vec4<f32>, KI>>) {
    let kb = (min(t0 + lid / S, last) * p.kv_heads + kvh) * HD4;
    for (var ii = 0u; ii < KI; ii++) {
        (*kr)[ii] = k4(kb + min(lid % S + ii * S, HD4 - 1u));
    }
}

fn load_v(t0: u32, last: u32, kvh: u32, lid: u32, vr: ptr<function, array<vec4<f32>, KPI>>) {
    let vb = kvh * VHD4 + lid % VHD4;
    let kg = min(lid / VHD4, NKG - 1u);
    for (var j = 0u; j < KPI; j++) {
        (*vr)[j] = v4(vb + min(t0 + kg + NKG * j, last) * p.kv_heads * VHD4);
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
    var vr: array<vec4<f32>, KPI>;
    if (k0 < kend) {
        load_k(k0, kend - 1u, kvh, lid, &kr);
        load_v(k0, kend - 1u, kvh, lid, &vr);
    }
    let pre = pre_load(sp, lid);
    let fresh_score = prepare(sp, lid, pre);
    workgroupBarrier();

    // This invocation's key in a tile (for the scores) and its V word's key group
    // (invocations past the groups weigh a clamped group's keys, which nothing reads).
    let ks = lid / S;
    let kg = lid / VHD4;
    var m = NEG;
    // This key group's share of the softmax denominator; the groups' shares meet at the end.
    var l = 0.0;
    var acc4 = vec4<f32>(0.0);
    var half = 0u;
    for (var t0 = k0; t0 < kend; t0 += KT) {
        let last = kend - 1u;
        let more = t0 + KT < kend;
        // Scores: invocations ks*S .. ks*S+S-1 take key t0 + ks.
        var d = 0.0;
        for (var ii = 0u; ii < KI; ii++) {
            let i = lid % S + ii * S;
            d += select(0.0, dot(q_s[min(i, HD4 - 1u)], kr[ii]), i < HD4);
        }
        if (more) {
            load_k(t0 + KT, last, kvh, lid, &kr);
        }
        let t = key_sum(d, lid);
        if (lid % S == 0u) {
            sc[half + ks] = select(NEG, t * p.scale, t0 + ks <= last);
        }
        workgroupBarrier();
        // Every invocation takes the tile's maximum and the weights of its own keys from
        // the scores itself: one barrier a tile, where exchanging the partial scores and
        // the weights through workgroup memory took four (H100, four alternated runs: E2B
        // decode 425.0-426.3 -> 425.6-427.5 tok/s, 270M 1,508-1,515 -> 1,517-1,523; the
        // kernel at head size 512 21.3 -> 20.6 µs).
        var tm = NEG;
        for (var u = 0u; u < KT; u++) {
            tm = max(tm, sc[half + u]);
        }
        let m_new = max(m, tm);
        let alpha = exp(m - m_new);
        var tl = l * alpha;
        var a4 = acc4 * alpha;
        for (var j = 0u; j < KPI; j++) {
            let u = kg + NKG * j;
            if (u < KT) {
                let e = select(0.0, exp(sc[half + u] - m_new), t0 + u <= last);
                tl += e;
                a4 += e * vr[j];
            }
        }
        l = tl;
        acc4 = a4;
        m = m_new;
        if (more) {
            load_v(t0 + KT, last, kvh, lid, &vr);
        }
        half = KT - half;
    }
    // The key groups' sums meet: dimension d = lid + i·WG is word d / 4 of each group.
    vsum[lid] = acc4;
    if (lid % VHD4 == 0u && kg < NKG) {
        lsum[kg] = l;
    }
    workgroupBarrier();
    var acc: array<f32, PER>;
    for (var i = 0u; i < VPER; i++) {
        let d = min(lid + i * WG, 4u * VHD4 - 1u);
        var t = 0.0;
        for (var kgi = 0u; kgi < NKG; kgi++) {
            t += vsum[kgi * VHD4 + d / 4u][d % 4u];
        }
        acc[i] = t;
    }
    l = 0.0;
    for (var kgi = 0u; kgi < NKG; kgi++) {
        l += lsum[kgi];
    }
    if (kend < k1) {
        fresh_key(lid, fresh_score, &m, &l, &acc);
    }

    store(g, th, lid, m, l, &acc);
    finish(th, lid);
}
