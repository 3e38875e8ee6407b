// Q5_0 chunk dot product (see shaders/matmul/matvec.wgsl): a chunk is 8 consecutive
// elements (a quarter block: low nibbles of qs for the first half, high for the second,
// 5th bits from qh at the elements' own indices), so the 32 invocations of a row read 8
// whole blocks per step, contiguous across invocations. 22-byte blocks: 2-aligned fields.
const CH: u32 = 8u;

fn chunk_dot(row_byte: u32, c: u32, xo: u32) -> f32 {
    let b = row_byte + (c / 4u) * QB;
    let part = c % 4u;
    let qs = b + 6u + 8u * (part & 1u);
    let sh = 4u * (part >> 1u);
    let qh = read_u32_even(b + 2u) >> (8u * part);
    var s = 0.0;
    for (var g = 0u; g < 2u; g++) {
        let v = ((read_u32_even(qs + 4u * g) >> sh) & 0x0F0F0F0Fu) | (spread4(qh >> (4u * g)) << 4u);
        s += dot(bytes4(v) - 16.0, xin(xo + 2u * c + g));
    }
    return f16_at(b) * s;
}
