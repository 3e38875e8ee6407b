// The K and V caches in f32 for the attention kernels, which bind them as `kc`
// (array<KC>) and `vc` (array<VC>), read-only or, to store the new token's row
// (attention_decode_prep.wgsl), writable: k4(i) is vec4 i of K (head_dim is a multiple of
// 4: wide, independent loads), v1(i) element i of V. A K row is stored as KC values made
// by kv_pack4, a V row as V_WORDS words per pair of elements (KV2, from kv_pack2; word k
// of it is v_word(.., k)).
alias KC = vec4<f32>;
alias VC = f32;
alias KV2 = vec2<f32>;
const V_WORDS: u32 = 2u;

fn k4(i: u32) -> vec4<f32> {
    return kc[i];
}

fn v1(i: u32) -> f32 {
    return vc[i];
}

fn kv_pack4(v: vec4<f32>) -> KC {
    return v;
}

fn kv_unpack4(w: KC) -> vec4<f32> {
    return w;
}

fn kv_pack2(v: vec2<f32>) -> KV2 {
    return v;
}

fn v_word(w: KV2, k: u32) -> VC {
    return w[k];
}

// What a pair becomes in the cache, as f32 (nothing here).
fn kv_round2(v: vec2<f32>) -> vec2<f32> {
    return v;
}
