//! Weight blocks as GPU buffers hold them. Every type keeps the file's bytes in the file's
//! order except Q6_K, whose 210-byte blocks leave its fields only 2-byte aligned: a
//! kernel reading them in place takes two 4-byte loads and a realignment per 4 bytes. On
//! the GPU, Q6_K blocks come in groups of eight with each field gathered:
//!
//! `ql[8][128] @0, qh[8][64] @1024, scales[8][16] @1536, d[8] @1664` (1680 = 8 · 210 bytes)
//!
//! so a group is as large as its eight blocks, every group starts 16-aligned, and the
//! quant and scale fields of every block can be read with 16-byte loads. A block keeps its
//! byte offset in the file's order as its name (shaders/quant/q6_k.wgsl turns that into
//! its fields' offsets), and a tile is padded with zero blocks to whole groups.
//! Same bytes, so no more memory than the file's blocks (plus < 1.5 KB a tile).

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

/// Bytes a GPU buffer takes for `file_len` bytes of `ty` blocks.
pub fn gpu_len(ty: GgmlType, file_len: usize) -> usize {
    if regrouped(ty) { file_len.div_ceil(GROUP_BYTES) * GROUP_BYTES } else { file_len }
}

/// Writes the GPU layout of the blocks in `src` (whole blocks of `ty`) through `put(offset,
/// bytes)`, one group at a time, `gpu_len` bytes in all.
pub fn write(ty: GgmlType, src: &[u8], put: &mut dyn FnMut(usize, &[u8])) {
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
