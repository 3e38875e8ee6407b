// Q6_K chunk loads, quants and scales for the matvecs of LM heads (see
// shaders/matmul/matvec.wgsl and q6_k_chunk.wgsl, whose interface this shares): a chunk is
// the 64 elements 128h + 32k + 16j .. +15 (k < 4) of a block, for half h and 16-byte
// column j of its ql (at 64h + 16j and 64h + 32 + 16j) and qh (at 32h + 16j): three
// 16-byte loads of quants, one of the block's 16 scales and a word holding d, in the
// grouped layout of quant/q6_k.wgsl. Chunk c of a row is block c / 4, h = c / 2 % 2,
// j = c % 2. H100, E2B's head (262144 x 1536): 186.8 us with 16-element chunks, 136.6
// with these (8 invocations a row); the layers' matvecs, with 4x fewer chunks a row to
// spread over their invocations, lost 1.5-2.7 us each. w4 is the weight tile bound a
// second time, as 16-byte words.
@group(0) @binding(11) var<storage, read> w4: array<vec4<u32>>;

const CH: u32 = 64u;
// Quant words per quarter.
const QW: u32 = 4u;

struct Chunk {
    ql0: vec4<u32>,
    ql1: vec4<u32>,
    qh: vec4<u32>,
    sc: vec4<u32>,
    d: u32,
}

fn chunk_load(row_byte: u32, c: u32) -> Chunk {
    let f = q6_fields(row_byte + (c / 4u) * QB);
    let h = (c / 2u) % 2u;
    let ql = f.x + 64u * h + 16u * (c % 2u);
    let qh = f.y + 32u * h + 16u * (c % 2u);
    return Chunk(w4[ql >> 4u], w4[(ql + 32u) >> 4u], w4[qh >> 4u], w4[f.z >> 4u], w[f.w >> 2u]);
}

// Word (of 4 elements) of the chunk's first element, 128h + 16j of block c / 4, in its
// row; quarter k is 8 words on and its words follow one another.
fn q6_word0(c: u32) -> u32 {
    return (c / 4u) * 64u + 32u * ((c / 2u) % 2u) + 4u * (c % 2u);
}

// Quant word i of quarter k (0..63, a byte each).
fn q6_word(t: Chunk, k: u32, i: u32) -> u32 {
    return q6_quant(select(t.ql0[i], t.ql1[i], (k & 1u) == 1u), t.qh[i], k);
}

// The scales of quarters k = 0..3: sub-block 8h + 2k + j, byte 2(k % 2) + j of the
// block's scale word 2h + k / 2.
fn q6_scales(t: Chunk, c: u32) -> vec4<f32> {
    let high = (c / 2u) % 2u == 1u;
    let sh = 8u * (c % 2u);
    let a = sbytes4(select(t.sc.x, t.sc.z, high) >> sh);
    let b = sbytes4(select(t.sc.y, t.sc.w, high) >> sh);
    return vec4<f32>(a.x, a.z, b.x, b.z);
}

fn q6_d(t: Chunk, row_byte: u32, c: u32) -> f32 {
    return half_of(t.d, q6_fields(row_byte + (c / 4u) * QB).w);
}
