// Q4_K, 256 elements in 144 bytes: d f16 @0, dmin f16 @2, scales[12] @4 (k4_scales.wgsl),
// qs[128] @16. Element 32*s + l (sub-block s < 8, l < 32) is nibble s%2 of qs[32*(s/2) + l].
// y = (d * scale_s) * q - (dmin * min_s).
const QK: u32 = 256u;
const QB: u32 = 144u;

// Where elements 4·k4 .. 4·k4 + 3 of a row lie: the word of qs that holds them (an index
// into w), the nibble's shift, and their sub-block's d · scale and dmin · min.
struct Q4kAt {
    q: u32,
    sh: u32,
    a: f32,
    m: f32,
}

fn q4k_at(row_byte: u32, k4: u32) -> Q4kAt {
    let e = 4u * k4;
    let b = row_byte + (e / QK) * QB;
    let s = (e % QK) / 32u;
    let dm = unpack2x16float(w[b >> 2u]);
    let sm = k4_scale_min(b + 4u, s);
    return Q4kAt((b + 16u + 32u * (s / 2u) + e % 32u) >> 2u, 4u * (s & 1u), dm.x * sm.x, dm.y * sm.y);
}

fn dq4(row_byte: u32, k4: u32) -> vec4<f32> {
    let a = q4k_at(row_byte, k4);
    return a.a * bytes4((w[a.q] >> a.sh) & 0x0F0F0F0Fu) - a.m;
}

// Elements 4·k4 .. 4·k4 + 15 (k4 a multiple of 4: half a sub-block), its scales decoded once.
fn dq16(row_byte: u32, k4: u32) -> array<vec4<f32>, 4> {
    let a = q4k_at(row_byte, k4);
    var r: array<vec4<f32>, 4>;
    for (var j = 0u; j < 4u; j++) {
        r[j] = a.a * bytes4((w[a.q + j] >> a.sh) & 0x0F0F0F0Fu) - a.m;
    }
    return r;
}
