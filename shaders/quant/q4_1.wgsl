// Q4_1, 32 elements in 20 bytes: d f16 @0, m f16 @2, qs[16] @4 (nibbles as Q4_0).
// y = d * q + m.
const QK: u32 = 32u;
const QB: u32 = 20u;

fn dq4(row_byte: u32, k4: u32) -> vec4<f32> {
    let e = 4u * k4;
    let b = row_byte + (e / QK) * QB;
    let i = e % QK;
    let dm = unpack2x16float(w[b >> 2u]);
    let q = (w[(b + 4u + (i & 15u)) >> 2u] >> (4u * (i >> 4u))) & 0x0F0F0F0Fu;
    return dm.x * bytes4(q) + dm.y;
}
