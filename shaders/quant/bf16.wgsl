// BF16: the top 16 bits of an f32 per 2 bytes; four elements are two words.
const QK: u32 = 1u;
const QB: u32 = 2u;

fn dq4(row_byte: u32, k4: u32) -> vec4<f32> {
    let i = (row_byte >> 2u) + 2u * k4;
    let a = w[i];
    let b = w[i + 1u];
    return bitcast<vec4<f32>>(vec4<u32>(a << 16u, a & 0xFFFF0000u, b << 16u, b & 0xFFFF0000u));
}
