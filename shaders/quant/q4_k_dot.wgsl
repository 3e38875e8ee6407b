// The Q4_K chunk dot product with x as f32 (chunk loads in q4_k_chunk.wgsl).

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
