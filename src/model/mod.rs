//! Model configuration and layer plan: everything the forward pass needs to know about a
//! Gemma 3 or Gemma 4 model, read from GGUF metadata and the tensor table.

pub mod config;
pub mod meta;
pub mod plan;
pub mod towers;

pub use config::{Arch, Config, ExpertGateUp, MoeConfig, Rope, TokenIds};
pub use meta::PerLayer;
pub use plan::{AttnKind, LayerPlan, kv_donors};
pub use towers::{AudioConfig, VisionConfig};
