//! Gemma 3 SentencePiece-BPE: scores instead of merges.
//!
//! Per fragment (spaces already `▁`, no dummy prefix since Gemma sets add_space_prefix=false):
//! start from characters and repeatedly merge the adjacent pair whose concatenation is a token
//! with the highest score (ties: leftmost). Any token may be formed this way, including a
//! character the vocabulary lacks on its own, as in SentencePiece and llama.cpp. Characters
//! left unmerged that are not tokens fall back to `<0xHH>` bytes.

use super::merge::{Symbol, merge_word};
use super::vocab::Vocab;

/// A score with a total order (scores are finite in practice; NaN sorts consistently anyway).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Score(f32);

impl Eq for Score {}
impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Score {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

pub fn encode(vocab: &Vocab, unk: Option<u32>, fragment: &str, out: &mut Vec<u32>) {
    let pair = |word: &str, l: &Symbol, r: &Symbol| {
        let id = vocab.id(&word[l.start..r.end])?;
        Some((Score(vocab.score(id)), id))
    };
    merge_word(vocab, unk, fragment, pair, out);
}
