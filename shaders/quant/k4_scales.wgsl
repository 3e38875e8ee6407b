// The 6-bit scales and mins of a Q4_K/Q5_K block, in the 12 bytes at byte 4 of the block
// as the GPU holds them (src/gpu/block_groups.rs's k4_pairs): the file packs sub-blocks
// 4-7's values from three bytes each; on the GPU, word p (< 3) of the 12 bytes holds
// (scale 2p, min 2p, scale 2p+1, min 2p+1) in its bytes' low 6 bits, and the same four
// values of p = 3 sit in the twelve bytes' top 2 bits (value i: bits 0-1 in byte i, 2-3
// in byte 4 + i, 4-5 in byte 8 + i).

// (scale 2g, min 2g, scale 2g+1, min 2g+1) from the three scale words s0, s1, s2. Every
// invocation runs one branch-free sequence: neighbouring invocations differ in g, and a
// branch on it made each subgroup run every case. (The file's packing took 26 integer
// operations here; decoding none at all, timing only, was E2B decode +1.1%, and this
// layout gained +0.6-0.9%: fifty-sixth session.)
fn k4_pair(s0: u32, s1: u32, s2: u32, g: u32) -> vec4<f32> {
    let plain = select(select(s0, s1, g == 1u), s2, g == 2u) & 0x3F3F3F3Fu;
    let top = ((s0 >> 6u) & 0x03030303u) | ((s1 >> 4u) & 0x0C0C0C0Cu) | ((s2 >> 2u) & 0x30303030u);
    return vec4<f32>(unpack4xU8(select(plain, top, g == 3u)));
}

// The scale and min of sub-block j (< 8) of the block whose scale bytes start at byte s
// (4-aligned: blocks are whole words).
fn k4_scale_min(s: u32, j: u32) -> vec2<f32> {
    let i = s >> 2u;
    let v = k4_pair(w[i], w[i + 1u], w[i + 2u], j / 2u);
    return select(v.xy, v.zw, (j & 1u) == 1u);
}
