// Q6_K chunk loads, quants and scales (see shaders/matmul/matvec.wgsl), shared by the dot
// products of q6_k_dot.wgsl (x as f32) and q6_k_idot.wgsl (x as integer limbs): a chunk
// is the 16 elements that share 4 bytes of ql at l and at l + 32 and 4 bytes of qh at l (l = 4j,
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

// The chunk's four words of quants (0..63, a byte each): word k holds elements
// 128h + 32k + l .. +3, of sub-block 8h + 2k + l/16.
fn q6_quants(t: Chunk, p: vec3<u32>) -> vec4<u32> {
    let odd = (p.x & 2u) != 0u;
    let ql0 = pair_u32(t.ql0, odd);
    let ql1 = pair_u32(t.ql1, odd);
    let qh = pair_u32(t.qh, odd);
    return vec4<u32>(
        (ql0 & 0x0F0F0F0Fu) | ((qh & 0x03030303u) << 4u),
        (ql1 & 0x0F0F0F0Fu) | ((qh & 0x0C0C0C0Cu) << 2u),
        ((ql0 >> 4u) & 0x0F0F0F0Fu) | (qh & 0x30303030u),
        ((ql1 >> 4u) & 0x0F0F0F0Fu) | ((qh >> 2u) & 0x30303030u),
    );
}

// The sub-block scales of the chunk's four words. Sub-block 8h + 2k + l/16 is byte
// l/16 + 2k of the half's 8: bytes 0 and 2 of the first four (k = 0, 1) and of the
// second (k = 2, 3), shifted by l/16.
fn q6_scales(t: Chunk, p: vec3<u32>) -> vec4<f32> {
    let s0 = p.x + 192u + 8u * p.y;
    let sa = sbytes4(span_u32(t.sc, s0, 0u) >> (8u * (p.z / 16u)));
    let sb = sbytes4(span_u32(t.sc, s0, 4u) >> (8u * (p.z / 16u)));
    return vec4<f32>(sa.x, sa.z, sb.x, sb.z);
}
