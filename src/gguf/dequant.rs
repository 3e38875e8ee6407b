//! CPU dequantization of ggml blocks to f32 (the reference for the GPU kernels).
//!
//! Each block type has one small function that expands one block; `each_block` is the only
//! loop over blocks. The arithmetic (order of multiplies and adds, all in f32) follows
//! ggml's `dequantize_row_*`, so results are bit-identical to ggml and to gguf-py. Every
//! product and sum is rounded on its own: a fused multiply-add changes the last bit of
//! `d * q - m` for the types with a min (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K).
//!
//! Layout notes below give byte offsets inside one block; all multi-byte fields are
//! little-endian, and "f16" scales are IEEE half precision. "Element i" is the i-th output
//! value of the block.

use half::{bf16, f16};

use super::types::GgmlType;
use crate::{Error, Result};

/// Expand the first `n` elements of type `ty` stored in `data` to f32.
pub fn dequantize(ty: GgmlType, data: &[u8], n: usize) -> Result<Vec<f32>> {
    let need = bytes_needed(ty, n)?;
    if data.len() < need {
        return Err(wrong_len(ty, n, need, data.len()));
    }
    let mut out = vec![0f32; n];
    dequantize_into(ty, &data[..need], &mut out)?;
    Ok(out)
}

/// Expand `data` (exactly `out.len()` elements of type `ty`, whole blocks) into `out`.
/// Does not allocate; meant for row-by-row use.
pub fn dequantize_into(ty: GgmlType, data: &[u8], out: &mut [f32]) -> Result<()> {
    match ty {
        GgmlType::F32 => each_block(ty, data, out, f32_block),
        GgmlType::F16 => each_block(ty, data, out, f16_block),
        GgmlType::BF16 => each_block(ty, data, out, bf16_block),
        GgmlType::Q4_0 => each_block(ty, data, out, q4_0_block),
        GgmlType::Q4_1 => each_block(ty, data, out, q4_1_block),
        GgmlType::Q5_0 => each_block(ty, data, out, q5_0_block),
        GgmlType::Q5_1 => each_block(ty, data, out, q5_1_block),
        GgmlType::Q8_0 => each_block(ty, data, out, q8_0_block),
        GgmlType::Q2_K => each_block(ty, data, out, q2_k_block),
        GgmlType::Q3_K => each_block(ty, data, out, q3_k_block),
        GgmlType::Q4_K => each_block(ty, data, out, q4_k_block),
        GgmlType::Q5_K => each_block(ty, data, out, q5_k_block),
        GgmlType::Q6_K => each_block(ty, data, out, q6_k_block),
        other => Err(Error::UnsupportedType(format!("{other} (no CPU dequantization)"))),
    }
}

/// Whether `dequantize` can expand `ty` (the dispatch above is the single list).
pub fn is_supported(ty: GgmlType) -> bool {
    !matches!(dequantize_into(ty, &[], &mut []), Err(Error::UnsupportedType(_)))
}

fn bytes_needed(ty: GgmlType, n: usize) -> Result<usize> {
    ty.bytes_for(n as u64)
        .and_then(|b| usize::try_from(b).ok())
        .ok_or_else(|| Error::Input(format!("{n} elements is not a whole number of {ty} blocks ({} each)", ty.block_elems())))
}

fn wrong_len(ty: GgmlType, n: usize, need: usize, got: usize) -> Error {
    Error::Input(format!("{ty}: {n} elements take {need} bytes, got {got}"))
}

/// The one loop over blocks, after checking that `data` holds exactly `out.len()` elements.
/// Block sizes are compile-time constants taken from the block function's signature, so
/// block functions index fixed-size arrays without bounds checks.
fn each_block<const B: usize, const E: usize>(
    ty: GgmlType,
    data: &[u8],
    out: &mut [f32],
    block: impl Fn(&[u8; B], &mut [f32; E]),
) -> Result<()> {
    debug_assert_eq!((B, E), (ty.block_bytes(), ty.block_elems()), "{ty} block function disagrees with the type table");
    let need = bytes_needed(ty, out.len())?;
    if data.len() != need {
        // Exact length, not a prefix: a wrong row offset or count must not go unnoticed.
        return Err(wrong_len(ty, out.len(), need, data.len()));
    }
    let (blocks, _) = data.as_chunks::<B>();
    let (outs, _) = out.as_chunks_mut::<E>();
    for (b, o) in blocks.iter().zip(outs) {
        block(b, o);
    }
    Ok(())
}

fn half_at(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// F32: one element, 4 bytes.
fn f32_block(b: &[u8; 4], o: &mut [f32; 1]) {
    o[0] = f32::from_le_bytes(*b);
}

/// F16: one element, 2 bytes.
fn f16_block(b: &[u8; 2], o: &mut [f32; 1]) {
    o[0] = f16::from_le_bytes(*b).to_f32();
}

/// BF16: one element, 2 bytes (the top half of an f32).
fn bf16_block(b: &[u8; 2], o: &mut [f32; 1]) {
    o[0] = bf16::from_le_bytes(*b).to_f32();
}

/// The 32 unsigned quants of a legacy block: element j (j < 16) is the low nibble of
/// qs[j], element j + 16 its high nibble; for 5-bit types bit 4 of element i is bit i of `qh`.
fn legacy_quants(qs: &[u8], qh: u32) -> [u8; 32] {
    let mut q = [0u8; 32];
    for j in 0..16 {
        q[j] = (qs[j] & 0x0F) | (((qh >> j) & 1) as u8) << 4;
        q[j + 16] = (qs[j] >> 4) | (((qh >> (j + 16)) & 1) as u8) << 4;
    }
    q
}

/// Symmetric legacy block: y = d * (q - offset).
fn scale_centered(q: &[u8; 32], d: f32, offset: i32, o: &mut [f32; 32]) {
    for (y, &q) in o.iter_mut().zip(q) {
        *y = d * (q as i32 - offset) as f32;
    }
}

/// Asymmetric legacy block: y = d * q + m.
fn scale_min(q: &[u8; 32], d: f32, m: f32, o: &mut [f32; 32]) {
    for (y, &q) in o.iter_mut().zip(q) {
        *y = d * q as f32 + m;
    }
}

/// Q4_0, 32 elements in 18 bytes: d f16 @0, qs[16] @2 (4-bit quants, see `legacy_quants`).
/// y = d * (q - 8).
fn q4_0_block(b: &[u8; 18], o: &mut [f32; 32]) {
    scale_centered(&legacy_quants(&b[2..18], 0), half_at(b, 0), 8, o);
}

/// Q4_1, 32 elements in 20 bytes: d f16 @0, m f16 @2, qs[16] @4. y = d * q + m.
fn q4_1_block(b: &[u8; 20], o: &mut [f32; 32]) {
    scale_min(&legacy_quants(&b[4..20], 0), half_at(b, 0), half_at(b, 2), o);
}

/// Q5_0, 32 elements in 22 bytes: d f16 @0, qh u32 @2 (bit 4 of element i is bit i),
/// qs[16] @6 (low 4 bits). y = d * (q - 16).
fn q5_0_block(b: &[u8; 22], o: &mut [f32; 32]) {
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    scale_centered(&legacy_quants(&b[6..22], qh), half_at(b, 0), 16, o);
}

/// Q5_1, 32 elements in 24 bytes: d f16 @0, m f16 @2, qh u32 @4, qs[16] @8. y = d * q + m.
fn q5_1_block(b: &[u8; 24], o: &mut [f32; 32]) {
    let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    scale_min(&legacy_quants(&b[8..24], qh), half_at(b, 0), half_at(b, 2), o);
}

/// Q8_0, 32 elements in 34 bytes: d f16 @0, qs[32] i8 @2 (element i is qs[i]). y = q * d.
fn q8_0_block(b: &[u8; 34], o: &mut [f32; 32]) {
    let d = half_at(b, 0);
    for (y, &q) in o.iter_mut().zip(&b[2..]) {
        *y = q as i8 as f32 * d;
    }
}

/// Q2_K, 256 elements in 84 bytes: scales[16] @0 (sub-block s: scale = low nibble,
/// min = high nibble), qs[64] @16, d f16 @80, dmin f16 @82.
/// Element 128*h + 32*j + l (h < 2, j < 4, l < 32) is bits 2j..2j+2 of qs[32*h + l], in
/// sub-block s = 8*h + 2*j + l/16; y = (d * scale_s) * q - (dmin * min_s).
fn q2_k_block(b: &[u8; 84], o: &mut [f32; 256]) {
    let (scales, qs) = (&b[0..16], &b[16..80]);
    let (d, dmin) = (half_at(b, 80), half_at(b, 82));
    for (i, y) in o.iter_mut().enumerate() {
        let (h, j, l) = (i / 128, (i / 32) % 4, i % 32);
        let sc = scales[8 * h + 2 * j + l / 16];
        let q = (qs[32 * h + l] >> (2 * j)) & 3;
        *y = (d * (sc & 0x0F) as f32) * q as f32 - dmin * (sc >> 4) as f32;
    }
}

/// Q3_K, 256 elements in 110 bytes: hmask[32] @0, qs[64] @32, scales[12] @96, d f16 @108.
/// Sub-block s (16 of them, 16 elements each) has a 6-bit scale: low 4 bits are the low
/// nibble of scales[s] (s < 8) or the high nibble of scales[s - 8]; high 2 bits are bits
/// 2*(s/4)..+2 of scales[8 + s%4]; it is stored with an offset of 32.
/// Element 128*h + 32*j + l (h < 2, j < 4, l < 32): low 2 bits are bits 2j..2j+2 of
/// qs[32*h + l]; if bit 4*h + j of hmask[l] is clear, 4 is subtracted. Its sub-block is
/// s = 8*h + 2*j + l/16; y = (d * (scale_s - 32)) * q.
fn q3_k_block(b: &[u8; 110], o: &mut [f32; 256]) {
    let (hmask, qs, scales) = (&b[0..32], &b[32..96], &b[96..108]);
    let d = half_at(b, 108);
    let scale = |s: usize| {
        let low = if s < 8 { scales[s] & 0x0F } else { scales[s - 8] >> 4 };
        let high = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
        (low | high << 4) as i32 - 32
    };
    for (i, y) in o.iter_mut().enumerate() {
        let (h, j, l) = (i / 128, (i / 32) % 4, i % 32);
        let low = ((qs[32 * h + l] >> (2 * j)) & 3) as i32;
        let q = if hmask[l] & (1 << (4 * h + j)) != 0 { low } else { low - 4 };
        *y = (d * scale(8 * h + 2 * j + l / 16) as f32) * q as f32;
    }
}

/// The 6-bit scale and min of sub-block j (< 8) packed in the 12 bytes `s` of a Q4_K/Q5_K
/// block: for j < 4, scale = s[j] & 63 and min = s[j+4] & 63; for j >= 4, the low 4 bits
/// come from the nibbles of s[j+4] (scale: low, min: high) and the high 2 bits from the top
/// bits of s[j-4] (scale) and s[j] (min).
fn k4_scale_min(s: &[u8], j: usize) -> (f32, f32) {
    let (sc, m) = k4_scale_min_u8(s, j);
    (sc as f32, m as f32)
}

/// `k4_scale_min` as the 6-bit integers.
pub(crate) fn k4_scale_min_u8(s: &[u8], j: usize) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        ((s[j + 4] & 0x0F) | (s[j - 4] >> 6) << 4, (s[j + 4] >> 4) | (s[j] >> 6) << 4)
    }
}

/// Q4_K, 256 elements in 144 bytes: d f16 @0, dmin f16 @2, scales[12] @4 (see
/// `k4_scale_min`), qs[128] @16. Element 64*c + l (c < 4, l < 32) is the low nibble of
/// qs[32*c + l] in sub-block 2c; element 64*c + 32 + l its high nibble, sub-block 2c + 1.
/// y = (d * scale) * q - (dmin * min).
fn q4_k_block(b: &[u8; 144], o: &mut [f32; 256]) {
    k_block(b, &b[16..144], None, o);
}

/// Q5_K, 256 elements in 176 bytes: d f16 @0, dmin f16 @2, scales[12] @4, qh[32] @16,
/// qs[128] @48. As Q4_K, plus bit 4 of element 32*s + l (sub-block s) is bit s of qh[l].
fn q5_k_block(b: &[u8; 176], o: &mut [f32; 256]) {
    k_block(b, &b[48..176], Some(&b[16..48]), o);
}

/// Shared body of Q4_K and Q5_K (they differ only by the optional fifth bit).
fn k_block(b: &[u8], qs: &[u8], qh: Option<&[u8]>, o: &mut [f32; 256]) {
    let (d, dmin, scales) = (half_at(b, 0), half_at(b, 2), &b[4..16]);
    for (s, sub) in o.chunks_exact_mut(32).enumerate() {
        let (sc, m) = k4_scale_min(scales, s);
        let (d1, m1) = (d * sc, dmin * m);
        let shift = 4 * (s % 2);
        for (l, y) in sub.iter_mut().enumerate() {
            let low = (qs[32 * (s / 2) + l] >> shift) & 0x0F;
            let high = qh.map_or(0, |qh| (qh[l] >> s) & 1);
            *y = d1 * (low | high << 4) as f32 - m1;
        }
    }
}

/// Q6_K, 256 elements in 210 bytes: ql[128] @0, qh[64] @128, scales[16] i8 @192, d f16 @208.
/// Element 128*h + 32*k + l (h < 2, k < 4, l < 32): low 4 bits are the low (k < 2) or
/// high (k >= 2) nibble of ql[64*h + 32*(k%2) + l]; high 2 bits are bits 2k..2k+2 of
/// qh[32*h + l]; stored with an offset of 32. Sub-block (16 elements) s = 8*h + 2*k + l/16;
/// y = (d * scale_s) * q.
fn q6_k_block(b: &[u8; 210], o: &mut [f32; 256]) {
    let (ql, qh, scales) = (&b[0..128], &b[128..192], &b[192..208]);
    let d = half_at(b, 208);
    for (i, y) in o.iter_mut().enumerate() {
        let (h, k, l) = (i / 128, (i / 32) % 4, i % 32);
        let low = (ql[64 * h + 32 * (k % 2) + l] >> (4 * (k / 2))) & 0x0F;
        let high = (qh[32 * h + l] >> (2 * k)) & 3;
        let q = (low | high << 4) as i32 - 32;
        *y = (d * scales[8 * h + 2 * k + l / 16] as i8 as f32) * q as f32;
    }
}
