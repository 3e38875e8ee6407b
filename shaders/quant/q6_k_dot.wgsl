// Q6_K chunk loads and dot product (see shaders/matmul/matvec.wgsl): a chunk is 8
// consecutive elements (within one 16-element sub-block), so the 32 invocations of a row
// cover one whole block per step with reads contiguous across invocations. 210-byte
// blocks leave fields 2-aligned (quant/span.wgsl).
const CH: u32 = 8u;

struct Chunk {
    lo: vec3<u32>,
    hi: vec3<u32>,
    scale: u32,
    d: u32,
}

// Chunk c's bytes: its ql span, its qh span, its scale byte and the block's d.
fn q6_at(row_byte: u32, c: u32) -> vec4<u32> {
    let b = row_byte + (c / 32u) * QB;
    let e = (c % 32u) * 8u;
    let h = e / 128u;
    let k = (e / 32u) % 4u;
    let l = e % 32u;
    return vec4<u32>(b + 64u * h + 32u * (k & 1u) + l, b + 128u + 32u * h + l, b + 192u + 8u * h + 2u * k + l / 16u, b + 208u);
}

fn chunk_load(row_byte: u32, c: u32) -> Chunk {
    let a = q6_at(row_byte, c);
    return Chunk(load_span(a.x), load_span(a.y), w[a.z >> 2u], w[a.w >> 2u]);
}

fn chunk_dot(t: Chunk, row_byte: u32, c: u32, xo: u32) -> f32 {
    let a = q6_at(row_byte, c);
    let k = ((c % 32u) / 4u) % 4u;
    let byte = (t.scale >> ((a.z & 3u) * 8u)) & 0xFFu;
    let sc = f32((bitcast<i32>(byte) << 24u) >> 24u);
    var s = 0.0;
    for (var g = 0u; g < 2u; g++) {
        let lo = (span_u32(t.lo, a.x, 4u * g) >> (4u * (k >> 1u))) & 0x0F0F0F0Fu;
        let hi = ((span_u32(t.hi, a.y, 4u * g) >> (2u * k)) & 0x03030303u) << 4u;
        s += dot(bytes4(lo | hi) - 32.0, xin(xo + 2u * c + g));
    }
    return (half_of(t.d, a.w) * sc) * s;
}
