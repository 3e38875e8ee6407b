//! .npy arrays (NumPy's format) for reference tensors and `rullama logits --out`.

use std::path::Path;

use npyz::WriterBuilder;

use crate::{Error, Result};

/// A C-order array read from a .npy file.
pub struct Array<T> {
    pub shape: Vec<usize>,
    pub data: Vec<T>,
}

/// Read a .npy file of element type `T` (f32, i32, i64, ...).
pub fn read<T: npyz::Deserialize>(path: impl AsRef<Path>) -> Result<Array<T>> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let bad = |e: std::io::Error| Error::Input(format!("{}: not a readable .npy array: {e}", path.display()));
    let f = npyz::NpyFile::new(&bytes[..]).map_err(bad)?;
    if f.order() != npyz::Order::C {
        return Err(Error::Input(format!("{}: Fortran-order arrays are not supported", path.display())));
    }
    let shape = f.shape().iter().map(|&d| d as usize).collect();
    let data = f.into_vec::<T>().map_err(bad)?;
    Ok(Array { shape, data })
}

/// Write `data` with `shape` (C order) as a float32 .npy file.
pub fn write_f32(path: impl AsRef<Path>, shape: &[usize], data: &[f32]) -> Result<()> {
    let path = path.as_ref();
    if shape.iter().product::<usize>() != data.len() {
        return Err(Error::Input(format!("shape {shape:?} does not hold {} values", data.len())));
    }
    let file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    let dims: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
    let io = |e: std::io::Error| Error::io(path, e);
    let mut w = npyz::WriteOptions::new()
        .default_dtype()
        .shape(&dims)
        .writer(std::io::BufWriter::new(file))
        .begin_nd()
        .map_err(io)?;
    w.extend(data.iter().copied()).map_err(io)?;
    w.finish().map_err(io)
}
