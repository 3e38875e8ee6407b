// Q8_0 chunk dot product (see shaders/matmul/matvec.wgsl): a chunk is one block. Its 34
// bytes start 2- or 4-aligned; nine words cover them either way and are read once.
const CH: u32 = 32u;

fn chunk_dot(row_byte: u32, c: u32, xo: u32) -> f32 {
    let b = row_byte + c * QB;
    let i = b >> 2u;
    var ws: array<u32, 9>;
    for (var j = 0u; j < 9u; j++) {
        ws[j] = w[i + j];
    }
    let odd = (b & 2u) != 0u;
    let dd = unpack2x16float(ws[0]);
    let d = select(dd.x, dd.y, odd);
    var s = 0.0;
    for (var j = 0u; j < 8u; j++) {
        // Bytes 2 + 4j .. 5 + 4j of the block.
        let q = select((ws[j] >> 16u) | (ws[j + 1u] << 16u), ws[j + 1u], odd);
        s += dot(sbytes4(q), x[xo + 8u * c + j]);
    }
    return d * s;
}
