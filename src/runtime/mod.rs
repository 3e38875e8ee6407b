//! Sessions: sampling, stop rules, the generation loop.

pub mod backend;
pub mod generate;
pub mod sampler;
pub mod snapshot;

pub use generate::{GenerateOptions, GenerateStats, StopReason, TextModel, TokenEvent, generate};
pub use sampler::{Sampler, SamplingOptions};
