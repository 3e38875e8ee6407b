// Q6_K chunk loads and dot product (see shaders/matmul/matvec.wgsl): a chunk is the 16
// elements that share 4 bytes of ql at l and at l + 32 and 4 bytes of qh at l (l = 4j,
// j < 8) in half h of a block: elements 128h + 32k + l .. +3 for k < 4, one quarter of
// them per sub-block scale. The 8 invocations of a half read 32 contiguous bytes of each
// field, and every quant byte is loaded once with all four of its 2-bit pairs used.
// (Chunks of 8 elements, one quarter of each byte, took eight 4-byte loads per 8 elements
// and repeated the address and scale work per quarter: E2B's LM head streamed ~1.2 TB/s.)
// 210-byte blocks leave fields 2-aligned: each 4-byte field is read as the two words that
// hold it (quant/span.wgsl for the 8 scale bytes).
const CH: u32 = 16u;

struct Chunk {
    ql0: vec2<u32>,
    ql1: vec2<u32>,
    qh: vec2<u32>,
    sc: vec3<u32>,
    d: u32,
}

// Chunk c's block start, half and l.
fn q6_pos(row_byte: u32, c: u32) -> vec3<u32> {
    let j = c % 16u;
    return vec3<u32>(row_byte + (c / 16u) * QB, j / 8u, 4u * (j % 8u));
}

fn chunk_load(row_byte: u32, c: u32) -> Chunk {
    let p = q6_pos(row_byte, c);
    let a = (p.x + 64u * p.y + p.z) >> 2u;
    let h = (p.x + 128u + 32u * p.y + p.z) >> 2u;
    // Every field here ends before the block's d, so the second word stays in the tile.
    return Chunk(vec2<u32>(w[a], w[a + 1u]), vec2<u32>(w[a + 8u], w[a + 9u]), vec2<u32>(w[h], w[h + 1u]), load_span(p.x + 192u + 8u * p.y), w[(p.x + 208u) >> 2u]);
}

fn chunk_dot(t: Chunk, row_byte: u32, c: u32, xo: u32) -> f32 {
    let p = q6_pos(row_byte, c);
    let odd = (p.x & 2u) != 0u;
    let ql0 = pair_u32(t.ql0, odd);
    let ql1 = pair_u32(t.ql1, odd);
    let qh = pair_u32(t.qh, odd);
    // Sub-block scales 8h + 2k + l/16 for k < 4: bytes l/16 + 2k of the half's 8, so
    // bytes 0 and 2 of sa (k = 0, 1) and of sb (k = 2, 3).
    let s0 = p.x + 192u + 8u * p.y;
    let sa = sbytes4(span_u32(t.sc, s0, 0u) >> (8u * (p.z / 16u)));
    let sb = sbytes4(span_u32(t.sc, s0, 4u) >> (8u * (p.z / 16u)));
    let q0 = (ql0 & 0x0F0F0F0Fu) | ((qh & 0x03030303u) << 4u);
    let q1 = (ql1 & 0x0F0F0F0Fu) | ((qh & 0x0C0C0C0Cu) << 2u);
    let q2 = ((ql0 >> 4u) & 0x0F0F0F0Fu) | (qh & 0x30303030u);
    let q3 = ((ql1 >> 4u) & 0x0F0F0F0Fu) | ((qh >> 2u) & 0x30303030u);
    // x vec4 of element 128h + l; each quarter is 32 elements (8 vec4s) on.
    let e = xo + (c / 16u) * 64u + 32u * p.y + p.z / 4u;
    let s = sa.x * dot(bytes4(q0) - 32.0, xin(e)) + sa.z * dot(bytes4(q1) - 32.0, xin(e + 8u))
        + (sb.x * dot(bytes4(q2) - 32.0, xin(e + 16u)) + sb.z * dot(bytes4(q3) - 32.0, xin(e + 24u)));
    return half_of(t.d, p.x + 208u) * s;
}
