// Q4_K chunk loads and dot product (see shaders/matmul/matvec.wgsl): a chunk is 32
// elements, the 16 quant bytes at 16j of a block's qs (j < 8), read with one 16-byte
// load: their low nibbles are elements 16(j%2) .. +15 of sub-block 2(j/2), their high
// nibbles the same elements of sub-block 2(j/2)+1. A second 16-byte load brings the
// block's d, dmin and 12 scale bytes. Blocks are 144 = 9 · 16 bytes and rows whole
// blocks, so both loads are aligned. (Chunks of 8 elements took seven 4-byte loads for 4
// bytes of quants: E2B's layer matvecs streamed at 130–400 GB/s.) w4 is the weight tile
// bound a second time, as 16-byte words.
@group(0) @binding(11) var<storage, read> w4: array<vec4<u32>>;

const CH: u32 = 32u;

struct Chunk {
    head: vec4<u32>,
    qv: vec4<u32>,
}

fn chunk_load(row_byte: u32, c: u32) -> Chunk {
    let b = row_byte + (c / 8u) * QB;
    return Chunk(w4[b >> 4u], w4[(b + 16u + 16u * (c % 8u)) >> 4u]);
}

// The scales and mins of sub-blocks 2g and 2g + 1 (k4_scale_min in k4_scales.wgsl) from
// the block head in registers, as (scale 2g, min 2g, scale 2g+1, min 2g+1). Both
// sub-blocks take the same case (g < 2: plain 6-bit fields; g >= 2: nibbles of bytes
// 8.. with top bits from bytes 0.. and 4..), and the 16-bit halves of the three scale
// words at g % 2 hold every byte either case reads, so all invocations run one
// branch-free sequence (neighbouring invocations differ in g: a per-sub-block branch made
// each subgroup run both cases).
fn k4_reg_scales(head: vec4<u32>, g: u32) -> vec4<f32> {
    let sh = 16u * (g & 1u);
    let y = (head.y >> sh) & 0xFFFFu; // bytes 2k, 2k + 1
    let z = (head.z >> sh) & 0xFFFFu; // bytes 4 + 2k, 5 + 2k
    let v = (head.w >> sh) & 0xFFFFu; // bytes 8 + 2k, 9 + 2k
    let high = g >= 2u;
    let sc = select(y & 0x3F3Fu, (v & 0x0F0Fu) | ((y & 0xC0C0u) >> 2u), high);
    let mn = select(z & 0x3F3Fu, ((v >> 4u) & 0x0F0Fu) | ((z & 0xC0C0u) >> 2u), high);
    return vec4<f32>(f32(sc & 0xFFu), f32(mn & 0xFFu), f32(sc >> 8u), f32(mn >> 8u));
}

// v's words rotated left by r (< 4): word i of the result is word (i + r) % 4 of v.
fn rot4(v: vec4<u32>, r: u32) -> vec4<u32> {
    let a = select(v, v.yzwx, (r & 1u) != 0u);
    return select(a, a.zwxy, (r & 2u) != 0u);
}

fn chunk_dot(t: Chunk, row_byte: u32, c: u32, xo: u32) -> f32 {
    let j = c % 8u;
    let g = j / 2u;
    let dm = unpack2x16float(t.head.x);
    let sm = k4_reg_scales(t.head, g);
    let s0 = sm.xy;
    let s1 = sm.zw;
    // x vec4 of element 16(j%2) of sub-block 2g; sub-block 2g+1 is 32 elements (8 vec4) on.
    let e = xo + (c / 8u) * 64u + 16u * g + 4u * (j % 2u);
    var lo = 0.0;
    var hi = 0.0;
    var sx_lo = 0.0;
    var sx_hi = 0.0;
    let one = vec4<f32>(1.0);
    // Neighbouring invocations (j = 0..7) start 4 or 16 vec4s apart in x, so at step i
    // those of even j would all read one bank group of workgroup memory (those of odd j
    // another): each takes its 4 vec4s in an order rotated by g, which spreads the 8
    // reads over 8 bank groups.
    let q = rot4(t.qv, g);
    for (var i = 0u; i < 4u; i++) {
        let k = (i + g) & 3u;
        let xl = xin(e + k);
        let xh = xin(e + 8u + k);
        lo += dot(bytes4(q[i] & 0x0F0F0F0Fu), xl);
        hi += dot(bytes4((q[i] >> 4u) & 0x0F0F0F0Fu), xh);
        sx_lo += dot(one, xl);
        sx_hi += dot(one, xh);
    }
    return (dm.x * s0.x) * lo - (dm.y * s0.y) * sx_lo + ((dm.x * s1.x) * hi - (dm.y * s1.y) * sx_hi);
}
