// Q6_K chunk dot product (see shaders/matmul/matvec.wgsl): a chunk is 8 consecutive
// elements (within one 16-element sub-block), so the 32 invocations of a row cover one
// whole block per step with reads contiguous across invocations. 210-byte blocks leave
// fields 2-aligned.
const CH: u32 = 8u;

fn chunk_dot(row_byte: u32, c: u32, xo: u32) -> f32 {
    let b = row_byte + (c / 32u) * QB;
    let e = (c % 32u) * 8u;
    let h = e / 128u;
    let k = (e / 32u) % 4u;
    let l = e % 32u;
    let lb = b + 64u * h + 32u * (k & 1u) + l;
    let hb = b + 128u + 32u * h + l;
    let sc = f32((bitcast<i32>(read_u8(b + 192u + 8u * h + 2u * k + l / 16u)) << 24u) >> 24u);
    var s = 0.0;
    for (var g = 0u; g < 2u; g++) {
        let lo = (read_u32_even(lb + 4u * g) >> (4u * (k >> 1u))) & 0x0F0F0F0Fu;
        let hi = ((read_u32_even(hb + 4u * g) >> (2u * k)) & 0x03030303u) << 4u;
        s += dot(bytes4(lo | hi) - 32.0, xin(xo + 2u * c + g));
    }
    return (f16_at(b + 208u) * sc) * s;
}
