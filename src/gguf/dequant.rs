//! CPU dequantization of ggml blocks to f32 (the reference for the GPU kernels).

use super::types::GgmlType;
use crate::{Error, Result};

/// Expand `n` elements of type `ty` stored in `data` to f32.
pub fn dequantize(ty: GgmlType, data: &[u8], n: usize) -> Result<Vec<f32>> {
    let need = ty.bytes_for(n as u64).ok_or_else(|| Error::Input(format!("{n} elements is not whole {ty} blocks")))?;
    if (data.len() as u64) < need {
        return Err(Error::Input(format!("{ty}: {n} elements need {need} bytes, got {}", data.len())));
    }
    let data = &data[..need as usize];
    let mut out = vec![0f32; n];
    match ty {
        GgmlType::F32 => {
            for (o, c) in out.iter_mut().zip(data.chunks_exact(4)) {
                *o = f32::from_le_bytes(c.try_into().unwrap());
            }
        }
        GgmlType::F16 => {
            for (o, c) in out.iter_mut().zip(data.chunks_exact(2)) {
                *o = half::f16::from_le_bytes([c[0], c[1]]).to_f32();
            }
        }
        GgmlType::BF16 => {
            for (o, c) in out.iter_mut().zip(data.chunks_exact(2)) {
                *o = half::bf16::from_le_bytes([c[0], c[1]]).to_f32();
            }
        }
        other => return Err(Error::UnsupportedType(format!("{other} (no CPU dequantization)"))),
    }
    Ok(out)
}

/// Expand `out.len()` elements from `data` into `out`.
pub fn dequantize_into(ty: GgmlType, data: &[u8], out: &mut [f32]) -> Result<()> {
    let v = dequantize(ty, data, out.len())?;
    out.copy_from_slice(&v);
    Ok(())
}
