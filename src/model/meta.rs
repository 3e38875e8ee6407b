//! Typed reads of architecture-prefixed GGUF metadata (`<arch>.<suffix>`).
//!
//! A missing optional key is `None`; a key that is present with the wrong type or an
//! impossible value is an error naming the key, so a malformed file never falls back to a
//! default silently.

use crate::gguf::{Gguf, MetaValue};
use crate::{Error, Result};

/// A metadata value that is either one number for every layer or one per layer.
#[derive(Debug, Clone, PartialEq)]
pub enum PerLayer {
    Scalar(usize),
    Array(Vec<usize>),
}

impl PerLayer {
    /// The value for layer `i` (arrays are length-checked when read).
    pub fn at(&self, i: usize) -> usize {
        match self {
            PerLayer::Scalar(v) => *v,
            PerLayer::Array(a) => a[i],
        }
    }
}

/// Metadata of one file, read under one architecture prefix.
pub struct Meta<'a> {
    pub gguf: &'a Gguf,
    pub prefix: &'a str,
}

impl<'a> Meta<'a> {
    pub fn key(&self, suffix: &str) -> String {
        format!("{}.{suffix}", self.prefix)
    }

    fn raw(&self, suffix: &str) -> Option<(String, &'a MetaValue)> {
        let key = self.key(suffix);
        self.gguf.get(&key).map(|v| (key, v))
    }

    /// A non-negative integer, or `None` when the key is absent.
    pub fn usize(&self, suffix: &str) -> Result<Option<usize>> {
        self.raw(suffix).map(|(key, v)| as_usize(&key, v)).transpose()
    }

    /// A required non-negative integer; `what` says in words what the key is.
    pub fn req_usize(&self, suffix: &str, what: &str) -> Result<usize> {
        self.usize(suffix)?.ok_or_else(|| missing(&self.key(suffix), what))
    }

    /// A finite number, or `None` when the key is absent.
    pub fn f32(&self, suffix: &str) -> Result<Option<f32>> {
        self.raw(suffix)
            .map(|(key, v)| match v.as_f32() {
                Some(x) if x.is_finite() => Ok(x),
                _ => Err(bad(&key, v, "a finite number")),
            })
            .transpose()
    }

    pub fn str(&self, suffix: &str) -> Result<Option<&'a str>> {
        self.raw(suffix).map(|(key, v)| v.as_str().ok_or_else(|| bad(&key, v, "a string"))).transpose()
    }

    /// A scalar integer or an integer array with exactly `n_layers` entries.
    pub fn per_layer(&self, suffix: &str, n_layers: usize) -> Result<Option<PerLayer>> {
        let Some((key, v)) = self.raw(suffix) else { return Ok(None) };
        match v.as_array() {
            None => Ok(Some(PerLayer::Scalar(as_usize(&key, v)?))),
            Some(items) => {
                check_len(&key, items.len(), n_layers)?;
                let vals = items.iter().map(|x| as_usize(&key, x)).collect::<Result<Vec<_>>>()?;
                Ok(Some(PerLayer::Array(vals)))
            }
        }
    }
}

pub fn check_len(key: &str, got: usize, n_layers: usize) -> Result<()> {
    if got != n_layers {
        return Err(Error::Gguf(format!(
            "metadata {key:?} has {got} entries, but the model has {n_layers} layers; the file is inconsistent"
        )));
    }
    Ok(())
}

fn as_usize(key: &str, v: &MetaValue) -> Result<usize> {
    v.as_u64()
        .filter(|_| !matches!(v, MetaValue::Bool(_)))
        .and_then(|x| usize::try_from(x).ok())
        .ok_or_else(|| bad(key, v, "a non-negative integer"))
}

pub fn bad(key: &str, v: &MetaValue, expected: &str) -> Error {
    Error::Gguf(format!("metadata {key:?} is {}, expected {expected}", v.summary()))
}

pub fn missing(key: &str, what: &str) -> Error {
    Error::MissingTensor(format!("metadata key {key:?} ({what}) is not in the file"))
}
