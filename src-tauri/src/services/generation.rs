//! One reply, backend-agnostic: render the conversation with the model's template,
//! tokenize, check it fits, generate, and split the output into answer and thinking.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use rullama::chat::{Event, Message as ChatMessage, Parser, RenderOptions, Template};
use rullama::runtime::SamplingOptions;
use rullama::runtime::backend::PrefillPrecision;

use super::engine::{Backend, GenEnd, GenRequest};
use super::history::Sampling;
use super::stream::StopReason;
use crate::error::{AppError, AppResult};

/// How often live statistics are reported.
pub const STATS_INTERVAL: Duration = Duration::from_millis(250);

#[derive(Debug, Clone)]
pub struct GenerateJob {
    /// The conversation, system prompt first when there is one, ending with the user turn.
    pub messages: Vec<ChatMessage>,
    pub thinking: bool,
    pub sampling: Sampling,
    /// Context the person asked for (Settings; `None`: the model's own); capped by the
    /// model's limit.
    pub context: Option<usize>,
    /// How the prompt's products run (Settings).
    pub prefill: PrefillPrecision,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GenStats {
    pub prompt_tokens: u32,
    pub reply_tokens: u32,
    pub tok_s: f64,
    pub context_used: u32,
    pub context_max: u32,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Finish {
    pub stop: StopReason,
    pub stats: GenStats,
}

/// Receives a reply as it is produced.
pub trait ReplyObserver: Send {
    fn piece(&mut self, text: &str, thinking: bool);
    fn stats(&mut self, stats: &GenStats);
    fn finished(self: Box<Self>, result: AppResult<Finish>);
}

pub fn run(
    backend: &mut dyn Backend,
    job: &GenerateJob,
    cancel: &AtomicBool,
    obs: &mut dyn ReplyObserver,
) -> AppResult<Finish> {
    let template = backend.template();
    let options = RenderOptions { thinking: job.thinking, ..RenderOptions::default() };
    let chat = backend.is_chat();
    let prompt_text = if chat { template.render(&job.messages, &options)? } else { plain_text(&job.messages) };
    let prompt = backend.encode(&prompt_text)?;
    let context_max = job.context.unwrap_or(usize::MAX).min(backend.context_length()).max(1);
    // One free position at least, or there is no room for a reply.
    if prompt.len() >= context_max {
        return Err(AppError::Invalid(format!(
            "This conversation does not fit: it is {} tokens and the context is {context_max}. Start a new chat, shorten the message, or raise the context length in Settings.",
            prompt.len()
        )));
    }

    let gemma4 = matches!(template, Template::Gemma4Small | Template::Gemma4Large);
    let mut parser = (chat && gemma4).then(|| Parser::for_prompt(&prompt_text));
    let sampling = sampling_options(&job.sampling);
    let req = GenRequest { prompt: &prompt, context: context_max, max_tokens: job.sampling.max_tokens.map_or(usize::MAX, |n| n as usize), sampling, prefill: job.prefill };

    let prompt_tokens = prompt.len() as u32;
    let stats = |reply_tokens: u32, tok_s: f64| GenStats {
        prompt_tokens,
        reply_tokens,
        tok_s,
        context_used: prompt_tokens + reply_tokens,
        context_max: context_max as u32,
    };
    let pace = test_pace();
    let mut started = false;
    let mut reply_tokens = 0u32;
    let mut first_token: Option<Instant> = None;
    let mut last_stats = Instant::now();
    let result = backend.generate(&req, cancel, &mut |text| {
        if let Some(pace) = pace {
            std::thread::sleep(pace);
        }
        reply_tokens += 1;
        let first = *first_token.get_or_insert_with(Instant::now);
        match &mut parser {
            Some(p) => emit(p.feed(text), obs),
            None => {
                // A base model's continuation starts with the paragraph break; drop it.
                let text = if started { text } else { text.trim_start() };
                started |= !text.is_empty();
                if !text.is_empty() {
                    obs.piece(text, false);
                }
            }
        }
        if last_stats.elapsed() >= STATS_INTERVAL {
            last_stats = Instant::now();
            // The first token comes after prefill, so the rate counts the ones after it.
            let secs = first.elapsed().as_secs_f64();
            let rate = if reply_tokens > 1 && secs > 0.0 { (reply_tokens - 1) as f64 / secs } else { 0.0 };
            obs.stats(&stats(reply_tokens, rate));
        }
    });
    let end = match result {
        // A cancel during prefill is a stop like any other.
        Err(rullama::Error::Cancelled) => GenEnd { prompt_tokens: prompt.len(), reply_tokens: reply_tokens as usize, decode_secs: 0.0, stop: StopReason::Cancelled },
        other => other?,
    };
    if let Some(p) = &mut parser {
        emit(p.finish(), obs);
    }
    let rate = if end.decode_secs > 0.0 { end.reply_tokens as f64 / end.decode_secs } else { 0.0 };
    let finish = Finish { stop: end.stop, stats: stats(end.reply_tokens as u32, rate) };
    obs.stats(&finish.stats);
    Ok(finish)
}

/// A base model's prompt: BOS, then the conversation as paragraphs, for it to continue.
fn plain_text(messages: &[ChatMessage]) -> String {
    let parts: Vec<&str> = messages.iter().map(|m| m.content.trim()).filter(|c| !c.is_empty()).collect();
    format!("<bos>{}", parts.join("\n\n"))
}

/// Debug builds only: `RULLAMA_TEST_TOKEN_DELAY_MS` slows every token down, so that the
/// end-to-end suite can stop a reply mid-stream however fast the machine is.
fn test_pace() -> Option<Duration> {
    if !cfg!(debug_assertions) {
        return None;
    }
    std::env::var("RULLAMA_TEST_TOKEN_DELAY_MS").ok()?.parse().ok().map(Duration::from_millis)
}

fn emit(events: Vec<Event>, obs: &mut dyn ReplyObserver) {
    for e in events {
        match e {
            Event::Content(t) => obs.piece(&t, false),
            Event::Thinking(t) => obs.piece(&t, true),
            // No tools are offered, so a call is the model improvising; keep it visible.
            Event::ToolCall(call) => obs.piece(&format!("\n[tool call {} {}]\n", call.name, call.arguments), false),
        }
    }
}

fn sampling_options(s: &Sampling) -> SamplingOptions {
    SamplingOptions {
        temperature: s.temperature,
        top_k: s.top_k as usize,
        top_p: s.top_p,
        min_p: s.min_p,
        repeat_penalty: s.repeat_penalty,
        seed: s.seed.unwrap_or_else(rand::random),
        ..SamplingOptions::default()
    }
}
