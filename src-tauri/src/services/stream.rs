//! What a reply's stream carries to the UI (over a `tauri::ipc::Channel` in the app), and
//! the sink trait that lets services stream without knowing about Tauri.

use serde::Serialize;

use super::history::Id;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndOfTurn,
    MaxTokens,
    ContextFull,
    Cancelled,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    /// First event: the ids of the messages this reply belongs to.
    Started { user_message_id: Id, assistant_message_id: Id },
    /// A piece of the reply (already saved when sent), answer text or thinking.
    Token { text: String, thinking: bool },
    /// Sent a few times a second while streaming and once at the end.
    Stats { prompt_tokens: u32, reply_tokens: u32, tok_s: f64, context_used: u32, context_max: u32 },
    /// Last event of a reply that ended normally or was stopped.
    Done { stop_reason: StopReason },
    /// Last event of a reply that failed; `message` is a sentence for the person.
    Error { message: String },
}

pub trait EventSink: Send + Sync {
    /// Deliver one event. A closed receiver (the window went away) is not an error: the
    /// reply is still written to the history.
    fn send(&self, event: StreamEvent);
}

#[cfg(test)]
pub mod testing {
    use std::sync::Mutex;

    use super::*;

    /// Collects events for assertions.
    #[derive(Default)]
    pub struct Collect(pub Mutex<Vec<StreamEvent>>);

    impl EventSink for Collect {
        fn send(&self, event: StreamEvent) {
            self.0.lock().unwrap().push(event);
        }
    }

    impl Collect {
        pub fn events(&self) -> Vec<StreamEvent> {
            self.0.lock().unwrap().clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_serialize_to_the_contract_shapes() {
        let cases = [
            (
                StreamEvent::Started { user_message_id: 1, assistant_message_id: 2 },
                r#"{"type":"started","user_message_id":1,"assistant_message_id":2}"#,
            ),
            (StreamEvent::Token { text: "hi".into(), thinking: true }, r#"{"type":"token","text":"hi","thinking":true}"#),
            (
                StreamEvent::Stats { prompt_tokens: 3, reply_tokens: 4, tok_s: 2.5, context_used: 7, context_max: 8 },
                r#"{"type":"stats","prompt_tokens":3,"reply_tokens":4,"tok_s":2.5,"context_used":7,"context_max":8}"#,
            ),
            (StreamEvent::Done { stop_reason: StopReason::ContextFull }, r#"{"type":"done","stop_reason":"context_full"}"#),
            (StreamEvent::Error { message: "x".into() }, r#"{"type":"error","message":"x"}"#),
        ];
        for (event, json) in cases {
            assert_eq!(serde_json::to_string(&event).unwrap(), json);
        }
    }
}
