//! CPU dequantization against gguf-py's `gguf.quants.dequantize` (the oracle), using the
//! vectors in tests/fixtures/quant_refs.gguf (made by scripts/fixtures/quant_refs.py with
//! gguf-py's own writer, so this also reads a file from an independent writer).

use proptest::prelude::*;
use rullama::Error;
use rullama::gguf::dequant::{dequantize, dequantize_into, is_supported};
use rullama::gguf::{GgmlType, GgufFile};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/quant_refs.gguf");

/// Every type Ollama ships Gemma weights in, in type-table order.
const SUPPORTED: &[GgmlType] = &[
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::BF16,
];

fn fixture() -> GgufFile {
    GgufFile::open(FIXTURE).expect("fixture opens")
}

/// Index and values of the first element whose bits differ (bit equality also tells -0 from +0).
fn first_mismatch(got: &[f32], want: &[f32]) -> Option<(usize, f32, f32)> {
    got.iter().zip(want).enumerate().find(|(_, (g, w))| g.to_bits() != w.to_bits()).map(|(i, (g, w))| (i, *g, *w))
}

#[test]
fn fixture_covers_every_supported_type() {
    let f = fixture();
    let supported: Vec<GgmlType> = GgmlType::all().filter(|&t| is_supported(t)).collect();
    assert_eq!(supported, SUPPORTED);
    for &ty in SUPPORTED {
        let raw = f.view(&format!("{ty}.raw")).unwrap();
        let reference = f.view(&format!("{ty}.ref")).unwrap();
        assert_eq!(raw.info.ty, ty);
        assert_eq!(reference.info.ty, GgmlType::F32);
        assert_eq!(raw.info.dims, reference.info.dims, "{ty}");
        assert!(raw.info.n_rows() > 1, "{ty}: several rows, to test row-by-row use");
    }
}

#[test]
fn bit_exact_with_gguf_py() {
    let f = fixture();
    for &ty in SUPPORTED {
        let raw = f.view(&format!("{ty}.raw")).unwrap();
        let want = f.view(&format!("{ty}.ref")).unwrap().as_f32().unwrap();
        assert!(want.iter().all(|x| x.is_finite()), "{ty}: reference must be NaN-free");
        let got = dequantize(ty, raw.data, raw.info.n_elements as usize).unwrap();
        assert_eq!(got.len(), want.len());
        if let Some((i, g, w)) = first_mismatch(&got, want) {
            panic!("{ty}: element {i} (block {}) is {g:e}, gguf-py gives {w:e}", i / ty.block_elems());
        }
    }
}

#[test]
fn row_by_row_matches_reference() {
    let f = fixture();
    for &ty in SUPPORTED {
        let raw = f.view(&format!("{ty}.raw")).unwrap();
        let want = f.view(&format!("{ty}.ref")).unwrap().as_f32().unwrap();
        let row_len = raw.info.row_len() as usize;
        let mut row = vec![f32::NAN; row_len];
        for r in 0..raw.info.n_rows() {
            dequantize_into(ty, raw.rows(r, r + 1).unwrap(), &mut row).unwrap();
            let want_row = &want[r as usize * row_len..][..row_len];
            assert_eq!(first_mismatch(&row, want_row), None, "{ty} row {r}");
        }
    }
}

#[test]
fn to_f32_uses_the_same_path() {
    let f = fixture();
    let raw = f.view("Q4_K.raw").unwrap();
    let want = f.view("Q4_K.ref").unwrap().as_f32().unwrap();
    assert_eq!(first_mismatch(&raw.to_f32().unwrap(), want), None);
}

#[test]
fn short_buffer_is_an_error() {
    for &ty in SUPPORTED {
        let n = 2 * ty.block_elems();
        let data = vec![0u8; 2 * ty.block_bytes() - 1];
        assert!(matches!(dequantize(ty, &data, n), Err(Error::Input(_))), "{ty}");
        let mut out = vec![0f32; n];
        assert!(matches!(dequantize_into(ty, &data, &mut out), Err(Error::Input(_))), "{ty}");
    }
}

#[test]
fn dequantize_into_wants_exact_length() {
    for &ty in SUPPORTED {
        let data = vec![0u8; 2 * ty.block_bytes()];
        let mut out = vec![0f32; ty.block_elems()];
        assert!(matches!(dequantize_into(ty, &data, &mut out), Err(Error::Input(_))), "{ty}");
        // `dequantize` takes the first n elements of a longer buffer (a tensor prefix).
        assert_eq!(dequantize(ty, &data, ty.block_elems()).unwrap().len(), ty.block_elems(), "{ty}");
    }
}

#[test]
fn partial_block_is_an_error() {
    for &ty in SUPPORTED.iter().filter(|t| t.block_elems() > 1) {
        let n = ty.block_elems() + 1;
        let data = vec![0u8; 4 * ty.block_bytes()];
        let err = dequantize(ty, &data, n).unwrap_err();
        assert!(matches!(err, Error::Input(ref m) if m.contains("whole")), "{ty}: {err}");
        let mut out = vec![0f32; n];
        assert!(matches!(dequantize_into(ty, &data[..2 * ty.block_bytes()], &mut out), Err(Error::Input(_))), "{ty}");
    }
}

#[test]
fn unsupported_types_are_errors() {
    for ty in GgmlType::all().filter(|t| !SUPPORTED.contains(t)) {
        let data = vec![0u8; ty.block_bytes()];
        let n = ty.block_elems();
        assert!(matches!(dequantize(ty, &data, n), Err(Error::UnsupportedType(_))), "{ty}");
        let mut out = vec![0f32; n];
        assert!(matches!(dequantize_into(ty, &data, &mut out), Err(Error::UnsupportedType(_))), "{ty}");
    }
    let err = dequantize(GgmlType::IQ2_XXS, &[], 0).unwrap_err();
    assert!(err.to_string().contains("IQ2_XXS"), "{err}");
}

#[test]
fn zero_elements_is_empty() {
    for &ty in SUPPORTED {
        assert_eq!(dequantize(ty, &[], 0).unwrap(), Vec::<f32>::new());
    }
}

proptest! {
    /// Any type, any byte count, any element count: a value or an error, never a panic.
    #[test]
    fn arbitrary_input_never_panics(ty_index in 0..GgmlType::all().count(), len in 0usize..1200, n in 0usize..1100, seed: u8) {
        let ty = GgmlType::all().nth(ty_index).unwrap();
        let data: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect();
        let whole = dequantize(ty, &data, n);
        let mut out = vec![0f32; n];
        let into = dequantize_into(ty, &data, &mut out);
        if let Ok(v) = &whole {
            prop_assert_eq!(v.len(), n);
        }
        if into.is_ok() {
            let v = whole.expect("exact-length input is also a valid prefix");
            prop_assert!(v.iter().zip(&out).all(|(a, b)| a.to_bits() == b.to_bits()));
        }
    }
}
