// F32: one element per 4 bytes. dq4 interface: see shaders/quant/common.wgsl and matmul.wgsl.
const QK: u32 = 1u;
const QB: u32 = 4u;

fn dq4(row_byte: u32, k4: u32) -> vec4<f32> {
    let i = (row_byte >> 2u) + 4u * k4;
    return bitcast<vec4<f32>>(vec4<u32>(w[i], w[i + 1u], w[i + 2u], w[i + 3u]));
}
