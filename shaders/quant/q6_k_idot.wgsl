// The Q6_K chunk dot product with x as integer limbs (matmul/matvec_x_limbs.wgsl; chunk
// loads in q6_k_chunk.wgsl): each of the chunk's four words is one integer dot product,
// less 32 times the word's sum (the quants' offset), in its run's unit.
fn chunk_dot(t: Chunk, row_byte: u32, c: u32, xo: u32) -> f32 {
    let p = q6_pos(row_byte, c);
    let q = q6_quants(t, p);
    let sc = q6_scales(t, p);
    // Word of element 128h + l of the staged input (which starts at element 0); each
    // quarter is 32 elements (8 words) on.
    let w0 = (c / 16u) * 64u + 32u * p.y + p.z / 4u;
    let v = vec4<f32>(
        f32(word_idot(q.x, w0, 32)) * xunit[w0 / 4u],
        f32(word_idot(q.y, w0 + 8u, 32)) * xunit[w0 / 4u + 2u],
        f32(word_idot(q.z, w0 + 16u, 32)) * xunit[w0 / 4u + 4u],
        f32(word_idot(q.w, w0 + 24u, 32)) * xunit[w0 / 4u + 6u],
    );
    return half_of(t.d, p.x + 208u) * dot(sc, v);
}
