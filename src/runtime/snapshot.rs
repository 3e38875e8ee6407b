//! KV snapshots: a conversation's cache (K/V of every layer that stores its own, plus the
//! position) saved to a versioned file and restored later. A snapshot records the cache
//! layout and a fingerprint of the model, so one taken with another model is refused.

use std::io::{Read, Write};
use std::path::Path;

use crate::gguf::GgufFile;
use crate::model::Config;
use crate::{Error, Result};

const MAGIC: &[u8; 4] = b"RLKV";
const VERSION: u32 = 1;

/// K and V (f32, `[pos][heads·dim]`) of each layer; `None` for layers that share a donor's.
pub struct KvState {
    pub len: usize,
    pub layers: Vec<Option<(Vec<f32>, Vec<f32>)>>,
}

/// FNV-1a: a stable hash (the file outlives any one build, unlike std's hasher).
fn fnv(h: &mut u64, bytes: &[u8]) {
    for b in bytes {
        *h ^= *b as u64;
        *h = h.wrapping_mul(0x100_0000_01b3);
    }
}

/// Hash of what the cache layout depends on.
pub fn layout_hash(cfg: &Config) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325;
    for l in &cfg.layers {
        for v in [l.head_dim, l.v_head_dim, l.n_kv_heads, l.kv_donor.map_or(usize::MAX, |d| d)] {
            fnv(&mut h, &(v as u64).to_le_bytes());
        }
    }
    h
}

/// Fingerprint of the weights: the tensor table and the first bytes of the embedding.
pub fn model_fingerprint(file: &GgufFile) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325;
    for t in &file.tensors {
        fnv(&mut h, t.name.as_bytes());
        fnv(&mut h, &t.offset.to_le_bytes());
    }
    if let Some(t) = file.tensor("token_embd.weight") {
        let d = file.tensor_data(t);
        fnv(&mut h, &d[..d.len().min(1 << 16)]);
    }
    h
}

pub fn save(path: &Path, cfg: &Config, file: &GgufFile, state: &KvState) -> Result<()> {
    let io = |e| Error::io(path, e);
    let tmp = path.with_extension("partial");
    let mut w = std::io::BufWriter::new(std::fs::File::create(&tmp).map_err(io)?);
    w.write_all(MAGIC).map_err(io)?;
    for v in [VERSION as u64, layout_hash(cfg), model_fingerprint(file), state.len as u64, state.layers.len() as u64] {
        w.write_all(&v.to_le_bytes()).map_err(io)?;
    }
    for l in &state.layers {
        let (k, v) = l.as_ref().map(|(k, v)| (&k[..], &v[..])).unwrap_or((&[], &[]));
        w.write_all(&(k.len() as u64).to_le_bytes()).map_err(io)?;
        w.write_all(&(v.len() as u64).to_le_bytes()).map_err(io)?;
        w.write_all(bytemuck::cast_slice(k)).map_err(io)?;
        w.write_all(bytemuck::cast_slice(v)).map_err(io)?;
    }
    w.into_inner().map_err(|e| io(e.into_error()))?.sync_all().map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

pub fn load(path: &Path, cfg: &Config, file: &GgufFile) -> Result<KvState> {
    let bad = |m: &str| Error::Input(format!("{}: {m}", path.display()));
    let mut r = std::io::BufReader::new(std::fs::File::open(path).map_err(|e| Error::io(path, e))?);
    let mut magic = [0u8; 4];
    r.read_exact(&mut magic).map_err(|_| bad("not a KV snapshot"))?;
    if &magic != MAGIC {
        return Err(bad("not a KV snapshot"));
    }
    let mut u64s = [0u64; 5];
    for v in &mut u64s {
        let mut b = [0u8; 8];
        r.read_exact(&mut b).map_err(|_| bad("truncated header"))?;
        *v = u64::from_le_bytes(b);
    }
    let [version, layout, fingerprint, len, n_layers] = u64s;
    if version != VERSION as u64 {
        return Err(bad(&format!("snapshot version {version} is not supported (expected {VERSION})")));
    }
    if layout != layout_hash(cfg) || n_layers != cfg.layers.len() as u64 || fingerprint != model_fingerprint(file) {
        return Err(bad("the snapshot was taken with a different model"));
    }
    let mut layers = Vec::with_capacity(cfg.layers.len());
    for l in &cfg.layers {
        let mut lens = [0u64; 2];
        for v in &mut lens {
            let mut b = [0u8; 8];
            r.read_exact(&mut b).map_err(|_| bad("truncated"))?;
            *v = u64::from_le_bytes(b);
        }
        let want = [len as usize * l.n_kv_heads * l.head_dim, len as usize * l.n_kv_heads * l.v_head_dim];
        if !l.stores_kv() {
            if lens != [0, 0] {
                return Err(bad("layer data does not match the model's layout"));
            }
            layers.push(None);
            continue;
        }
        if lens != [want[0] as u64, want[1] as u64] {
            return Err(bad("layer data does not match the model's layout"));
        }
        let mut read = |n: usize| -> Result<Vec<f32>> {
            let mut b = vec![0u8; n * 4];
            r.read_exact(&mut b).map_err(|_| bad("truncated"))?;
            Ok(bytemuck::pod_collect_to_vec(&b))
        };
        let k = read(want[0])?;
        let v = read(want[1])?;
        layers.push(Some((k, v)));
    }
    Ok(KvState { len: len as usize, layers })
}
