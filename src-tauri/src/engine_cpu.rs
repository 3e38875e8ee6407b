//! The CPU reference engine behind the app's `Engine` seam, and `TextBackend`, which turns
//! any `rullama::runtime::TextModel` plus its tokenizer into a `Backend` (the GPU engine
//! plugs in the same way).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use rullama::chat::Template;
use rullama::cpu::forward::CpuModel;
use rullama::gguf::GgufFile;
use rullama::runtime::{self, GenerateOptions, TextModel};
use rullama::store::ResolvedModel;
use rullama::tokenizer::Tokenizer;

use crate::services::engine::{Backend, Engine, GenEnd, GenRequest, LoadProgress};
use crate::services::stream::StopReason;

pub struct CpuEngine;

impl Engine for CpuEngine {
    fn load(
        &self,
        model: &ResolvedModel,
        progress: &mut dyn FnMut(LoadProgress),
        _cancel: &AtomicBool,
    ) -> rullama::Result<Box<dyn Backend>> {
        progress(LoadProgress::new("Reading the model file", 0.05));
        let file = Arc::new(GgufFile::open(&model.gguf)?);
        let arch = file.gguf.architecture().unwrap_or_default().to_string();
        // Before the weights: an unsupported family fails fast with its own message.
        let template = Template::for_model(&arch, &model.entry.name, model.entry.parameters)?;
        progress(LoadProgress::new("Preparing the weights", 0.3));
        let weights = CpuModel::load(file.clone())?;
        progress(LoadProgress::new("Reading the tokenizer", 0.8));
        let tokenizer = Tokenizer::from_gguf(&file.gguf)?;
        progress(LoadProgress::new("Ready", 1.0));
        Ok(Box::new(TextBackend { model: weights, tokenizer, template }))
    }
}

pub struct TextBackend<M> {
    pub model: M,
    pub tokenizer: Tokenizer,
    pub template: Template,
}

impl<M: TextModel + Send> Backend for TextBackend<M> {
    fn template(&self) -> Template {
        self.template
    }

    fn context_length(&self) -> usize {
        self.model.config().context_length
    }

    fn encode(&self, text: &str) -> rullama::Result<Vec<u32>> {
        Ok(self.tokenizer.encode(text))
    }

    fn generate(&mut self, req: &GenRequest, cancel: &AtomicBool, on_token: &mut dyn FnMut(&str)) -> rullama::Result<GenEnd> {
        let opts = GenerateOptions { max_tokens: req.max_tokens, sampling: req.sampling.clone() };
        let stats = runtime::generate(&self.model, &self.tokenizer, req.prompt, req.context, &opts, cancel, |t| on_token(&t.text))?;
        Ok(GenEnd {
            prompt_tokens: stats.prompt_tokens,
            reply_tokens: stats.generated_tokens,
            decode_secs: stats.decode.as_secs_f64(),
            stop: match stats.stop {
                runtime::StopReason::EndOfTurn => StopReason::EndOfTurn,
                runtime::StopReason::MaxTokens => StopReason::MaxTokens,
                runtime::StopReason::ContextFull => StopReason::ContextFull,
                runtime::StopReason::Cancelled => StopReason::Cancelled,
            },
        })
    }
}
