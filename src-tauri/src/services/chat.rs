//! Conversations with the loaded model: send, regenerate, edit, stop.
//!
//! A reply is written to the history as it streams: each piece is saved before it is sent
//! to the UI, so a crash never loses text the person has seen. The reply then ends as
//! `complete`, `incomplete` (stopped) or `error`.

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;

use rullama::chat::Message as ChatMessage;

use super::generation::{Finish, GenStats, GenerateJob, ReplyObserver};
use super::history::{Chat, History, Id, Message, NewMessage, ReplyEnd, Role, Status};
use super::settings::SettingsStore;
use super::stream::{EventSink, StopReason, StreamEvent};
use super::worker::{LoadedModel, Worker};
use crate::error::{AppError, AppResult};

pub struct ChatService {
    history: Arc<History>,
    worker: Arc<Worker>,
    settings: Arc<SettingsStore>,
}

/// A reply that has been started; `done` fires once it is finished and saved.
pub struct Reply {
    pub user_message_id: Id,
    pub assistant_message_id: Id,
    pub done: Receiver<()>,
}

impl ChatService {
    pub fn new(history: Arc<History>, worker: Arc<Worker>, settings: Arc<SettingsStore>) -> ChatService {
        ChatService { history, worker, settings }
    }

    /// Add a user message under `parent_id` (`None`: the chat's first message) and reply.
    pub fn send_message(
        &self,
        chat_id: Id,
        content: &str,
        parent_id: Option<Id>,
        thinking: bool,
        sink: Arc<dyn EventSink>,
    ) -> AppResult<Reply> {
        let content = non_empty(content)?;
        let model = self.worker.current().ok_or(AppError::NoModel)?;
        let user = NewMessage { chat_id, parent_id, role: Role::User, content, status: Status::Complete, model: None };
        let user_id = self.history.add_message(&user)?;
        self.reply(chat_id, user_id, thinking, model, sink)
    }

    /// Answer the same user message again; the new reply is a sibling of `message_id`.
    pub fn regenerate(&self, chat_id: Id, message_id: Id, thinking: bool, sink: Arc<dyn EventSink>) -> AppResult<Reply> {
        let old = self.message_in(chat_id, message_id, Role::Assistant)?;
        let user_id =
            old.parent_id.ok_or_else(|| AppError::Invalid("This reply has no message to answer.".into()))?;
        let model = self.worker.current().ok_or(AppError::NoModel)?;
        self.reply(chat_id, user_id, thinking, model, sink)
    }

    /// Replace a user message with new text as a sibling (the old branch stays), and reply.
    pub fn edit_message(
        &self,
        chat_id: Id,
        message_id: Id,
        content: &str,
        thinking: bool,
        sink: Arc<dyn EventSink>,
    ) -> AppResult<Reply> {
        let content = non_empty(content)?;
        let old = self.message_in(chat_id, message_id, Role::User)?;
        let model = self.worker.current().ok_or(AppError::NoModel)?;
        let user =
            NewMessage { chat_id, parent_id: old.parent_id, role: Role::User, content, status: Status::Complete, model: None };
        let user_id = self.history.add_message(&user)?;
        self.reply(chat_id, user_id, thinking, model, sink)
    }

    pub fn stop(&self) {
        self.worker.cancel_generation();
    }

    fn message_in(&self, chat_id: Id, message_id: Id, role: Role) -> AppResult<Message> {
        let (in_chat, m) = self.history.message(message_id)?;
        if in_chat != chat_id {
            return Err(AppError::Invalid(format!("Message {message_id} is not part of chat {chat_id}.")));
        }
        if m.role != role {
            return Err(AppError::Invalid(format!("Message {message_id} is not a {} message.", role.as_str())));
        }
        Ok(m)
    }

    fn reply(&self, chat_id: Id, user_id: Id, thinking: bool, model: LoadedModel, sink: Arc<dyn EventSink>) -> AppResult<Reply> {
        let chat = self.history.get_chat(chat_id)?;
        let path = self.history.path_to(user_id)?;
        let messages = conversation(&chat, &path, &model);
        // One reply at a time: a reply still streaming (in this chat or another) stops.
        self.worker.cancel_generation();
        let reply = NewMessage {
            chat_id,
            parent_id: Some(user_id),
            role: Role::Assistant,
            content: "",
            status: Status::Streaming,
            model: Some(&model.name),
        };
        let assistant_id = self.history.add_message(&reply)?;
        self.history.set_chat_model(chat_id, &model.name)?;
        sink.send(StreamEvent::Started { user_message_id: user_id, assistant_message_id: assistant_id });

        let (done_tx, done) = mpsc::channel();
        let recorder = Recorder {
            history: self.history.clone(),
            id: assistant_id,
            sink,
            content: String::new(),
            thinking: String::new(),
            last_stats: None,
            done: done_tx,
        };
        let settings = self.settings.get();
        let job = GenerateJob {
            messages,
            thinking,
            sampling: chat.sampling,
            context: settings.context_length.map(|n| n as usize),
            prefill: settings.prefill_precision,
        };
        self.worker.generate(job, Box::new(recorder));
        Ok(Reply { user_message_id: user_id, assistant_message_id: assistant_id, done })
    }
}

fn non_empty(content: &str) -> AppResult<&str> {
    match content.trim() {
        "" => Err(AppError::Invalid("The message is empty.".into())),
        _ => Ok(content),
    }
}

/// The conversation the model sees: the chat's system prompt (or the model's default),
/// then the branch from the root to the new user message. Failed replies with no text
/// are left out; stopped replies are kept as far as they went.
fn conversation(chat: &Chat, path: &[Message], model: &LoadedModel) -> Vec<ChatMessage> {
    let stored_system = path.first().filter(|m| m.role == Role::System).map(|m| m.content.clone());
    let own = Some(chat.system_prompt.clone()).filter(|s| !s.trim().is_empty());
    let system = own.or(stored_system).or_else(|| model.default_system.clone());
    let mut out: Vec<ChatMessage> = system.into_iter().map(ChatMessage::system).collect();
    for m in path {
        match m.role {
            Role::System => {}
            Role::User => out.push(ChatMessage::user(m.content.clone())),
            Role::Assistant if m.content.trim().is_empty() => {}
            Role::Assistant => {
                let mut a = ChatMessage::assistant(m.content.clone());
                a.thinking = m.thinking.clone().filter(|t| !t.is_empty());
                out.push(a);
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "chat_tests.rs"]
mod tests;

/// Saves and forwards one reply as it streams.
struct Recorder {
    history: Arc<History>,
    id: Id,
    sink: Arc<dyn EventSink>,
    content: String,
    thinking: String,
    last_stats: Option<GenStats>,
    done: Sender<()>,
}

impl Recorder {
    fn thinking(&self) -> Option<&str> {
        Some(self.thinking.as_str()).filter(|t| !t.is_empty())
    }
}

impl ReplyObserver for Recorder {
    fn piece(&mut self, text: &str, thinking: bool) {
        if text.is_empty() {
            return;
        }
        if thinking { &mut self.thinking } else { &mut self.content }.push_str(text);
        // Saved before sent: the UI never shows text the database does not have.
        // A failed save is retried with the next piece, and the final save reports it.
        let _ = self.history.update_reply(self.id, &self.content, self.thinking());
        self.sink.send(StreamEvent::Token { text: text.to_string(), thinking });
    }

    fn stats(&mut self, s: &GenStats) {
        self.last_stats = Some(*s);
        self.sink.send(StreamEvent::Stats {
            prompt_tokens: s.prompt_tokens,
            reply_tokens: s.reply_tokens,
            tok_s: s.tok_s,
            context_used: s.context_used,
            context_max: s.context_max,
        });
    }

    fn finished(self: Box<Self>, result: AppResult<Finish>) {
        let (status, error, stats, last) = match result {
            Ok(f) => {
                let status = if f.stop == StopReason::Cancelled { Status::Incomplete } else { Status::Complete };
                (status, None, Some(f.stats), StreamEvent::Done { stop_reason: f.stop })
            }
            Err(e) => {
                let message = e.to_string();
                (Status::Error, Some(message.clone()), self.last_stats, StreamEvent::Error { message })
            }
        };
        let end = ReplyEnd {
            status,
            content: self.content.clone(),
            thinking: self.thinking().map(str::to_string),
            error,
            prompt_tokens: stats.map(|s| s.prompt_tokens),
            reply_tokens: stats.map(|s| s.reply_tokens),
            tok_s: stats.map(|s| s.tok_s).filter(|t| *t > 0.0),
        };
        match self.history.finish_reply(self.id, &end) {
            Ok(()) => self.sink.send(last),
            Err(e) => self.sink.send(StreamEvent::Error { message: format!("The reply could not be saved. {e}") }),
        }
        let _ = self.done.send(());
    }
}
