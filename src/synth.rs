//! Full-size random-weight models in Ollama's GGUF layout, for measuring speed without real
//! weights (`rullama synth`). Shapes, tensor names and tensor types follow the published
//! files (spec §2.2, §4; Q4_K_M as llama-quantize assigns it); values are random but valid
//! (finite, modest block scales), so kernels do the same work as on real weights.

use std::path::Path;

use crate::gguf::{GgmlType, GgufWriter};
use crate::{Error, Result};

/// A model shape to synthesise.
#[derive(Debug, Clone)]
pub struct Preset {
    pub arch: &'static str,
    pub name: &'static str,
    pub layers: usize,
    pub hidden: usize,
    pub heads: usize,
    pub kv_swa: usize,
    pub kv_global: usize,
    pub hd_swa: usize,
    pub hd_global: usize,
    /// Every `pattern`-th layer is global.
    pub pattern: usize,
    pub ffn: usize,
    /// KV-shared layers get twice the FFN width (`use_double_wide_mlp`).
    pub double_wide: bool,
    pub shared_kv: usize,
    pub ple: usize,
    pub window: usize,
    pub k_eq_v: bool,
    /// (experts, used, expert FFN)
    pub moe: Option<(usize, usize, usize)>,
    pub vocab: usize,
}

pub fn preset(arch: &str, name: &str) -> Result<Preset> {
    let base = Preset {
        arch: "gemma4",
        name: "",
        layers: 0,
        hidden: 0,
        heads: 8,
        kv_swa: 1,
        kv_global: 1,
        hd_swa: 256,
        hd_global: 512,
        pattern: 5,
        ffn: 0,
        double_wide: false,
        shared_kv: 0,
        ple: 0,
        window: 512,
        k_eq_v: false,
        moe: None,
        vocab: 262_144,
    };
    Ok(match (arch, name) {
        ("gemma4", "e2b") => Preset { name: "e2b", layers: 35, hidden: 1536, ffn: 6144, double_wide: true, shared_kv: 20, ple: 256, ..base },
        ("gemma4", "e4b") => Preset {
            name: "e4b",
            layers: 42,
            hidden: 2560,
            kv_swa: 2,
            kv_global: 2,
            pattern: 6,
            ffn: 10240,
            shared_kv: 18,
            ple: 256,
            ..base
        },
        ("gemma4", "26b-a4b") => Preset {
            name: "26b-a4b",
            layers: 30,
            hidden: 2816,
            heads: 16,
            kv_swa: 8,
            kv_global: 2,
            pattern: 6,
            ffn: 2112,
            window: 1024,
            k_eq_v: true,
            moe: Some((128, 8, 704)),
            ..base
        },
        ("gemma3", "270m") => Preset {
            arch: "gemma3",
            name: "270m",
            layers: 18,
            hidden: 640,
            heads: 4,
            hd_swa: 256,
            hd_global: 256,
            pattern: 6,
            ffn: 2048,
            ..base
        },
        _ => {
            return Err(Error::Input(format!(
                "no preset {arch}/{name}; presets: gemma4 e2b, e4b, 26b-a4b; gemma3 270m"
            )));
        }
    })
}

/// Fill `out` with random blocks of `ty` whose scale fields are finite and small.
pub fn random_blocks(ty: GgmlType, out: &mut [u8], seed: u64) {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for chunk in out.chunks_mut(8) {
        // xorshift64*: fast enough for multi-GB files.
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        let v = s.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
    let small = |i: usize| half::f16::from_f32(0.002 + (i % 7) as f32 * 0.0005).to_le_bytes();
    let bb = ty.block_bytes();
    // Byte offsets of the f16 scale fields in each block (see gguf::dequant).
    let scale_fields: &[usize] = match ty {
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => &[0],
        GgmlType::Q4_1 | GgmlType::Q5_1 => &[0, 2],
        GgmlType::Q4_K | GgmlType::Q5_K => &[0, 2],
        GgmlType::Q2_K => &[80, 82],
        GgmlType::Q3_K => &[108],
        GgmlType::Q6_K => &[208],
        GgmlType::F16 => {
            for (i, c) in out.chunks_mut(2).enumerate() {
                c.copy_from_slice(&half::f16::from_f32(((i * 7919) % 2001) as f32 / 1000.0 - 1.0).to_le_bytes()[..c.len()]);
            }
            return;
        }
        GgmlType::F32 => {
            for (i, c) in out.chunks_mut(4).enumerate() {
                c.copy_from_slice(&((((i * 7919) % 2001) as f32 / 1000.0 - 1.0) * 0.05).to_le_bytes()[..c.len()]);
            }
            return;
        }
        _ => &[],
    };
    for (i, block) in out.chunks_mut(bb).enumerate() {
        for &f in scale_fields {
            block[f..f + 2].copy_from_slice(&small(i));
        }
    }
}

/// Q4_K_M as llama-quantize assigns it: attn_v and ffn_down get Q6_K on the first and last
/// eighth of the layers and every third in between, Q4_K elsewhere; rows that are not a
/// multiple of 256 fall back to Q5_0 (Q8_0 where Q6_K was meant), as in the real Gemma 3
/// 270M file.
fn q4_k_m_type(cols: usize, layer: usize, layers: usize, more_bits: bool) -> GgmlType {
    let eighth = layers / 8;
    let use_more = more_bits && (layer < eighth || layer >= layers - eighth || (layer - eighth) % 3 == 2);
    match (cols.is_multiple_of(256), use_more) {
        (true, true) => GgmlType::Q6_K,
        (true, false) => GgmlType::Q4_K,
        (false, true) => GgmlType::Q8_0,
        (false, false) => GgmlType::Q5_0,
    }
}

/// Write a random-weight model for `p` to `path`.
pub fn write(p: &Preset, path: &Path) -> Result<()> {
    let mut w = GgufWriter::new();
    let a = p.arch;
    let key = |k: &str| format!("{a}.{k}");
    let is_global = |i: usize| (i + 1).is_multiple_of(p.pattern);
    let first_shared = p.layers - p.shared_kv;
    w.set_str("general.architecture", a)
        .set_str("general.name", &format!("synthetic {a} {}", p.name))
        .set_u32("general.file_type", 15)
        .set_u32(&key("block_count"), p.layers as u32)
        .set_u32(&key("context_length"), 131_072)
        .set_u32(&key("embedding_length"), p.hidden as u32)
        .set_u32(&key("attention.head_count"), p.heads as u32)
        .set_u32(&key("attention.key_length"), p.hd_global as u32)
        .set_u32(&key("attention.value_length"), p.hd_global as u32)
        .set_f32(&key("attention.layer_norm_rms_epsilon"), 1e-6)
        .set_u32(&key("attention.sliding_window"), p.window as u32)
        .set_f32(&key("rope.freq_base"), 1e6);
    let ffn_of = |i: usize| if p.double_wide && i >= first_shared { 2 * p.ffn } else { p.ffn };
    if a == "gemma4" {
        let pattern: Vec<bool> = (0..p.layers).map(|i| !is_global(i)).collect();
        let kv: Vec<u32> = (0..p.layers).map(|i| if is_global(i) { p.kv_global } else { p.kv_swa } as u32).collect();
        let ffn: Vec<u32> = (0..p.layers).map(|i| ffn_of(i) as u32).collect();
        w.set_bool_array(&key("attention.sliding_window_pattern"), &pattern)
            .set_u32_array(&key("attention.head_count_kv"), &kv)
            .set_u32_array(&key("feed_forward_length"), &ffn)
            .set_u32(&key("attention.key_length_swa"), p.hd_swa as u32)
            .set_u32(&key("attention.value_length_swa"), p.hd_swa as u32)
            .set_u32(&key("attention.shared_kv_layers"), p.shared_kv as u32)
            .set_f32(&key("rope.freq_base_swa"), 1e4)
            .set_u32(&key("rope.dimension_count"), p.hd_global as u32)
            .set_f32(&key("final_logit_softcapping"), 30.0)
            .set_u32(&key("embedding_length_per_layer_input"), p.ple as u32);
        if let Some((e, used, fe)) = p.moe {
            w.set_u32(&key("expert_count"), e as u32)
                .set_u32(&key("expert_used_count"), used as u32)
                .set_u32(&key("expert_feed_forward_length"), fe as u32);
        }
    } else {
        w.set_u32(&key("attention.head_count_kv"), p.kv_swa as u32).set_u32(&key("feed_forward_length"), p.ffn as u32);
    }
    // A vocabulary of placeholder pieces with the real special-token and byte-token ids
    // (byte tokens <0x00>..<0xFF> at 238..493, as in Gemma's vocabulary).
    let tokens: Vec<String> = (0..p.vocab)
        .map(|i| match i {
            0 => "<pad>".into(),
            1 => "<eos>".into(),
            2 => "<bos>".into(),
            3 => "<unk>".into(),
            105 => if a == "gemma4" { "<|turn>" } else { "<start_of_turn>" }.into(),
            106 => if a == "gemma4" { "<turn|>" } else { "<end_of_turn>" }.into(),
            238..=493 => format!("<0x{:02X}>", i - 238),
            _ => format!("▁t{i}"),
        })
        .collect();
    let types: Vec<i32> = (0..p.vocab)
        .map(|i| match i {
            0..=3 | 105 | 106 => 3,
            238..=493 => 6,
            _ => 1,
        })
        .collect();
    let scores: Vec<f32> = (0..p.vocab).map(|i| -(i as f32)).collect();
    w.set_str("tokenizer.ggml.model", "llama")
        .set_str("tokenizer.ggml.pre", if a == "gemma4" { "gemma4" } else { "default" })
        .set_u32("tokenizer.ggml.unknown_token_id", 3)
        .set_u32("tokenizer.ggml.padding_token_id", 0)
        .set_str_array("tokenizer.ggml.tokens", &tokens)
        .set_f32_array("tokenizer.ggml.scores", &scores)
        .set_i32_array("tokenizer.ggml.token_type", &types)
        .set_u32("tokenizer.ggml.bos_token_id", 2)
        .set_u32("tokenizer.ggml.eos_token_id", 1);

    let mut seed = 1u64;
    let mut tensor = |w: &mut GgufWriter, name: String, cols: usize, rows: usize, ty: GgmlType| -> Result<()> {
        seed += 1;
        let s = seed;
        let dims: &[u64] = &[cols as u64, rows as u64];
        let dims = if rows == 1 { &dims[..1] } else { dims };
        w.add_generated(&name, dims, ty, move |out| random_blocks(ty, out, s))?;
        Ok(())
    };
    let (d, v) = (p.hidden, p.vocab);
    tensor(&mut w, "token_embd.weight".into(), d, v, if a == "gemma4" { GgmlType::Q6_K } else { GgmlType::Q8_0 })?;
    tensor(&mut w, "output_norm.weight".into(), d, 1, GgmlType::F32)?;
    if a == "gemma4" {
        let n_rot = p.hd_global / 8; // partial_rotary_factor 0.25 of the pairs
        let freqs: Vec<f32> = (0..p.hd_global / 2).map(|j| if j < n_rot { 1.0 } else { 1e30 }).collect();
        w.add_f32("rope_freqs.weight", &[freqs.len() as u64], &freqs)?;
    }
    if p.ple > 0 {
        let lp = p.layers * p.ple;
        tensor(&mut w, "per_layer_token_embd.weight".into(), lp, v, GgmlType::Q6_K)?;
        tensor(&mut w, "per_layer_model_proj.weight".into(), d, lp, GgmlType::F16)?;
        tensor(&mut w, "per_layer_proj_norm.weight".into(), p.ple, 1, GgmlType::F32)?;
    }
    for i in 0..p.layers {
        let n = |s: &str| format!("blk.{i}.{s}");
        let (hd, kvh) = if is_global(i) { (p.hd_global, p.kv_global) } else { (p.hd_swa, p.kv_swa) };
        let q4 = |cols: usize, more: bool| q4_k_m_type(cols, i, p.layers, more);
        for norm in ["attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm"] {
            tensor(&mut w, n(&format!("{norm}.weight")), d, 1, GgmlType::F32)?;
        }
        tensor(&mut w, n("attn_q.weight"), d, p.heads * hd, q4(d, false))?;
        tensor(&mut w, n("attn_q_norm.weight"), hd, 1, GgmlType::F32)?;
        if i < first_shared {
            tensor(&mut w, n("attn_k.weight"), d, kvh * hd, q4(d, false))?;
            tensor(&mut w, n("attn_k_norm.weight"), hd, 1, GgmlType::F32)?;
            if !(p.k_eq_v && is_global(i)) {
                tensor(&mut w, n("attn_v.weight"), d, kvh * hd, q4(d, true))?;
            }
        }
        tensor(&mut w, n("attn_output.weight"), p.heads * hd, d, q4(p.heads * hd, false))?;
        let f = ffn_of(i);
        tensor(&mut w, n("ffn_gate.weight"), d, f, q4(d, false))?;
        tensor(&mut w, n("ffn_up.weight"), d, f, q4(d, false))?;
        tensor(&mut w, n("ffn_down.weight"), f, d, q4(f, true))?;
        if a == "gemma4" {
            tensor(&mut w, n("layer_output_scale.weight"), 1, 1, GgmlType::F32)?;
        }
        if p.ple > 0 {
            tensor(&mut w, n("inp_gate.weight"), d, p.ple, q4(d, false))?;
            tensor(&mut w, n("proj.weight"), p.ple, d, q4(p.ple, false))?;
            tensor(&mut w, n("post_norm.weight"), d, 1, GgmlType::F32)?;
        }
        if let Some((e, _, fe)) = p.moe {
            tensor(&mut w, n("ffn_gate_inp.weight"), d, e, GgmlType::F32)?;
            tensor(&mut w, n("ffn_gate_inp.scale"), d, 1, GgmlType::F32)?;
            w.add_generated(&n("ffn_gate_up_exps.weight"), &[d as u64, 2 * fe as u64, e as u64], q4(d, false), {
                let ty = q4(d, false);
                move |out| random_blocks(ty, out, i as u64 * 31 + 7)
            })?;
            let dty = q4(fe, true);
            w.add_generated(&n("ffn_down_exps.weight"), &[fe as u64, d as u64, e as u64], dty, move |out| {
                random_blocks(dty, out, i as u64 * 37 + 11)
            })?;
            tensor(&mut w, n("ffn_down_exps.scale"), e, 1, GgmlType::F32)?;
            for norm in ["pre_ffw_norm_2", "post_ffw_norm_1", "post_ffw_norm_2"] {
                tensor(&mut w, n(&format!("{norm}.weight")), d, 1, GgmlType::F32)?;
            }
        }
    }
    w.write(path)
}
