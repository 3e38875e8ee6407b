//! Decoding ids to text (gemma4_spec.md §5): a piece of the exact form `<0xHH>` is that raw
//! byte, any other piece is its text with `▁` turned back into a space. Every token decodes
//! to its text, control tokens included, so `decode(encode(s)) == s`.
//!
//! Bytes are joined first and then read as UTF-8, so a character spelled by several byte
//! tokens comes out whole. Bytes that cannot form UTF-8 become U+FFFD by Rust's lossy rule
//! (one per maximal invalid subsequence); the streaming decoder applies the same rule
//! incrementally, so streamed text always equals the decode of all ids. (Hugging Face writes
//! one U+FFFD per byte token of an invalid run instead; valid text is identical.)

use super::Tokenizer;
use super::vocab::piece_byte;
use crate::{Error, Result};

const SPACE_MARK: char = '\u{2581}';

impl Tokenizer {
    /// Append the bytes token `id` stands for.
    fn push_token_bytes(&self, id: u32, out: &mut Vec<u8>) -> Result<()> {
        let piece = self.vocab.piece(id).ok_or_else(|| {
            Error::Input(format!("token id {id} is outside the vocabulary ({} tokens)", self.vocab.len()))
        })?;
        match piece_byte(piece) {
            Some(b) => out.push(b),
            None => {
                for (i, part) in piece.split(SPACE_MARK).enumerate() {
                    if i > 0 {
                        out.push(b' ');
                    }
                    out.extend_from_slice(part.as_bytes());
                }
            }
        }
        Ok(())
    }

    /// The text of `ids`. Fails on an id outside the vocabulary.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        let mut bytes = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            self.push_token_bytes(id, &mut bytes)?;
        }
        Ok(match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }
}

/// Turns ids arriving one at a time into text, holding back the bytes of a character that
/// is not complete yet (byte-fallback tokens spell one character over several tokens).
#[derive(Debug, Default, Clone)]
pub struct StreamDecoder {
    pending: Vec<u8>,
}

impl StreamDecoder {
    pub fn new() -> StreamDecoder {
        StreamDecoder::default()
    }

    /// Add one token; returns the text that is now complete (possibly empty).
    pub fn push(&mut self, tok: &Tokenizer, id: u32) -> Result<String> {
        tok.push_token_bytes(id, &mut self.pending)?;
        Ok(self.drain(false))
    }

    /// End of stream: whatever is still held back, an incomplete character as U+FFFD.
    pub fn finish(&mut self) -> String {
        self.drain(true)
    }

    /// Whether bytes of an incomplete character are being held back.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    fn drain(&mut self, at_end: bool) -> String {
        let mut text = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    text.push_str(s);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    text.push_str(std::str::from_utf8(valid).unwrap_or_default());
                    match e.error_len() {
                        // Invalid bytes: replaced exactly as String::from_utf8_lossy does.
                        Some(n) => {
                            text.push(char::REPLACEMENT_CHARACTER);
                            rest = &after[n..];
                        }
                        // A character cut short by the end of the input: wait for more.
                        None if !at_end => {
                            rest = after;
                            break;
                        }
                        None => {
                            text.push(char::REPLACEMENT_CHARACTER);
                            rest = &[];
                            break;
                        }
                    }
                }
            }
        }
        let keep = rest.len();
        self.pending.drain(..self.pending.len() - keep);
        text
    }
}
