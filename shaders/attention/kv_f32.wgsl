// The K and V caches in f32 for the attention kernels, which bind both as arrays of
// 4-element words (`kc`, `vc`: array<KC>; head_dim and v_head_dim are multiples of 4),
// read-only or, to store the new token's row (attention_decode_prep.wgsl), writable:
// k4(i) / v4(i) is word i of K / V (wide, independent loads), v1(i) element i of V. Rows
// are stored as KC words made by kv_pack4.
alias KC = vec4<f32>;

fn k4(i: u32) -> vec4<f32> {
    return kc[i];
}

fn v4(i: u32) -> vec4<f32> {
    return vc[i];
}

fn v1(i: u32) -> f32 {
    return vc[i >> 2u][i & 3u];
}

fn kv_pack4(v: vec4<f32>) -> KC {
    return v;
}

fn kv_unpack4(w: KC) -> vec4<f32> {
    return w;
}

// What a pair becomes in the cache, as f32 (nothing here).
fn kv_round2(v: vec2<f32>) -> vec2<f32> {
    return v;
}
