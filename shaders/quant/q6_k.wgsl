// Q6_K, 256 elements in 210 bytes: ql[128] @0, qh[64] @128, scales[16] i8 @192, d f16 @208.
// Element 128*h + 32*k + l (h < 2, k < 4, l < 32): low 4 bits are nibble k/2 of
// ql[64*h + 32*(k%2) + l], high 2 bits are bits 2k..2k+2 of qh[32*h + l]; offset 32.
// Sub-block (16 elements) 8*h + 2*k + l/16. y = (d * scale) * q.
const QK: u32 = 256u;
const QB: u32 = 210u;

fn dq4(row_byte: u32, k4: u32) -> vec4<f32> {
    let e = 4u * k4;
    let b = row_byte + (e / QK) * QB;
    let i = e % QK;
    let h = i / 128u;
    let k = (i / 32u) % 4u;
    let l = i % 32u;
    let lo = (read_u32_even(b + 64u * h + 32u * (k & 1u) + l) >> (4u * (k >> 1u))) & 0x0F0F0F0Fu;
    let hi = ((read_u32_even(b + 128u + 32u * h + l) >> (2u * k)) & 0x03030303u) << 4u;
    let sc = f32((bitcast<i32>(read_u8(b + 192u + 8u * h + 2u * k + l / 16u)) << 24u) >> 24u);
    return (f16_at(b + 208u) * sc) * (bytes4(lo | hi) - 32.0);
}
