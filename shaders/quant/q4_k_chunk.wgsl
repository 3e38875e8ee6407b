// Q4_K chunk loads and scales (see shaders/matmul/matvec.wgsl), shared by the dot products
// of q4_k_dot.wgsl (x as f32) and q4_k_idot.wgsl (x as integer limbs): a chunk is 32
// elements, the 16 quant bytes at 16j of a block's qs (j < 8), read with one 16-byte
// load: their low nibbles are elements 16(j%2) .. +15 of sub-block 2(j/2), their high
// nibbles the same elements of sub-block 2(j/2)+1. A second 16-byte load brings the
// block's d, dmin and 12 scale bytes. Blocks are 144 = 9 · 16 bytes and rows whole
// blocks, so both loads are aligned. (Chunks of 8 elements took seven 4-byte loads for 4
// bytes of quants: E2B's layer matvecs streamed at 130–400 GB/s.) w4 is the weight tile
// bound a second time, as 16-byte words.
@group(0) @binding(11) var<storage, read> w4: array<vec4<u32>>;

const CH: u32 = 32u;

struct Chunk {
    head: vec4<u32>,
    qv: vec4<u32>,
}

fn chunk_load(row_byte: u32, c: u32) -> Chunk {
    let b = row_byte + (c / 8u) * QB;
    return Chunk(w4[b >> 4u], w4[(b + 16u + 16u * (c % 8u)) >> 4u]);
}

// The scales and mins of sub-blocks 2g and 2g + 1 from the block head in registers, as
// (scale 2g, min 2g, scale 2g+1, min 2g+1) (k4_scales.wgsl).
fn k4_reg_scales(head: vec4<u32>, g: u32) -> vec4<f32> {
    return k4_pair(head.y, head.z, head.w, g);
}
