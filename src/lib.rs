//! rullama engine: GGUF models from Ollama's store, a CPU reference and a wgpu engine
//! for Gemma 3 and Gemma 4.

pub mod chat;
pub mod cpu;
pub mod error;
pub mod gguf;
pub mod gpu;
pub mod model;
pub mod npy;
pub mod runtime;
pub mod store;
pub mod synth;
pub mod tokenizer;

pub use error::{Error, Result};
