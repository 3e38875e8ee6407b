// Q8_0 chunk dot product (see shaders/matmul/matvec.wgsl): a chunk is 8 consecutive
// elements (a quarter block), so the 32 invocations of a row read 8 whole blocks per step,
// contiguous across invocations. 34-byte blocks leave fields 2-aligned.
const CH: u32 = 8u;

fn chunk_dot(row_byte: u32, c: u32, xo: u32) -> f32 {
    let b = row_byte + (c / 4u) * QB;
    let qb = b + 2u + 8u * (c % 4u);
    let s = dot(sbytes4(read_u32_even(qb)), xin(xo + 2u * c)) + dot(sbytes4(read_u32_even(qb + 4u)), xin(xo + 2u * c + 1u));
    return f16_at(b) * s;
}
