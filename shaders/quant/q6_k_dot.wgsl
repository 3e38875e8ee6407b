// The Q6_K chunk dot product with x as f32 (chunk loads in q6_k_chunk.wgsl or
// q6_k_chunk_wide.wgsl): Σ_k scale_k · Σ (q - 32) · x over quarter k, times d.
fn q6_quarter(t: Chunk, k: u32, e: u32) -> f32 {
    var s = 0.0;
    for (var i = 0u; i < QW; i++) {
        s += dot(bytes4(q6_word(t, k, i)) - vec4<f32>(32.0), xin(e + i));
    }
    return s;
}

fn chunk_dot(t: Chunk, row_byte: u32, c: u32, xo: u32) -> f32 {
    let e = xo + q6_word0(c);
    let v = vec4<f32>(q6_quarter(t, 0u, e), q6_quarter(t, 1u, e + 8u), q6_quarter(t, 2u, e + 16u), q6_quarter(t, 3u, e + 24u));
    return q6_d(t, row_byte, c) * dot(q6_scales(t, c), v);
}
