// F16: one IEEE half per 2 bytes; four elements are two words (rows are 8-byte multiples
// since cols is a multiple of 4).
const QK: u32 = 1u;
const QB: u32 = 2u;

fn dq4(row_byte: u32, k4: u32) -> vec4<f32> {
    let i = (row_byte >> 2u) + 2u * k4;
    return vec4<f32>(unpack2x16float(w[i]), unpack2x16float(w[i + 1u]));
}
