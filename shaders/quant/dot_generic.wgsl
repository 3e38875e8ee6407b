// Chunk dot product for any type with a dq4 (see shaders/matmul/matvec.wgsl): a chunk is
// four elements.
const CH: u32 = 4u;

fn chunk_dot(row_byte: u32, c: u32, xo: u32) -> f32 {
    return dot(dq4(row_byte, c), xin(xo + c));
}
