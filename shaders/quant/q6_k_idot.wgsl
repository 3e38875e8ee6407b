// The Q6_K chunk dot product with x as integer limbs (matmul/matvec_x_limbs.wgsl; chunk
// loads in q6_k_chunk.wgsl or q6_k_chunk_wide.wgsl): each word of quants is one integer
// dot product, less 32 times the word's sum (the quants' offset), in its run's unit
// (a quarter's words lie in one run).
fn q6_quarter(t: Chunk, k: u32, wd: u32) -> f32 {
    var s = 0.0;
    for (var i = 0u; i < QW; i++) {
        s += f32(word_idot(q6_word(t, k, i), wd + i, 32));
    }
    return s * xunit[wd / 4u];
}

fn chunk_dot(t: Chunk, row_byte: u32, c: u32, xo: u32) -> f32 {
    // The staged input starts at element 0 (x's offset is applied when staging).
    let w0 = q6_word0(c);
    let v = vec4<f32>(q6_quarter(t, 0u, w0), q6_quarter(t, 1u, w0 + 8u), q6_quarter(t, 2u, w0 + 16u), q6_quarter(t, 3u, w0 + 24u));
    return q6_d(t, row_byte, c) * dot(q6_scales(t, c), v);
}
