//! The CPU reference engine behind the app's `Engine` seam.
//! (Stand-in until the engine's tokenizer and generation loop are available.)

use std::sync::atomic::AtomicBool;

use rullama::store::ResolvedModel;

use crate::services::engine::{Backend, Engine, LoadProgress};

pub struct CpuEngine;

impl Engine for CpuEngine {
    fn load(
        &self,
        _model: &ResolvedModel,
        _progress: &mut dyn FnMut(LoadProgress),
        _cancel: &AtomicBool,
    ) -> rullama::Result<Box<dyn Backend>> {
        Err(rullama::Error::Unsupported("this build has no tokenizer yet".into()))
    }
}
