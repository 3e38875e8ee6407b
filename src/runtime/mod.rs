//! Sessions: sampling, stop rules, the generation loop.

// pub mod backend; (enabled when the GPU kernels land)
pub mod generate;
pub mod sampler;
pub mod snapshot;

pub use generate::{GenerateOptions, GenerateStats, StopReason, TextModel, TokenEvent, generate};
pub use sampler::{Sampler, SamplingOptions};
