//! The seam between the app and a compute backend. The model worker only sees these two
//! traits, so the CPU reference and the GPU engine are interchangeable (tests use a
//! scripted backend).

use std::sync::atomic::AtomicBool;

use rullama::chat::Template;
use rullama::runtime::SamplingOptions;
use rullama::runtime::backend::PrefillPrecision;
use rullama::store::ResolvedModel;
use serde::Serialize;

use super::stream::StopReason;

/// One step of loading, for a progress bar.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadProgress {
    pub stage: String,
    /// 0 to 1, overall.
    pub fraction: f32,
}

impl LoadProgress {
    pub fn new(stage: &str, fraction: f32) -> LoadProgress {
        LoadProgress { stage: stage.to_string(), fraction }
    }
}

/// Makes backends from catalog entries.
pub trait Engine: Send + Sync {
    /// Load `model`. On failure nothing may stay allocated; `cancel` may abort the load.
    fn load(
        &self,
        model: &ResolvedModel,
        progress: &mut dyn FnMut(LoadProgress),
        cancel: &AtomicBool,
    ) -> rullama::Result<Box<dyn Backend>>;

    /// Names of the GPU adapters this engine can use (empty for CPU-only engines).
    fn adapters(&self) -> Vec<String> {
        Vec::new()
    }
}

#[derive(Debug, Clone)]
pub struct GenRequest<'a> {
    /// Prompt token ids, BOS included.
    pub prompt: &'a [u32],
    /// Tokens of context to allocate (prompt + reply).
    pub context: usize,
    pub max_tokens: usize,
    pub sampling: SamplingOptions,
    /// How the prompt's products run, where the engine has the choice.
    pub prefill: PrefillPrecision,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GenEnd {
    pub prompt_tokens: usize,
    pub reply_tokens: usize,
    /// Seconds spent producing the reply tokens (prefill excluded).
    pub decode_secs: f64,
    pub stop: StopReason,
}

/// A loaded model.
pub trait Backend: Send {
    fn template(&self) -> Template;
    /// The model's own context limit.
    fn context_length(&self) -> usize;
    /// Whether the model is instruction-tuned. A base model gets the conversation as
    /// plain text to continue, since it never learned the turn format.
    fn is_chat(&self) -> bool {
        true
    }
    /// Where the model runs, for people.
    fn device(&self) -> String {
        "CPU".into()
    }
    /// Tokenize rendered prompt text (special-token strings become their ids).
    fn encode(&self, text: &str) -> rullama::Result<Vec<u32>>;
    /// Generate until a stop token, `max_tokens`, a full context or `cancel`; `on_token`
    /// gets each token's text (empty while a UTF-8 character is incomplete).
    fn generate(
        &mut self,
        req: &GenRequest,
        cancel: &AtomicBool,
        on_token: &mut dyn FnMut(&str),
    ) -> rullama::Result<GenEnd>;
}
