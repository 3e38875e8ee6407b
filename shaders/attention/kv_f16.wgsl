// The K and V caches in f16 for the attention kernels, two halves per u32 (element 2j in
// the low half), so no shader-f16 support is needed. The same contract as kv_f32.wgsl:
// k4(i) / v4(i) is word i (four elements) of K / V, v1(i) element i of V, all widened to
// f32; kv_pack4 rounds to nearest as the CPU's f16 cache does (head_norm_rope.wgsl stores
// the same way).
alias KC = vec2<u32>;

fn k4(i: u32) -> vec4<f32> {
    return kv_unpack4(kc[i]);
}

fn v4(i: u32) -> vec4<f32> {
    return kv_unpack4(vc[i]);
}

fn v1(i: u32) -> f32 {
    return unpack2x16float(vc[i >> 2u][(i >> 1u) & 1u])[i & 1u];
}

fn kv_pack4(v: vec4<f32>) -> KC {
    return vec2<u32>(pack2x16float(v.xy), pack2x16float(v.zw));
}

fn kv_unpack4(w: KC) -> vec4<f32> {
    return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
}

// What a pair becomes in the cache, as f32: each value rounded to the nearest f16 (ties to
// even, subnormals kept), in integer steps rather than through pack2x16float and back,
// which a compiler may fold into a conversion that rounds otherwise. Packing the result
// (kv_pack4) is then exact, so the stored row and the values used beside it agree.
fn kv_round1(x: f32) -> f32 {
    if (abs(x) < 6.103515625e-5) {
        return round(x * 16777216.0) * 5.9604644775390625e-8;
    }
    let b = bitcast<u32>(x);
    return bitcast<f32>((b + 0xFFFu + ((b >> 13u) & 1u)) & 0xFFFFE000u);
}

fn kv_round2(v: vec2<f32>) -> vec2<f32> {
    return vec2<f32>(kv_round1(v.x), kv_round1(v.y));
}
