//! Streaming parser for Gemma 4 output (spec §9.3): splits generated text into answer
//! content, thinking, and tool calls.
//!
//! - `<|channel>thought\n … <channel|>` is thinking; its text is trimmed.
//! - `<|tool_call>call:NAME{…}<tool_call|>` is a tool call. Its end is found by matching
//!   braces outside strings, so a missing `<tool_call|>` is tolerated; stray `<tool_call|>`
//!   tags after a call are dropped. A call that cannot be read comes back as content, tags
//!   included, so nothing the model wrote is lost.
//! - `<turn|>` and `<|tool_response>` end the model's turn; the rest is ignored.
//! - Content before a tag loses its trailing whitespace, and content after a thought or a
//!   call loses its leading whitespace. Text without tags passes through unchanged.
//!
//! Thinking is reported whether or not it was asked for; the caller decides what to show.
//! Use one parser per generated message.
//!
//! Tags may be split across chunks at any byte that is a char boundary; the events do not
//! depend on how the text was chunked (apart from how they are split into pieces).

use super::ToolCall;
use super::tool_format::{STRING_DELIMITER, parse_tool_call};

const CHANNEL_OPEN: &str = "<|channel>";
const CHANNEL_CLOSE: &str = "<channel|>";
const CALL_OPEN: &str = "<|tool_call>";
const CALL_CLOSE: &str = "<tool_call|>";
const TURN_END: &str = "<turn|>";
const RESPONSE_OPEN: &str = "<|tool_response>";
const CHANNEL_NAME: &str = "thought\n";
/// The prompt ends with this when the model is to continue inside a thought.
const OPEN_THOUGHT: &str = "<|channel>thought\n";

#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    Content(String),
    Thinking(String),
    ToolCall(ToolCall),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Answer text. `trim_leading` drops whitespace right after a thought or a call.
    Content { trim_leading: bool },
    /// Inside a thought. `name_seen`: the `thought\n` channel name has been dealt with;
    /// `started`: leading whitespace is behind us.
    Thinking { name_seen: bool, started: bool },
    /// After `<|tool_call>`, collecting the call.
    ToolCall,
    /// Right after a call: stray `<tool_call|>` and whitespace are dropped.
    AfterToolCall,
    /// The turn ended; everything else is ignored.
    Ended,
}

#[derive(Clone, Debug)]
pub struct Parser {
    state: State,
    buf: String,
}

impl Default for Parser {
    fn default() -> Self {
        Self::new()
    }
}

/// How a scan of the buffered text ends.
enum Step {
    /// Nothing more can be decided until more text arrives.
    Pause,
    /// The state changed; scan again.
    Again,
}

impl Parser {
    /// A parser for output that starts as plain content.
    pub fn new() -> Self {
        Parser { state: State::Content { trim_leading: false }, buf: String::new() }
    }

    /// A parser for output that continues `prompt`: if the prompt leaves a thought open
    /// (Gemma 4 with thinking on, after tool results), output starts inside that thought.
    pub fn for_prompt(prompt: &str) -> Self {
        let mut parser = Self::new();
        if prompt.ends_with(OPEN_THOUGHT) {
            parser.state = State::Thinking { name_seen: true, started: false };
        }
        parser
    }

    /// Feeds the next piece of generated text and returns the events it completes.
    pub fn feed(&mut self, chunk: &str) -> Vec<Event> {
        self.buf.push_str(chunk);
        self.drain(false)
    }

    /// Ends the stream: flushes held-back text and any unfinished thought or call.
    pub fn finish(&mut self) -> Vec<Event> {
        let events = self.drain(true);
        self.buf.clear();
        events
    }

    fn drain(&mut self, finishing: bool) -> Vec<Event> {
        let mut events = Vec::new();
        loop {
            let step = match self.state {
                State::Content { trim_leading } => {
                    self.content(trim_leading, finishing, &mut events)
                }
                State::Thinking { name_seen, started } => {
                    self.thinking(name_seen, started, finishing, &mut events)
                }
                State::ToolCall => self.tool_call(finishing, &mut events),
                State::AfterToolCall => self.after_tool_call(finishing),
                State::Ended => {
                    self.buf.clear();
                    Step::Pause
                }
            };
            if let Step::Pause = step {
                break;
            }
        }
        events
    }

    fn content(&mut self, trim_leading: bool, finishing: bool, events: &mut Vec<Event>) -> Step {
        if trim_leading {
            trim_start_in_place(&mut self.buf);
            if self.buf.is_empty() {
                return Step::Pause;
            }
            self.state = State::Content { trim_leading: false };
        }
        const TAGS: [&str; 4] = [CHANNEL_OPEN, CALL_OPEN, TURN_END, RESPONSE_OPEN];
        if let Some((at, tag)) = first_tag(&self.buf, &TAGS) {
            push(events, Event::Content(self.buf[..at].trim_end().to_string()));
            self.buf.drain(..at + tag.len());
            self.state = match tag {
                CHANNEL_OPEN => State::Thinking { name_seen: false, started: false },
                CALL_OPEN => State::ToolCall,
                _ => State::Ended,
            };
            return Step::Again;
        }
        let keep = if finishing { 0 } else { held_back(&self.buf, &TAGS) };
        let text: String = self.buf.drain(..self.buf.len() - keep).collect();
        push(events, Event::Content(text));
        Step::Pause
    }

    fn thinking(
        &mut self,
        name_seen: bool,
        started: bool,
        finishing: bool,
        events: &mut Vec<Event>,
    ) -> Step {
        if !name_seen {
            if self.buf.starts_with(CHANNEL_NAME) {
                self.buf.drain(..CHANNEL_NAME.len());
            } else if !finishing && CHANNEL_NAME.starts_with(self.buf.as_str()) {
                return Step::Pause;
            }
            // Any other channel name stays part of the thought.
        }
        if !started {
            trim_start_in_place(&mut self.buf);
            if self.buf.is_empty() {
                self.state = State::Thinking { name_seen: true, started: false };
                return Step::Pause;
            }
        }
        self.state = State::Thinking { name_seen: true, started: true };
        const TAGS: [&str; 4] = [CHANNEL_CLOSE, CALL_OPEN, TURN_END, RESPONSE_OPEN];
        if let Some((at, tag)) = first_tag(&self.buf, &TAGS) {
            push(events, Event::Thinking(self.buf[..at].trim_end().to_string()));
            self.buf.drain(..at + tag.len());
            self.state = match tag {
                CHANNEL_CLOSE => State::Content { trim_leading: true },
                // A call before the thought was closed ends the thought.
                CALL_OPEN => State::ToolCall,
                _ => State::Ended,
            };
            return Step::Again;
        }
        let keep = if finishing {
            self.buf.len() - self.buf.trim_end().len()
        } else {
            held_back(&self.buf, &TAGS)
        };
        let text: String = self.buf.drain(..self.buf.len() - keep).collect();
        push(events, Event::Thinking(text));
        Step::Pause
    }

    fn tool_call(&mut self, finishing: bool, events: &mut Vec<Event>) -> Step {
        let Some(end) = find_call_end(&self.buf, finishing) else { return Step::Pause };
        let parsed = parse_tool_call(&self.buf[..end.body]).or_else(|err| match end.alternative {
            Some(body) => parse_tool_call(&self.buf[..body]),
            None => Err(err),
        });
        match parsed {
            Ok(call) => push(events, Event::ToolCall(call)),
            Err(_) => {
                push(events, Event::Content(format!("{CALL_OPEN}{}", &self.buf[..end.resume])))
            }
        }
        self.buf.drain(..end.resume);
        self.state = State::AfterToolCall;
        Step::Again
    }

    fn after_tool_call(&mut self, finishing: bool) -> Step {
        loop {
            trim_start_in_place(&mut self.buf);
            if !self.buf.starts_with(CALL_CLOSE) {
                break;
            }
            self.buf.drain(..CALL_CLOSE.len());
        }
        if self.buf.is_empty() || (!finishing && CALL_CLOSE.starts_with(self.buf.as_str())) {
            return Step::Pause;
        }
        self.state = State::Content { trim_leading: false };
        Step::Again
    }
}

/// Appends an event, merging it into the previous one of the same kind; empty text is
/// dropped.
fn push(events: &mut Vec<Event>, event: Event) {
    match (events.last_mut(), event) {
        (_, Event::Content(t) | Event::Thinking(t)) if t.is_empty() => {}
        (Some(Event::Content(prev)), Event::Content(t)) => prev.push_str(&t),
        (Some(Event::Thinking(prev)), Event::Thinking(t)) => prev.push_str(&t),
        (_, event) => events.push(event),
    }
}

fn trim_start_in_place(s: &mut String) {
    let cut = s.len() - s.trim_start().len();
    s.drain(..cut);
}

/// The earliest complete tag in `s`.
fn first_tag<'t>(s: &str, tags: &[&'t str]) -> Option<(usize, &'t str)> {
    tags.iter().filter_map(|&t| s.find(t).map(|at| (at, t))).min_by_key(|&(at, _)| at)
}

/// Bytes at the end of `s` that must wait for more text: a partial tag, and the whitespace
/// before it (which is dropped if the tag completes).
fn held_back(s: &str, tags: &[&str]) -> usize {
    let partial = tags
        .iter()
        .flat_map(|t| (1..t.len()).rev().find(|&k| s.ends_with(&t[..k])))
        .max()
        .unwrap_or(0);
    // Tags are ASCII, so `len - partial` is a char boundary.
    let before = &s[..s.len() - partial];
    partial + (before.len() - before.trim_end().len())
}

/// Where a tool call ends in the buffered text after `<|tool_call>`.
struct CallEnd {
    /// Length of the call body (`call:NAME{...}`).
    body: usize,
    /// Another body length to try if that one cannot be read.
    alternative: Option<usize>,
    /// Bytes consumed, including a closing tag.
    resume: usize,
}

/// Scans a call body. The call ends when its argument braces balance (the closing tag is
/// then optional), at a `<tool_call|>` outside strings, or before a tag that cannot be part
/// of a call. Returns None while that cannot be decided yet.
fn find_call_end(s: &str, finishing: bool) -> Option<CallEnd> {
    let bytes = s.as_bytes();
    let mut close_in_string = None;
    let mut in_delimited = false;
    let mut in_quotes = false;
    let mut escaped = false;
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        // Byte-wise: tags are ASCII, and an ASCII byte is never part of a longer char.
        let rest = &bytes[i..];
        let at = |tag: &str| rest.starts_with(tag.as_bytes());
        if !in_quotes && at(STRING_DELIMITER) {
            in_delimited = !in_delimited;
            i += STRING_DELIMITER.len();
            continue;
        }
        if at(CALL_CLOSE) {
            if in_delimited || in_quotes {
                close_in_string.get_or_insert(i);
            } else {
                let resume = i + CALL_CLOSE.len();
                return Some(CallEnd { body: i, alternative: close_in_string, resume });
            }
            i += CALL_CLOSE.len();
            continue;
        }
        if in_delimited {
            i += 1;
            continue;
        }
        if in_quotes {
            match bytes[i] {
                b'\\' if !escaped => escaped = true,
                b'"' if !escaped => in_quotes = false,
                _ => escaped = false,
            }
            i += 1;
            continue;
        }
        if [CALL_OPEN, TURN_END, RESPONSE_OPEN, CHANNEL_OPEN].into_iter().any(at) {
            return Some(CallEnd { body: i, alternative: close_in_string, resume: i });
        }
        match bytes[i] {
            b'"' => {
                in_quotes = true;
                escaped = false;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' if depth > 0 => {
                depth -= 1;
                if depth == 0 && bytes[i] == b'}' {
                    return args_closed(s, i + 1, finishing, close_in_string);
                }
            }
            _ => {}
        }
        i += 1;
    }
    // Cut off unfinished. A close tag that seemed to sit inside a string most likely ended
    // the call (with that string left unclosed), so try the text before it first.
    finishing.then_some(match close_in_string {
        Some(at) => CallEnd { body: at, alternative: Some(s.len()), resume: s.len() },
        None => CallEnd { body: s.len(), alternative: None, resume: s.len() },
    })
}

/// The arguments closed at `end`; take a closing tag if one follows.
fn args_closed(
    s: &str,
    end: usize,
    finishing: bool,
    close_in_string: Option<usize>,
) -> Option<CallEnd> {
    let after = &s[end..];
    let gap = after.len() - after.trim_start().len();
    let next = &after[gap..];
    if next.starts_with(CALL_CLOSE) {
        let resume = end + gap + CALL_CLOSE.len();
        return Some(CallEnd { body: end, alternative: close_in_string, resume });
    }
    if !finishing && CALL_CLOSE.starts_with(next) {
        return None;
    }
    Some(CallEnd { body: end, alternative: close_in_string, resume: end })
}
