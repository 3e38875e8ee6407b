//! A loaded model on either engine, behind one type: the CLI and the app choose the backend
//! at run time and the generation loop does not care which it is.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::generate::TextModel;
use super::sampler::Sampler;
use crate::cpu::forward::{CpuModel, KvCache, Logits};
use crate::gguf::GgufFile;
use crate::gpu::forward::{GpuCache, GpuModel};
use crate::model::Config;
use crate::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[derive(clap::ValueEnum)]
pub enum Backend {
    /// The f32 reference on the CPU.
    Cpu,
    /// wgpu + WGSL kernels.
    Gpu,
}

/// How a KV cache stores K and V.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[derive(clap::ValueEnum)]
pub enum KvCacheType {
    /// f32: exact.
    #[default]
    F32,
    /// f16: half the memory (on the GPU); K and V rounded to f16.
    F16,
}

/// How prefill's products on tensor cores treat their inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[derive(clap::ValueEnum)]
pub enum PrefillPrecision {
    /// f32-accurate: three f16 products a result (the reference's results to f32 rounding).
    #[default]
    F32,
    /// Inputs rounded to f16, one product a result summed in f32: faster prompts on tensor
    /// cores (E2B 512 tokens +44% on an H200), logits further from the reference. Elsewhere (the
    /// CPU, GPUs without tensor cores) products stay f32.
    F16,
}

pub enum LoadedModel {
    Cpu(CpuModel),
    Gpu(GpuModel),
}

// One per conversation, so the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub enum Cache {
    Cpu(KvCache),
    Gpu(GpuCache),
}

impl Backend {
    pub fn load(self, file: Arc<GgufFile>, progress: &mut dyn FnMut(f32)) -> Result<LoadedModel> {
        Ok(match self {
            Backend::Cpu => {
                let m = CpuModel::load(file)?;
                progress(1.0);
                LoadedModel::Cpu(m)
            }
            Backend::Gpu => LoadedModel::Gpu(GpuModel::load_with_progress(file, progress)?),
        })
    }
}

/// The GPU engine where it takes the model, else the CPU reference: what the app and
/// `rullama run` do unless told which. Only `Error::Gpu` (no usable adapter, too little GPU
/// memory) falls back; other errors, a broken file say, would fail on the CPU too. `load`
/// is called with the engine to try and, on the CPU after a GPU error, why the GPU was
/// passed over.
pub fn gpu_or_cpu<T>(mut load: impl FnMut(Backend, Option<&str>) -> Result<T>) -> Result<T> {
    match load(Backend::Gpu, None) {
        Err(Error::Gpu(why)) => load(Backend::Cpu, Some(&why)),
        other => other,
    }
}

impl LoadedModel {
    pub fn device_name(&self) -> String {
        match self {
            LoadedModel::Cpu(_) => "CPU (f32 reference)".into(),
            LoadedModel::Gpu(m) => format!("{} ({:?})", m.k.gpu.info.name, m.k.gpu.info.backend),
        }
    }

    /// Bytes of weights the engine holds (the CPU reference reads them from the memory map).
    pub fn weight_bytes(&self) -> u64 {
        match self {
            LoadedModel::Cpu(m) => m.file.bytes().len() as u64,
            LoadedModel::Gpu(m) => m.weight_bytes,
        }
    }

    /// Bytes of the GPU engine's tables and scratch buffers so far (`Kernels::buffer_bytes`;
    /// 0 on the CPU).
    pub fn scratch_bytes(&self) -> u64 {
        match self {
            LoadedModel::Cpu(_) => 0,
            LoadedModel::Gpu(m) => m.k.buffer_bytes(),
        }
    }

    /// Caches made from now on store K and V as `ty`.
    pub fn set_kv_cache_type(&mut self, ty: KvCacheType) {
        let f16 = ty == KvCacheType::F16;
        match self {
            LoadedModel::Cpu(m) => m.set_kv_f16(f16),
            LoadedModel::Gpu(m) => m.set_kv_f16(f16),
        }
    }

    /// Bytes a KV cache of `capacity` tokens (plus activation buffers on the GPU) takes.
    pub fn cache_bytes(&self, capacity: usize) -> u64 {
        match self {
            LoadedModel::Cpu(m) => m.cfg.kv_cache_bytes(capacity, capacity, 4),
            LoadedModel::Gpu(m) => m.cache_bytes(capacity),
        }
    }
}

impl TextModel for LoadedModel {
    type Cache = Cache;

    fn set_prefill_precision(&mut self, p: PrefillPrecision) {
        if let LoadedModel::Gpu(m) = self {
            m.set_prefill_f16(p == PrefillPrecision::F16);
        }
    }

    fn config(&self) -> &Config {
        match self {
            LoadedModel::Cpu(m) => &m.cfg,
            LoadedModel::Gpu(m) => &m.cfg,
        }
    }

    fn new_cache(&self, capacity: usize) -> Cache {
        match self {
            LoadedModel::Cpu(m) => Cache::Cpu(m.new_cache(capacity)),
            LoadedModel::Gpu(m) => Cache::Gpu(m.new_cache(capacity)),
        }
    }

    fn cache_len(&self, cache: &Cache) -> usize {
        match cache {
            Cache::Cpu(c) => c.len(),
            Cache::Gpu(c) => c.len(),
        }
    }

    fn forward(&self, tokens: &[u32], cache: &mut Cache, which: Logits, cancel: &AtomicBool) -> Result<Vec<f32>> {
        match (self, cache) {
            (LoadedModel::Cpu(m), Cache::Cpu(c)) => TextModel::forward(m, tokens, c, which, cancel),
            (LoadedModel::Gpu(m), Cache::Gpu(c)) => m.forward(tokens, c, which, cancel),
            _ => Err(crate::Error::Input("a cache from the other backend was passed".into())),
        }
    }

    fn next_token(&self, tokens: &[u32], cache: &mut Cache, sampler: &mut Sampler, history: &[u32], cancel: &AtomicBool) -> Result<u32> {
        match (self, cache) {
            (LoadedModel::Cpu(m), Cache::Cpu(c)) => m.next_token(tokens, c, sampler, history, cancel),
            (LoadedModel::Gpu(m), Cache::Gpu(c)) => m.next_token(tokens, c, sampler, history, cancel),
            _ => Err(crate::Error::Input("a cache from the other backend was passed".into())),
        }
    }

    fn decode(
        &self,
        first: u32,
        cache: &mut Cache,
        sampler: &mut Sampler,
        history: &[u32],
        cancel: &AtomicBool,
        on: &mut dyn FnMut(u32) -> Result<bool>,
    ) -> Result<()> {
        match (self, cache) {
            (LoadedModel::Cpu(m), Cache::Cpu(c)) => m.decode(first, c, sampler, history, cancel, on),
            (LoadedModel::Gpu(m), Cache::Gpu(c)) => m.decode(first, c, sampler, history, cancel, on),
            _ => Err(crate::Error::Input("a cache from the other backend was passed".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `gpu_or_cpu` with the GPU answering `gpu`; returns its result and the calls made.
    fn pick(gpu: Result<&'static str>) -> (Result<&'static str>, Vec<(Backend, Option<String>)>) {
        let mut gpu = Some(gpu);
        let mut calls = Vec::new();
        let got = gpu_or_cpu(|b, why| {
            calls.push((b, why.map(String::from)));
            match b {
                Backend::Gpu => gpu.take().expect("the GPU is tried once"),
                Backend::Cpu => Ok("cpu"),
            }
        });
        (got, calls)
    }

    #[test]
    fn the_gpu_is_taken_where_it_loads_the_model() {
        let (got, calls) = pick(Ok("gpu"));
        assert_eq!(got.unwrap(), "gpu");
        assert_eq!(calls, [(Backend::Gpu, None)]);
    }

    #[test]
    fn a_gpu_error_falls_back_to_the_cpu_and_says_why() {
        let (got, calls) = pick(Err(Error::Gpu("no adapter".into())));
        assert_eq!(got.unwrap(), "cpu");
        assert_eq!(calls, [(Backend::Gpu, None), (Backend::Cpu, Some("no adapter".into()))]);
    }

    #[test]
    fn other_errors_do_not_fall_back() {
        let (got, calls) = pick(Err(Error::Input("broken".into())));
        assert!(matches!(got, Err(Error::Input(_))));
        assert_eq!(calls, [(Backend::Gpu, None)]);
    }
}
