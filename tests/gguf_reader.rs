//! GGUF reader: malformed input is an error, never a panic or an out-of-bounds read.
//! Random mutations of a valid file are thrown at the parser (proptest); crash inputs
//! found by the fuzz target are kept in tests/fixtures/gguf_crashes/ and replayed here.

use proptest::prelude::*;
use rullama::gguf::{Gguf, GgmlType, GgufWriter, MetaValue, ValueType};
use rullama::Error;

fn sample_file() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.set_str("general.architecture", "gemma4")
        .set_u32("gemma4.block_count", 2)
        .set_bool_array("gemma4.attention.sliding_window_pattern", &[true, false])
        .set_str_array("tokenizer.ggml.tokens", &["<pad>", "<eos>", "▁hello"])
        .set(
            "nested",
            MetaValue::Array(
                ValueType::Array,
                vec![MetaValue::Array(ValueType::I32, vec![MetaValue::I32(-1), MetaValue::I32(7)])],
            ),
        );
    w.add_f32("a", &[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    w.add_tensor("q", &[32], GgmlType::Q8_0, vec![0u8; 34]).unwrap();
    w.to_bytes()
}

fn gguf_err(r: Result<Gguf, Error>) -> String {
    match r {
        Err(Error::Gguf(m)) => m,
        Err(other) => panic!("expected a GGUF error, got {other}"),
        Ok(_) => panic!("expected a GGUF error, parse succeeded"),
    }
}

#[test]
fn parses_the_sample() {
    let bytes = sample_file();
    let g = Gguf::parse(&bytes).unwrap();
    assert_eq!(g.version, 3);
    assert_eq!(g.architecture(), Some("gemma4"));
    assert_eq!(g.tensors.len(), 2);
    let a = g.tensor("a").unwrap();
    assert_eq!(a.dims, vec![3, 2]);
    assert_eq!(a.n_rows(), 2);
    let data = g.tensor_bytes(&bytes, a);
    let vals: &[f32] = bytemuck::cast_slice(data);
    assert_eq!(vals, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(g.data_offset % 32, 0);
}

#[test]
fn rejects_bad_magic_and_versions() {
    let mut b = sample_file();
    b[0] = b'X';
    assert!(gguf_err(Gguf::parse(&b)).contains("not a GGUF"));
    let mut b = sample_file();
    b[4..8].copy_from_slice(&1u32.to_le_bytes());
    assert!(gguf_err(Gguf::parse(&b)).contains("version 1"));
    let mut b = sample_file();
    b[4..8].copy_from_slice(&3u32.to_be_bytes());
    assert!(gguf_err(Gguf::parse(&b)).contains("big-endian"));
    assert!(gguf_err(Gguf::parse(b"GG")).contains("file ends"));
}

#[test]
fn rejects_truncated_data() {
    let b = sample_file();
    let g = Gguf::parse(&b).unwrap();
    let q = g.tensor("q").unwrap();
    // Trailing padding after the last tensor is optional; cutting into its data is not.
    let cut = &b[..(g.data_offset + q.offset + q.n_bytes - 1) as usize];
    assert!(gguf_err(Gguf::parse(cut)).contains("truncated"));
}

#[test]
fn rejects_huge_counts_without_allocating() {
    let mut b = sample_file();
    b[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(gguf_err(Gguf::parse(&b)).contains("tensor count"));
    let mut b = sample_file();
    b[16..24].copy_from_slice(&(1u64 << 40).to_le_bytes());
    assert!(gguf_err(Gguf::parse(&b)).contains("metadata count"));
}

#[test]
fn rejects_misaligned_and_partial_block_tensors() {
    let mut w = GgufWriter::new();
    w.add_tensor("q", &[32], GgmlType::Q8_0, vec![0u8; 34]).unwrap();
    let mut b = w.to_bytes();
    // The tensor's offset field is the last 8 bytes before the padding of the header.
    let off_pos = 24 + 8 + 1 + 4 + 8 + 4;
    b[off_pos..off_pos + 8].copy_from_slice(&3u64.to_le_bytes());
    assert!(gguf_err(Gguf::parse(&b)).contains("not aligned"));
    let mut b = w.to_bytes();
    let dim_pos = 24 + 8 + 1 + 4;
    b[dim_pos..dim_pos + 8].copy_from_slice(&33u64.to_le_bytes());
    assert!(gguf_err(Gguf::parse(&b)).contains("block size"));
}

#[test]
fn rejects_bad_alignment_key() {
    let mut w = GgufWriter::new();
    w.set_u32("general.alignment", 24);
    assert!(gguf_err(Gguf::parse(&w.to_bytes())).contains("power of two"));
}

#[test]
fn replays_kept_crash_inputs() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gguf_crashes");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).expect("crash corpus directory exists") {
        let bytes = std::fs::read(e.unwrap().path()).unwrap();
        let _ = Gguf::parse(&bytes); // must return, Ok or Err, without panicking
        n += 1;
    }
    assert!(n > 0, "the crash corpus is empty");
}

proptest! {
    // PROPTEST_CASES=200000 for a long fuzzing run; 3000 per CI run.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(3000),
        ..ProptestConfig::default()
    })]

    #[test]
    fn mutated_files_never_panic(edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
                                 cut in any::<prop::sample::Index>()) {
        let mut b = sample_file();
        for (i, v) in edits {
            let i = i.index(b.len());
            b[i] = v;
        }
        let keep = cut.index(b.len() + 1);
        b.truncate(keep.max(b.len() * 3 / 4));
        if let Ok(g) = Gguf::parse(&b) {
            for t in &g.tensors {
                // Every accepted tensor must be readable in full.
                prop_assert_eq!(g.tensor_bytes(&b, t).len() as u64, t.n_bytes);
            }
        }
    }

    #[test]
    fn random_bytes_never_panic(tail in prop::collection::vec(any::<u8>(), 0..256)) {
        let mut b = b"GGUF\x03\0\0\0".to_vec();
        b.extend(tail);
        let _ = Gguf::parse(&b);
    }
}
