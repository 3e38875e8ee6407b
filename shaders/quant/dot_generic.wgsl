// Chunk loads and dot product for any type with a dq4 (see shaders/matmul/matvec.wgsl):
// a chunk is four elements, loaded already dequantized (these types are rare in decode,
// so their loads may wait on the arithmetic that follows them).
const CH: u32 = 4u;

alias Chunk = vec4<f32>;

fn chunk_load(row_byte: u32, c: u32) -> Chunk {
    return dq4(row_byte, c);
}

fn chunk_dot(t: Chunk, row_byte: u32, c: u32, xo: u32) -> f32 {
    return dot(t, xin(xo + c));
}
