//! GGUF: the file format Ollama and llama.cpp store models in.
//!
//! `reader` parses and validates a file (memory-mapped, zero-copy), `types` names the
//! tensor block layouts, `dequant` expands blocks to f32 on the CPU, `writer` produces files
//! (fixtures, synthetic models, adapters).

pub mod dequant;
pub mod reader;
pub mod types;
pub mod value;
pub mod writer;

pub use reader::{Gguf, GgufFile, TensorInfo};
pub use types::GgmlType;
pub use value::{MetaValue, ValueType};
pub use writer::GgufWriter;
