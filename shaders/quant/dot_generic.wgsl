// Chunk dot product for any type with a dq4 (see shaders/matmul/matvec.wgsl): a chunk is
// four elements.
const CH: u32 = 4u;

fn chunk_dot(row_byte: u32, c: u32, xs: ptr<function, array<vec4<f32>, CH / 4u>>) -> f32 {
    return dot(dq4(row_byte, c), (*xs)[0]);
}
