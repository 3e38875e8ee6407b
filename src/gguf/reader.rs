//! GGUF reader: parses and validates the header, metadata and tensor table of a file, then
//! exposes tensor data as zero-copy slices of the memory map.
//!
//! Every count, length and offset read from the file is checked against the bytes that are
//! actually there before it is used, so a corrupt or hostile file yields `Error::Gguf`,
//! never a panic or an out-of-bounds read.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use super::types::GgmlType;
use super::value::{MetaValue, ValueType};
use crate::{Error, Result};

pub const MAGIC: &[u8; 4] = b"GGUF";
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// ggml tensors have at most four dimensions.
pub const MAX_DIMS: usize = 4;
/// Arrays of arrays deeper than this are refused (real files nest at most once).
const MAX_ARRAY_DEPTH: usize = 8;

/// One entry of the tensor table, validated against the file.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    /// ggml `ne`: dimension sizes, fastest-varying first (a `[out, in]` matrix is `[in, out]`).
    pub dims: Vec<u64>,
    pub ty: GgmlType,
    /// Offset of the data from the start of the data section.
    pub offset: u64,
    pub n_elements: u64,
    pub n_bytes: u64,
}

impl TensorInfo {
    /// Length of one row (dims[0]) and number of rows (product of the rest).
    pub fn row_len(&self) -> u64 {
        self.dims.first().copied().unwrap_or(1)
    }

    pub fn n_rows(&self) -> u64 {
        self.dims.iter().skip(1).product()
    }

    pub fn row_bytes(&self) -> u64 {
        self.ty.bytes_for(self.row_len()).unwrap_or(0)
    }
}

/// Parsed header of a GGUF file: everything but the tensor data.
#[derive(Debug, Clone)]
pub struct Gguf {
    pub version: u32,
    pub metadata: Vec<(String, MetaValue)>,
    meta_index: HashMap<String, usize>,
    pub tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
    pub alignment: u64,
    /// Absolute file offset of the data section.
    pub data_offset: u64,
    /// Total file length the header was validated against.
    pub file_len: u64,
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(Error::Gguf(format!(
                "file ends inside {what} (needs {n} bytes at offset {}, {} left)",
                self.pos,
                self.remaining()
            )));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        Ok(self.take(N, what)?.try_into().expect("take returned N bytes"))
    }

    fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }
    fn u16(&mut self, what: &str) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }
    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }
    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A count that must be satisfiable by the bytes left, at `min_size` bytes per item.
    fn count(&mut self, min_size: usize, what: &str) -> Result<usize> {
        let n = self.u64(what)?;
        let max = (self.remaining() / min_size.max(1)) as u64;
        if n > max {
            return Err(Error::Gguf(format!(
                "{what} is {n}, more than the {} bytes left could hold",
                self.remaining()
            )));
        }
        Ok(n as usize)
    }

    fn string(&mut self, what: &str) -> Result<String> {
        let n = self.count(1, what)?;
        let bytes = self.take(n, what)?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| Error::Gguf(format!("{what} at offset {} is not valid UTF-8", self.pos - n)))
    }

    fn value(&mut self, ty: ValueType, depth: usize, key: &str) -> Result<MetaValue> {
        Ok(match ty {
            ValueType::U8 => MetaValue::U8(self.u8(key)?),
            ValueType::I8 => MetaValue::I8(self.u8(key)? as i8),
            ValueType::U16 => MetaValue::U16(self.u16(key)?),
            ValueType::I16 => MetaValue::I16(self.u16(key)? as i16),
            ValueType::U32 => MetaValue::U32(self.u32(key)?),
            ValueType::I32 => MetaValue::I32(self.u32(key)? as i32),
            ValueType::F32 => MetaValue::F32(f32::from_bits(self.u32(key)?)),
            ValueType::U64 => MetaValue::U64(self.u64(key)?),
            ValueType::I64 => MetaValue::I64(self.u64(key)? as i64),
            ValueType::F64 => MetaValue::F64(f64::from_bits(self.u64(key)?)),
            ValueType::Bool => match self.u8(key)? {
                0 => MetaValue::Bool(false),
                1 => MetaValue::Bool(true),
                b => return Err(Error::Gguf(format!("metadata {key:?}: bool byte is {b}, not 0 or 1"))),
            },
            ValueType::String => MetaValue::String(self.string(key)?),
            ValueType::Array => {
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(Error::Gguf(format!("metadata {key:?}: arrays nested deeper than {MAX_ARRAY_DEPTH}")));
                }
                let elem = value_type(self.u32(key)?, key)?;
                let n = self.count(elem.min_size(), key)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.value(elem, depth + 1, key)?);
                }
                MetaValue::Array(elem, items)
            }
        })
    }
}

fn value_type(id: u32, key: &str) -> Result<ValueType> {
    ValueType::from_id(id).ok_or_else(|| Error::Gguf(format!("metadata {key:?} has unknown value type {id}")))
}

impl Gguf {
    /// Parse and validate a whole GGUF image (header + data) held in `bytes`.
    pub fn parse(bytes: &[u8]) -> Result<Gguf> {
        let mut c = Cursor { buf: bytes, pos: 0 };
        let magic = c.array::<4>("the magic number")?;
        if &magic != MAGIC {
            return Err(Error::Gguf(format!(
                "the file does not start with \"GGUF\" (found {:02x?}); it is not a GGUF model",
                magic
            )));
        }
        let version = c.u32("the version")?;
        match version {
            2 | 3 => {}
            1 => return Err(Error::Gguf("GGUF version 1 is obsolete and not supported; re-convert the model".into())),
            v if v.swap_bytes() <= 3 => {
                return Err(Error::Gguf("this is a big-endian GGUF file; only little-endian files are supported".into()));
            }
            v => return Err(Error::Gguf(format!("unsupported GGUF version {v}"))),
        }
        // Minimum encoded sizes: a tensor entry is name len (8) + n_dims (4) + type (4) + offset (8);
        // a metadata entry is key len (8) + type (4) + at least one byte of value.
        let n_tensors = c.count(24, "the tensor count")?;
        let n_kv = c.count(13, "the metadata count")?;

        let mut metadata = Vec::with_capacity(n_kv);
        let mut meta_index = HashMap::with_capacity(n_kv);
        for _ in 0..n_kv {
            let key = c.string("a metadata key")?;
            let ty = value_type(c.u32(&key)?, &key)?;
            let value = c.value(ty, 0, &key)?;
            if meta_index.insert(key.clone(), metadata.len()).is_some() {
                return Err(Error::Gguf(format!("metadata key {key:?} appears twice")));
            }
            metadata.push((key, value));
        }

        let alignment = match meta_index.get("general.alignment") {
            None => DEFAULT_ALIGNMENT,
            Some(&i) => match metadata[i].1.as_u64() {
                Some(a) if a > 0 && a.is_power_of_two() && a <= 1 << 20 => a,
                _ => return Err(Error::Gguf(format!("general.alignment is {}, not a power of two", metadata[i].1.summary()))),
            },
        };

        let mut tensors = Vec::with_capacity(n_tensors);
        let mut tensor_index = HashMap::with_capacity(n_tensors);
        for _ in 0..n_tensors {
            let name = c.string("a tensor name")?;
            let n_dims = c.u32(&name)? as usize;
            if n_dims > MAX_DIMS {
                return Err(Error::Gguf(format!("tensor {name:?} has {n_dims} dimensions (at most {MAX_DIMS})")));
            }
            let mut dims = Vec::with_capacity(n_dims.max(1));
            for _ in 0..n_dims {
                let d = c.u64(&name)?;
                if d > i64::MAX as u64 {
                    return Err(Error::Gguf(format!("tensor {name:?} has a dimension of {d}")));
                }
                dims.push(d);
            }
            if dims.is_empty() {
                dims.push(1);
            }
            let ty = GgmlType::from_id(c.u32(&name)?)
                .map_err(|e| Error::Gguf(format!("tensor {name:?}: {}", e.to_string().trim_start_matches("not a valid GGUF file: "))))?;
            let offset = c.u64(&name)?;
            let n_elements = dims
                .iter()
                .try_fold(1u64, |acc, &d| acc.checked_mul(d))
                .filter(|&n| n <= i64::MAX as u64)
                .ok_or_else(|| Error::Gguf(format!("tensor {name:?} has too many elements ({dims:?})")))?;
            if dims[0] % ty.block_elems() as u64 != 0 {
                return Err(Error::Gguf(format!(
                    "tensor {name:?}: row length {} is not a multiple of the {ty} block size {}",
                    dims[0],
                    ty.block_elems()
                )));
            }
            let n_bytes = ty
                .bytes_for(n_elements)
                .ok_or_else(|| Error::Gguf(format!("tensor {name:?} is too large")))?;
            if offset % alignment != 0 {
                return Err(Error::Gguf(format!("tensor {name:?}: data offset {offset} is not aligned to {alignment}")));
            }
            if tensor_index.insert(name.clone(), tensors.len()).is_some() {
                return Err(Error::Gguf(format!("tensor {name:?} appears twice")));
            }
            tensors.push(TensorInfo { name, dims, ty, offset, n_elements, n_bytes });
        }

        let data_offset = (c.pos as u64).div_ceil(alignment) * alignment;
        let file_len = bytes.len() as u64;
        for t in &tensors {
            let end = data_offset.checked_add(t.offset).and_then(|s| s.checked_add(t.n_bytes));
            if end.is_none_or(|e| e > file_len) {
                return Err(Error::Gguf(format!(
                    "tensor {:?} ({} bytes at data offset {}) runs past the end of the file ({} bytes); the file is truncated",
                    t.name, t.n_bytes, t.offset, file_len
                )));
            }
        }
        Ok(Gguf { version, metadata, meta_index, tensors, tensor_index, alignment, data_offset, file_len })
    }

    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.meta_index.get(key).map(|&i| &self.metadata[i].1)
    }

    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(MetaValue::as_str)
    }

    pub fn get_u32(&self, key: &str) -> Option<u32> {
        self.get(key).and_then(MetaValue::as_u32)
    }

    pub fn get_f32(&self, key: &str) -> Option<f32> {
        self.get(key).and_then(MetaValue::as_f32)
    }

    pub fn architecture(&self) -> Option<&str> {
        self.get_str("general.architecture")
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index.get(name).map(|&i| &self.tensors[i])
    }

    pub fn has_tensor(&self, name: &str) -> bool {
        self.tensor_index.contains_key(name)
    }

    /// Bytes of `t`'s data inside `image` (the bytes this header was parsed from).
    pub fn tensor_bytes<'a>(&self, image: &'a [u8], t: &TensorInfo) -> &'a [u8] {
        // Bounds were validated in `parse` against this image's length.
        let start = (self.data_offset + t.offset) as usize;
        &image[start..start + t.n_bytes as usize]
    }
}

/// A memory-mapped GGUF file. Nothing is copied: tensor views borrow from the map.
pub struct GgufFile {
    pub path: PathBuf,
    mmap: Mmap,
    pub gguf: Gguf,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile").field("path", &self.path).finish_non_exhaustive()
    }
}

impl GgufFile {
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile> {
        let path = path.as_ref().to_path_buf();
        let file = std::fs::File::open(&path).map_err(|e| Error::io(&path, e))?;
        // SAFETY: the map is read-only. A file truncated by another process while mapped
        // would fault; that is the accepted contract of memory-mapped model files.
        let mmap = unsafe { Mmap::map(&file) }.map_err(|e| Error::io(&path, e))?;
        let gguf = Gguf::parse(&mmap).map_err(|e| match e {
            Error::Gguf(msg) => Error::Gguf(format!("{}: {msg}", path.display())),
            other => other,
        })?;
        Ok(GgufFile { path, mmap, gguf })
    }

    pub fn bytes(&self) -> &[u8] {
        &self.mmap
    }

    pub fn tensor_data(&self, t: &TensorInfo) -> &[u8] {
        self.gguf.tensor_bytes(&self.mmap, t)
    }

    /// A zero-copy view of the named tensor.
    pub fn view(&self, name: &str) -> Result<TensorView<'_>> {
        let info = self.gguf.tensor(name).ok_or_else(|| Error::MissingTensor(format!("{name} (in {})", self.path.display())))?;
        Ok(TensorView { info, data: self.tensor_data(info) })
    }
}

impl std::ops::Deref for GgufFile {
    type Target = Gguf;
    fn deref(&self) -> &Gguf {
        &self.gguf
    }
}

/// A tensor's table entry plus its bytes, borrowed from the map.
#[derive(Debug, Clone, Copy)]
pub struct TensorView<'a> {
    pub info: &'a TensorInfo,
    pub data: &'a [u8],
}

impl<'a> TensorView<'a> {
    fn typed<T: bytemuck::Pod>(&self, want: GgmlType) -> Result<&'a [T]> {
        if self.info.ty != want {
            return Err(Error::Gguf(format!("tensor {:?} is {}, not {want}", self.info.name, self.info.ty)));
        }
        bytemuck::try_cast_slice(self.data)
            .map_err(|e| Error::Gguf(format!("tensor {:?} data is misaligned for {want}: {e}", self.info.name)))
    }

    pub fn as_f32(&self) -> Result<&'a [f32]> {
        self.typed(GgmlType::F32)
    }

    pub fn as_f16(&self) -> Result<&'a [half::f16]> {
        self.typed(GgmlType::F16)
    }

    pub fn as_bf16(&self) -> Result<&'a [half::bf16]> {
        self.typed(GgmlType::BF16)
    }

    /// Raw bytes of rows `[r0, r1)` (rows along dims[0]); for splitting large tensors.
    pub fn rows(&self, r0: u64, r1: u64) -> Result<&'a [u8]> {
        let rb = self.info.row_bytes();
        if r0 > r1 || r1 > self.info.n_rows() {
            return Err(Error::Input(format!("rows {r0}..{r1} of tensor {:?} with {} rows", self.info.name, self.info.n_rows())));
        }
        Ok(&self.data[(r0 * rb) as usize..(r1 * rb) as usize])
    }

    /// Expand to f32 (CPU), for any supported type.
    pub fn to_f32(&self) -> Result<Vec<f32>> {
        super::dequant::dequantize(self.info.ty, self.data, self.info.n_elements as usize)
    }
}
