//! A scripted engine for tests: it "tokenizes" one token per byte and replies with fixed
//! pieces (or an endless `w0 w1 w2 …` stream), at a set pace, honouring cancel, the token
//! limit and the context size like a real backend.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rullama::chat::Template;
use rullama::runtime::backend::PrefillPrecision;
use rullama::store::ResolvedModel;

use super::engine::{Backend, Engine, GenEnd, GenRequest, LoadProgress};
use super::stream::StopReason;

/// A piece that makes the backend panic.
pub const PANIC: &str = "\u{0}panic";

#[derive(Clone)]
pub struct ScriptEngine {
    pub pieces: Vec<String>,
    /// Keep going after `pieces` with `w{n} ` forever.
    pub endless: bool,
    pub pace: Duration,
    pub template: Template,
    pub context_length: usize,
    pub chat: bool,
    /// Rendered prompts, in order, for assertions.
    pub prompts: Arc<Mutex<Vec<String>>>,
    /// Names of the models loaded, in order.
    pub loads: Arc<Mutex<Vec<String>>>,
    /// Each reply's prefill precision, in order.
    pub prefills: Arc<Mutex<Vec<PrefillPrecision>>>,
}

impl ScriptEngine {
    pub fn new(pieces: &[&str]) -> ScriptEngine {
        ScriptEngine {
            pieces: pieces.iter().map(|s| s.to_string()).collect(),
            endless: false,
            pace: Duration::ZERO,
            template: Template::Gemma3,
            context_length: 4096,
            chat: true,
            prompts: Arc::default(),
            loads: Arc::default(),
            prefills: Arc::default(),
        }
    }

    /// The `i`-th piece of the endless stream.
    pub fn endless_piece(i: usize) -> String {
        format!("w{i} ")
    }
}

impl Engine for ScriptEngine {
    fn load(
        &self,
        model: &ResolvedModel,
        progress: &mut dyn FnMut(LoadProgress),
        _cancel: &AtomicBool,
    ) -> rullama::Result<Box<dyn Backend>> {
        progress(LoadProgress::new("reading", 0.0));
        if model.entry.name.contains("broken") {
            return Err(rullama::Error::Gguf("tensor data runs past the end of the file".into()));
        }
        progress(LoadProgress::new("ready", 1.0));
        self.loads.lock().unwrap().push(model.entry.name.clone());
        Ok(Box::new(self.clone()))
    }
}

impl Backend for ScriptEngine {
    fn template(&self) -> Template {
        self.template
    }

    fn context_length(&self) -> usize {
        self.context_length
    }

    fn is_chat(&self) -> bool {
        self.chat
    }

    fn encode(&self, text: &str) -> rullama::Result<Vec<u32>> {
        self.prompts.lock().unwrap().push(text.to_string());
        Ok(text.bytes().map(u32::from).collect())
    }

    fn generate(&mut self, req: &GenRequest, cancel: &AtomicBool, on_token: &mut dyn FnMut(&str)) -> rullama::Result<GenEnd> {
        self.prefills.lock().unwrap().push(req.prefill);
        let start = Instant::now();
        let mut n = 0;
        let stop = loop {
            if cancel.load(Ordering::Relaxed) {
                break StopReason::Cancelled;
            }
            let piece = match self.pieces.get(n) {
                Some(p) => p.clone(),
                None if self.endless => Self::endless_piece(n - self.pieces.len()),
                None => break StopReason::EndOfTurn,
            };
            std::thread::sleep(self.pace);
            // A backend bug, for the worker's panic handling.
            assert!(piece != PANIC, "scripted backend failure");
            on_token(&piece);
            n += 1;
            if n >= req.max_tokens {
                break StopReason::MaxTokens;
            }
            if req.prompt.len() + n + 1 >= req.context {
                break StopReason::ContextFull;
            }
        };
        Ok(GenEnd { prompt_tokens: req.prompt.len(), reply_tokens: n, decode_secs: start.elapsed().as_secs_f64(), stop })
    }
}
