// Q5_0 chunk dot product (see shaders/matmul/matvec.wgsl): a chunk is one block (22 bytes,
// 2-aligned), read as six words once.
const CH: u32 = 32u;

// The 4 bytes at byte offset o (even) of the window ws.
fn win32(ws: array<u32, 6>, o: u32) -> u32 {
    let i = o >> 2u;
    if ((o & 2u) == 0u) {
        return ws[i];
    }
    return (ws[i] >> 16u) | (ws[i + 1u] << 16u);
}

fn chunk_dot(row_byte: u32, c: u32, xo: u32) -> f32 {
    let b = row_byte + c * QB;
    let i = b >> 2u;
    var ws: array<u32, 6>;
    for (var j = 0u; j < 6u; j++) {
        ws[j] = w[i + j];
    }
    let o = b & 2u;
    let d = unpack2x16float(win32(ws, o)).x;
    let qh = win32(ws, o + 2u);
    var s = 0.0;
    for (var j = 0u; j < 4u; j++) {
        let q = win32(ws, o + 6u + 4u * j);
        // Elements 4j.. (low nibbles) and 16 + 4j.. (high nibbles), 5th bits from qh.
        let lo = (q & 0x0F0F0F0Fu) | (spread4(qh >> (4u * j)) << 4u);
        let hi = ((q >> 4u) & 0x0F0F0F0Fu) | (spread4(qh >> (16u + 4u * j)) << 4u);
        s += dot(bytes4(lo) - 16.0, x[xo + 8u * c + j]) + dot(bytes4(hi) - 16.0, x[xo + 8u * c + 4u + j]);
    }
    return d * s;
}
