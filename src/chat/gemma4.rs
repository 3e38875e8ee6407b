//! Gemma 4 prompt format (spec §9.1, §9.2), following the model's published chat template.
//!
//! ```text
//! <bos><|turn>system\n[<|think|>\n]{system}{tool declarations}<turn|>\n
//! <|turn>user\n{media}{text}<turn|>\n
//! <|turn>model\n[<|channel>thought\n{thinking}\n<channel|>]{calls}{responses}{text}<turn|>\n
//! <|turn>model\n
//! ```
//!
//! Tool results are folded into the model turn that made the calls, and consecutive
//! assistant messages share one model turn. A turn whose calls have no results yet ends
//! with `<|tool_response>`: the model is waiting for them.

use std::borrow::Cow;

use super::tool_format::{format_tool_call, format_tool_declaration, format_tool_response};
use super::{Message, RenderOptions, Role, ToolResponse};
use crate::Result;

const IMAGE: &str = "<|image|>";
const AUDIO: &str = "<|audio|>";
const CHANNEL_OPEN: &str = "<|channel>";
const CHANNEL_CLOSE: &str = "<channel|>";

/// What the last rendered message ended with; decides the generation prompt.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ending {
    Text,
    ToolCall,
    ToolResponse,
}

pub(super) fn render(messages: &[Message], options: &RenderOptions, large: bool) -> Result<String> {
    let mut out = String::from("<bos>");

    let (system, rest) = match messages.split_first() {
        Some((first, rest)) if first.role == Role::System => (Some(first), rest),
        _ => (None, messages),
    };
    if system.is_some() || !options.tools.is_empty() || options.thinking {
        out.push_str("<|turn>system\n");
        if options.thinking {
            out.push_str("<|think|>\n");
        }
        if let Some(system) = system {
            out.push_str(system.content.trim());
        }
        for tool in &options.tools {
            out.push_str(&format_tool_declaration(tool));
        }
        out.push_str("<turn|>\n");
    }

    // Thinking is replayed only for the model's work since the last user message.
    let last_user = rest.iter().rposition(|m| m.role == Role::User);
    let mut ending = Ending::Text;
    let mut prev_role = None;

    for (i, message) in rest.iter().enumerate() {
        if message.role == Role::Tool {
            continue; // rendered inside the assistant turn that made the calls
        }
        ending = Ending::Text;
        let is_model = message.role == Role::Assistant;
        if !(is_model && prev_role == Some(Role::Assistant)) {
            out.push_str("<|turn>");
            out.push_str(role_name(message.role));
            out.push('\n');
        }

        if let Some(thinking) = &message.thinking
            && is_model
            && !thinking.is_empty()
            && last_user.is_none_or(|u| i > u)
        {
            out.push_str("<|channel>thought\n");
            out.push_str(thinking);
            out.push_str("\n<channel|>");
        }

        for call in &message.tool_calls {
            out.push_str(&format_tool_call(call)?);
        }
        if !message.tool_calls.is_empty() {
            ending = Ending::ToolCall;
        }

        let responses = responses_for(rest, i);
        for response in &responses {
            out.push_str(&format_tool_response(&response.response));
            push_media(&mut out, response.images, response.audios);
        }
        let responded = !responses.is_empty();
        if responded {
            ending = Ending::ToolResponse;
        }

        let text = if is_model {
            strip_thinking(&message.content)
        } else {
            message.content.trim().to_string()
        };
        let start = out.len();
        push_media(&mut out, message.images, message.audios);
        out.push_str(&text);
        let has_content = !out[start..].trim().is_empty();

        let next_role = rest[i + 1..].iter().map(|m| m.role).find(|&r| r != Role::Tool);
        let continues_into_next = is_model
            && next_role == Some(Role::Assistant)
            && (message.tool_calls.is_empty() || responded);
        if ending == Ending::ToolCall {
            out.push_str("<|tool_response>");
        } else if continues_into_next || (responded && !has_content && next_role.is_none()) {
            // The model turn goes on (with the next message, or with generation).
        } else {
            out.push_str("<turn|>\n");
        }
        prev_role = Some(message.role);
    }

    if options.add_generation_prompt {
        match ending {
            Ending::Text => {
                out.push_str("<|turn>model\n");
                if large && !options.thinking {
                    out.push_str("<|channel>thought\n<channel|>");
                }
            }
            Ending::ToolResponse if options.thinking => out.push_str("<|channel>thought\n"),
            Ending::ToolResponse | Ending::ToolCall => {}
        }
    }
    Ok(out)
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "model",
        Role::Tool => "tool",
    }
}

fn push_media(out: &mut String, images: usize, audios: usize) {
    out.extend(std::iter::repeat_n(IMAGE, images));
    out.extend(std::iter::repeat_n(AUDIO, audios));
}

/// One tool result to render, with the media attached to its tool message.
struct Rendered<'a> {
    response: Cow<'a, ToolResponse>,
    images: usize,
    audios: usize,
}

/// The results that belong in message `i`'s turn: its own `tool_responses`, or else, when
/// it made calls, those of the tool messages that follow it.
fn responses_for(messages: &[Message], i: usize) -> Vec<Rendered<'_>> {
    let message = &messages[i];
    if !message.tool_responses.is_empty() {
        return message
            .tool_responses
            .iter()
            .map(|r| Rendered { response: Cow::Borrowed(r), images: 0, audios: 0 })
            .collect();
    }
    if message.tool_calls.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let followers = messages[i + 1..].iter().take_while(|m| m.role == Role::Tool);
    for (position, tool) in followers.enumerate() {
        if tool.tool_responses.is_empty() {
            // Content only: attribute it to the call at the same position.
            let name = message.tool_calls.get(position).map_or("unknown", |c| c.name.as_str());
            let response = ToolResponse {
                name: name.to_string(),
                response: serde_json::Value::String(tool.content.clone()),
            };
            out.push(Rendered {
                response: Cow::Owned(response),
                images: tool.images,
                audios: tool.audios,
            });
        } else {
            let last = tool.tool_responses.len() - 1;
            for (k, response) in tool.tool_responses.iter().enumerate() {
                // A tool message's media follow its last result.
                let (images, audios) = if k == last { (tool.images, tool.audios) } else { (0, 0) };
                out.push(Rendered { response: Cow::Borrowed(response), images, audios });
            }
        }
    }
    out
}

/// The template's `strip_thinking`: drops every `<|channel>…<channel|>` span (and an
/// unclosed `<|channel>…` tail), then trims.
fn strip_thinking(text: &str) -> String {
    let mut out = String::new();
    for part in text.split(CHANNEL_CLOSE) {
        out.push_str(part.split(CHANNEL_OPEN).next().unwrap_or(""));
    }
    out.trim().to_string()
}
