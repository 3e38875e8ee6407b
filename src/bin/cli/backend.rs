//! Which engine computes: the CPU reference or the GPU.

use std::sync::Arc;

use rullama::cpu::forward::CpuModel;
use rullama::gguf::GgufFile;
use rullama::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    Cpu,
    Gpu,
}

impl Backend {
    pub fn load(self, file: Arc<GgufFile>) -> Result<CpuModel> {
        match self {
            Backend::Cpu => CpuModel::load(file),
            Backend::Gpu => Err(Error::Unsupported("the GPU backend is not built yet; use --backend cpu".into())),
        }
    }
}
