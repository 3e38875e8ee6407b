// Q4_K, 256 elements in 144 bytes: d f16 @0, dmin f16 @2, scales[12] @4 (k4_scales.wgsl),
// qs[128] @16. Element 32*s + l (sub-block s < 8, l < 32) is nibble s%2 of qs[32*(s/2) + l].
// y = (d * scale_s) * q - (dmin * min_s).
const QK: u32 = 256u;
const QB: u32 = 144u;

fn dq4(row_byte: u32, k4: u32) -> vec4<f32> {
    let e = 4u * k4;
    let b = row_byte + (e / QK) * QB;
    let s = (e % QK) / 32u;
    let l = e % 32u;
    let dm = unpack2x16float(w[b >> 2u]);
    let sm = k4_scale_min(b + 4u, s);
    let q = (w[(b + 16u + 32u * (s / 2u) + l) >> 2u] >> (4u * (s & 1u))) & 0x0F0F0F0Fu;
    return (dm.x * sm.x) * bytes4(q) - dm.y * sm.y;
}

// Elements 4·k4 .. 4·k4 + 15 (k4 a multiple of 4: half a sub-block), its scales decoded once.
fn dq16(row_byte: u32, k4: u32) -> array<vec4<f32>, 4> {
    let e = 4u * k4;
    let b = row_byte + (e / QK) * QB;
    let s = (e % QK) / 32u;
    let dm = unpack2x16float(w[b >> 2u]);
    let sm = k4_scale_min(b + 4u, s);
    let a = dm.x * sm.x;
    let m = dm.y * sm.y;
    let q0 = (b + 16u + 32u * (s / 2u) + e % 32u) >> 2u;
    let sh = 4u * (s & 1u);
    var r: array<vec4<f32>, 4>;
    for (var j = 0u; j < 4u; j++) {
        r[j] = a * bytes4((w[q0 + j] >> sh) & 0x0F0F0F0Fu) - m;
    }
    return r;
}
