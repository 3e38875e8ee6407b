//! Tokenizer parity with Hugging Face `tokenizers` on the real Gemma 3 vocabulary, as
//! SentencePiece-BPE (Gemma 3) and as merge-list BPE (Gemma 4 layout).
//!
//! Fixtures and expected ids come from scripts/fixtures/tokenizer_refs.py.

use std::path::PathBuf;
use std::sync::OnceLock;

use proptest::prelude::*;
use rullama::Error;
use rullama::gguf::{Gguf, GgufFile, GgufWriter};
use rullama::tokenizer::{Algorithm, StreamDecoder, TokenType, Tokenizer};
use serde::Deserialize;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn load(name: &str) -> Tokenizer {
    let file = GgufFile::open(fixture(name)).expect("fixture opens");
    Tokenizer::from_gguf(&file).expect("fixture has a tokenizer")
}

fn gemma3() -> &'static Tokenizer {
    static T: OnceLock<Tokenizer> = OnceLock::new();
    T.get_or_init(|| load("gemma3_vocab.gguf"))
}

fn gemma4style() -> &'static Tokenizer {
    static T: OnceLock<Tokenizer> = OnceLock::new();
    T.get_or_init(|| load("gemma4style_vocab.gguf"))
}

#[derive(Deserialize)]
struct Case {
    text: String,
    ids: Vec<u32>,
    decoded: String,
}

#[derive(Deserialize)]
struct DecodeCase {
    ids: Vec<u32>,
    text: String,
}

#[derive(Deserialize)]
struct WholeFragmentCase {
    text: String,
    ids: Vec<u32>,
    ids_without_whole_fragment_hit: Vec<u32>,
}

#[derive(Deserialize)]
struct Refs {
    cases: Vec<Case>,
    #[serde(default)]
    decode_cases: Vec<DecodeCase>,
    #[serde(default)]
    whole_fragment_cases: Vec<WholeFragmentCase>,
}

fn refs(name: &str) -> Refs {
    let text = std::fs::read_to_string(fixture(name)).expect("refs file");
    serde_json::from_str(&text).expect("refs parse")
}

/// Every case: encode equals the reference ids, and decode equals the reference decode.
/// Failures are collected so one run shows all of them.
fn check_cases(tok: &Tokenizer, cases: &[Case]) {
    let mut failures = Vec::new();
    for c in cases {
        let ids = tok.encode(&c.text);
        if ids != c.ids {
            failures.push(format!("encode {:?}: got {:?}, want {:?}", c.text, ids, c.ids));
        }
        let decoded = tok.decode(&c.ids).expect("reference ids are in the vocabulary");
        if decoded != c.decoded {
            failures.push(format!("decode {:?}: got {:?}, want {:?}", c.ids, decoded, c.decoded));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases fail:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

/// decode(encode(s)) == s, except for text that spells `▁` or a byte token (`<0x41>`) itself:
/// those decode to a space and to the byte, in the reference as here.
fn check_round_trip(tok: &Tokenizer, cases: &[Case]) {
    let mut checked = 0;
    for c in cases.iter().filter(|c| !c.text.contains('\u{2581}') && !c.text.contains("<0x")) {
        assert_eq!(tok.decode(&tok.encode(&c.text)).unwrap(), c.text);
        checked += 1;
    }
    assert!(checked * 10 >= cases.len() * 9, "only {checked} of {} cases round-trip", cases.len());
}

#[test]
fn gemma3_is_sentencepiece_and_matches_hf() {
    let tok = gemma3();
    assert_eq!(tok.algorithm(), Algorithm::SentencePiece);
    let r = refs("gemma3_tokenizer_refs.json");
    assert!(r.cases.len() >= 300, "{} cases", r.cases.len());
    check_cases(tok, &r.cases);
    check_round_trip(tok, &r.cases);
}

#[test]
fn gemma3_decode_matches_hf() {
    let tok = gemma3();
    let r = refs("gemma3_tokenizer_refs.json");
    assert!(r.decode_cases.len() >= 50);
    for c in &r.decode_cases {
        assert_eq!(tok.decode(&c.ids).unwrap(), c.text, "ids {:?}", c.ids);
    }
}

#[test]
fn gemma4style_is_bpe_and_matches_hf() {
    let tok = gemma4style();
    assert_eq!(tok.algorithm(), Algorithm::Bpe);
    let r = refs("gemma4style_tokenizer_refs.json");
    assert!(r.cases.len() >= 300, "{} cases", r.cases.len());
    check_cases(tok, &r.cases);
    check_round_trip(tok, &r.cases);
}

/// The few tokens merges cannot build are emitted whole when they are a whole fragment; the
/// SentencePiece path has no such short cut and gives the merge result.
#[test]
fn whole_fragment_hit() {
    let r = refs("gemma4style_tokenizer_refs.json");
    assert!(!r.whole_fragment_cases.is_empty());
    for c in &r.whole_fragment_cases {
        assert_eq!(gemma4style().encode(&c.text), c.ids, "{:?}", c.text);
        assert_eq!(c.ids.len(), 1, "{:?}", c.text);
        assert_eq!(gemma3().encode(&c.text), c.ids_without_whole_fragment_hit, "{:?}", c.text);
    }
}

/// gemma4_spec.md §5 parity vectors: Hugging Face ids on the real Gemma 4 vocabulary, which
/// shares its ordinary pieces with Gemma 3.
#[test]
fn gemma4_spec_table() {
    let table: &[(&str, &[u32])] = &[
        ("hello", &[23391]),
        ("hello world", &[23391, 1902]),
        (" hello", &[29104]),
        ("  hello", &[138, 23391]),
        ("   ", &[139]),
        ("\n\n", &[108]),
        ("\t\t", &[255969]),
        ("12345", &[236770, 236778, 236800, 236812, 236810]),
        ("Hello, World!", &[9259, 236764, 4109, 236888]),
        ("你好世界", &[144626, 12811]),
    ];
    for &(text, want) in table {
        assert_eq!(gemma4style().encode(text), want, "{text:?}");
        assert_eq!(gemma4style().decode(want).unwrap(), text);
    }
}

#[test]
fn metadata_ids_and_lookups() {
    for tok in [gemma3(), gemma4style()] {
        assert_eq!(tok.vocab_size(), 262144);
        assert_eq!((tok.bos_id(), tok.eos_id()), (Some(2), Some(1)));
        assert_eq!(tok.eot_id(), tok.id_of("<end_of_turn>"));
        assert_eq!(tok.eot_id(), Some(106));
        assert_eq!(tok.eog_ids(), &[1, 106]);
        assert!(tok.is_eog(106) && tok.is_eog(1) && !tok.is_eog(2));
        assert_eq!(tok.id_of("<start_of_turn>"), Some(105));
        assert_eq!(tok.token_str(105), Some("<start_of_turn>"));
        assert_eq!(tok.token_type(105), Some(TokenType::Control));
        assert_eq!(tok.token_type(107), Some(TokenType::UserDefined));
        assert_eq!(tok.token_type(238), Some(TokenType::Byte));
        assert_eq!(tok.token_str(238), Some("<0x00>"));
        assert_eq!(tok.token_str(262144), None);
        assert_eq!(tok.id_of("not a token at all"), None);
        assert!(tok.add_bos());
        assert_eq!(tok.encode_with_bos("hello"), [2, 23391]);
        assert_eq!(tok.encode(""), Vec::<u32>::new());
    }
}

/// Text whose characters go through byte fallback (not in the vocabulary): emoji, rare CJK.
const STREAM_TEXTS: &[&str] = &[
    "\u{1F9CC} troll \u{1FAE9} face",
    "rare CJK \u{20000}\u{20001}\u{2A6A5}!",
    "mixed: 你好 \u{1F600} \u{13000} é \u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}",
    "<start_of_turn>model\n\u{20000}<end_of_turn>",
];

fn stream(tok: &Tokenizer, ids: &[u32]) -> Vec<String> {
    let mut sd = StreamDecoder::new();
    let mut chunks: Vec<String> = ids.iter().map(|&id| sd.push(tok, id).unwrap()).collect();
    chunks.push(sd.finish());
    chunks
}

#[test]
fn stream_decoder_emits_whole_characters() {
    let tok = gemma3();
    for text in STREAM_TEXTS {
        let ids = tok.encode(text);
        let byte_tokens = ids.iter().filter(|&&id| tok.token_type(id) == Some(TokenType::Byte)).count();
        assert!(byte_tokens >= 4, "{text:?} should use byte fallback");
        let chunks = stream(tok, &ids);
        assert_eq!(chunks.concat(), tok.decode(&ids).unwrap());
        assert_eq!(chunks.concat(), *text);
        // No chunk holds a replacement character: no character was ever split.
        assert!(chunks.iter().all(|c| !c.contains('\u{FFFD}')), "{chunks:?}");
    }
}

#[test]
fn stream_decoder_holds_back_partial_characters() {
    let tok = gemma3();
    // U+20000 has no token: four byte tokens F0 A0 80 80.
    let ids = tok.encode("\u{20000}");
    assert_eq!(ids.len(), 4);
    let mut sd = StreamDecoder::new();
    for &id in &ids[..3] {
        assert_eq!(sd.push(tok, id).unwrap(), "");
        assert!(sd.has_pending());
    }
    assert_eq!(sd.push(tok, ids[3]).unwrap(), "\u{20000}");
    assert!(!sd.has_pending());
    // A character cut off at the end of the stream becomes one replacement character.
    let mut sd = StreamDecoder::new();
    assert_eq!(sd.push(tok, ids[0]).unwrap(), "");
    assert_eq!(sd.finish(), "\u{FFFD}");
    assert_eq!(tok.decode(&ids[..1]).unwrap(), "\u{FFFD}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    /// Any id sequence, valid UTF-8 or not: the streamed text equals the decode of all ids.
    #[test]
    fn stream_equals_decode(picks in prop::collection::vec((0u8..4, any::<u32>()), 0..24)) {
        let tok = gemma3();
        let ids: Vec<u32> = picks
            .iter()
            .map(|&(kind, r)| match kind {
                // Byte tokens 0x80..0xFF (continuation and lead bytes), and any byte.
                0 => 238 + 0x80 + r % 0x80,
                1 => 238 + r % 256,
                2 => r % 262144,
                _ => 236700 + r % 1000,
            })
            .collect();
        prop_assert_eq!(stream(tok, &ids).concat(), tok.decode(&ids).unwrap());
    }
}

#[test]
fn out_of_range_ids_are_errors() {
    let tok = gemma3();
    assert!(matches!(tok.decode(&[1, 262144]), Err(Error::Input(_))));
    assert!(matches!(tok.decode(&[u32::MAX]), Err(Error::Input(_))));
    let mut sd = StreamDecoder::new();
    assert!(matches!(sd.push(tok, 262144), Err(Error::Input(_))));
}

fn parse(w: &GgufWriter) -> Gguf {
    Gguf::parse(&w.to_bytes()).expect("writer output parses")
}

#[test]
fn missing_or_bad_tokenizer_metadata_is_an_error() {
    let mut w = GgufWriter::new();
    w.set_str("general.architecture", "gemma3");
    let err = Tokenizer::from_gguf(&parse(&w)).unwrap_err();
    assert!(matches!(err, Error::MissingTensor(_)), "{err}");
    assert!(err.to_string().contains("tokenizer.ggml.tokens"), "{err}");

    // Vocabulary but neither merges nor scores: no algorithm applies.
    w.set_str_array("tokenizer.ggml.tokens", &["a", "b"]);
    assert!(matches!(Tokenizer::from_gguf(&parse(&w)), Err(Error::MissingTensor(_))));

    // Arrays that disagree in length with the vocabulary.
    w.set_f32_array("tokenizer.ggml.scores", &[0.0]);
    assert!(matches!(Tokenizer::from_gguf(&parse(&w)), Err(Error::Gguf(_))));
    w.set_f32_array("tokenizer.ggml.scores", &[0.0, -1.0]);
    assert!(Tokenizer::from_gguf(&parse(&w)).is_ok());
    w.set_i32_array("tokenizer.ggml.token_type", &[1, 1, 1]);
    assert!(matches!(Tokenizer::from_gguf(&parse(&w)), Err(Error::Gguf(_))));
    w.set_i32_array("tokenizer.ggml.token_type", &[1, 1]);

    // A special id outside the vocabulary.
    w.set_u32("tokenizer.ggml.bos_token_id", 2);
    assert!(matches!(Tokenizer::from_gguf(&parse(&w)), Err(Error::Gguf(_))));
    w.set_u32("tokenizer.ggml.bos_token_id", 0);

    // A malformed merge entry.
    w.set_str_array("tokenizer.ggml.merges", &["ab"]);
    assert!(matches!(Tokenizer::from_gguf(&parse(&w)), Err(Error::Gguf(_))));
    w.set_str_array("tokenizer.ggml.merges", &["a b"]);
    assert_eq!(Tokenizer::from_gguf(&parse(&w)).unwrap().algorithm(), Algorithm::Bpe);

    // Byte-level (GPT-2 style) vocabularies are a different algorithm.
    w.set_str("tokenizer.ggml.model", "gpt2");
    assert!(matches!(Tokenizer::from_gguf(&parse(&w)), Err(Error::Unsupported(_))));
}
