// Q6_K chunk dot product (see shaders/matmul/matvec.wgsl): a chunk is, for one half h of a
// block and 16 consecutive l, the four quarters k (64 elements 128h + 32k + l): 16 bytes
// of ql twice and 16 of qh, all 2-aligned (210-byte blocks).
const CH: u32 = 64u;

fn chunk_dot(row_byte: u32, c: u32, xo: u32) -> f32 {
    let b = row_byte + (c / 4u) * QB;
    let h = (c % 4u) / 2u;
    let l0 = 16u * (c % 2u);
    let d = f16_at(b + 208u);
    // Element index of (k = 0, l0) within the row, in vec4s.
    let e4 = xo + (c / 4u) * 64u + 32u * h + l0 / 4u;
    var s = 0.0;
    for (var k = 0u; k < 4u; k++) {
        let sc = f32((bitcast<i32>(read_u8(b + 192u + 8u * h + 2u * k + l0 / 16u)) << 24u) >> 24u);
        var sk = 0.0;
        for (var g = 0u; g < 4u; g++) {
            let lo = (read_u32_even(b + 64u * h + 32u * (k & 1u) + l0 + 4u * g) >> (4u * (k >> 1u))) & 0x0F0F0F0Fu;
            let hi = ((read_u32_even(b + 128u + 32u * h + l0 + 4u * g) >> (2u * k)) & 0x03030303u) << 4u;
            sk += dot(bytes4(lo | hi) - 32.0, x[e4 + 8u * k + g]);
        }
        s += sc * sk;
    }
    return d * s;
}
