// The K and V caches in f16 for the attention kernels, two halves per u32 (element 2j in
// the low half), so no shader-f16 support is needed: k4(i) is vec4 i of K, v1(i) element
// i of V, both widened to f32. Written by rope/head_norm_rope.wgsl.
@group(0) @binding(2) var<storage, read> kc: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read> vc: array<u32>;

fn k4(i: u32) -> vec4<f32> {
    let u = kc[i];
    return vec4<f32>(unpack2x16float(u.x), unpack2x16float(u.y));
}

fn v1(i: u32) -> f32 {
    return unpack2x16float(vc[i >> 1u])[i & 1u];
}
