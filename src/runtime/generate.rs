//! The generation loop: prefill the prompt, then sample and decode one token at a time,
//! streaming each token (with timing) to a callback. Backend-agnostic through `TextModel`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::sampler::{Sampler, SamplingOptions};
use crate::cpu::forward::Logits;
use crate::model::Config;
use crate::tokenizer::{StreamDecoder, Tokenizer};
use crate::{Error, Result};

/// What a backend offers the generation loop.
pub trait TextModel {
    type Cache;
    fn config(&self) -> &Config;
    fn new_cache(&self, capacity: usize) -> Self::Cache;
    fn cache_len(&self, cache: &Self::Cache) -> usize;
    /// Evaluate `tokens` after what `cache` holds; logits of all positions or the last.
    fn forward(&self, tokens: &[u32], cache: &mut Self::Cache, which: Logits, cancel: &AtomicBool) -> Result<Vec<f32>>;

    /// Evaluate `tokens` and choose the next token. Backends that can sample where the
    /// logits live (the GPU) override this so only the token id travels back.
    fn next_token(
        &self,
        tokens: &[u32],
        cache: &mut Self::Cache,
        sampler: &mut Sampler,
        history: &[u32],
        cancel: &AtomicBool,
    ) -> Result<u32> {
        let logits = self.forward(tokens, cache, Logits::Last, cancel)?;
        Ok(sampler.sample(&logits, history))
    }
}

#[derive(Debug, Clone)]
pub struct GenerateOptions {
    pub max_tokens: usize,
    pub sampling: SamplingOptions,
}

/// One streamed token.
#[derive(Debug, Clone)]
pub struct TokenEvent {
    pub id: u32,
    /// Text this token completes (empty while a UTF-8 sequence is still partial).
    pub text: String,
    /// Since generation started.
    pub elapsed: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndOfTurn,
    MaxTokens,
    ContextFull,
    Cancelled,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct GenerateStats {
    pub prompt_tokens: usize,
    pub generated_tokens: usize,
    pub prefill: Duration,
    pub decode: Duration,
    pub stop: StopReason,
}

impl GenerateStats {
    pub fn prefill_tok_s(&self) -> f64 {
        self.prompt_tokens as f64 / self.prefill.as_secs_f64().max(1e-9)
    }
    pub fn decode_tok_s(&self) -> f64 {
        self.generated_tokens as f64 / self.decode.as_secs_f64().max(1e-9)
    }
}

/// Generate a reply to `prompt` (token ids, BOS included) into a fresh cache of `context` tokens.
pub fn generate<M: TextModel>(
    model: &M,
    tok: &Tokenizer,
    prompt: &[u32],
    context: usize,
    opts: &GenerateOptions,
    cancel: &AtomicBool,
    mut on_token: impl FnMut(&TokenEvent),
) -> Result<GenerateStats> {
    if prompt.is_empty() {
        return Err(Error::Input("the prompt is empty".into()));
    }
    if prompt.len() >= context {
        return Err(Error::Input(format!(
            "the prompt is {} tokens, more than the context of {context} allows (with room for a reply)",
            prompt.len()
        )));
    }
    let stop_ids = &model.config().tokens.stop;
    let start = Instant::now();
    let mut cache = model.new_cache(context);
    let mut sampler = Sampler::new(opts.sampling.clone());
    let mut history = prompt.to_vec();
    let mut next = model.next_token(prompt, &mut cache, &mut sampler, &history, cancel)?;
    let prefill = start.elapsed();
    let mut decoder = StreamDecoder::new();
    let mut generated = 0;
    let decode_start = Instant::now();
    let stop = loop {
        if cancel.load(Ordering::Relaxed) {
            break StopReason::Cancelled;
        }
        let id = next;
        if stop_ids.contains(&id) {
            break StopReason::EndOfTurn;
        }
        generated += 1;
        history.push(id);
        let text = decoder.push(tok, id)?;
        on_token(&TokenEvent { id, text, elapsed: start.elapsed() });
        if generated >= opts.max_tokens {
            break StopReason::MaxTokens;
        }
        if model.cache_len(&cache) + 1 >= context {
            break StopReason::ContextFull;
        }
        next = match model.next_token(&[id], &mut cache, &mut sampler, &history, cancel) {
            Err(Error::Cancelled) => break StopReason::Cancelled,
            other => other?,
        };
    };
    let rest = decoder.finish();
    if !rest.is_empty() {
        on_token(&TokenEvent { id: *history.last().unwrap_or(&0), text: rest, elapsed: start.elapsed() });
    }
    Ok(GenerateStats { prompt_tokens: prompt.len(), generated_tokens: generated, prefill, decode: decode_start.elapsed(), stop })
}
