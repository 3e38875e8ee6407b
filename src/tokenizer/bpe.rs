//! Gemma 4 BPE: rank-ordered merges over characters, with SentencePiece-style spaces.
//!
//! Per fragment (text between special tokens; there is no pre-tokenizer regex): spaces are
//! already `▁`. If the whole fragment is a token, it is emitted as is (Hugging Face's
//! `ignore_merges`, Ollama's short cut; it matters for the few tokens merges cannot build).
//! Otherwise adjacent pieces merge by the lowest rank, rank being the index of `"left right"`
//! in `tokenizer.ggml.merges`, and only if the merged piece is a token. See gemma4_spec.md §5.

use std::cmp::Reverse;
use std::collections::HashMap;

use super::merge::{Symbol, merge_word};
use super::vocab::Vocab;
use crate::gguf::MetaValue;
use crate::{Error, Result};

pub const KEY_MERGES: &str = "tokenizer.ggml.merges";

pub struct Bpe {
    /// (left id, right id) → (rank, merged id).
    ranks: HashMap<(u32, u32), (u32, u32)>,
}

impl Bpe {
    /// Merges whose pieces or result are not tokens can never apply and are dropped.
    pub fn new(vocab: &Vocab, merges: &[MetaValue]) -> Result<Bpe> {
        let mut ranks = HashMap::with_capacity(merges.len());
        for (rank, m) in merges.iter().enumerate() {
            let (left, right) = m
                .as_str()
                .and_then(|s| s.split_once(' '))
                .ok_or_else(|| Error::Gguf(format!("metadata {KEY_MERGES}[{rank}] is not a string \"left right\"")))?;
            let ids = (vocab.id(left), vocab.id(right), vocab.id(&[left, right].concat()));
            if let (Some(l), Some(r), Some(merged)) = ids {
                // A repeated pair keeps its last rank, as Hugging Face's and Ollama's maps do.
                ranks.insert((l, r), (rank as u32, merged));
            }
        }
        Ok(Bpe { ranks })
    }

    pub fn encode(&self, vocab: &Vocab, unk: Option<u32>, fragment: &str, out: &mut Vec<u32>) {
        if let Some(id) = vocab.id(fragment) {
            out.push(id);
            return;
        }
        let pair = |_: &str, l: &Symbol, r: &Symbol| {
            let &(rank, merged) = self.ranks.get(&(l.id?, r.id?))?;
            Some((Reverse(rank), merged))
        };
        merge_word(vocab, unk, fragment, pair, out);
    }
}
