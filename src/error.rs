//! One error type for the engine. Every variant carries a sentence a user can act on.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },

    #[error("not a valid GGUF file: {0}")]
    Gguf(String),

    #[error("unsupported tensor type {0}")]
    UnsupportedType(String),

    #[error("Ollama store: {0}")]
    Store(String),

    #[error("model not found: {0}")]
    ModelNotFound(String),

    #[error("unsupported model: {0}")]
    Unsupported(String),

    #[error("model file is missing data: {0}")]
    MissingTensor(String),

    #[error("invalid input: {0}")]
    Input(String),

    #[error("GPU: {0}")]
    Gpu(String),

    #[error("cancelled")]
    Cancelled,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }
}
