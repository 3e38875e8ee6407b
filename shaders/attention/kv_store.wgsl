// Store K and V rows computed in f32 into an f16 cache (kv_f16.wgsl's layout: two halves
// per u32, element 2j low): k_dst[k_off/2 + j] = pack(k_src[2j], k_src[2j + 1]) for
// 2j < k_len, and the same for V. Offsets and lengths are even. Rounds to nearest
// (pack2x16float), as the CPU's f16 cache does.
struct Params {
    k_len: u32,
    v_len: u32,
    k_off: u32,
    v_off: u32,
    groups_x: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> k_src: array<f32>;
@group(0) @binding(2) var<storage, read> v_src: array<f32>;
@group(0) @binding(3) var<storage, read_write> k_dst: array<u32>;
@group(0) @binding(4) var<storage, read_write> v_dst: array<u32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let j = (wg.x + wg.y * p.groups_x) * 256u + lid;
    if (2u * j < p.k_len) {
        k_dst[p.k_off / 2u + j] = pack2x16float(vec2<f32>(k_src[2u * j], k_src[2u * j + 1u]));
    }
    if (2u * j < p.v_len) {
        v_dst[p.v_off / 2u + j] = pack2x16float(vec2<f32>(v_src[2u * j], v_src[2u * j + 1u]));
    }
}
