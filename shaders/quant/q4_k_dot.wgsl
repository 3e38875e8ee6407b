// Q4_K chunk dot product (see shaders/matmul/matvec.wgsl): a chunk is 8 consecutive
// elements, a quarter of a 32-element sub-block, so the 32 invocations of a row cover one
// whole block per step and each of their reads (qs, x) is contiguous across invocations.
// (Chunks of a whole 64-element sub-block pair read x 256 bytes apart per invocation:
// every load instruction touched 32 cache lines.) Blocks are 144 bytes and rows whole
// blocks, so every field is word-aligned.
const CH: u32 = 8u;

fn chunk_dot(row_byte: u32, c: u32, xo: u32) -> f32 {
    let b = row_byte + (c / 32u) * QB;
    let e = (c % 32u) * 8u;
    let s = e / 32u;
    let dm = unpack2x16float(w[b >> 2u]);
    let sm = k4_scale_min(b + 4u, s);
    let qo = (b + 16u + 32u * (s / 2u) + e % 32u) >> 2u;
    let sh = 4u * (s & 1u);
    let xa = xin(xo + 2u * c);
    let xb = xin(xo + 2u * c + 1u);
    let q = dot(bytes4((w[qo] >> sh) & 0x0F0F0F0Fu), xa) + dot(bytes4((w[qo + 1u] >> sh) & 0x0F0F0F0Fu), xb);
    let one = vec4<f32>(1.0);
    return (dm.x * sm.x) * q - (dm.y * sm.y) * (dot(one, xa) + dot(one, xb));
}
