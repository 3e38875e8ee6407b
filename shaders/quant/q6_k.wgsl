// Q6_K, 256 elements in 210 bytes: ql[128] @0, qh[64] @128, scales[16] i8 @192, d f16 @208.
// Element 128*h + 32*k + l (h < 2, k < 4, l < 32): low 4 bits are nibble k/2 of
// ql[64*h + 32*(k%2) + l], high 2 bits are bits 2k..2k+2 of qh[32*h + l]; offset 32.
// Sub-block (16 elements) 8*h + 2*k + l/16. y = (d * scale) * q.
// On the GPU the blocks come in groups of eight, each field gathered (gpu/block_groups.rs):
// ql[8][128] @0, qh[8][64] @1024, scales[8][16] @1536, d[8] @1664, 1680 bytes a group.
// A block is still named by its byte offset in the file's order (a multiple of 210).
const QK: u32 = 256u;
const QB: u32 = 210u;
const QG: u32 = 1680u;

// Byte offsets of the ql, qh, scales and d of the block at file offset b.
fn q6_fields(b: u32) -> vec4<u32> {
    let n = b / QB;
    let g = (n / 8u) * QG;
    let i = n % 8u;
    return vec4<u32>(g + 128u * i, g + 1024u + 64u * i, g + 1536u + 16u * i, g + 1664u + 2u * i);
}

// Where elements 4·k4 .. 4·k4 + 3 of a row lie: the words of ql and qh that hold them (as
// indices into w; every field but d is 4-aligned here, and l a multiple of 4), their
// quarter k (q6_quant), and d times their sub-block's scale.
struct Q6At {
    ql: u32,
    qh: u32,
    k: u32,
    ds: f32,
}

fn q6_at(row_byte: u32, k4: u32) -> Q6At {
    let e = 4u * k4;
    let f = q6_fields(row_byte + (e / QK) * QB);
    let i = e % QK;
    let h = i / 128u;
    let k = (i / 32u) % 4u;
    let l = i % 32u;
    let sc = f32((bitcast<i32>(read_u8(f.z + 8u * h + 2u * k + l / 16u)) << 24u) >> 24u);
    return Q6At((f.x + 64u * h + 32u * (k & 1u) + l) >> 2u, (f.y + 32u * h + l) >> 2u, k, f16_at(f.w) * sc);
}

fn dq4(row_byte: u32, k4: u32) -> vec4<f32> {
    let a = q6_at(row_byte, k4);
    return a.ds * (bytes4(q6_quant(w[a.ql], w[a.qh], a.k)) - 32.0);
}

// Elements 4·k4 .. 4·k4 + 15 (k4 a multiple of 4: one sub-block), its scale read once.
fn dq16(row_byte: u32, k4: u32) -> array<vec4<f32>, 4> {
    let a = q6_at(row_byte, k4);
    var r: array<vec4<f32>, 4>;
    for (var j = 0u; j < 4u; j++) {
        r[j] = a.ds * (bytes4(q6_quant(w[a.ql + j], w[a.qh + j], a.k)) - 32.0);
    }
    return r;
}

// Four quants of quarter k (0..63, a byte each) from a word of ql (ql at 64h + 32(k % 2)
// + l, its nibble k / 2) and the word of qh at 32h + l (bits 2k..2k+1).
fn q6_quant(ql: u32, qh: u32, k: u32) -> u32 {
    return ((ql >> (4u * (k >> 1u))) & 0x0F0F0F0Fu) | (((qh >> (2u * k)) & 0x03030303u) << 4u);
}
