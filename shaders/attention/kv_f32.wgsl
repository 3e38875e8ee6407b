// The K and V caches in f32 for the attention kernels: k4(i) is vec4 i of K (head_dim is
// a multiple of 4: wide, independent loads), v1(i) element i of V.
@group(0) @binding(2) var<storage, read> kc: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> vc: array<f32>;

fn k4(i: u32) -> vec4<f32> {
    return kc[i];
}

fn v1(i: u32) -> f32 {
    return vc[i];
}
