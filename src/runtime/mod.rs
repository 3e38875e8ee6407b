//! Sessions: sampling, stop rules, generation loop.

pub mod sampler;
