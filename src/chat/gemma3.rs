//! Gemma 3 prompt format, following the model's published chat template:
//!
//! ```text
//! <bos><start_of_turn>user\n{system}\n\n{text}<end_of_turn>\n
//! <start_of_turn>model\n{text}<end_of_turn>\n
//! <start_of_turn>model\n
//! ```
//!
//! There is no system turn: a leading system message is prefixed, untrimmed and followed by
//! a blank line, to the first turn. Message text is trimmed. As in the template, user
//! messages must sit at even positions (after the system message) and only there; other
//! roles render under their own name (`assistant` as `model`). Gemma 3 has no thinking mode
//! (the option is ignored) and no tool format (tools are refused).

use super::{Message, RenderOptions, Role};
use crate::{Error, Result};

const IMAGE: &str = "<start_of_image>";

pub(super) fn render(messages: &[Message], options: &RenderOptions) -> Result<String> {
    if !options.tools.is_empty() {
        return Err(Error::Input("Gemma 3 models cannot call tools".into()));
    }
    let (prefix, rest) = match messages.split_first() {
        Some((first, rest)) if first.role == Role::System => {
            (format!("{}\n\n", first.content), rest)
        }
        _ => (String::new(), messages),
    };

    let mut out = String::from("<bos>");
    for (i, message) in rest.iter().enumerate() {
        if (message.role == Role::User) != (i % 2 == 0) {
            return Err(Error::Input(format!(
                "Gemma 3 needs user and assistant messages to alternate, starting with user \
                 (message {} is {:?})",
                i + 1,
                message.role
            )));
        }
        if !message.tool_calls.is_empty() || !message.tool_responses.is_empty() {
            return Err(Error::Input("Gemma 3 models cannot call tools".into()));
        }
        if message.audios > 0 {
            return Err(Error::Input("Gemma 3 models do not take audio".into()));
        }
        let role = match message.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "model",
            Role::Tool => "tool",
        };
        out.push_str("<start_of_turn>");
        out.push_str(role);
        out.push('\n');
        if i == 0 {
            out.push_str(&prefix);
        }
        out.extend(std::iter::repeat_n(IMAGE, message.images));
        out.push_str(message.content.trim());
        out.push_str("<end_of_turn>\n");
    }
    if options.add_generation_prompt {
        out.push_str("<start_of_turn>model\n");
    }
    Ok(out)
}
