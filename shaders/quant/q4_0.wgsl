// Q4_0, 32 elements in 18 bytes: d f16 @0, qs[16] @2. Element j (< 16) is the low nibble
// of qs[j], element j + 16 its high nibble. y = d * (q - 8).
const QK: u32 = 32u;
const QB: u32 = 18u;

fn dq4(row_byte: u32, k4: u32) -> vec4<f32> {
    let e = 4u * k4;
    let b = row_byte + (e / QK) * QB;
    let i = e % QK;
    let q = (read_u32_even(b + 2u + (i & 15u)) >> (4u * (i >> 4u))) & 0x0F0F0F0Fu;
    return f16_at(b) * (bytes4(q) - 8.0);
}
