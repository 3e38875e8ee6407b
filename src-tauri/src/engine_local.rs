//! The engine behind the app's `Engine` seam: rullama's GPU engine (wgpu) when an adapter is
//! usable, else its CPU reference. `TextBackend` turns any `rullama::runtime::TextModel` plus
//! its tokenizer into a `Backend`.
//!
//! `RULLAMA_BACKEND=cpu|gpu` forces one engine (tests, troubleshooting); the default tries
//! the GPU and falls back to the CPU when the GPU cannot be used, saying so in the progress.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use rullama::chat::Template;
use rullama::gguf::GgufFile;
use rullama::runtime::backend::{Backend as Device, LoadedModel as DeviceModel};
use rullama::runtime::{self, GenerateOptions, TextModel};
use rullama::store::ResolvedModel;
use rullama::tokenizer::Tokenizer;

use crate::services::engine::{Backend, Engine, GenEnd, GenRequest, LoadProgress};
use crate::services::stream::StopReason;

pub const BACKEND_ENV: &str = "RULLAMA_BACKEND";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Auto,
    Only(Device),
}

pub struct LocalEngine {
    pub choice: Choice,
}

impl LocalEngine {
    /// From `RULLAMA_BACKEND` (`cpu`, `gpu`; anything else or unset: automatic).
    pub fn from_env() -> LocalEngine {
        let choice = match std::env::var(BACKEND_ENV).map(|v| v.to_ascii_lowercase()).as_deref() {
            Ok("cpu") => Choice::Only(Device::Cpu),
            Ok("gpu") => Choice::Only(Device::Gpu),
            _ => Choice::Auto,
        };
        LocalEngine { choice }
    }

    fn weights(&self, file: &Arc<GgufFile>, progress: &mut dyn FnMut(LoadProgress)) -> rullama::Result<DeviceModel> {
        let upload = |device: Device, progress: &mut dyn FnMut(LoadProgress)| {
            let stage = match device {
                Device::Gpu => "Uploading the weights to the GPU",
                Device::Cpu => "Preparing the weights",
            };
            progress(LoadProgress::new(stage, 0.1));
            device.load(file.clone(), &mut |f| progress(LoadProgress::new(stage, 0.1 + 0.8 * f.clamp(0.0, 1.0))))
        };
        match self.choice {
            Choice::Only(device) => upload(device, progress),
            // No usable adapter, or the GPU refused the model: the CPU reference still runs
            // it, slowly.
            Choice::Auto => rullama::runtime::backend::gpu_or_cpu(|device, passed_over| {
                if let Some(why) = passed_over {
                    progress(LoadProgress::new(&format!("GPU unavailable ({why}); using the CPU"), 0.1));
                }
                upload(device, progress)
            }),
        }
    }
}

impl Engine for LocalEngine {
    fn load(
        &self,
        model: &ResolvedModel,
        progress: &mut dyn FnMut(LoadProgress),
        _cancel: &AtomicBool,
    ) -> rullama::Result<Box<dyn Backend>> {
        progress(LoadProgress::new("Reading the model file", 0.02));
        let file = Arc::new(GgufFile::open(&model.gguf)?);
        let arch = file.gguf.architecture().unwrap_or_default().to_string();
        // Before the weights: an unsupported family fails fast with its own message.
        let template = Template::for_model(&arch, &model.entry.name, model.entry.parameters)?;
        let tokenizer = Tokenizer::from_gguf(&file.gguf)?;
        let weights = self.weights(&file, progress)?;
        let chat = rullama::chat::is_chat_model(&file.gguf);
        progress(LoadProgress::new("Ready", 1.0));
        Ok(Box::new(TextBackend { device: weights.device_name(), model: weights, tokenizer, template, chat }))
    }

    fn adapters(&self) -> Vec<String> {
        rullama::gpu::device::adapter_names()
    }
}

/// The engine picks its GPU once per process (`RULLAMA_ADAPTER`, a substring of the adapter
/// name). `list_adapters` shows `name (backend, type)`; the name is what is matched.
pub fn adapter_env_value(listed: &str) -> &str {
    match listed.rsplit_once(" (") {
        Some((name, rest)) if rest.ends_with(')') && !name.is_empty() => name,
        _ => listed,
    }
}

pub struct TextBackend<M> {
    pub model: M,
    /// Where it runs, for people ("NVIDIA H100 (Vulkan)", "CPU (f32 reference)").
    pub device: String,
    pub tokenizer: Tokenizer,
    pub template: Template,
    /// Instruction-tuned (has a chat format); `false` for base models.
    pub chat: bool,
}

impl<M: TextModel + Send> Backend for TextBackend<M> {
    fn template(&self) -> Template {
        self.template
    }

    fn context_length(&self) -> usize {
        self.model.config().context_length
    }

    fn is_chat(&self) -> bool {
        self.chat
    }

    fn device(&self) -> String {
        self.device.clone()
    }

    fn encode(&self, text: &str) -> rullama::Result<Vec<u32>> {
        Ok(self.tokenizer.encode(text))
    }

    fn generate(&mut self, req: &GenRequest, cancel: &AtomicBool, on_token: &mut dyn FnMut(&str)) -> rullama::Result<GenEnd> {
        self.model.set_prefill_precision(req.prefill);
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

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::paths::AppPaths;
    use crate::services::Services;
    use crate::services::history::Sampling;
    use crate::services::stream::StreamEvent;
    use crate::services::stream::testing::Collect;

    fn services(dir: &Path) -> Services {
        services_on(dir, Device::Cpu)
    }

    fn services_on(dir: &Path, device: Device) -> Services {
        let ollama = dir.join("ollama");
        std::fs::create_dir_all(&ollama).unwrap();
        let engine = Arc::new(LocalEngine { choice: Choice::Only(device) });
        Services::open(AppPaths::new(dir.join("data")), engine, Some(vec![ollama])).unwrap()
    }

    fn tiny_fixture() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/g3_tiny.f32.gguf")
    }

    /// The same greedy reply from the GPU engine as from the CPU reference, through the
    /// app's whole path (worker, generation, history). Runs on any adapter wgpu finds
    /// (Mesa's lavapipe in CI).
    #[test]
    fn the_gpu_engine_replies_like_the_cpu_reference() {
        let mut replies = Vec::new();
        for device in [Device::Cpu, Device::Gpu] {
            let dir = tempfile::tempdir().unwrap();
            let s = services_on(dir.path(), device);
            let name = s.models.import(&tiny_fixture()).unwrap().name;
            let info = s.models.load(&name, Box::new(|_| {})).unwrap();
            assert_eq!(info.device.starts_with("CPU"), device == Device::Cpu, "{}", info.device);
            let (events, _) = ask(&s, "Hello there", 12);
            assert!(matches!(events.last(), Some(StreamEvent::Done { .. })), "{events:?}");
            replies.push(text_of(&events));
        }
        assert!(!replies[0].is_empty());
        assert_eq!(replies[0], replies[1]);
    }

    /// Send `text` in a new chat with greedy sampling; returns the events and the chat id.
    fn ask(s: &Services, text: &str, max_tokens: u32) -> (Vec<StreamEvent>, i64) {
        let chat = s.history.create_chat(None).unwrap().id;
        let greedy = Sampling { temperature: 0.0, max_tokens: Some(max_tokens), ..Sampling::default() };
        s.history.update_chat_settings(chat, None, &greedy).unwrap();
        let sink = Arc::new(Collect::default());
        let reply = s.chat.send_message(chat, text, None, false, sink.clone()).unwrap();
        reply.done.recv_timeout(Duration::from_secs(600)).unwrap();
        (sink.events(), chat)
    }

    fn text_of(events: &[StreamEvent]) -> String {
        events.iter().filter_map(|e| if let StreamEvent::Token { text, .. } = e { Some(text.as_str()) } else { None }).collect()
    }

    #[test]
    fn adapter_names_lose_their_backend_suffix() {
        assert_eq!(adapter_env_value("llvmpipe (LLVM 15.0.6, 256 bits) (Vulkan, Cpu)"), "llvmpipe (LLVM 15.0.6, 256 bits)");
        assert_eq!(adapter_env_value("NVIDIA H100"), "NVIDIA H100");
    }

    #[test]
    fn the_tiny_fixture_loads_and_streams_a_reply() {
        let dir = tempfile::tempdir().unwrap();
        let s = services(dir.path());
        let fixture = tiny_fixture();
        let name = s.models.import(&fixture).unwrap().name;
        let stages = Arc::new(std::sync::Mutex::new(Vec::new()));
        let st = stages.clone();
        let info = s.models.load(&name, Box::new(move |p| st.lock().unwrap().push(p.fraction))).unwrap();
        assert_eq!((info.architecture.as_str(), info.context_length), ("gemma3", 512));
        let fractions = stages.lock().unwrap().clone();
        assert!(fractions.windows(2).all(|w| w[0] <= w[1]) && fractions.last() == Some(&1.0), "{fractions:?}");

        let (events, chat) = ask(&s, "Hello there", 12);
        let Some(StreamEvent::Stats { prompt_tokens, reply_tokens, context_used, context_max, .. }) =
            events.iter().rev().find(|e| matches!(e, StreamEvent::Stats { .. })).cloned()
        else {
            panic!("{events:?}")
        };
        // The fixture is not instruction-tuned (its name says nothing of "it"), so the
        // prompt is the message as text after BOS, tokenized by the model's own tokenizer.
        assert!(!info.chat);
        let file = GgufFile::open(&fixture).unwrap();
        let expected = Tokenizer::from_gguf(&file.gguf).unwrap().encode("<bos>Hello there");
        assert_eq!(expected[0], 2, "BOS is recognised in the text");
        assert_eq!(prompt_tokens as usize, expected.len());
        assert!((1..=12).contains(&reply_tokens), "{reply_tokens}");
        assert_eq!((context_used, context_max), (prompt_tokens + reply_tokens, 512));
        let saved = s.history.get_chat(chat).unwrap().messages.pop().unwrap();
        assert_eq!(saved.content, text_of(&events));

        // Greedy decoding is deterministic: the same question gets the same reply.
        let (again, _) = ask(&s, "Hello there", 12);
        assert_eq!(text_of(&again), text_of(&events));
    }

    /// The real Gemma 3 270M (fetched by `scripts/demo-model`) answers a factual question.
    #[test]
    fn the_demo_model_answers() {
        let gguf = std::env::var_os("RULLAMA_DEMO_GGUF").map(PathBuf::from).unwrap_or_else(|| {
            directories::BaseDirs::new().unwrap().data_dir().join("rullama/models/gemma-3-270m-q4_k_m.gguf")
        });
        assert!(gguf.is_file(), "the demo model is missing at {}; run `bash scripts/demo-model --fetch-only`", gguf.display());
        let dir = tempfile::tempdir().unwrap();
        let s = services(dir.path());
        let name = s.models.import(&gguf).unwrap().name;
        s.models.load(&name, Box::new(|_| {})).unwrap();
        // The demo model is the base (pretrained) model: the reply continues the text.
        assert_eq!(s.models.current().map(|m| m.chat), Some(false));
        let (events, _) = ask(&s, "What is the capital of France?", 12);
        let text = text_of(&events);
        assert!(text.contains("Paris"), "{text:?}");
    }
}
