// What attention.wgsl and attention_decode.wgsl share: parameters, bindings, the key range
// of a workgroup's query, and writing its result. Composed with kv_f32.wgsl or
// kv_f16.wgsl (the cache's element type). The including kernel defines WG, PER
// (output dimensions per invocation, d = lid + i*WG) and its own workgroup arrays.
//
// splits == 1: out[out_off + (t*n_heads + h)*v_head_dim + d] = softmax-weighted sum of V.
// splits > 1: split s covers keys [first + s*chunk, first + (s+1)*chunk) of the query's
// range and writes the unnormalised partial (m, l, acc[v_head_dim]) at
// out[((t*n_heads + h)*splits + s)*(v_head_dim + 2)]; attention_merge.wgsl combines them.
const MAX_HD: u32 = 512u;
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
    // Decode with the new token's prep (attention_decode_prep.wgsl): what to do to q, K
    // and V (its flags), the norms' epsilon, RoPE's position scale, whether rope factors
    // are bound. Zero elsewhere.
    q_flags: u32,
    k_flags: u32,
    v_flags: u32,
    eps: f32,
    rope_scale: f32,
    has_factors: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
// Bindings 2 and 3 are the K and V caches (`kc`, `vc`), which each kernel declares with the
// access it needs; their element types and readers k4 / v1 come from kv_f32.wgsl or
// kv_f16.wgsl. Binding 4 is the output `out` (f32): attention_out.wgsl, or
// attention_decode_merge.wgsl's coherent one where workgroups read each other's partials.

// Workgroup g's query row th (token * n_heads + head), its KV head and its keys [k0, k1).
struct Span {
    th: u32,
    kvh: u32,
    k0: u32,
    k1: u32,
}

fn span(g: u32) -> Span {
    let split = g % p.splits;
    let th = g / p.splits;
    let h = th % p.n_heads;
    let pos = p.pos0 + th / p.n_heads;
    let k0 = first_key(pos) + split * p.chunk;
    return Span(th, h / (p.n_heads / p.kv_heads), k0, min(k0 + p.chunk, pos + 1u));
}

// The first key position `pos` sees (sliding window).
fn first_key(pos: u32) -> u32 {
    if (p.window > 0u && pos + 1u > p.window) {
        return pos + 1u - p.window;
    }
    return 0u;
}

// The normalised output (one split) or the partial state (m, l, acc) of workgroup g.
fn store(g: u32, th: u32, lid: u32, m: f32, l: f32, acc: ptr<function, array<f32, PER>>) {
    if (p.splits == 1u) {
        let ob = p.out_off + th * p.v_head_dim;
        for (var i = 0u; i < PER; i++) {
            let d = lid + i * WG;
            if (d < p.v_head_dim) {
                out[ob + d] = (*acc)[i] / l;
            }
        }
        return;
    }
    let ob = g * (p.v_head_dim + 2u);
    if (lid == 0u) {
        out[ob] = m;
        out[ob + 1u] = l;
    }
    for (var i = 0u; i < PER; i++) {
        let d = lid + i * WG;
        if (d < p.v_head_dim) {
            out[ob + 2u + d] = (*acc)[i];
        }
    }
}
