//! The committed tiny text-model fixtures (written by scripts/fixtures/make_text_fixtures.py
//! with gguf-py) parse with our reader, and every Q8_0 file has the tensor table of its F32 twin
//! with only the matrices quantized.

use std::path::PathBuf;

use rullama::gguf::{GgmlType, GgufFile};

const FIXTURES: [(&str, &str); 3] = [("g4_dense", "gemma4"), ("g4_moe", "gemma4"), ("g3_tiny", "gemma3")];

fn open(file: &str) -> GgufFile {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(file);
    GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn fixtures_parse_with_consistent_metadata() {
    for (name, arch) in FIXTURES {
        for suffix in ["f32", "q8_0"] {
            let f = open(&format!("{name}.{suffix}.gguf"));
            assert_eq!(f.architecture(), Some(arch), "{name}.{suffix}");
            let n_vocab = f.get("tokenizer.ggml.tokens").and_then(|v| v.as_array()).map(<[_]>::len);
            let embd = f.tensor("token_embd.weight").expect("token_embd");
            assert_eq!(Some(embd.dims[1] as usize), n_vocab, "{name}: vocab vs token_embd rows");
            let n_layers = f.get_u32(&format!("{arch}.block_count")).expect("block_count");
            assert!(f.has_tensor(&format!("blk.{}.attn_q.weight", n_layers - 1)));
            assert!(!f.has_tensor(&format!("blk.{n_layers}.attn_q.weight")));
            if arch == "gemma4" {
                // Per-layer arrays must have one entry per layer.
                for key in ["attention.sliding_window_pattern", "attention.head_count_kv"] {
                    let arr = f.get(&format!("gemma4.{key}")).and_then(|v| v.as_array()).expect(key);
                    assert_eq!(arr.len(), n_layers as usize, "{name}: {key}");
                }
                assert!(f.has_tensor("rope_freqs.weight"));
            }
        }
    }
}

#[test]
fn q8_files_have_the_f32_tensor_table_and_f32_side_tensors() {
    for (name, _) in FIXTURES {
        let full = open(&format!("{name}.f32.gguf"));
        let q8 = open(&format!("{name}.q8_0.gguf"));
        let shapes = |f: &GgufFile| f.tensors.iter().map(|t| (t.name.clone(), t.dims.clone())).collect::<Vec<_>>();
        assert_eq!(shapes(&full), shapes(&q8), "{name}: tensor tables differ");
        assert!(full.tensors.iter().all(|t| t.ty == GgmlType::F32), "{name}: f32 file has non-F32 tensors");
        let mut n_quantized = 0;
        for t in &q8.tensors {
            match t.ty {
                // Norms, scales, router and rope_freqs are stored unquantized: bit-identical.
                GgmlType::F32 => {
                    let want = full.view(&t.name).unwrap().as_f32().unwrap();
                    assert_eq!(want, q8.view(&t.name).unwrap().as_f32().unwrap(), "{}: F32 tensor changed", t.name);
                }
                GgmlType::Q8_0 => {
                    n_quantized += 1;
                    assert!(t.dims.len() >= 2 && t.dims[0] % 32 == 0, "{}: bad Q8_0 shape {:?}", t.name, t.dims);
                }
                other => panic!("{}: unexpected type {other}", t.name),
            }
        }
        assert!(n_quantized > 0, "{name}: no Q8_0 tensors");
        for t in ["ffn_gate_inp.weight", "ffn_gate_inp.scale", "ffn_down_exps.scale", "layer_output_scale.weight"] {
            if let Some(info) = q8.tensor(&format!("blk.0.{t}")) {
                assert_eq!(info.ty, GgmlType::F32, "{name}: blk.0.{t}");
            }
        }
    }
}
