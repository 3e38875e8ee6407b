//! Weight matrices on the GPU, stored as their raw GGUF blocks (no f32 expansion).
//!
//! A matrix larger than the device's largest storage binding is split into tiles of whole
//! rows, one buffer each; the matmul encoders dispatch once per tile. Stacked expert
//! tensors are split at expert boundaries so every expert lies in one tile. Q6_K tiles hold
//! their blocks in groups of eight (block_groups.rs).

use super::block_groups;
use super::kernel::{self, Kernels};
use super::shaders;
use crate::gguf::GgmlType;
use crate::{Error, Result};

/// Rows `[row0, row0 + rows)` of a matrix in one buffer.
pub struct Tile {
    pub buffer: wgpu::Buffer,
    pub row0: usize,
    pub rows: usize,
}

/// `rows` rows of `cols` elements of type `ty` (ggml `ne = [cols, rows]`), as on disk.
pub struct GpuMatrix {
    pub ty: GgmlType,
    pub cols: usize,
    pub rows: usize,
    tiles: Vec<Tile>,
}

impl GpuMatrix {
    /// Upload a matrix whose blocks are `data` (exactly `rows` rows).
    pub fn upload(k: &Kernels, name: &str, ty: GgmlType, cols: usize, rows: usize, data: &[u8]) -> Result<GpuMatrix> {
        Self::upload_stacked(k, name, ty, cols, rows, 1, data)
    }

    /// Upload a stack of equal matrices of `rows_per_group` rows each (the experts of a
    /// MoE tensor), keeping each one inside a single tile.
    pub fn upload_stacked(
        k: &Kernels,
        name: &str,
        ty: GgmlType,
        cols: usize,
        rows: usize,
        rows_per_group: usize,
        data: &[u8],
    ) -> Result<GpuMatrix> {
        Self::upload_with_tile_limit(k, name, ty, cols, rows, rows_per_group, data, k.gpu.max_binding())
    }

    /// `upload_stacked` with tiles of at most `max_tile_bytes` (tests force small tiles).
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    pub fn upload_with_tile_limit(
        k: &Kernels,
        name: &str,
        ty: GgmlType,
        cols: usize,
        rows: usize,
        rows_per_group: usize,
        data: &[u8],
        max_tile_bytes: u64,
    ) -> Result<GpuMatrix> {
        if shaders::quant(ty).is_none() {
            return Err(Error::UnsupportedType(format!("{ty} in {name} (no GPU matmul kernel for this type)")));
        }
        if cols == 0 || rows == 0 || !cols.is_multiple_of(ty.block_elems()) || !cols.is_multiple_of(4) {
            return Err(Error::Input(format!(
                "{name}: a {ty} matrix of {rows}x{cols} is not a whole number of {}-element blocks per row, or its rows are not a multiple of 4 elements",
                ty.block_elems()
            )));
        }
        if rows_per_group == 0 || !rows.is_multiple_of(rows_per_group) {
            return Err(Error::Input(format!("{name}: {rows} rows do not split into groups of {rows_per_group}")));
        }
        let row_bytes = row_bytes(ty, cols);
        if data.len() != rows * row_bytes {
            return Err(Error::Input(format!("{name}: {ty} matrix {rows}x{cols} takes {} bytes, got {}", rows * row_bytes, data.len())));
        }
        let group_bytes = (rows_per_group * row_bytes) as u64;
        // As many groups as fit once laid out for the GPU (Q6_K pads tiles to whole block groups).
        let mut groups_per_tile = (max_tile_bytes / group_bytes) as usize;
        while groups_per_tile > 0 && block_groups::gpu_len(ty, groups_per_tile * group_bytes as usize) as u64 > max_tile_bytes {
            groups_per_tile -= 1;
        }
        if groups_per_tile == 0 {
            return Err(Error::Gpu(format!(
                "{name}: {rows_per_group} rows of {row_bytes} bytes do not fit in one GPU buffer binding ({max_tile_bytes} bytes)"
            )));
        }
        let per_tile = groups_per_tile * rows_per_group;
        let tiles = (0..rows)
            .step_by(per_tile)
            .map(|row0| {
                let n = per_tile.min(rows - row0);
                let label = format!("{name}[{row0}..{}]", row0 + n);
                Tile { buffer: upload_blocks(k, &label, ty, &data[row0 * row_bytes..(row0 + n) * row_bytes]), row0, rows: n }
            })
            .collect();
        Ok(GpuMatrix { ty, cols, rows, tiles })
    }

    pub fn row_bytes(&self) -> usize {
        row_bytes(self.ty, self.cols)
    }

    /// Bytes of weight data on the GPU.
    pub fn bytes(&self) -> u64 {
        (self.rows * self.row_bytes()) as u64
    }

    pub fn tiles(&self) -> &[Tile] {
        &self.tiles
    }
}

/// Whole blocks of `ty` in one buffer, in their GPU layout (block_groups.rs), written
/// straight into the upload's staging memory.
pub fn upload_blocks(k: &Kernels, label: &str, ty: GgmlType, data: &[u8]) -> wgpu::Buffer {
    if !block_groups::rewritten(ty) {
        return kernel::upload(&k.gpu, label, data);
    }
    let len = block_groups::gpu_len(ty, data.len());
    let buf = kernel::storage(&k.gpu, label, len as u64);
    // No view only where wgpu has already reported the failed write (validation, or no
    // staging memory) to the device's error handler, as `kernel::upload`'s write_buffer
    // would: the next submission returns it.
    if let Some(mut view) = std::num::NonZeroU64::new(len as u64).and_then(|n| k.gpu.queue.write_buffer_with(&buf, 0, n)) {
        block_groups::write(ty, data, &mut |at, bytes| view.slice(at..at + bytes.len()).copy_from_slice(bytes));
    }
    buf
}

fn row_bytes(ty: GgmlType, cols: usize) -> usize {
    cols / ty.block_elems() * ty.block_bytes()
}
