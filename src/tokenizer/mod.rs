//! Tokenizers built from GGUF metadata: Gemma 4 BPE and Gemma 3 SentencePiece-BPE.
//!
//! Both share the same outline (gemma4_spec.md §5): spaces become `▁` (no pre-tokenizer, no
//! dummy prefix); control and user-defined tokens are split out ([`special`]); each remaining
//! fragment is encoded by the model; characters that end up without a token fall back to
//! `<0xHH>` byte tokens.
//!
//! Special tokens are matched after the space replacement, with spaces in their text read as
//! `▁` too. Gemma 3 stores its whitespace-run tokens (ids 138-167) with real spaces, and this
//! way a run of spaces and a run of literal `▁` both match them, as in SentencePiece and in
//! Hugging Face's tokenizer (llama.cpp matches them only on real spaces). Gemma's other
//! special tokens contain no space, so for them this is the same as matching the raw text.
//!
//! Which model: a GGUF with `tokenizer.ggml.merges` is BPE ([`bpe`]), one without merges but
//! with `tokenizer.ggml.scores` is SentencePiece-BPE ([`spm`]). `tokenizer.ggml.model` does not
//! decide it: Ollama writes "llama" for both Gemma 3 (scores, no merges) and Gemma 4 (merges).

mod bpe;
mod decode;
mod merge;
mod special;
mod spm;
mod vocab;

pub use decode::StreamDecoder;
pub use vocab::TokenType;

use crate::gguf::Gguf;
use crate::{Error, Result};
use bpe::Bpe;
use special::{Piece, SpecialSplitter};
use vocab::Vocab;

const KEY_MODEL: &str = "tokenizer.ggml.model";
const SPACE_MARK: &str = "\u{2581}";

/// The encoding algorithm a tokenizer uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// Rank-ordered merges (Gemma 4).
    Bpe,
    /// Score-ordered merges without a merge list (Gemma 3).
    SentencePiece,
}

enum Model {
    Bpe(Bpe),
    SentencePiece,
}

pub struct Tokenizer {
    vocab: Vocab,
    specials: SpecialSplitter,
    model: Model,
    unk: Option<u32>,
    bos: Option<u32>,
    eos: Option<u32>,
    eot: Option<u32>,
    /// Every id that ends generation.
    eog: Vec<u32>,
    add_bos: bool,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("algorithm", &self.algorithm())
            .field("vocab_size", &self.vocab_size())
            .field("bos", &self.bos)
            .field("eos", &self.eos)
            .field("eot", &self.eot)
            .finish_non_exhaustive()
    }
}

impl Tokenizer {
    pub fn from_gguf(g: &Gguf) -> Result<Tokenizer> {
        if let Some(kind) = g.get_str(KEY_MODEL)
            && !matches!(kind, "llama" | "gemma" | "gemma4")
        {
            return Err(Error::Unsupported(format!(
                "tokenizer type {kind:?} ({KEY_MODEL}); only Gemma's SentencePiece-style tokenizers are supported"
            )));
        }
        let vocab = Vocab::from_gguf(g)?;
        let merges = g.get(bpe::KEY_MERGES).and_then(|m| m.as_array()).filter(|m| !m.is_empty());
        let model = match merges {
            Some(m) => Model::Bpe(Bpe::new(&vocab, m)?),
            None if vocab.has_scores() => Model::SentencePiece,
            None => {
                return Err(Error::MissingTensor(format!(
                    "no usable tokenizer: neither {} nor {} is present",
                    bpe::KEY_MERGES,
                    vocab::KEY_SCORES
                )));
            }
        };

        let id_key = |key: &str| -> Result<Option<u32>> {
            match g.get(key) {
                None => Ok(None),
                Some(v) => match v.as_u32().filter(|&id| (id as usize) < vocab.len()) {
                    Some(id) => Ok(Some(id)),
                    None => Err(Error::Gguf(format!("metadata {key} is not a token id below {}", vocab.len()))),
                },
            }
        };
        let unk = id_key("tokenizer.ggml.unknown_token_id")?;
        let bos = id_key("tokenizer.ggml.bos_token_id")?;
        let eos = id_key("tokenizer.ggml.eos_token_id")?;
        // Gemma 3 files carry no eot key; like llama.cpp, find the end-of-turn token by name.
        let eot = match id_key("tokenizer.ggml.eot_token_id")? {
            Some(id) => Some(id),
            None => ["<turn|>", "<end_of_turn>"].iter().find_map(|t| vocab.id(t)),
        };
        let mut eog: Vec<u32> = eos.into_iter().chain(eot).collect();
        if let Some(ids) = g.get("tokenizer.ggml.eos_token_ids").and_then(|v| v.as_array()) {
            eog.extend(ids.iter().filter_map(|v| v.as_u32()).filter(|&id| (id as usize) < vocab.len()));
        }
        eog.sort_unstable();
        eog.dedup();
        let add_bos = g.get("tokenizer.ggml.add_bos_token").and_then(|v| v.as_bool()).unwrap_or(false);

        let specials = SpecialSplitter::new(vocab.iter_matched_whole().map(|(id, t)| (id, t.replace(' ', SPACE_MARK))));
        Ok(Tokenizer { vocab, specials, model, unk, bos, eos, eot, eog, add_bos })
    }

    /// Token ids of `text`, without BOS. Special tokens written in the text are recognised.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let normalized = text.replace(' ', SPACE_MARK);
        let mut pieces = Vec::new();
        self.specials.split(&normalized, &mut pieces);
        let mut out = Vec::with_capacity(text.len() / 3 + 1);
        for piece in pieces {
            match piece {
                Piece::Token(id) => out.push(id),
                Piece::Text(fragment) => match &self.model {
                    Model::Bpe(bpe) => bpe.encode(&self.vocab, self.unk, fragment, &mut out),
                    Model::SentencePiece => spm::encode(&self.vocab, self.unk, fragment, &mut out),
                },
            }
        }
        out
    }

    /// BOS (when the vocabulary has one) followed by `encode(text)`.
    pub fn encode_with_bos(&self, text: &str) -> Vec<u32> {
        let mut out: Vec<u32> = self.bos.into_iter().collect();
        out.extend(self.encode(text));
        out
    }

    /// The piece of `id` as stored (spaces as `▁`, bytes as `<0xHH>`).
    pub fn token_str(&self, id: u32) -> Option<&str> {
        self.vocab.piece(id)
    }

    pub fn token_type(&self, id: u32) -> Option<TokenType> {
        self.vocab.token_type(id)
    }

    /// The id of a piece, spelled as stored.
    pub fn id_of(&self, piece: &str) -> Option<u32> {
        self.vocab.id(piece)
    }

    pub fn vocab_size(&self) -> usize {
        self.vocab.len()
    }

    pub fn algorithm(&self) -> Algorithm {
        match self.model {
            Model::Bpe(_) => Algorithm::Bpe,
            Model::SentencePiece => Algorithm::SentencePiece,
        }
    }

    pub fn bos_id(&self) -> Option<u32> {
        self.bos
    }

    pub fn eos_id(&self) -> Option<u32> {
        self.eos
    }

    /// End of turn (`<turn|>` in Gemma 4, `<end_of_turn>` in Gemma 3).
    pub fn eot_id(&self) -> Option<u32> {
        self.eot
    }

    /// Ids that end generation: EOS, EOT and `tokenizer.ggml.eos_token_ids`, sorted.
    pub fn eog_ids(&self) -> &[u32] {
        &self.eog
    }

    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.binary_search(&id).is_ok()
    }

    /// Whether the file asks for BOS to be prepended (`tokenizer.ggml.add_bos_token`). Gemma 4
    /// says no: its prompt template writes `<bos>` itself.
    pub fn add_bos(&self) -> bool {
        self.add_bos
    }
}
