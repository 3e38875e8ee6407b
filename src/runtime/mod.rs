//! Sessions: sampling, stop rules, the generation loop.

// TEMP pub mod generate;
pub mod sampler;

// TEMP pub use generate::{GenerateOptions, GenerateStats, StopReason, TextModel, TokenEvent, generate};
pub use sampler::{Sampler, SamplingOptions};
