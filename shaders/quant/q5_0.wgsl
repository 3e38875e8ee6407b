// Q5_0, 32 elements in 22 bytes: d f16 @0, qh u32 @2 (bit 4 of element i is bit i),
// qs[16] @6 (low 4 bits, nibbles as Q4_0). y = d * (q - 16).
const QK: u32 = 32u;
const QB: u32 = 22u;

fn dq4(row_byte: u32, k4: u32) -> vec4<f32> {
    let e = 4u * k4;
    let b = row_byte + (e / QK) * QB;
    let i = e % QK;
    let lo = (read_u32_even(b + 6u + (i & 15u)) >> (4u * (i >> 4u))) & 0x0F0F0F0Fu;
    let hi = spread4(read_u32_even(b + 2u) >> i) << 4u;
    return f16_at(b) * (bytes4(lo | hi) - 16.0);
}

// Elements 4·k4 .. 4·k4 + 15 (k4 a multiple of 4: half a block), d and qh read once.
fn dq16(row_byte: u32, k4: u32) -> array<vec4<f32>, 4> {
    let e = 4u * k4;
    let b = row_byte + (e / QK) * QB;
    let i = e % QK;
    let d = f16_at(b);
    let qh = read_u32_even(b + 2u) >> i;
    var r: array<vec4<f32>, 4>;
    for (var j = 0u; j < 4u; j++) {
        let lo = (read_u32_even(b + 6u + 4u * j) >> (4u * (i >> 4u))) & 0x0F0F0F0Fu;
        r[j] = d * (bytes4(lo | (spread4(qh >> (4u * j)) << 4u)) - 16.0);
    }
    return r;
}
