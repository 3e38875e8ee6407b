//! What the history stores, in the shapes the UI receives (JSON field names are the
//! command contract's).

use serde::{Deserialize, Serialize};

use crate::error::{AppError, AppResult};

pub type Id = i64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Complete,
    /// Being written right now (or the app died while it was).
    Streaming,
    /// Stopped before the model finished: by the person, or by a crash.
    Incomplete,
    Error,
}

/// Text forms stored in the database; the same words as the JSON.
macro_rules! sql_words {
    ($ty:ty { $($variant:ident = $word:literal),+ $(,)? }) => {
        impl $ty {
            pub fn as_str(self) -> &'static str {
                match self { $(<$ty>::$variant => $word),+ }
            }
            pub fn parse(s: &str) -> Option<$ty> {
                match s { $($word => Some(<$ty>::$variant),)+ _ => None }
            }
        }
    };
}
sql_words!(Role { System = "system", User = "user", Assistant = "assistant" });
sql_words!(Status { Complete = "complete", Streaming = "streaming", Incomplete = "incomplete", Error = "error" });

/// Per-chat sampling settings. Missing fields take the defaults, so older exports import.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Sampling {
    /// 0 means greedy.
    pub temperature: f32,
    /// 0 disables.
    pub top_k: u32,
    /// 1 disables.
    pub top_p: f32,
    /// 0 disables.
    pub min_p: f32,
    /// 1 disables.
    pub repeat_penalty: f32,
    /// `None` draws a fresh seed for every reply, so regenerating gives a new answer.
    pub seed: Option<u64>,
    /// Most tokens in one reply; `None`: until the end of the turn or a full context.
    pub max_tokens: Option<u32>,
}

/// Google's recommended settings for Gemma 3 and Gemma 4.
impl Default for Sampling {
    fn default() -> Self {
        Sampling { temperature: 1.0, top_k: 64, top_p: 0.95, min_p: 0.0, repeat_penalty: 1.0, seed: None, max_tokens: None }
    }
}

impl Sampling {
    pub fn validate(&self) -> AppResult<()> {
        let checks: [(bool, &str); 6] = [
            ((0.0..=5.0).contains(&self.temperature), "The temperature must be between 0 and 5."),
            (self.top_k <= 1000, "Top-k must be between 0 and 1000."),
            ((0.0..=1.0).contains(&self.top_p) && self.top_p > 0.0, "Top-p must be above 0 and at most 1."),
            ((0.0..=1.0).contains(&self.min_p), "Min-p must be between 0 and 1."),
            ((0.5..=2.0).contains(&self.repeat_penalty), "The repeat penalty must be between 0.5 and 2."),
            (self.max_tokens.is_none_or(|n| (1..=1 << 20).contains(&n)), "The reply length limit must be between 1 and 1048576 tokens."),
        ];
        // `contains` is false for NaN, so NaN is refused too.
        match checks.iter().find(|(ok, _)| !ok) {
            Some((_, why)) => Err(AppError::Invalid(why.to_string())),
            None => Ok(()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatSummary {
    pub id: Id,
    pub title: String,
    pub pinned: bool,
    pub model: Option<String>,
    pub updated: i64,
    /// The start of the newest message, for the chat list.
    pub last_message: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Chat {
    pub id: Id,
    pub title: String,
    pub pinned: bool,
    pub model: Option<String>,
    /// Empty: the model's own default.
    pub system_prompt: String,
    pub sampling: Sampling,
    pub created: i64,
    pub updated: i64,
    /// Every message of every branch, oldest first.
    pub messages: Vec<Message>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub id: Id,
    pub parent_id: Option<Id>,
    pub role: Role,
    pub content: String,
    pub thinking: Option<String>,
    pub status: Status,
    /// Why generation failed, for `status: error`.
    #[serde(default)]
    pub error: Option<String>,
    pub model: Option<String>,
    pub prompt_tokens: Option<u32>,
    pub reply_tokens: Option<u32>,
    pub tok_s: Option<f64>,
    pub created: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchHit {
    pub chat_id: Id,
    /// `None` when the chat's title matched.
    pub message_id: Option<Id>,
    pub title: String,
    /// The matching passage, plain text.
    pub snippet: String,
}
