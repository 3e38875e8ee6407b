// Q5_K, 256 elements in 176 bytes: d f16 @0, dmin f16 @2, scales[12] @4, qh[32] @16,
// qs[128] @48. As Q4_K, plus bit 4 of element 32*s + l is bit s of qh[l].
const QK: u32 = 256u;
const QB: u32 = 176u;

fn dq4(row_byte: u32, k4: u32) -> vec4<f32> {
    let e = 4u * k4;
    let b = row_byte + (e / QK) * QB;
    let s = (e % QK) / 32u;
    let l = e % 32u;
    let dm = unpack2x16float(w[b >> 2u]);
    let sm = k4_scale_min(b + 4u, s);
    let lo = (w[(b + 48u + 32u * (s / 2u) + l) >> 2u] >> (4u * (s & 1u))) & 0x0F0F0F0Fu;
    let hi = ((w[(b + 16u + l) >> 2u] >> s) & 0x01010101u) << 4u;
    return (dm.x * sm.x) * bytes4(lo | hi) - dm.y * sm.y;
}
