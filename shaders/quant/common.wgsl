// Byte-level reads from the raw GGUF blocks in `w: array<u32>` (declared by the including
// kernel). Block sizes such as 18, 22, 34 and 210 bytes leave fields 2-byte aligned only,
// so multi-byte reads take a byte offset and shift. All fields are little-endian.

fn read_u8(b: u32) -> u32 {
    return (w[b >> 2u] >> ((b & 3u) * 8u)) & 0xFFu;
}

// `b` even.
fn read_u16(b: u32) -> u32 {
    return (w[b >> 2u] >> ((b & 2u) * 8u)) & 0xFFFFu;
}

// Four bytes starting at an even offset `b`.
fn read_u32_even(b: u32) -> u32 {
    let i = b >> 2u;
    if ((b & 2u) == 0u) {
        return w[i];
    }
    return (w[i] >> 16u) | (w[i + 1u] << 16u);
}

// IEEE half at even offset `b`.
fn f16_at(b: u32) -> f32 {
    return unpack2x16float(read_u16(b)).x;
}

// bfloat16 from its 16 bits (the top half of an f32).
fn bf16_bits(h: u32) -> f32 {
    return bitcast<f32>(h << 16u);
}

// The four bytes of `u` as unsigned values, lowest byte first.
fn bytes4(u: u32) -> vec4<f32> {
    return vec4<f32>(f32(u & 0xFFu), f32((u >> 8u) & 0xFFu), f32((u >> 16u) & 0xFFu), f32(u >> 24u));
}

// The four bytes of `u` as signed (two's complement) values, lowest byte first.
fn sbytes4(u: u32) -> vec4<f32> {
    let s = bitcast<i32>(u);
    return vec4<f32>(f32((s << 24u) >> 24u), f32((s << 16u) >> 24u), f32((s << 8u) >> 24u), f32(s >> 24u));
}

// Bits 0..3 of `h` spread to bit 0 of each byte (the 5th-bit masks of Q5 types).
fn spread4(h: u32) -> u32 {
    return (h & 1u) | ((h & 2u) << 7u) | ((h & 4u) << 14u) | ((h & 8u) << 21u);
}
