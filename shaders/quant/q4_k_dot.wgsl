// Q4_K chunk dot product (see shaders/matmul/matvec.wgsl): a chunk is sub-blocks 2j and
// 2j + 1 of a block (64 elements), which share 32 bytes of qs (low / high nibbles). Blocks
// are 144 bytes and rows whole blocks, so every field is word-aligned.
const CH: u32 = 64u;

fn chunk_dot(row_byte: u32, c: u32, xo: u32) -> f32 {
    let b = (row_byte + (c / 4u) * QB) >> 2u;
    let j = c % 4u;
    let dm = unpack2x16float(w[b]);
    let sm0 = k4_scale_min(4u * b + 4u, 2u * j);
    let sm1 = k4_scale_min(4u * b + 4u, 2u * j + 1u);
    var s0 = 0.0;
    var s1 = 0.0;
    var x0 = 0.0;
    var x1 = 0.0;
    let one = vec4<f32>(1.0);
    for (var g = 0u; g < 8u; g++) {
        let q = w[b + 4u + 8u * j + g];
        let xa = x[xo + 16u * c + g];
        let xb = x[xo + 16u * c + 8u + g];
        s0 += dot(bytes4(q & 0x0F0F0F0Fu), xa);
        s1 += dot(bytes4((q >> 4u) & 0x0F0F0F0Fu), xb);
        x0 += dot(one, xa);
        x1 += dot(one, xb);
    }
    return dm.x * (sm0.x * s0 + sm1.x * s1) - dm.y * (sm0.y * x0 + sm1.y * x1);
}
