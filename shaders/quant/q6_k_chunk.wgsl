// Q6_K chunk loads, quants and scales (see shaders/matmul/matvec.wgsl), shared by the dot
// products of q6_k_dot.wgsl (x as f32) and q6_k_idot.wgsl (x as integer limbs): a chunk
// is the 16 elements that share 4 bytes of ql at l and at l + 32 and 4 bytes of qh at l
// (l = 4j, j < 8) in half h of a block: elements 128h + 32k + l .. +3 for k < 4, one
// quarter of them per sub-block scale. The 8 invocations of a half read 32 contiguous
// bytes of each field, and every quant byte is loaded once with all four of its 2-bit
// pairs used. In the grouped layout of quant/q6_k.wgsl every field is 4-aligned: a chunk
// is six 4-byte loads. (In the file's 210-byte blocks each field was two words to
// realign; chunks of 8 elements, one quarter of each byte, took eight 4-byte loads per 8
// elements: E2B's LM head streamed ~1.2 TB/s.) LM heads take q6_k_chunk_wide.wgsl.
const CH: u32 = 16u;
// Quant words per quarter.
const QW: u32 = 1u;

struct Chunk {
    ql0: u32,
    ql1: u32,
    qh: u32,
    sc: vec2<u32>,
    d: u32,
}

fn chunk_load(row_byte: u32, c: u32) -> Chunk {
    let f = q6_fields(row_byte + (c / 16u) * QB);
    let h = (c % 16u) / 8u;
    let ql = (f.x + 64u * h + 4u * (c % 8u)) >> 2u;
    let s = (f.z + 8u * h) >> 2u;
    return Chunk(w[ql], w[ql + 8u], w[((f.y + 32u * h) >> 2u) + c % 8u], vec2<u32>(w[s], w[s + 1u]), w[f.w >> 2u]);
}

// Word (of 4 elements) of the chunk's first element, 128h + l of block c / 16, in its row;
// quarter k is 8 words on.
fn q6_word0(c: u32) -> u32 {
    return (c / 16u) * 64u + 32u * ((c % 16u) / 8u) + c % 8u;
}

// Quant word i (< QW) of quarter k (0..63, a byte each).
fn q6_word(t: Chunk, k: u32, i: u32) -> u32 {
    return q6_quant(select(t.ql0, t.ql1, (k & 1u) == 1u), t.qh, k);
}

// The scales of quarters k = 0..3: sub-block 8h + 2k + l/16 is byte 2k + l/16 of the
// half's 8: bytes 0 and 2 of its first word (k = 0, 1) and of its second (k = 2, 3),
// shifted by l/16.
fn q6_scales(t: Chunk, c: u32) -> vec4<f32> {
    let sh = 8u * ((c % 8u) / 4u);
    let a = sbytes4(t.sc.x >> sh);
    let b = sbytes4(t.sc.y >> sh);
    return vec4<f32>(a.x, a.z, b.x, b.z);
}

fn q6_d(t: Chunk, row_byte: u32, c: u32) -> f32 {
    return half_of(t.d, q6_fields(row_byte + (c / 16u) * QB).w);
}
