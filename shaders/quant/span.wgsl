// Raw words for the matvec chunk loads (shaders/matmul/matvec.wgsl issues every load of a
// row before the work that feeds it, so the loads may do no arithmetic on what they read).
// Fields of 2-aligned blocks are read as spans: the three words from the one holding byte
// b (even) on cover the 8 bytes at b whatever b's alignment, and span_u32 takes a field
// out once the words have arrived.

fn load_span(b: u32) -> vec3<u32> {
    let i = b >> 2u;
    // The 8 bytes at b end in word i + 1 when b is 4-aligned, so only the third word can
    // lie past the tile (a span of its final bytes); it is then clamped to the last word.
    return vec3<u32>(w[i], w[i + 1u], w[min(i + 2u, arrayLength(&w) - 1u)]);
}

// read_u32_even(b + o) from the span loaded at b (o even, (b & 2) + o <= 4). Fields are
// picked by select, not by a dynamic vector index.
fn span_u32(s: vec3<u32>, b: u32, o: u32) -> u32 {
    let r = (b & 2u) + o;
    return pair_u32(select(s.xy, s.yz, r >= 4u), (r & 2u) != 0u);
}

// The 4 bytes held by a pair of consecutive words, from the first's byte 0 (odd = false)
// or byte 2.
fn pair_u32(v: vec2<u32>, odd: bool) -> u32 {
    return select(v.x, (v.x >> 16u) | (v.y << 16u), odd);
}

// f16_at(b) from the word holding byte b (even).
fn half_of(word: u32, b: u32) -> f32 {
    return unpack2x16float(word >> ((b & 2u) * 8u)).x;
}
