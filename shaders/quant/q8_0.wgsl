// Q8_0, 32 elements in 34 bytes: d f16 @0, qs[32] i8 @2. y = q * d.
const QK: u32 = 32u;
const QB: u32 = 34u;

fn dq4(row_byte: u32, k4: u32) -> vec4<f32> {
    let e = 4u * k4;
    let b = row_byte + (e / QK) * QB;
    return sbytes4(read_u32_even(b + 2u + e % QK)) * f16_at(b);
}

// Elements 4·k4 .. 4·k4 + 15 (k4 a multiple of 4: half a block), d read once.
fn dq16(row_byte: u32, k4: u32) -> array<vec4<f32>, 4> {
    let e = 4u * k4;
    let b = row_byte + (e / QK) * QB;
    let d = f16_at(b);
    var r: array<vec4<f32>, 4>;
    for (var j = 0u; j < 4u; j++) {
        r[j] = sbytes4(read_u32_even(b + 2u + e % QK + 4u * j)) * d;
    }
    return r;
}
