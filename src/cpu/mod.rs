//! The CPU reference: a plain f32 implementation of every op and forward path.

pub mod forward;
pub mod ops;
