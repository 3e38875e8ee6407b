// Q6_K chunk dot product (see shaders/matmul/matvec.wgsl): a chunk is the 64 consecutive
// elements 128h + 32k + l of a block for one half h, k in {2m, 2m + 1}, l < 32. Their low
// bits are one nibble (m) of ql[64h ..][..64], their high bits bits 2k of qh[32h ..][..32];
// all fields are 2-aligned (210-byte blocks).
const CH: u32 = 64u;

fn chunk_dot(row_byte: u32, c: u32, xs: ptr<function, array<vec4<f32>, CH / 4u>>) -> f32 {
    let b = row_byte + (c / 4u) * QB;
    let h = (c % 4u) / 2u;
    let m = c % 2u;
    let d = f16_at(b + 208u);
    var s = 0.0;
    for (var kk = 0u; kk < 2u; kk++) {
        let k = 2u * m + kk;
        // Sub-blocks of 16: scales 8h + 2k and 8h + 2k + 1.
        var sk = vec2<f32>(0.0);
        for (var g = 0u; g < 8u; g++) {
            let lo = (read_u32_even(b + 64u * h + 32u * kk + 4u * g) >> (4u * m)) & 0x0F0F0F0Fu;
            let hi = ((read_u32_even(b + 128u + 32u * h + 4u * g) >> (2u * k)) & 0x03030303u) << 4u;
            let t = dot(bytes4(lo | hi) - 32.0, (*xs)[8u * kk + g]);
            if (g < 4u) {
                sk.x += t;
            } else {
                sk.y += t;
            }
        }
        let s0 = f32((bitcast<i32>(read_u8(b + 192u + 8u * h + 2u * k)) << 24u) >> 24u);
        let s1 = f32((bitcast<i32>(read_u8(b + 193u + 8u * h + 2u * k)) << 24u) >> 24u);
        s += s0 * sk.x + s1 * sk.y;
    }
    return d * s;
}
