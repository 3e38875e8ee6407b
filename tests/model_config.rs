//! Config and layer plan from GGUF metadata. Expected values are the published shapes in
//! gemma4_spec.md §2.2 / §6.5 and, for Gemma 3 270M, the real file's header as dumped by the
//! Python `gguf` package (oracles.md §5) and its HF config (query_pre_attn_scalar 256).
mod common;

use rullama::Error;
use rullama::gguf::{GgmlType, Gguf, GgufWriter};
use rullama::model::{Arch, AttnKind, Config, ExpertGateUp, LayerPlan};

const VOCAB: usize = 262_144;

fn parse(w: &GgufWriter) -> rullama::Result<Config> {
    Config::from_gguf(&Gguf::parse(&w.to_bytes()).expect("writer output parses"))
}

fn config(w: &GgufWriter) -> Config {
    parse(w).expect("config builds")
}

/// Common keys of a text model.
fn base(arch: &str, layers: u32, hidden: u32, heads: u32) -> GgufWriter {
    let mut w = GgufWriter::new();
    w.set_str("general.architecture", arch)
        .set_u32(&format!("{arch}.block_count"), layers)
        .set_u32(&format!("{arch}.embedding_length"), hidden)
        .set_u32(&format!("{arch}.attention.head_count"), heads)
        .set_u32(&format!("{arch}.context_length"), 131_072)
        .set_f32(&format!("{arch}.attention.layer_norm_rms_epsilon"), 1e-6);
    w
}

/// A vocabulary of `n` pieces with Gemma's first ids and, when asked, `<end_of_turn>` at 106.
fn set_tokens(w: &mut GgufWriter, n: usize, end_of_turn: bool) {
    let toks: Vec<String> = (0..n)
        .map(|i| match i {
            0 => "<pad>".into(),
            1 => "<eos>".into(),
            2 => "<bos>".into(),
            105 => "<start_of_turn>".into(),
            106 if end_of_turn => "<end_of_turn>".into(),
            _ => format!("tok{i}"),
        })
        .collect();
    w.set_str_array("tokenizer.ggml.tokens", &toks);
}

/// `period - 1` sliding layers then one global, repeated (true = sliding, as the converter writes).
fn pattern(layers: usize, period: usize) -> Vec<bool> {
    (0..layers).map(|i| (i + 1) % period != 0).collect()
}

/// A tensor whose shape matters but whose values do not: the smallest encoding that fits.
fn shape_only(w: &mut GgufWriter, name: &str, dims: &[u64]) {
    let ty = if dims[0].is_multiple_of(256) { GgmlType::IQ1_S } else { GgmlType::F32 };
    let n: u64 = dims.iter().product();
    let bytes = ty.bytes_for(n).unwrap() as usize;
    w.add_tensor(name, dims, ty, vec![0; bytes]).unwrap();
}

/// Gemma 4 keys shared by the published models (spec §2.2, §3.1).
fn gemma4(layers: u32, hidden: u32, heads: u32, period: usize, window: u32, shared: u32, ple: u32) -> GgufWriter {
    let mut w = base("gemma4", layers, hidden, heads);
    w.set_u32("gemma4.attention.key_length", 512)
        .set_u32("gemma4.attention.value_length", 512)
        .set_u32("gemma4.attention.key_length_swa", 256)
        .set_u32("gemma4.attention.value_length_swa", 256)
        .set_u32("gemma4.attention.sliding_window", window)
        .set_bool_array("gemma4.attention.sliding_window_pattern", &pattern(layers as usize, period))
        .set_u32("gemma4.attention.shared_kv_layers", shared)
        .set_u32("gemma4.embedding_length_per_layer_input", ple)
        .set_f32("gemma4.rope.freq_base", 1e6)
        .set_f32("gemma4.rope.freq_base_swa", 1e4)
        .set_u32("gemma4.rope.dimension_count", 512)
        .set_u32("gemma4.rope.dimension_count_swa", 256)
        .set_f32("gemma4.final_logit_softcapping", 30.0)
        .set_u32("tokenizer.ggml.bos_token_id", 2)
        .set_u32("tokenizer.ggml.eos_token_id", 1)
        .set_u32_array("tokenizer.ggml.eos_token_ids", &[1, 106]);
    set_tokens(&mut w, VOCAB, false);
    w
}

/// KV heads per layer: `swa` on sliding layers, `global` on global ones (the converter's array form).
fn kv_array(layers: usize, period: usize, swa: i32, global: i32) -> Vec<i32> {
    pattern(layers, period).iter().map(|&s| if s { swa } else { global }).collect()
}

fn globals(c: &Config) -> Vec<usize> {
    c.plan().iter().filter(|l| l.kind == AttnKind::Global).map(|l| l.index).collect()
}

/// Head sizes from the spec for every Gemma 4 model: 256 sliding, 512 global.
fn assert_gemma4_heads(c: &Config) {
    for l in c.plan() {
        let want = if l.kind == AttnKind::Sliding { 256 } else { 512 };
        assert_eq!((l.head_dim, l.v_head_dim), (want, want), "layer {}", l.index);
    }
}

/// Every layer's KV heads: `swa` / `global` by kind.
fn assert_kv_heads(c: &Config, swa: usize, global: usize) {
    for l in c.plan() {
        let want = if l.kind == AttnKind::Sliding { swa } else { global };
        assert_eq!(l.n_kv_heads, want, "layer {}", l.index);
    }
}

fn assert_common_gemma4(c: &Config) {
    assert_eq!(c.arch, Arch::Gemma4);
    assert_eq!(c.vocab, VOCAB);
    assert_eq!(c.context_length, 131_072);
    assert_eq!(c.eps, 1e-6);
    assert_eq!(c.attn_scale, 1.0);
    assert!(c.qk_norm && c.v_norm);
    assert_eq!(c.embed_scale, (c.hidden as f32).sqrt());
    assert_eq!(c.final_logit_softcap, Some(30.0));
    assert_eq!((c.rope_sliding.base, c.rope_sliding.dims, c.rope_sliding.linear_scale), (1e4, 256, 1.0));
    assert_eq!((c.rope_global.base, c.rope_global.dims, c.rope_global.linear_scale), (1e6, 512, 1.0));
    assert!(c.tied_output);
    assert_eq!((c.tokens.bos, c.tokens.eos, c.tokens.eot), (2, 1, Some(106)));
    assert_eq!(c.tokens.stop, vec![1, 106]);
    assert_gemma4_heads(c);
}

#[test]
fn e2b_plan_matches_spec() {
    let mut w = gemma4(35, 1536, 8, 5, 512, 20, 256);
    w.set_u32("gemma4.attention.head_count_kv", 1);
    // use_double_wide_mlp: the converter writes per-layer widths, 2x on the 20 shared layers.
    let ffn: Vec<i32> = (0..35).map(|i| if i >= 15 { 12288 } else { 6144 }).collect();
    w.set_i32_array("gemma4.feed_forward_length", &ffn);
    let c = config(&w);
    assert_common_gemma4(&c);
    assert_eq!((c.n_layers, c.hidden, c.n_heads), (35, 1536, 8));
    assert_eq!((c.sliding_window, c.shared_kv_layers, c.first_shared_layer()), (512, 20, 15));
    assert_eq!((c.ple_dim, c.ple_vocab), (256, VOCAB));
    assert!(c.moe.is_none() && c.vision.is_none() && c.audio.is_none());
    assert_eq!(globals(&c), vec![4, 9, 14, 19, 24, 29, 34]);
    assert_kv_heads(&c, 1, 1);
    for l in c.plan() {
        assert_eq!(l.ffn_width, if l.index >= 15 { 12288 } else { 6144 });
        // spec §6.5: sliding shared layers read layer 13's cache, global ones layer 14's.
        let donor = match (l.index >= 15, l.kind) {
            (false, _) => None,
            (true, AttnKind::Sliding) => Some(13),
            (true, AttnKind::Global) => Some(14),
        };
        assert_eq!(l.kv_donor, donor, "layer {}", l.index);
        assert!(l.has_v && !l.has_output_scale);
    }
    // Only layers 0..15 store KV: 12 sliding (K+V 2·256 per token) and 3 global (2·512), one head.
    let per_token_f16 = (12 * 512 + 3 * 1024) * 2;
    assert_eq!(c.kv_cache_bytes(1, 1, 2), per_token_f16);
    assert_eq!(c.kv_cache_bytes(4096, 512, 2), (12 * 512 * 512 + 3 * 1024 * 4096) * 2);
    assert_eq!(c.kv_cache_bytes(4096, 4096, 2), per_token_f16 * 4096);
}

#[test]
fn e4b_plan_matches_spec() {
    let mut w = gemma4(42, 2560, 8, 6, 512, 18, 256);
    w.set_u32("gemma4.attention.head_count_kv", 2).set_u32("gemma4.feed_forward_length", 10240);
    let c = config(&w);
    assert_common_gemma4(&c);
    assert_eq!((c.n_layers, c.hidden, c.first_shared_layer(), c.ple_dim), (42, 2560, 24, 256));
    assert_eq!(globals(&c), (0..7).map(|k| 6 * k + 5).collect::<Vec<_>>());
    assert_kv_heads(&c, 2, 2);
    for l in c.plan() {
        assert_eq!(l.ffn_width, 10240);
        let donor = match (l.index >= 24, l.kind) {
            (false, _) => None,
            (true, AttnKind::Sliding) => Some(22),
            (true, AttnKind::Global) => Some(23),
        };
        assert_eq!(l.kv_donor, donor, "layer {}", l.index);
    }
}

/// The large models: no PLE or sharing; global layers have K but no V projection.
fn large(layers: u32, hidden: u32, heads: u32, kv: (i32, i32), ffn: u32) -> GgufWriter {
    let mut w = gemma4(layers, hidden, heads, 6, 1024, 0, 0);
    w.set_i32_array("gemma4.attention.head_count_kv", &kv_array(layers as usize, 6, kv.0, kv.1))
        .set_u32("gemma4.feed_forward_length", ffn);
    for i in (5..layers as u64).step_by(6) {
        shape_only(&mut w, &format!("blk.{i}.attn_k.weight"), &[hidden as u64, kv.1 as u64 * 512]);
    }
    w
}

fn assert_large(c: &Config, layers: usize, kv: (usize, usize), ffn: usize) {
    assert_common_gemma4(c);
    assert_eq!((c.n_layers, c.sliding_window, c.shared_kv_layers, c.ple_dim), (layers, 1024, 0, 0));
    assert_eq!(globals(c), (5..layers).step_by(6).collect::<Vec<_>>());
    assert_kv_heads(c, kv.0, kv.1);
    for l in c.plan() {
        assert_eq!(l.kv_donor, None);
        assert_eq!(l.ffn_width, ffn);
        // attention_k_eq_v on every global layer (spec §2.2), read from the missing attn_v.
        assert_eq!(l.has_v, l.kind == AttnKind::Sliding, "layer {}", l.index);
    }
}

#[test]
fn gemma4_12b_plan_matches_spec() {
    let mut w = large(48, 3840, 16, (8, 1), 15360);
    // A sliding layer with both projections keeps its own V.
    shape_only(&mut w, "blk.0.attn_k.weight", &[3840, 8 * 256]);
    shape_only(&mut w, "blk.0.attn_v.weight", &[3840, 8 * 256]);
    let c = config(&w);
    assert_large(&c, 48, (8, 1), 15360);
    assert!(c.moe.is_none());
}

#[test]
fn gemma4_26b_a4b_plan_matches_spec() {
    let mut w = large(30, 2816, 16, (8, 2), 2112);
    w.set_u32("gemma4.expert_count", 128)
        .set_u32("gemma4.expert_used_count", 8)
        .set_u32("gemma4.expert_feed_forward_length", 704);
    let c = config(&w);
    assert_large(&c, 30, (8, 2), 2112);
    let moe = c.moe.as_ref().expect("MoE");
    assert_eq!((moe.n_experts, moe.n_used, moe.expert_ffn), (128, 8, 704));
    // No expert tensors in the table: the converter's fused layout and scale name.
    assert_eq!(moe.gate_up, ExpertGateUp::Fused);
    assert_eq!(moe.per_expert_scale_name(3), "blk.3.ffn_down_exps.scale");
}

#[test]
fn gemma4_31b_plan_matches_spec() {
    let c = config(&large(60, 5376, 32, (16, 4), 21504));
    assert_large(&c, 60, (16, 4), 21504);
    assert_eq!(c.n_heads, 32);
}

/// Gemma 3 270M with the keys of the real file (oracles.md §5).
fn gemma3_270m() -> GgufWriter {
    let mut w = base("gemma3", 18, 640, 4);
    w.set_u32("gemma3.context_length", 32768)
        .set_u32("gemma3.feed_forward_length", 2048)
        .set_u32("gemma3.attention.head_count_kv", 1)
        .set_u32("gemma3.attention.key_length", 256)
        .set_u32("gemma3.attention.value_length", 256)
        .set_f32("gemma3.rope.freq_base", 1e6)
        .set_u32("gemma3.attention.sliding_window", 512)
        .set_u32("tokenizer.ggml.bos_token_id", 2)
        .set_u32("tokenizer.ggml.eos_token_id", 1);
    set_tokens(&mut w, VOCAB, true);
    w
}

fn assert_gemma3_270m(c: &Config) {
    assert_eq!(c.arch, Arch::Gemma3);
    assert_eq!((c.n_layers, c.hidden, c.n_heads, c.vocab, c.context_length), (18, 640, 4, VOCAB, 32768));
    assert_eq!((c.sliding_window, c.shared_kv_layers, c.ple_dim), (512, 0, 0));
    // Implicit Gemma 3 pattern: every 6th layer is global.
    assert_eq!(globals(c), vec![5, 11, 17]);
    for l in c.plan() {
        assert_eq!((l.head_dim, l.v_head_dim, l.n_kv_heads, l.ffn_width), (256, 256, 1, 2048));
        assert!(l.has_v && l.kv_donor.is_none());
    }
    // Local base 1e4 is implicit; global from the file; neither is scaled.
    assert_eq!((c.rope_sliding.base, c.rope_sliding.dims, c.rope_sliding.linear_scale), (1e4, 256, 1.0));
    assert_eq!((c.rope_global.base, c.rope_global.dims, c.rope_global.linear_scale), (1e6, 256, 1.0));
    assert!(!c.rope_global.freq_factors);
    // query_pre_attn_scalar = 256 in the 270M's HF config.
    assert_eq!(c.attn_scale, 1.0 / 16.0);
    assert_eq!(c.embed_scale, 640f32.sqrt());
    assert!(c.qk_norm && !c.v_norm);
    assert_eq!(c.final_logit_softcap, None);
    assert!(c.tied_output);
    assert_eq!((c.tokens.bos, c.tokens.eos, c.tokens.eot), (2, 1, Some(106)));
    assert_eq!(c.tokens.stop, vec![1, 106]);
    assert!(c.vision.is_none() && c.audio.is_none() && c.moe.is_none());
}

#[test]
fn gemma3_270m_from_metadata() {
    let c = config(&gemma3_270m());
    assert_gemma3_270m(&c);
    assert!((c.eps - 1e-6).abs() < 1e-12);
    // 18 layers of K+V, 1 head of 256 each.
    assert_eq!(c.kv_cache_bytes(1, 1, 4), 18 * 2 * 256 * 4);
}

/// The real file gives the same answers.
#[test]
fn gemma3_270m_real_file() {
    let f = rullama::gguf::GgufFile::open(common::demo_gguf()).expect("open the real 270M GGUF");
    let c = Config::from_gguf(&f).expect("config");
    assert_gemma3_270m(&c);
}

#[test]
fn gemma3_rope_scaling_and_explicit_pattern() {
    let mut w = gemma3_270m();
    w.set_str("gemma3.rope.scaling.type", "linear")
        .set_f32("gemma3.rope.scaling.factor", 8.0)
        .set_f32("gemma3.rope.local.freq_base", 20000.0)
        .set_u32("gemma3.attention.sliding_window_pattern", 3)
        .set_u32("tokenizer.ggml.eot_token_id", 107);
    let c = config(&w);
    assert_eq!(c.rope_global.linear_scale, 8.0);
    assert_eq!((c.rope_sliding.linear_scale, c.rope_sliding.base), (1.0, 20000.0));
    assert_eq!(globals(&c), vec![2, 5, 8, 11, 14, 17]);
    assert_eq!(c.tokens.eot, Some(107));
    assert_eq!(c.tokens.stop, vec![1, 107]);

    w.set_str("gemma3.rope.scaling.type", "yarn");
    assert!(matches!(parse(&w), Err(Error::Unsupported(m)) if m.contains("yarn")));
}

#[test]
fn gemma3_27b_attention_scale_is_width_over_heads() {
    // 27B: 62 layers, D 5376, 32 heads, head 128; HF query_pre_attn_scalar = 168.
    let mut w = base("gemma3", 62, 5376, 32);
    w.set_u32("gemma3.feed_forward_length", 21504)
        .set_u32("gemma3.attention.head_count_kv", 16)
        .set_u32("gemma3.attention.key_length", 128)
        .set_u32("gemma3.attention.sliding_window", 1024);
    set_tokens(&mut w, 1000, false);
    let c = config(&w);
    assert!((c.attn_scale - 1.0 / 168f32.sqrt()).abs() < 1e-7);
    // No <end_of_turn> in this vocabulary and no key: no end-of-turn id.
    assert_eq!(c.tokens.eot, None);
    assert_eq!(c.tokens.stop, vec![1]);
}

#[test]
fn gemma4_pattern_defaults_and_integer_period() {
    let mut w = gemma4(35, 1536, 8, 5, 512, 0, 0);
    w.set_u32("gemma4.attention.head_count_kv", 1).set_u32("gemma4.feed_forward_length", 6144);
    w.set_u32("gemma4.attention.sliding_window_pattern", 5);
    assert_eq!(globals(&config(&w)), (0..7).map(|k| 5 * k + 4).collect::<Vec<_>>());

    // Missing pattern: every Gemma 4 layer is global ([GO]).
    let mut w = base("gemma4", 4, 64, 2);
    w.set_u32("gemma4.feed_forward_length", 128).set_u32("gemma4.attention.head_count_kv", 1);
    set_tokens(&mut w, 300, false);
    let c = config(&w);
    assert_eq!(globals(&c), vec![0, 1, 2, 3]);
    assert_eq!(c.sliding_window, 0);
    // [GO] defaults: head 512 global, eps 1e-6, base 1e6, softcap off.
    assert_eq!((c.plan()[0].head_dim, c.rope_global.base, c.final_logit_softcap), (512, 1e6, None));
}

/// A tiny Gemma 4 with real tensors, where widths and layouts come from shapes.
fn tiny() -> GgufWriter {
    // 6 layers S S G S S G; the last 2 share KV (donors: layer 4 → 3, layer 5 → 2).
    let (d, h) = (64u64, 4u64);
    let mut w = base("gemma4", 6, d as u32, h as u32);
    w.set_u32("gemma4.attention.key_length", 32)
        .set_u32("gemma4.attention.key_length_swa", 16)
        .set_u32("gemma4.attention.sliding_window", 8)
        .set_bool_array("gemma4.attention.sliding_window_pattern", &[true, true, false, true, true, false])
        .set_u32("gemma4.attention.shared_kv_layers", 2)
        .set_i32_array("gemma4.attention.head_count_kv", &[2, 2, 1, 2, 2, 1])
        .set_u32("gemma4.feed_forward_length", 96)
        .set_u32("gemma4.embedding_length_per_layer_input", 8)
        .set_u32("gemma4.expert_count", 4)
        .set_u32("gemma4.expert_used_count", 2)
        .set_u32("gemma4.expert_feed_forward_length", 24)
        .set_u32("tokenizer.ggml.eot_token_id", 5);
    set_tokens(&mut w, 100, false);
    w.add_f32("token_embd.weight", &[d, 120], &vec![0.0; 64 * 120]).unwrap();
    w.add_f32("output.weight", &[d, 120], &vec![0.0; 64 * 120]).unwrap();
    w.add_f32("per_layer_token_embd.weight", &[6 * 8, 110], &vec![0.0; 48 * 110]).unwrap();
    w.add_f32("rope_freqs.weight", &[16], &[1.0; 16]).unwrap();
    for (i, (hd, kv)) in [(16, 2), (16, 2), (32, 1), (16, 2), (16, 2), (32, 1)].into_iter().enumerate() {
        w.add_f32(&format!("blk.{i}.attn_q.weight"), &[d, h * hd], &vec![0.0; (d * h * hd) as usize]).unwrap();
        w.add_f32(&format!("blk.{i}.attn_q_norm.weight"), &[hd], &vec![1.0; hd as usize]).unwrap();
        // Shared layers carry no K/V; the global layer 2 has K but no V (k_eq_v).
        if i < 4 {
            w.add_f32(&format!("blk.{i}.attn_k.weight"), &[d, kv * hd], &vec![0.0; (d * kv * hd) as usize]).unwrap();
        }
        if i < 4 && i != 2 {
            w.add_f32(&format!("blk.{i}.attn_v.weight"), &[d, kv * hd], &vec![0.0; (d * kv * hd) as usize]).unwrap();
        }
        // Double-wide MLP on the shared layers, only visible in the shapes.
        let ff = if i >= 4 { 192 } else { 96 };
        w.add_f32(&format!("blk.{i}.ffn_gate.weight"), &[d, ff], &vec![0.0; (d * ff) as usize]).unwrap();
        if i == 2 || i == 5 {
            w.add_f32(&format!("blk.{i}.layer_output_scale.weight"), &[1], &[0.5]).unwrap();
        }
    }
    w.add_f32("blk.0.ffn_gate_exps.weight", &[d, 24, 4], &vec![0.0; 64 * 24 * 4]).unwrap();
    w.add_f32("blk.0.ffn_up_exps.weight", &[d, 24, 4], &vec![0.0; 64 * 24 * 4]).unwrap();
    w.add_f32("blk.0.ffn_gate_inp.per_expert_scale", &[4], &[1.0; 4]).unwrap();
    w
}

#[test]
fn tiny_model_reads_shapes() {
    let c = config(&tiny());
    assert_eq!((c.vocab, c.ple_vocab, c.ple_dim), (120, 110, 8));
    assert!(!c.tied_output);
    assert!(c.rope_global.freq_factors && !c.rope_sliding.freq_factors);
    assert_eq!((c.rope_global.dims, c.rope_sliding.dims), (32, 16));
    assert_eq!(c.tokens.stop, vec![1, 5]);
    let moe = c.moe.as_ref().unwrap();
    assert_eq!(moe.gate_up, ExpertGateUp::Split);
    assert_eq!(moe.per_expert_scale_name(0), "blk.0.ffn_gate_inp.per_expert_scale");
    let want = |index, kind, head_dim, n_kv_heads, ffn_width, has_v, kv_donor, has_output_scale| LayerPlan {
        index,
        kind,
        head_dim,
        v_head_dim: head_dim,
        n_kv_heads,
        ffn_width,
        has_v,
        kv_donor,
        has_output_scale,
    };
    use AttnKind::{Global as G, Sliding as S};
    let expect = vec![
        want(0, S, 16, 2, 96, true, None, false),
        want(1, S, 16, 2, 96, true, None, false),
        want(2, G, 32, 1, 96, false, None, true),
        want(3, S, 16, 2, 96, true, None, false),
        want(4, S, 16, 2, 192, true, Some(3), false),
        want(5, G, 32, 1, 192, false, Some(2), true),
    ];
    assert_eq!(c.plan(), expect.as_slice());
}

#[test]
fn tensor_shapes_must_agree_with_metadata() {
    // Per-layer FFN array contradicting ffn_gate rows.
    let mut w = tiny();
    w.set_i32_array("gemma4.feed_forward_length", &[96, 96, 96, 96, 96, 96]);
    assert!(matches!(parse(&w), Err(Error::Gguf(m)) if m.contains("blk.4.ffn_gate.weight")));
    // Head size contradicting attn_q.
    let mut w = tiny();
    w.set_u32("gemma4.attention.key_length_swa", 8);
    assert!(matches!(parse(&w), Err(Error::Gguf(m)) if m.contains("blk.0.attn_q.weight")));
    // KV heads contradicting attn_k.
    let mut w = tiny();
    w.set_i32_array("gemma4.attention.head_count_kv", &[1, 2, 1, 2, 2, 1]);
    assert!(matches!(parse(&w), Err(Error::Gguf(m)) if m.contains("blk.0.attn_k.weight")));
    // More tokens than embedding rows.
    let mut w = tiny();
    set_tokens(&mut w, 121, false);
    assert!(matches!(parse(&w), Err(Error::Gguf(m)) if m.contains("121")));
}

#[test]
fn vision_and_audio_towers() {
    let mut w = gemma4(35, 1536, 8, 5, 512, 20, 256);
    w.set_u32("gemma4.attention.head_count_kv", 1).set_u32("gemma4.feed_forward_length", 6144);
    // [HF] defaults for the small towers; only the keys the converter always writes.
    w.set_u32("gemma4.vision.block_count", 16)
        .set_u32("gemma4.vision.embedding_length", 768)
        .set_u32("gemma4.vision.attention.head_count", 12)
        .set_u32("gemma4.vision.feed_forward_length", 3072)
        .set_u32("gemma4.audio.block_count", 12)
        .set_u32("gemma4.audio.embedding_length", 1024);
    let c = config(&w);
    let v = c.vision.as_ref().unwrap();
    assert_eq!((v.n_layers, v.hidden, v.n_heads, v.head_dim, v.ffn_width), (16, 768, 12, 64, 3072));
    assert_eq!((v.patch_size, v.n_channels, v.pool, v.eps, v.rope_base), (16, 3, 3, 1e-6, 100.0));
    assert_eq!((v.max_soft_tokens, v.min_soft_tokens, v.position_table), (280, 40, None));
    let a = c.audio.as_ref().unwrap();
    assert_eq!((a.n_layers, a.hidden, a.n_heads, a.head_dim, a.ffn_width), (12, 1024, 8, 128, 4096));
    assert_eq!((a.eps, a.conv_kernel, a.n_mels), (1e-6, 5, 128));
    assert_eq!((a.chunk_size, a.max_past, a.max_future, a.context_size), (12, 12, 0, 24));
    assert_eq!((a.logit_cap, a.residual_weight, a.gradient_clip), (50.0, 0.5, 1e10));

    // The 26B tower (hidden 1152, 16 heads → head 72) with explicit values.
    w.set_u32("gemma4.vision.embedding_length", 1152)
        .set_u32("gemma4.vision.attention.head_count", 16)
        .set_u32("gemma4.vision.patch_size", 14)
        .set_u32("gemma4.vision.projector.scale_factor", 4)
        .set_f32("gemma4.vision.attention.layer_norm_epsilon", 1e-5)
        .set_u32("gemma4.audio.feed_forward_length", 2048)
        .set_u32("gemma4.audio.conv_kernel_size", 7);
    let c = config(&w);
    let v = c.vision.as_ref().unwrap();
    assert_eq!((v.head_dim, v.patch_size, v.pool, v.eps), (72, 14, 4, 1e-5));
    let a = c.audio.as_ref().unwrap();
    assert_eq!((a.ffn_width, a.conv_kernel), (2048, 7));

    w.set_u32("gemma4.vision.attention.head_count", 7);
    assert!(matches!(parse(&w), Err(Error::Gguf(m)) if m.contains("vision.attention.head_count")));
    w.set_u32("gemma4.vision.block_count", 0);
    assert!(config(&w).vision.is_none());
}

fn small_gemma4() -> GgufWriter {
    let mut w = base("gemma4", 6, 64, 4);
    w.set_u32("gemma4.feed_forward_length", 128)
        .set_u32("gemma4.attention.head_count_kv", 2)
        .set_u32("gemma4.attention.sliding_window", 16)
        .set_bool_array("gemma4.attention.sliding_window_pattern", &pattern(6, 3));
    set_tokens(&mut w, 300, false);
    w
}

#[test]
fn errors_are_values() {
    assert!(parse(&small_gemma4()).is_ok());

    // Unsupported architecture: the sentence names it and what is supported.
    let mut w = small_gemma4();
    w.set_str("general.architecture", "llama");
    match parse(&w) {
        Err(Error::Unsupported(m)) => {
            assert!(m.contains("\"llama\"") && m.contains("gemma3") && m.contains("gemma4"), "{m}")
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    assert!(matches!(parse(&GgufWriter::new()), Err(Error::Unsupported(_))));

    // Missing required key.
    let mut w = base("gemma4", 6, 64, 4);
    set_tokens(&mut w, 300, false);
    w.set("gemma4.block_count", rullama::gguf::MetaValue::String("six".into()));
    assert!(matches!(parse(&w), Err(Error::Gguf(m)) if m.contains("gemma4.block_count")));
    let mut w = GgufWriter::new();
    w.set_str("general.architecture", "gemma4").set_u32("gemma4.embedding_length", 64);
    assert!(matches!(parse(&w), Err(Error::MissingTensor(m)) if m.contains("gemma4.block_count")));
    let mut w = base("gemma4", 6, 64, 4);
    set_tokens(&mut w, 300, false);
    assert!(matches!(parse(&w), Err(Error::MissingTensor(m)) if m.contains("feed_forward_length")));
    let mut w = base("gemma3", 6, 64, 4);
    w.set_u32("gemma3.feed_forward_length", 128);
    set_tokens(&mut w, 300, false);
    assert!(matches!(parse(&w), Err(Error::MissingTensor(m)) if m.contains("sliding_window")));

    // Arrays of the wrong length.
    let mut w = small_gemma4();
    w.set_bool_array("gemma4.attention.sliding_window_pattern", &pattern(5, 3));
    assert!(matches!(parse(&w), Err(Error::Gguf(m)) if m.contains("5 entries") && m.contains("6 layers")));
    let mut w = small_gemma4();
    w.set_i32_array("gemma4.feed_forward_length", &[128; 7]);
    assert!(matches!(parse(&w), Err(Error::Gguf(m)) if m.contains("feed_forward_length")));
    let mut w = small_gemma4();
    w.set_i32_array("gemma4.attention.head_count_kv", &[2; 4]);
    assert!(matches!(parse(&w), Err(Error::Gguf(m)) if m.contains("head_count_kv")));

    // A shared global layer whose kind has no non-shared layer.
    let mut w = small_gemma4();
    w.set_bool_array("gemma4.attention.sliding_window_pattern", &[true, true, true, true, true, false])
        .set_u32("gemma4.attention.shared_kv_layers", 1);
    assert!(matches!(parse(&w), Err(Error::Gguf(m)) if m.contains("layer 5") && m.contains("global")));
    w.set_u32("gemma4.attention.shared_kv_layers", 6);
    assert!(matches!(parse(&w), Err(Error::Gguf(_))));

    // KV heads that do not divide the query heads.
    let mut w = small_gemma4();
    w.set_u32("gemma4.attention.head_count_kv", 3);
    assert!(matches!(parse(&w), Err(Error::Gguf(m)) if m.contains("3 KV heads")));

    // Wrongly typed values.
    let mut w = small_gemma4();
    w.set_f32("gemma4.attention.layer_norm_rms_epsilon", -1.0);
    assert!(matches!(parse(&w), Err(Error::Gguf(_))));
    let mut w = small_gemma4();
    w.set_str("gemma4.attention.sliding_window_pattern", "SSG");
    assert!(matches!(parse(&w), Err(Error::Gguf(m)) if m.contains("sliding_window_pattern")));
    let mut w = small_gemma4();
    w.set_u32("gemma4.rope.dimension_count", 1000);
    assert!(matches!(parse(&w), Err(Error::Gguf(m)) if m.contains("rope.dimension_count")));

    // No way to know the vocabulary.
    let mut w = base("gemma4", 6, 64, 4);
    w.set_u32("gemma4.feed_forward_length", 128);
    assert!(matches!(parse(&w), Err(Error::MissingTensor(m)) if m.contains("vocabulary")));
}
