// The 6-bit scale and min of sub-block j (< 8) of a Q4_K/Q5_K block, packed in the 12
// bytes at `s`: for j < 4, scale = s[j] & 63 and min = s[j+4] & 63; for j >= 4 the low 4
// bits are the nibbles of s[j+4] (scale: low, min: high) and the high 2 bits the top bits
// of s[j-4] (scale) and s[j] (min).
fn k4_scale_min(s: u32, j: u32) -> vec2<f32> {
    if (j < 4u) {
        return vec2<f32>(f32(read_u8(s + j) & 63u), f32(read_u8(s + j + 4u) & 63u));
    }
    let a = read_u8(s + j + 4u);
    return vec2<f32>(f32((a & 15u) | ((read_u8(s + j - 4u) >> 6u) << 4u)), f32((a >> 4u) | ((read_u8(s + j) >> 6u) << 4u)));
}
