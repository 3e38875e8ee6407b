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

    /// Feed tokens one after another, starting with `first` (not yet in the cache): `on(id)`
    /// sees each token in turn and says whether to feed it, and feeding a token yields the
    /// next. On return the cache holds exactly the tokens `on` accepted. `history` (the
    /// tokens before `first`) serves the repetition penalty. A backend may evaluate a token
    /// before `on` has seen it (the GPU queues the next step while the host looks at a
    /// token); what it evaluated past a refusal is dropped from the cache.
    fn decode(
        &self,
        first: u32,
        cache: &mut Self::Cache,
        sampler: &mut Sampler,
        history: &[u32],
        cancel: &AtomicBool,
        on: &mut dyn FnMut(u32) -> Result<bool>,
    ) -> Result<()> {
        decode_stepwise(self, first, cache, sampler, history, cancel, on)
    }

    /// Prefill's products from now on take `p` where the backend has that choice (the GPU's
    /// tensor cores, `GpuModel::set_prefill_f16`); elsewhere products stay f32.
    fn set_prefill_precision(&mut self, _p: super::backend::PrefillPrecision) {}
}

/// `TextModel::decode` one `next_token` call per token.
pub fn decode_stepwise<M: TextModel + ?Sized>(
    model: &M,
    first: u32,
    cache: &mut M::Cache,
    sampler: &mut Sampler,
    history: &[u32],
    cancel: &AtomicBool,
    on: &mut dyn FnMut(u32) -> Result<bool>,
) -> Result<()> {
    let mut history = history.to_vec();
    let mut id = first;
    while on(id)? {
        history.push(id);
        id = model.next_token(&[id], cache, sampler, &history, cancel)?;
    }
    Ok(())
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
    let first = model.next_token(prompt, &mut cache, &mut sampler, prompt, cancel)?;
    let prefill = start.elapsed();
    let mut decoder = StreamDecoder::new();
    let (mut generated, mut last) = (0, first);
    let mut stop = StopReason::MaxTokens;
    let decode_start = Instant::now();
    let fed = model.decode(first, &mut cache, &mut sampler, prompt, cancel, &mut |id| {
        if cancel.load(Ordering::Relaxed) {
            stop = StopReason::Cancelled;
            return Ok(false);
        }
        if stop_ids.contains(&id) {
            stop = StopReason::EndOfTurn;
            return Ok(false);
        }
        generated += 1;
        last = id;
        let text = decoder.push(tok, id)?;
        on_token(&TokenEvent { id, text, elapsed: start.elapsed() });
        if generated >= opts.max_tokens {
            stop = StopReason::MaxTokens;
            return Ok(false);
        }
        // The next token needs this one in the cache, after the prompt and the others.
        if prompt.len() + generated >= context {
            stop = StopReason::ContextFull;
            return Ok(false);
        }
        Ok(true)
    });
    match fed {
        Err(Error::Cancelled) => stop = StopReason::Cancelled,
        other => other?,
    }
    let rest = decoder.finish();
    if !rest.is_empty() {
        on_token(&TokenEvent { id: last, text: rest, elapsed: start.elapsed() });
    }
    Ok(GenerateStats { prompt_tokens: prompt.len(), generated_tokens: generated, prefill, decode: decode_start.elapsed(), stop })
}
