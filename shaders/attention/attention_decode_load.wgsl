// attention_decode.wgsl's hooks for a new token whose q, K and V are ready (normed and
// rotated by rope/head_norm_rope.wgsl, K and V in the caches): q as stored, every key
// read from the caches (bound read-only).
@group(0) @binding(2) var<storage, read> kc: array<KC>;
@group(0) @binding(3) var<storage, read> vc: array<KC>;

// This invocation's q vec4, loaded with the first tile's K and V.
struct Pre {
    q: vec4<f32>,
}

fn pre_load(sp: Span, lid: u32) -> Pre {
    let qb = p.q_off + sp.th * p.head_dim + 4u * min(lid, HD4 - 1u);
    return Pre(vec4<f32>(q[qb], q[qb + 1u], q[qb + 2u], q[qb + 3u]));
}

fn prepare(sp: Span, lid: u32, pre: Pre) -> f32 {
    if (lid < HD4) {
        q_s[lid] = pre.q;
    }
    return 0.0;
}

fn cached_end(sp: Span) -> u32 {
    return sp.k1;
}

fn fresh_key(lid: u32, s: f32, m: ptr<function, f32>, l: ptr<function, f32>, acc: ptr<function, array<f32, PER>>) {}
