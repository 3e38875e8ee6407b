//! Weight blocks as GPU buffers hold them. Every type keeps the file's bytes in the file's
//! order except two:
//!
//! Q6_K, whose 210-byte blocks leave its fields only 2-byte aligned: a kernel reading them
//! in place takes two 4-byte loads and a realignment per 4 bytes. On the GPU, Q6_K blocks
//! come in groups of eight with each field gathered:
//!
//! `ql[8][128] @0, qh[8][64] @1024, scales[8][16] @1536, d[8] @1664` (1680 = 8 · 210 bytes)
//!
//! so a group is as large as its eight blocks, every group starts 16-aligned, and the
//! quant and scale fields of every block can be read with 16-byte loads. A block keeps its
//! byte offset in the file's order as its name (shaders/quant/q6_k.wgsl turns that into
//! its fields' offsets), and a tile is padded with zero blocks to whole groups.
//! Same bytes, so no more memory than the file's blocks (plus < 1.5 KB a tile).
//!
//! Q4_K and Q5_K, whose 12 bytes of 6-bit scales and mins (`k4_scale_min` in
//! gguf/dequant.rs) are packed so that sub-blocks 4-7 take their bits from three bytes
//! each: on the GPU the same 12 bytes hold the same 16 values as `k4_pairs` lays them
//! out, so a kernel gets the four values of sub-blocks 2g and 2g + 1 from one word
//! (shaders/quant/k4_scales.wgsl). Blocks stay where they are, the same size.

use crate::gguf::dequant::k4_scale_min_u8;
use crate::gguf::GgmlType;

/// Blocks per group.
const GROUP: usize = 8;
const Q6_K_BLOCK: usize = 210;
const GROUP_BYTES: usize = GROUP * Q6_K_BLOCK;
/// (offset in a block, field length) of Q6_K's ql, qh, scales and d.
const Q6_K_FIELDS: [(usize, usize); 4] = [(0, 128), (128, 64), (192, 16), (208, 2)];

/// Whether tiles of `ty` are regrouped on the GPU.
pub fn regrouped(ty: GgmlType) -> bool {
    ty == GgmlType::Q6_K
}

/// Whether tiles of `ty` hold other bytes than the file's (regrouped, or rewritten in place).
pub fn rewritten(ty: GgmlType) -> bool {
    regrouped(ty) || k4_scales_at(ty).is_some()
}

/// Block size and where the 12 scale bytes of a Q4_K / Q5_K block start.
fn k4_scales_at(ty: GgmlType) -> Option<(usize, usize)> {
    match ty {
        GgmlType::Q4_K => Some((144, 4)),
        GgmlType::Q5_K => Some((176, 4)),
        _ => None,
    }
}

/// The 12 scale bytes `s` of a Q4_K / Q5_K block as the GPU holds them: with (sc, m) the
/// scale and min of sub-block j, bytes 4p .. 4p + 3 (p < 3) hold sc(2p), m(2p), sc(2p+1),
/// m(2p+1) in their low 6 bits, and the four values of p = 3 sit in the 12 bytes' top
/// bits, value i's bits 0-1 in byte i, 2-3 in byte 4 + i, 4-5 in byte 8 + i. So word p of
/// the 12 bytes (p < 3) masked by 0x3F3F3F3F, or for p = 3 the three words' top bits
/// gathered, is one byte a value.
pub fn k4_pairs(s: &[u8]) -> [u8; 12] {
    let v = |p: usize| {
        let (a, b) = (k4_scale_min_u8(s, 2 * p), k4_scale_min_u8(s, 2 * p + 1));
        [a.0, a.1, b.0, b.1]
    };
    let mut out = [0u8; 12];
    for p in 0..3 {
        out[4 * p..4 * p + 4].copy_from_slice(&v(p));
    }
    for (i, x) in v(3).into_iter().enumerate() {
        for k in 0..3 {
            out[4 * k + i] |= ((x >> (2 * k)) & 3) << 6;
        }
    }
    out
}

/// Bytes a GPU buffer takes for `file_len` bytes of `ty` blocks.
pub fn gpu_len(ty: GgmlType, file_len: usize) -> usize {
    if regrouped(ty) { file_len.div_ceil(GROUP_BYTES) * GROUP_BYTES } else { file_len }
}

/// Writes the GPU layout of the blocks in `src` (whole blocks of `ty`) through `put(offset,
/// bytes)`, one group at a time, `gpu_len` bytes in all.
pub fn write(ty: GgmlType, src: &[u8], put: &mut dyn FnMut(usize, &[u8])) {
    if let Some((block, at)) = k4_scales_at(ty) {
        // Rewritten a piece at a time, so no copy of the whole tile is held.
        let mut piece = Vec::with_capacity(block * 512);
        for (i, blocks) in src.chunks(block * 512).enumerate() {
            piece.clear();
            piece.extend_from_slice(blocks);
            for b in piece.chunks_exact_mut(block) {
                let s = k4_pairs(&b[at..at + 12]);
                b[at..at + 12].copy_from_slice(&s);
            }
            put(i * block * 512, &piece);
        }
        return;
    }
    if !regrouped(ty) {
        put(0, src);
        return;
    }
    let mut group = [0u8; GROUP_BYTES];
    for (g, blocks) in src.chunks(GROUP_BYTES).enumerate() {
        group.fill(0);
        let mut field_at = 0;
        for (off, len) in Q6_K_FIELDS {
            for (i, block) in blocks.chunks_exact(Q6_K_BLOCK).enumerate() {
                group[field_at + i * len..field_at + (i + 1) * len].copy_from_slice(&block[off..off + len]);
            }
            field_at += GROUP * len;
        }
        put(g * GROUP_BYTES, &group);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regroup(src: &[u8]) -> Vec<u8> {
        let mut out = vec![0xAAu8; gpu_len(GgmlType::Q6_K, src.len())];
        write(GgmlType::Q6_K, src, &mut |at, bytes| out[at..at + bytes.len()].copy_from_slice(bytes));
        out
    }

    #[test]
    fn q6_k_fields_land_where_the_shaders_read_them() {
        // 11 blocks: one whole group and a partial one, padded with zero blocks.
        let src: Vec<u8> = (0..11 * Q6_K_BLOCK).map(|i| (i * 7 + i / 210) as u8).collect();
        let out = regroup(&src);
        assert_eq!(out.len(), 2 * GROUP_BYTES);
        for n in 0..16 {
            let (g, i) = (n / 8 * GROUP_BYTES, n % 8);
            // The offsets q6_k.wgsl's q6_fields computes.
            let at = [g + 128 * i, g + 1024 + 64 * i, g + 1536 + 16 * i, g + 1664 + 2 * i];
            for (f, (off, len)) in Q6_K_FIELDS.iter().enumerate() {
                let got = &out[at[f]..at[f] + len];
                if n < 11 {
                    assert_eq!(got, &src[n * Q6_K_BLOCK + off..n * Q6_K_BLOCK + off + len], "block {n} field {f}");
                } else {
                    assert!(got.iter().all(|&b| b == 0), "padding block {n} field {f}");
                }
            }
        }
        // Every group starts 16-aligned and the quant and scale fields stay 16-aligned.
        assert!(GROUP_BYTES.is_multiple_of(16));
        assert!(Q6_K_FIELDS[..3].iter().all(|(_, len)| (GROUP * len).is_multiple_of(16) && len.is_multiple_of(16)));
    }

    #[test]
    fn k4_scales_land_where_the_shaders_read_them() {
        // Two Q5_K blocks (the scale bytes at 4 as in Q4_K) of every byte pattern's kind.
        let src: Vec<u8> = (0..2 * 176).map(|i| (i * 37 + 11) as u8).collect();
        let mut out = vec![0u8; src.len()];
        write(GgmlType::Q5_K, &src, &mut |at, bytes| out[at..at + bytes.len()].copy_from_slice(bytes));
        for b in 0..2 {
            let (file, gpu) = (&src[176 * b..176 * (b + 1)], &out[176 * b..176 * (b + 1)]);
            assert_eq!(&file[..4], &gpu[..4], "d and dmin");
            assert_eq!(&file[16..], &gpu[16..], "quants");
            let word = |k: usize| u32::from_le_bytes(gpu[4 + 4 * k..8 + 4 * k].try_into().unwrap());
            for j in 0..8 {
                // What k4_scales.wgsl's k4_pair computes for sub-block pair j / 2.
                let g = j / 2;
                let v = if g < 3 {
                    word(g) & 0x3F3F3F3F
                } else {
                    ((word(0) >> 6) & 0x03030303) | ((word(1) >> 4) & 0x0C0C0C0C) | ((word(2) >> 2) & 0x30303030)
                };
                let got = ((v >> (16 * (j % 2))) as u8, (v >> (16 * (j % 2) + 8)) as u8);
                assert_eq!(got, k4_scale_min_u8(&file[4..16], j), "block {b} sub-block {j}");
            }
        }
    }

    #[test]
    fn other_types_keep_the_file_order() {
        let src: Vec<u8> = (0..34 * 3).map(|i| i as u8).collect();
        let mut out = Vec::new();
        write(GgmlType::Q8_0, &src, &mut |at, bytes| {
            assert_eq!(at, out.len());
            out.extend_from_slice(bytes)
        });
        assert_eq!(out, src);
        assert_eq!(gpu_len(GgmlType::Q8_0, 102), 102);
    }
}
