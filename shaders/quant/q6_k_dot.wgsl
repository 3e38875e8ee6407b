// The Q6_K chunk dot product with x as f32 (chunk loads in q6_k_chunk.wgsl).
fn chunk_dot(t: Chunk, row_byte: u32, c: u32, xo: u32) -> f32 {
    let p = q6_pos(row_byte, c);
    let q = q6_quants(t, p);
    let sc = q6_scales(t, p);
    // x vec4 of element 128h + l; each quarter is 32 elements (8 vec4s) on.
    let e = xo + (c / 16u) * 64u + 32u * p.y + p.z / 4u;
    let s = sc.x * dot(bytes4(q.x) - 32.0, xin(e))
        + sc.y * dot(bytes4(q.y) - 32.0, xin(e + 8u))
        + (sc.z * dot(bytes4(q.z) - 32.0, xin(e + 16u)) + sc.w * dot(bytes4(q.w) - 32.0, xin(e + 24u)));
    return half_of(t.d, p.x + 208u) * s;
}
