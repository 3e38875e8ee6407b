//! Prompt renderers (Gemma 4 small/large, Gemma 3) and the Gemma 4 output parser.
//!
//! Renderers produce plain text. Special tokens appear as their literal strings (`<bos>`,
//! `<|turn>`, `<start_of_turn>`, ...); the tokenizer splits them out later.
//!
//! Media: each image or audio clip of a message is written as one placeholder string, placed
//! before the message text — `<|image|>` / `<|audio|>` for Gemma 4, `<start_of_image>` for
//! Gemma 3. The runtime expands every placeholder into the model's media span once the tower
//! has run (Gemma 4: `<|image>` + N soft tokens + `<image|>`, and `<|audio>` + N + `<audio|>`;
//! spec §7.4 and §8.5).

mod gemma3;
mod gemma4;
mod parser;
mod tool_format;

pub use parser::{Event, Parser};
pub use tool_format::{
    STRING_DELIMITER, format_tool_call, format_tool_declaration, format_tool_response,
    format_value, parse_arguments, parse_tool_call,
};

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// Who wrote a message. `developer` (OpenAI's newer name) is read as `System`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    #[serde(alias = "developer")]
    System,
    #[default]
    User,
    Assistant,
    Tool,
}

impl std::str::FromStr for Role {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "system" | "developer" => Ok(Role::System),
            "user" => Ok(Role::User),
            "assistant" | "model" => Ok(Role::Assistant),
            "tool" => Ok(Role::Tool),
            other => Err(Error::Input(format!(
                "unknown message role {other:?}; use system, user, assistant or tool"
            ))),
        }
    }
}

/// A call the model made (or is shown to have made) to a declared tool.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub name: String,
    /// A JSON object (or null for a call without arguments).
    #[serde(default)]
    pub arguments: serde_json::Value,
}

/// The result of a tool call, fed back to the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolResponse {
    pub name: String,
    /// An object renders as its fields; anything else renders as `{value:...}`.
    pub response: serde_json::Value,
}

/// A tool the model may call: a name, a description and a JSON-schema-like `parameters`
/// object (`{"type":"object","properties":{...},"required":[...]}`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub parameters: serde_json::Value,
}

impl Tool {
    /// Reads a declaration in the OpenAI shape `{"type":"function","function":{...}}` or the
    /// bare function object `{"name":...,"description":...,"parameters":...}`.
    pub fn from_json(value: &serde_json::Value) -> Result<Tool> {
        let function = value.get("function").unwrap_or(value);
        let name = function
            .get("name")
            .and_then(|n| n.as_str())
            .filter(|n| !n.trim().is_empty())
            .ok_or_else(|| Error::Input("tool declaration has no \"name\"".into()))?;
        let description = match function.get("description") {
            None | Some(serde_json::Value::Null) => String::new(),
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(_) => {
                return Err(Error::Input(format!(
                    "tool {name:?}: \"description\" must be a string"
                )));
            }
        };
        let parameters = function.get("parameters").cloned().unwrap_or_default();
        if !(parameters.is_null() || parameters.is_object()) {
            return Err(Error::Input(format!(
                "tool {name:?}: \"parameters\" must be a JSON object"
            )));
        }
        Ok(Tool { name: name.to_string(), description, parameters })
    }
}

/// One chat message.
///
/// Tool results can be given two ways: as `Role::Tool` messages following the assistant
/// message that made the calls (each with `tool_responses`, or with `content` only, in which
/// case it is attributed to the call at the same position), or as `tool_responses` on the
/// assistant message itself.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Message {
    pub role: Role,
    pub content: String,
    /// The model's reasoning for an assistant message.
    pub thinking: Option<String>,
    /// Number of images attached to this message, in order.
    pub images: usize,
    /// Number of audio clips attached to this message, in order.
    pub audios: usize,
    pub tool_calls: Vec<ToolCall>,
    pub tool_responses: Vec<ToolResponse>,
}

impl Message {
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Message { role, content: content.into(), ..Default::default() }
    }
    pub fn system(content: impl Into<String>) -> Self {
        Self::new(Role::System, content)
    }
    pub fn user(content: impl Into<String>) -> Self {
        Self::new(Role::User, content)
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new(Role::Assistant, content)
    }
    /// A tool message carrying one named result.
    pub fn tool_result(name: impl Into<String>, response: serde_json::Value) -> Self {
        Message {
            role: Role::Tool,
            tool_responses: vec![ToolResponse { name: name.into(), response }],
            ..Default::default()
        }
    }
}

/// How to render a conversation.
#[derive(Clone, Debug, PartialEq)]
pub struct RenderOptions {
    /// Ask the model to think before answering (Gemma 4 only; Gemma 3 ignores it).
    pub thinking: bool,
    /// Tools the model may call (Gemma 4 only).
    pub tools: Vec<Tool>,
    /// End with the opening of a model turn, so generation continues from there.
    pub add_generation_prompt: bool,
}

impl Default for RenderOptions {
    fn default() -> Self {
        RenderOptions { thinking: false, tools: Vec::new(), add_generation_prompt: true }
    }
}

/// A model family's prompt format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Template {
    /// Gemma 4 E2B/E4B.
    Gemma4Small,
    /// Gemma 4 12B/26B/31B: like small, but with thinking off the generation prompt carries
    /// an empty thought block.
    Gemma4Large,
    Gemma3,
}

/// Parameter count from which an unnamed Gemma 4 model gets the large template. Ollama's
/// rule says 12e9, but the 12B model counts 11.9e9 parameters and would fall to the small
/// template (and E4B, the largest small model, is ~8e9 with its per-layer embeddings), so
/// the cut sits between the two families.
pub const GEMMA4_LARGE_MIN_PARAMS: u64 = 10_000_000_000;

impl Template {
    /// Chooses the template for a model from its GGUF architecture, its name (tag or file
    /// name; may be empty) and its parameter count when known.
    ///
    /// Gemma 4 names containing `e2b`/`e4b` are small; `12b`/`26b`/`31b` are large;
    /// otherwise the parameter count decides (spec §2.1), and small is the default.
    pub fn for_model(arch: &str, name: &str, parameter_count: Option<u64>) -> Result<Template> {
        match arch {
            "gemma3" | "gemma3_text" => Ok(Template::Gemma3),
            "gemma4" => {
                let name = name.to_ascii_lowercase();
                let named = |tags: &[&str]| tags.iter().any(|t| name.contains(t));
                let large = !named(&["e2b", "e4b"])
                    && (named(&["12b", "26b", "31b"])
                        || parameter_count.is_some_and(|n| n >= GEMMA4_LARGE_MIN_PARAMS));
                Ok(if large { Template::Gemma4Large } else { Template::Gemma4Small })
            }
            other => Err(Error::Unsupported(format!(
                "no chat template for architecture {other:?} (supported: gemma3, gemma4)"
            ))),
        }
    }

    /// Renders a conversation into prompt text, starting with a literal `<bos>`.
    pub fn render(&self, messages: &[Message], options: &RenderOptions) -> Result<String> {
        match self {
            Template::Gemma4Small => gemma4::render(messages, options, false),
            Template::Gemma4Large => gemma4::render(messages, options, true),
            Template::Gemma3 => gemma3::render(messages, options),
        }
    }

    /// Strings that end the model's turn. Gemma 4 also stops at `<|tool_response>`: after
    /// its tool calls the model opens the response block and waits for the tool's result.
    pub fn stop_strings(&self) -> &'static [&'static str] {
        match self {
            Template::Gemma4Small | Template::Gemma4Large => &["<turn|>", "<|tool_response>"],
            Template::Gemma3 => &["<end_of_turn>"],
        }
    }
}

/// Whether a model was tuned for chat turns. Base (pretrained) checkpoints, like the Gemma 3
/// 270M demo file, continue text instead: wrapping a prompt in turn markers makes them
/// produce noise, so callers use plain completion for them.
pub fn is_chat_model(g: &crate::gguf::Gguf) -> bool {
    if g.architecture() == Some("gemma4") || g.get("tokenizer.chat_template").is_some() {
        return true;
    }
    let tuned = |s: &str| {
        let s = s.to_ascii_lowercase();
        s.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| matches!(w, "it" | "instruct" | "chat"))
    };
    ["general.finetune", "general.name", "general.basename"].iter().any(|k| g.get_str(k).is_some_and(tuned))
}
