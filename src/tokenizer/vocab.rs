//! The token table of a GGUF tokenizer: pieces, their types and scores, and the lookups
//! built once at load (piece → id, byte → byte-fallback token).

use std::collections::HashMap;

use crate::gguf::{Gguf, MetaValue};
use crate::{Error, Result};

pub const KEY_TOKENS: &str = "tokenizer.ggml.tokens";
pub const KEY_TYPES: &str = "tokenizer.ggml.token_type";
pub const KEY_SCORES: &str = "tokenizer.ggml.scores";

/// `tokenizer.ggml.token_type` values (llama.cpp's numbering, written by Ollama's converter too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenType {
    Normal,
    Unknown,
    /// Special tokens such as `<bos>` or `<start_of_turn>`.
    Control,
    /// Added tokens matched whole in the text, such as `\n\n` or `<table>` in Gemma.
    UserDefined,
    Unused,
    /// `<0xHH>` byte-fallback tokens.
    Byte,
}

impl TokenType {
    fn from_gguf(v: i64) -> TokenType {
        match v {
            2 => TokenType::Unknown,
            3 => TokenType::Control,
            4 => TokenType::UserDefined,
            5 => TokenType::Unused,
            6 => TokenType::Byte,
            // 1 is normal; 0 ("undefined") and anything newer are treated as normal, as llama.cpp does.
            _ => TokenType::Normal,
        }
    }

    /// Tokens split out of the text before the model runs.
    pub fn is_matched_whole(self) -> bool {
        matches!(self, TokenType::Control | TokenType::UserDefined)
    }
}

/// `b` as a byte-fallback piece, e.g. `<0x0A>`.
pub fn byte_piece(b: u8) -> String {
    format!("<0x{b:02X}>")
}

/// The byte a piece of the exact form `<0xHH>` stands for.
pub fn piece_byte(piece: &str) -> Option<u8> {
    let hex = piece.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

pub struct Vocab {
    pieces: Vec<String>,
    types: Vec<TokenType>,
    scores: Vec<f32>,
    ids: HashMap<String, u32>,
    byte_ids: [Option<u32>; 256],
}

impl Vocab {
    pub fn from_gguf(g: &Gguf) -> Result<Vocab> {
        let tokens = g.get(KEY_TOKENS).ok_or_else(|| {
            Error::MissingTensor(format!("no tokenizer: the metadata key {KEY_TOKENS} (the vocabulary) is missing"))
        })?;
        let pieces = array(tokens, KEY_TOKENS)?
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<String>>>()
            .ok_or_else(|| Error::Gguf(format!("metadata {KEY_TOKENS} must be an array of strings")))?;
        if pieces.is_empty() || u32::try_from(pieces.len()).is_err() {
            return Err(Error::Gguf(format!("metadata {KEY_TOKENS} has {} entries", pieces.len())));
        }
        let n = pieces.len();

        let types = match g.get(KEY_TYPES) {
            None => vec![TokenType::Normal; n],
            Some(v) => same_len(array(v, KEY_TYPES)?, n, KEY_TYPES)?
                .iter()
                .map(|t| t.as_i64().map(TokenType::from_gguf))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| Error::Gguf(format!("metadata {KEY_TYPES} must be an array of integers")))?,
        };
        let scores = match g.get(KEY_SCORES) {
            None => Vec::new(),
            Some(v) => same_len(array(v, KEY_SCORES)?, n, KEY_SCORES)?
                .iter()
                .map(MetaValue::as_f32)
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| Error::Gguf(format!("metadata {KEY_SCORES} must be an array of numbers")))?,
        };

        let mut ids = HashMap::with_capacity(n);
        let mut byte_ids = [None; 256];
        for (id, piece) in pieces.iter().enumerate() {
            // A repeated piece resolves to its last id, as in llama.cpp and Hugging Face.
            ids.insert(piece.clone(), id as u32);
            if let Some(b) = piece_byte(piece).filter(|&b| *piece == byte_piece(b)) {
                byte_ids[b as usize] = Some(id as u32);
            }
        }
        Ok(Vocab { pieces, types, scores, ids, byte_ids })
    }

    pub fn len(&self) -> usize {
        self.pieces.len()
    }

    pub fn piece(&self, id: u32) -> Option<&str> {
        self.pieces.get(id as usize).map(String::as_str)
    }

    pub fn token_type(&self, id: u32) -> Option<TokenType> {
        self.types.get(id as usize).copied()
    }

    pub fn id(&self, piece: &str) -> Option<u32> {
        self.ids.get(piece).copied()
    }

    pub fn has_scores(&self) -> bool {
        !self.scores.is_empty()
    }

    /// Score of a token (SentencePiece log-probability rank); only valid when `has_scores`.
    pub fn score(&self, id: u32) -> f32 {
        self.scores[id as usize]
    }

    /// Ids and pieces of every control and user-defined token, in id order.
    pub fn iter_matched_whole(&self) -> impl Iterator<Item = (u32, &str)> {
        self.pieces
            .iter()
            .zip(&self.types)
            .enumerate()
            .filter(|(_, (_, t))| t.is_matched_whole())
            .map(|(id, (p, _))| (id as u32, p.as_str()))
    }

    /// Byte fallback for a piece the vocabulary lacks: one `<0xHH>` token per UTF-8 byte.
    /// A byte without a token becomes the unknown token if there is one, else it is dropped.
    pub fn push_bytes(&self, text: &str, unk: Option<u32>, out: &mut Vec<u32>) {
        out.extend(text.bytes().filter_map(|b| self.byte_ids[b as usize].or(unk)));
    }
}

fn array<'a>(v: &'a MetaValue, key: &str) -> Result<&'a [MetaValue]> {
    v.as_array().ok_or_else(|| Error::Gguf(format!("metadata {key} must be an array")))
}

fn same_len<'a>(a: &'a [MetaValue], n: usize, key: &str) -> Result<&'a [MetaValue]> {
    if a.len() != n {
        return Err(Error::Gguf(format!("metadata {key} has {} entries but {KEY_TOKENS} has {n}", a.len())));
    }
    Ok(a)
}
