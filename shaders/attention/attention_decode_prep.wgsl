// attention_decode.wgsl's hooks when decode attention also does the new token's per-head
// work, with rope/head_norm_rope.wgsl's arithmetic, instead of a dispatch of its own:
// - q is RMS-normed (weighted by wq or not) and rotated (NeoX RoPE) as it is loaded;
// - with K_FRESH in k_flags the new position's K and V rows arrive raw (kn, vn: one token,
//   [kv_head][dim]). Every workgroup whose keys end at that position (p.pos0) norms and
//   rotates K and norms V itself, rounded as the caches hold them (kv_round2 in kv_f32 /
//   kv_f16.wgsl), reads the other keys from the caches and adds this one last
//   (fresh_key); one of them per KV head (its group's first query head) stores the row
//   into the caches, which nothing else in this dispatch reads.
// Composed with common/reduce*.wgsl and rope/sin_cos.wgsl. Each reduction on this
// kernel's path is a wait of its own, so the three heads' sums of squares share one
// (wg_sum4) and the new key's score takes the second (wg_sum). RoPE's sine and cosine need
// neither, so they are made with the loads, before the first (what was on that path: E2B
// decode with no RoPE at all, timing only, 467.0-468.2 tok/s against 463.6-465.0 on an
// H100, three alternated rounds; the move's own share was not measured apart).
const NORM: u32 = 1u;
const WEIGHTED: u32 = 2u;
const ROPE: u32 = 4u;
const K_FRESH: u32 = 8u;

@group(0) @binding(2) var<storage, read_write> kc: array<KC>;
@group(0) @binding(3) var<storage, read_write> vc: array<KC>;
@group(0) @binding(5) var<storage, read> wq: array<f32>;
@group(0) @binding(6) var<storage, read> wk: array<f32>;
@group(0) @binding(7) var<storage, read> inv_freq: array<f32>;
@group(0) @binding(8) var<storage, read> factors: array<f32>;
@group(0) @binding(9) var<storage, read> kn: array<f32>;
@group(0) @binding(10) var<storage, read> vn: array<f32>;

// The new K and V rows after norm and RoPE, rounded as the caches hold them.
var<workgroup> kt_s: array<f32, 4u * HD4>;
var<workgroup> vt_s: array<f32, VPER * WG>;

// What this invocation's part of the per-head work reads, loaded together before any of
// it is used (with the first tile's K and V): one wait on memory instead of one per step
// (q, its norm, RoPE's frequencies, the new K and V each waited on the reduction before).
// j: the RoPE pair (j, j + half) of q and K; i: the V pair (2i, 2i + 1).
struct Pre {
    q: vec2<f32>,
    wq: vec2<f32>,
    k: vec2<f32>,
    wk: vec2<f32>,
    v: vec2<f32>,
    // RoPE pair j's (sin, cos) at the new position.
    rot: vec2<f32>,
}

fn pre_load(sp: Span, lid: u32) -> Pre {
    let half = 2u * HD4;
    let vh = p.v_head_dim / 2u;
    let j = min(lid, half - 1u);
    let i = min(lid, vh - 1u);
    let at = p.q_off + sp.th * p.head_dim + j;
    let kb = sp.kvh * p.head_dim + j;
    let vb = sp.kvh * p.v_head_dim + 2u * i;
    var theta = f32(p.pos0) * p.rope_scale * inv_freq[j];
    if (p.has_factors != 0u) {
        theta = theta / factors[j];
    }
    return Pre(
        vec2<f32>(q[at], q[at + half]),
        vec2<f32>(wq[j], wq[j + half]),
        vec2<f32>(kn[kb], kn[kb + half]),
        vec2<f32>(wk[j], wk[j + half]),
        vec2<f32>(vn[vb], vn[vb + 1u]),
        sin_cos(theta),
    );
}

// What a pair (x.x, x.y) = elements (j, j + half) of a head becomes: RMS-normed by its
// head's sum of squares `ss` when `flags` ask, times the weights `w` (WEIGHTED), then
// rotated by RoPE pair j's (sin, cos) `sc` (ROPE).
fn head_pair(x: vec2<f32>, w: vec2<f32>, sc: vec2<f32>, flags: u32, ss: f32, dim: u32) -> vec2<f32> {
    var v = x;
    // Uniform per workgroup: the flags decide.
    if ((flags & NORM) != 0u) {
        v *= inverseSqrt(ss / f32(dim) + p.eps);
        if ((flags & WEIGHTED) != 0u) {
            v *= w;
        }
    }
    if ((flags & ROPE) != 0u) {
        v = vec2<f32>(v.x * sc.y - v.y * sc.x, v.y * sc.y + v.x * sc.x);
    }
    return v;
}

fn cached_end(sp: Span) -> u32 {
    if ((p.k_flags & K_FRESH) == 0u || sp.k1 != p.pos0 + 1u) {
        return sp.k1;
    }
    return sp.k1 - 1u;
}

// q pair (j, j + half) of head th into q_s for invocation j = lid < half; in the
// workgroups whose keys end at the new position also the new K and V (K: invocation
// j < half holds the RoPE pair (j, j + half); V: invocation i < vh the neighbours (2i,
// 2i + 1)), rounded as the caches store them, the new key's score
// (returned, scaled) and, in one workgroup per KV head, the row stored into the caches.
// q_s is complete after the caller's barrier; kt_s and vt_s already are on return.
fn prepare(sp: Span, lid: u32, pre: Pre) -> f32 {
    let half = 2u * HD4;
    let vh = p.v_head_dim / 2u;
    let j = min(lid, half - 1u);
    let i = min(lid, vh - 1u);
    // Uniform per workgroup.
    let fresh = cached_end(sp) != sp.k1;
    let qx = select(vec2<f32>(0.0), pre.q, lid < half);
    let kx = select(vec2<f32>(0.0), pre.k, fresh && lid < half);
    let vx = select(vec2<f32>(0.0), pre.v, fresh && lid < vh);
    let ss = wg_sum4(vec4<f32>(dot(qx, qx), dot(kx, kx), dot(vx, vx), 0.0), lid);
    let qv = head_pair(qx, pre.wq, pre.rot, p.q_flags, ss.x, p.head_dim);
    if (lid < half) {
        q_s[j >> 2u][j & 3u] = qv.x;
        q_s[(j + half) >> 2u][(j + half) & 3u] = qv.y;
    }
    if (!fresh) {
        return 0.0;
    }
    let kv = kv_round2(head_pair(kx, pre.wk, pre.rot, p.k_flags, ss.y, p.head_dim));
    let vv = kv_round2(head_pair(vx, vec2<f32>(1.0), vec2<f32>(0.0, 1.0), p.v_flags & NORM, ss.z, p.v_head_dim));
    if (lid < half) {
        kt_s[j] = kv.x;
        kt_s[j + half] = kv.y;
    }
    if (lid < vh) {
        vt_s[2u * i] = vv.x;
        vt_s[2u * i + 1u] = vv.y;
    }
    // Invocations past the head hold zeros in qv and kv.
    let score = wg_sum(dot(qv, kv), lid);
    if ((sp.th % p.n_heads) % (p.n_heads / p.kv_heads) == 0u) {
        let at = p.pos0 * p.kv_heads + sp.kvh;
        if (lid < HD4) {
            kc[at * HD4 + lid] = kv_pack4(vec4<f32>(kt_s[4u * lid], kt_s[4u * lid + 1u], kt_s[4u * lid + 2u], kt_s[4u * lid + 3u]));
        }
        if (lid < VHD4) {
            vc[at * VHD4 + lid] = kv_pack4(vec4<f32>(vt_s[4u * lid], vt_s[4u * lid + 1u], vt_s[4u * lid + 2u], vt_s[4u * lid + 3u]));
        }
    }
    return score * p.scale;
}

// The online-softmax step of attention_decode.wgsl for the new key alone (its score `s`
// from prepare).
fn fresh_key(lid: u32, s: f32, m: ptr<function, f32>, l: ptr<function, f32>, acc: ptr<function, array<f32, PER>>) {
    let m_new = max(*m, s);
    let alpha = exp(*m - m_new);
    let e = exp(s - m_new);
    *l = *l * alpha + e;
    *m = m_new;
    for (var i = 0u; i < VPER; i++) {
        let dd = lid + i * WG;
        if (dd < p.v_head_dim) {
            (*acc)[i] = (*acc)[i] * alpha + e * vt_s[dd];
        }
    }
}
