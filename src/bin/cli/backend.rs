//! Interim: the CPU reference only, until the GPU forward is wired.

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
    pub fn load(self, file: Arc<GgufFile>, _progress: &mut dyn FnMut(f32)) -> Result<CpuModel> {
        match self {
            Backend::Cpu => CpuModel::load(file),
            Backend::Gpu => Err(Error::Unsupported("the GPU backend is not wired yet; use --backend cpu".into())),
        }
    }
}
