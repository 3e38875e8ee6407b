//! Ollama store and model catalog.
//!
//! `ollama` reads Ollama's on-disk store (roots, manifests, layers, blobs) without ever
//! writing to it, `imported` keeps the list of GGUF files imported from elsewhere, `entry`
//! describes one model from its GGUF header, and `catalog` lists them all and resolves a
//! name or path to the files a load needs.

pub mod catalog;
pub mod entry;
pub mod imported;
pub mod name;
pub mod ollama;
pub mod status;

pub use catalog::{Catalog, ResolvedModel, StoreOptions};
pub use entry::{ModelEntry, Source, human_count};
pub use name::ModelName;
pub use ollama::{ModelConfig, RootEnv};
pub use status::{Problem, Status};
