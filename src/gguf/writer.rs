//! GGUF writer (v3): metadata plus tensors, each tensor's data aligned. Used for fixtures,
//! synthetic models and LoRA adapters.

use std::io::Write;
use std::path::Path;

use super::reader::{DEFAULT_ALIGNMENT, MAGIC};
use super::types::GgmlType;
use super::value::{MetaValue, ValueType};
use crate::{Error, Result};

/// Tensor contents: bytes in memory, or produced while writing (multi-GB synthetic models
/// are streamed to disk without being held in memory).
enum TensorData {
    Bytes(Vec<u8>),
    Generated { len: usize, fill: Fill },
}

/// Writes a generated tensor's bytes into the slice it is given.
type Fill = Box<dyn Fn(&mut [u8])>;

impl TensorData {
    fn len(&self) -> usize {
        match self {
            TensorData::Bytes(b) => b.len(),
            TensorData::Generated { len, .. } => *len,
        }
    }

    fn write_into(&self, out: &mut Vec<u8>) {
        match self {
            TensorData::Bytes(b) => out.extend_from_slice(b),
            TensorData::Generated { len, fill } => {
                let start = out.len();
                out.resize(start + len, 0);
                fill(&mut out[start..]);
            }
        }
    }
}

struct PendingTensor {
    name: String,
    dims: Vec<u64>,
    ty: GgmlType,
    data: TensorData,
}

#[derive(Default)]
pub struct GgufWriter {
    metadata: Vec<(String, MetaValue)>,
    tensors: Vec<PendingTensor>,
}

impl GgufWriter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Set a metadata value (replacing an earlier one with the same key).
    pub fn set(&mut self, key: &str, value: MetaValue) -> &mut Self {
        match self.metadata.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.metadata.push((key.to_string(), value)),
        }
        self
    }

    pub fn set_str(&mut self, key: &str, v: &str) -> &mut Self {
        self.set(key, MetaValue::String(v.to_string()))
    }
    pub fn set_u32(&mut self, key: &str, v: u32) -> &mut Self {
        self.set(key, MetaValue::U32(v))
    }
    pub fn set_f32(&mut self, key: &str, v: f32) -> &mut Self {
        self.set(key, MetaValue::F32(v))
    }
    pub fn set_bool(&mut self, key: &str, v: bool) -> &mut Self {
        self.set(key, MetaValue::Bool(v))
    }
    pub fn set_u32_array(&mut self, key: &str, v: &[u32]) -> &mut Self {
        self.set(key, MetaValue::Array(ValueType::U32, v.iter().map(|&x| MetaValue::U32(x)).collect()))
    }
    pub fn set_i32_array(&mut self, key: &str, v: &[i32]) -> &mut Self {
        self.set(key, MetaValue::Array(ValueType::I32, v.iter().map(|&x| MetaValue::I32(x)).collect()))
    }
    pub fn set_f32_array(&mut self, key: &str, v: &[f32]) -> &mut Self {
        self.set(key, MetaValue::Array(ValueType::F32, v.iter().map(|&x| MetaValue::F32(x)).collect()))
    }
    pub fn set_bool_array(&mut self, key: &str, v: &[bool]) -> &mut Self {
        self.set(key, MetaValue::Array(ValueType::Bool, v.iter().map(|&x| MetaValue::Bool(x)).collect()))
    }
    pub fn set_str_array<S: AsRef<str>>(&mut self, key: &str, v: &[S]) -> &mut Self {
        self.set(
            key,
            MetaValue::Array(ValueType::String, v.iter().map(|x| MetaValue::String(x.as_ref().to_string())).collect()),
        )
    }

    /// Add a tensor from raw (already encoded) bytes. `dims` is ggml `ne` (fastest first).
    pub fn add_tensor(&mut self, name: &str, dims: &[u64], ty: GgmlType, data: Vec<u8>) -> Result<&mut Self> {
        self.add_data(name, dims, ty, TensorData::Bytes(data))
    }

    /// Add a tensor whose encoded bytes `fill` writes when the file is written.
    pub fn add_generated(
        &mut self,
        name: &str,
        dims: &[u64],
        ty: GgmlType,
        fill: impl Fn(&mut [u8]) + 'static,
    ) -> Result<&mut Self> {
        let n: u64 = dims.iter().product();
        let len = ty.bytes_for(n).ok_or_else(|| Error::Input(format!("tensor {name}: {dims:?} is not whole {ty} blocks")))?;
        self.add_data(name, dims, ty, TensorData::Generated { len: len as usize, fill: Box::new(fill) })
    }

    fn add_data(&mut self, name: &str, dims: &[u64], ty: GgmlType, data: TensorData) -> Result<&mut Self> {
        let n: u64 = dims.iter().product();
        let expect = ty
            .bytes_for(n)
            .filter(|_| dims.first().is_some_and(|d| d % ty.block_elems() as u64 == 0))
            .ok_or_else(|| Error::Input(format!("tensor {name}: {dims:?} is not whole {ty} blocks")))?;
        if expect != data.len() as u64 {
            return Err(Error::Input(format!("tensor {name}: {} bytes given, {ty} {dims:?} needs {expect}", data.len())));
        }
        if self.tensors.iter().any(|t| t.name == name) {
            return Err(Error::Input(format!("tensor {name} added twice")));
        }
        self.tensors.push(PendingTensor { name: name.to_string(), dims: dims.to_vec(), ty, data });
        Ok(self)
    }

    /// Add an f32 tensor.
    pub fn add_f32(&mut self, name: &str, dims: &[u64], values: &[f32]) -> Result<&mut Self> {
        self.add_tensor(name, dims, GgmlType::F32, bytemuck::cast_slice(values).to_vec())
    }

    fn alignment(&self) -> u64 {
        self.metadata
            .iter()
            .find(|(k, _)| k == "general.alignment")
            .and_then(|(_, v)| v.as_u64())
            .unwrap_or(DEFAULT_ALIGNMENT)
    }

    /// Encode the whole file.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = self.header();
        let align = self.alignment();
        for t in &self.tensors {
            t.data.write_into(&mut out);
            pad_to(&mut out, align);
        }
        out
    }

    /// Header, metadata and tensor table, padded to the data section.
    fn header(&self) -> Vec<u8> {
        let align = self.alignment();
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (k, v) in &self.metadata {
            put_str(&mut out, k);
            out.extend_from_slice(&v.value_type().id().to_le_bytes());
            put_value(&mut out, v);
        }
        let mut offset = 0u64;
        for t in &self.tensors {
            put_str(&mut out, &t.name);
            out.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&t.ty.id().to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
            offset = (offset + t.data.len() as u64).div_ceil(align) * align;
        }
        pad_to(&mut out, align);
        out
    }

    /// Write to `path` atomically (temp file + rename), so a crash never leaves half a file.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let tmp = path.with_extension("gguf.partial");
        let f = std::fs::File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        let mut w = std::io::BufWriter::new(f);
        let io = |e| Error::io(&tmp, e);
        w.write_all(&self.header()).map_err(io)?;
        let align = self.alignment();
        let mut buf = Vec::new();
        for t in &self.tensors {
            buf.clear();
            t.data.write_into(&mut buf);
            pad_to(&mut buf, align);
            w.write_all(&buf).map_err(io)?;
        }
        w.into_inner().map_err(|e| io(e.into_error()))?.sync_all().map_err(io)?;
        std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
    }
}

fn pad_to(out: &mut Vec<u8>, align: u64) {
    let len = out.len() as u64;
    out.resize((len.div_ceil(align) * align) as usize, 0);
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_value(out: &mut Vec<u8>, v: &MetaValue) {
    match v {
        MetaValue::U8(x) => out.push(*x),
        MetaValue::I8(x) => out.push(*x as u8),
        MetaValue::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::Bool(x) => out.push(*x as u8),
        MetaValue::String(s) => put_str(out, s),
        MetaValue::Array(t, items) => {
            out.extend_from_slice(&t.id().to_le_bytes());
            out.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for i in items {
                put_value(out, i);
            }
        }
        MetaValue::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
    }
}
