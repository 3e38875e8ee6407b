// Q5_0 chunk loads and dot product (see shaders/matmul/matvec.wgsl): a chunk is 8
// consecutive elements (a quarter block: low nibbles of qs for the first half, high for
// the second, 5th bits from qh at the elements' own indices), so the 32 invocations of a
// row read 8 whole blocks per step, contiguous across invocations. 22-byte blocks: d and
// qh in the span at the block's start, the chunk's quants in a second (quant/span.wgsl).
const CH: u32 = 8u;

struct Chunk {
    head: vec3<u32>,
    q: vec3<u32>,
}

// The block's first byte and that of the 8 qs bytes chunk c reads.
fn q5_at(row_byte: u32, c: u32) -> vec2<u32> {
    let b = row_byte + (c / 4u) * QB;
    return vec2<u32>(b, b + 6u + 8u * ((c % 4u) & 1u));
}

fn chunk_load(row_byte: u32, c: u32) -> Chunk {
    let a = q5_at(row_byte, c);
    return Chunk(load_span(a.x), load_span(a.y));
}

fn chunk_dot(t: Chunk, row_byte: u32, c: u32, xo: u32) -> f32 {
    let a = q5_at(row_byte, c);
    let part = c % 4u;
    let sh = 4u * (part >> 1u);
    let qh = span_u32(t.head, a.x, 2u) >> (8u * part);
    var s = 0.0;
    for (var g = 0u; g < 2u; g++) {
        let v = ((span_u32(t.q, a.y, 4u * g) >> sh) & 0x0F0F0F0Fu) | (spread4(qh >> (4u * g)) << 4u);
        s += dot(bytes4(v) - 16.0, xin(xo + 2u * c + g));
    }
    return half_of(t.head.x, a.x) * s;
}
