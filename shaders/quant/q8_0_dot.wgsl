// Q8_0 chunk loads and dot product (see shaders/matmul/matvec.wgsl): a chunk is 8
// consecutive elements (a quarter block), so the 32 invocations of a row read 8 whole
// blocks per step, contiguous across invocations. 34-byte blocks leave fields 2-aligned
// (quant/span.wgsl).
const CH: u32 = 8u;

struct Chunk {
    d: u32,
    q: vec3<u32>,
}

// The block's first byte and chunk c's first quant byte.
fn q8_at(row_byte: u32, c: u32) -> vec2<u32> {
    let b = row_byte + (c / 4u) * QB;
    return vec2<u32>(b, b + 2u + 8u * (c % 4u));
}

fn chunk_load(row_byte: u32, c: u32) -> Chunk {
    let a = q8_at(row_byte, c);
    return Chunk(w[a.x >> 2u], load_span(a.y));
}

fn chunk_dot(t: Chunk, row_byte: u32, c: u32, xo: u32) -> f32 {
    let a = q8_at(row_byte, c);
    let s = dot(sbytes4(span_u32(t.q, a.y, 0u)), xin(xo + 2u * c)) + dot(sbytes4(span_u32(t.q, a.y, 4u)), xin(xo + 2u * c + 1u));
    return half_of(t.d, a.x) * s;
}
