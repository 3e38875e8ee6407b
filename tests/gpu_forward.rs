//! The GPU forward pass against the transformers references and the CPU reference, on the
//! committed fixtures (lavapipe in CI), and on the real Gemma 3 270M.
//!
//! Same criteria as the CPU: argmax equal at every position and max |Δ| ≤ 1e-3 × std of the
//! reference logits. GPU and CPU differ only in summation order (≈1e-6 relative per op).

mod common;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use rullama::cpu::forward::{CpuModel, Logits};
use rullama::gguf::GgufFile;
use rullama::gpu::forward::GpuModel;
use rullama::npy;
use common::{argmax, compare, tokens};
use rullama::runtime::{Sampler, SamplingOptions, TextModel};

fn check(model: &str, variant: &str) {
    let f = Arc::new(GgufFile::open(common::fixture(&format!("{model}.{variant}.gguf"))).unwrap());
    let gpu = GpuModel::load(f.clone()).unwrap();
    let cpu = CpuModel::load(f).unwrap();
    let toks = tokens(model);
    let suffix = if variant == "f32" { String::new() } else { format!(".{variant}") };
    let want = npy::read::<f32>(common::fixture(&format!("{model}{suffix}.logits.npy"))).unwrap().data;
    let v = gpu.cfg.vocab;
    let no = AtomicBool::new(false);

    let mut cache = gpu.new_cache(toks.len());
    let prefill = gpu.forward(&toks, &mut cache, Logits::All, &no).unwrap();
    let rel = compare(&format!("{model}.{variant} GPU vs transformers"), &prefill, &want, v);
    let mut cc = cpu.new_cache(toks.len());
    let cpu_logits = cpu.forward(&toks, &mut cc, Logits::All).unwrap();
    let rel_cpu = compare(&format!("{model}.{variant} GPU vs CPU"), &prefill, &cpu_logits, v);
    eprintln!("{model}.{variant}: GPU vs transformers {rel:.2e} × std, vs CPU {rel_cpu:.2e} × std");

    // Decode token by token must agree with the prefill.
    let mut cache = gpu.new_cache(toks.len());
    let mut dec = Vec::new();
    for &t in &toks {
        dec.extend(gpu.forward(&[t], &mut cache, Logits::Last, &no).unwrap());
    }
    compare(&format!("{model}.{variant} decode vs prefill"), &dec, &prefill, v);

    // Greedy sampling on the GPU picks the CPU's argmax.
    let mut cache = gpu.new_cache(toks.len());
    let mut s = Sampler::new(SamplingOptions::greedy());
    let id = gpu.next_token(&toks, &mut cache, &mut s, &toks, &no).unwrap();
    assert_eq!(id as usize, argmax(&cpu_logits[(toks.len() - 1) * v..]), "{model}.{variant}: GPU argmax");
}

#[test]
fn g4_dense_f32() {
    check("g4_dense", "f32");
}

#[test]
fn g4_dense_q8_0() {
    check("g4_dense", "q8_0");
}

#[test]
fn g4_moe_f32() {
    check("g4_moe", "f32");
}

#[test]
fn g4_moe_q8_0() {
    check("g4_moe", "q8_0");
}

#[test]
fn g3_tiny_f32() {
    check("g3_tiny", "f32");
}

#[test]
fn g3_tiny_q8_0() {
    check("g3_tiny", "q8_0");
}

#[test]
fn cancel_and_errors_leave_the_cache_unchanged() {
    let f = Arc::new(GgufFile::open(common::fixture("g4_dense.f32.gguf")).unwrap());
    let gpu = GpuModel::load(f).unwrap();
    let no = AtomicBool::new(false);
    let mut cache = gpu.new_cache(8);
    gpu.forward(&[2, 5, 6], &mut cache, Logits::Last, &no).unwrap();
    assert_eq!(cache.len(), 3);
    assert!(gpu.forward(&[gpu.cfg.vocab as u32], &mut cache, Logits::Last, &no).is_err());
    assert!(gpu.forward(&[1; 6], &mut cache, Logits::Last, &no).is_err(), "past the context");
    let yes = AtomicBool::new(true);
    let e = gpu.forward(&[7, 8, 9, 10], &mut cache, Logits::Last, &yes).unwrap_err();
    assert!(matches!(e, rullama::Error::Cancelled), "{e}");
    assert_eq!(cache.len(), 3);
}

/// Real weights: GPU vs CPU logits on the paragraph (Q4_K/Q5_0/Q6_K/Q8_0 kernels, 18 layers),
/// all at once and then token by token (the decode path: residual steps folded into the
/// matvecs, whose q/k and v projections are separate matrices in this file, and split
/// attention).
#[test]
fn real_gemma3_270m_gpu_matches_cpu() {
    let f = Arc::new(GgufFile::open(common::demo_gguf()).unwrap());
    let gpu = GpuModel::load(f.clone()).unwrap();
    let cpu = CpuModel::load(f).unwrap();
    let all: Vec<u32> = npy::read::<i32>(common::fixture("gemma3_270m_ref/tokens.npy")).unwrap().data.iter().map(|&t| t as u32).collect();
    let (toks, next) = (&all[..40], &all[40..46]);
    let no = AtomicBool::new(false);
    let mut gc = gpu.new_cache(46);
    let g = gpu.forward(toks, &mut gc, Logits::All, &no).unwrap();
    let mut cc = cpu.new_cache(46);
    let c = cpu.forward(toks, &mut cc, Logits::All).unwrap();
    let rel = compare("270M GPU vs CPU", &g, &c, gpu.cfg.vocab);
    eprintln!("270M: GPU vs CPU {rel:.2e} × std");
    let (mut g, mut c) = (Vec::new(), Vec::new());
    for &t in next {
        g.extend(gpu.forward(&[t], &mut gc, Logits::All, &no).unwrap());
        c.extend(cpu.forward(&[t], &mut cc, Logits::All).unwrap());
    }
    let rel = compare("270M GPU vs CPU, token by token", &g, &c, gpu.cfg.vocab);
    eprintln!("270M token by token: GPU vs CPU {rel:.2e} × std");
}

/// Decode with the new token's norms and RoPE inside attention (the default) against the
/// separate head_norm_rope dispatch, token by token, with f32 and f16 caches, on a model
/// with sliding and global layers and KV sharing (Gemma 4) and on Gemma 3. The same
/// arithmetic in another reduction order (the norms' sums differ by ~1e-7 relative): f32
/// caches agree to 5e-5 × std (measured ~6e-6); in f16 caches an element whose two f32
/// results straddle a rounding boundary differs by one f16 step (2^-11 relative) and later
/// layers carry it, so the models' tolerance, 1e-3 × std (measured up to ~4e-4). A wrong
/// row, position or rounding errs by O(0.1 × std) or more.
#[test]
fn decode_prep_in_attention_matches_head_norm_rope() {
    for model in ["g4_dense", "g3_tiny"] {
        let f = Arc::new(GgufFile::open(common::fixture(&format!("{model}.f32.gguf"))).unwrap());
        let mut gpu = GpuModel::load(f).unwrap();
        let toks = tokens(model);
        let no = AtomicBool::new(false);
        for f16 in [false, true] {
            gpu.set_kv_f16(f16);
            let mut run = |prep: bool| -> Vec<f32> {
                gpu.set_decode_prep(prep);
                let mut cache = gpu.new_cache(toks.len());
                toks.iter().flat_map(|&t| gpu.forward(&[t], &mut cache, Logits::Last, &no).unwrap()).collect()
            };
            let (fused, apart) = (run(true), run(false));
            let sd = common::std_dev(&apart);
            let e = fused.iter().zip(&apart).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max);
            let tol = if f16 { 1e-3 } else { 5e-5 };
            eprintln!("{model} f16 KV {f16}: prep in attention vs head_norm_rope {:.2e} × std", e / sd);
            assert!(e <= tol * sd, "{model} f16 KV {f16}: max |Δ| {e:.3e} > {tol:e} × std {sd:.3e}");
        }
    }
}

/// Decode with Gemma 4's per-layer-embedding gate through the down projection (the
/// default: `matmul::PleAcc`) against the gate's own matvec, token by token, on a model
/// with the gate in every layer. The same arithmetic but for the gate's sums, which meet
/// in another order (W_gate · h + RMS · W_gate · (w_post ⊙ d), in 64-bit fixed point):
/// measured 7.7e-6 × std on lavapipe, held to 5e-5 × std as the other reorderings here. A wrong layer's
/// sums or a stale accumulator errs by O(0.1 × std) or more. Also that the fused kernels
/// ran, and that two runs give the same bits (integer sums do not depend on order).
#[test]
fn decode_ple_gate_through_down_matches_own_matvec() {
    let f = Arc::new(GgufFile::open(common::fixture("g4_dense.f32.gguf")).unwrap());
    let mut gpu = GpuModel::load(f).unwrap();
    assert!(gpu.cfg.ple_dim > 0, "the fixture has per-layer embeddings");
    let toks = tokens("g4_dense");
    let no = AtomicBool::new(false);
    let mut run = |on: bool| -> Vec<f32> {
        gpu.set_ple_acc(on);
        let mut cache = gpu.new_cache(toks.len());
        let out = toks.iter().flat_map(|&t| gpu.forward(&[t], &mut cache, Logits::Last, &no).unwrap()).collect();
        out
    };
    let (fused, again, apart) = (run(true), run(true), run(false));
    let sd = common::std_dev(&apart);
    let e = fused.iter().zip(&apart).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max);
    eprintln!("g4_dense: gate through the down projection vs its own matvec {:.2e} × std", e / sd);
    assert!(e <= 5e-5 * sd, "max |Δ| {e:.3e} > 5e-5 × std {sd:.3e}");
    assert!(fused.iter().zip(&again).all(|(a, b)| a.to_bits() == b.to_bits()), "two runs differ");
    let ran = |tag: &str| gpu.k.compiled_matching(|n| n.starts_with("matvec/") && n.ends_with(tag));
    assert!(ran(&format!("/ple_acc{}", gpu.cfg.ple_dim)) && ran(&format!("/ple_gate{}x{}", gpu.cfg.ple_dim, gpu.cfg.hidden)), "the fused kernels did not run");
}

/// The estimate available before loading equals what loading then allocates.
#[test]
fn memory_estimate_matches_what_loading_allocates() {
    for name in ["g4_dense.q8_0.gguf", "g4_moe.f32.gguf"] {
        let f = Arc::new(GgufFile::open(common::fixture(name)).unwrap());
        let est = rullama::gpu::forward::estimate_bytes(&f, 4096).unwrap();
        let m = GpuModel::load(f).unwrap();
        assert_eq!(est, m.weight_bytes + m.cache_bytes(4096), "{name}");
    }
}

/// A KV snapshot taken from the GPU cache restores into a fresh one (and into the CPU
/// cache: the layout is the same) and continues exactly.
#[test]
fn gpu_kv_snapshot_round_trip() {
    use rullama::runtime::snapshot;
    let f = Arc::new(GgufFile::open(common::fixture("g4_dense.f32.gguf")).unwrap());
    let gpu = GpuModel::load(f.clone()).unwrap();
    let cpu = CpuModel::load(f.clone()).unwrap();
    let toks = tokens("g4_dense");
    let no = AtomicBool::new(false);
    let mut whole = gpu.new_cache(toks.len());
    let want = gpu.forward(&toks, &mut whole, Logits::All, &no).unwrap();

    let mut first = gpu.new_cache(toks.len());
    gpu.forward(&toks[..9], &mut first, Logits::All, &no).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gpu.kv");
    snapshot::save(&path, &gpu.cfg, &f, &first.export(&gpu.k).unwrap()).unwrap();

    let mut restored = gpu.new_cache(toks.len());
    restored.import(&gpu.k, snapshot::load(&path, &gpu.cfg, &f).unwrap()).unwrap();
    let got = gpu.forward(&toks[9..], &mut restored, Logits::All, &no).unwrap();
    let v = gpu.cfg.vocab;
    compare("GPU snapshot continue", &got, &want[9 * v..], v);

    let mut on_cpu = cpu.new_cache(toks.len());
    on_cpu.import(snapshot::load(&path, &cpu.cfg, &f).unwrap()).unwrap();
    let got = cpu.forward(&toks[9..], &mut on_cpu, Logits::All).unwrap();
    compare("GPU snapshot continued on the CPU", &got, &want[9 * v..], v);
}

/// Prefill `prompt`, then decode until `want` tokens after the first were accepted.
fn decode_n<M: TextModel>(m: &M, prompt: &[u32], opts: &SamplingOptions, want: usize) -> (Vec<u32>, M::Cache) {
    let no = AtomicBool::new(false);
    let mut cache = m.new_cache(prompt.len() + want + 4);
    let mut s = Sampler::new(opts.clone());
    let first = m.next_token(prompt, &mut cache, &mut s, prompt, &no).unwrap();
    let mut ids = Vec::new();
    m.decode(first, &mut cache, &mut s, prompt, &no, &mut |id| {
        ids.push(id);
        Ok(ids.len() <= want)
    })
    .unwrap();
    (ids, cache)
}

/// Pipelined decoding (the GPU queues the next step before the host has seen the token)
/// produces the CPU's tokens, greedy and sampled (same seed, top-k within the 64 GPU
/// candidates), and leaves exactly the accepted tokens in the cache: the logits after one
/// more token match the CPU's after the same history. Each case after the first runs on
/// the buffers of the one before (a dropped cache's, which the next of its size takes).
#[test]
fn pipelined_decode_matches_cpu_and_keeps_only_accepted_tokens() {
    for (name, model) in [("g4_dense.q8_0.gguf", "g4_dense"), ("g3_tiny.f32.gguf", "g3_tiny")] {
        let f = Arc::new(GgufFile::open(common::fixture(name)).unwrap());
        let gpu = GpuModel::load(f.clone()).unwrap();
        let cpu = CpuModel::load(f).unwrap();
        let prompt = &tokens(model)[..6];
        let no = AtomicBool::new(false);
        let want = 10;
        for opts in [
            SamplingOptions::greedy(),
            SamplingOptions { temperature: 1.0, top_k: 40, top_p: 0.95, seed: 3, ..Default::default() },
            SamplingOptions { temperature: 0.7, top_k: 100, repeat_penalty: 1.5, repeat_last_n: 8, seed: 4, ..Default::default() },
        ] {
            let (g, mut gc) = decode_n(&gpu, prompt, &opts, want);
            let (c, mut cc) = decode_n(&cpu, prompt, &opts, want);
            assert_eq!(g, c, "{name} {opts:?}: GPU vs CPU tokens");
            assert_eq!(g.len(), want + 1);
            // Fed: the prompt and the `want` accepted tokens, not the refused last one.
            assert_eq!(gc.len(), prompt.len() + want, "{name}");
            assert_eq!(cc.len(), prompt.len() + want, "{name}");
            let next = [g[want]];
            let gl = gpu.forward(&next, &mut gc, Logits::Last, &no).unwrap();
            let cl = cpu.forward(&next, &mut cc, Logits::Last).unwrap();
            compare(&format!("{name}: logits after pipelined decode"), &gl, &cl, gpu.cfg.vocab);
        }
    }
    // Several times round the on-GPU token ring (32 slots), where a group's tokens wrap to its start.
    let f = Arc::new(GgufFile::open(common::fixture("g3_tiny.f32.gguf")).unwrap());
    let (gpu, cpu) = (GpuModel::load(f.clone()).unwrap(), CpuModel::load(f).unwrap());
    let prompt = &tokens("g3_tiny")[..6];
    let (g, _) = decode_n(&gpu, prompt, &SamplingOptions::greedy(), 140);
    let (c, _) = decode_n(&cpu, prompt, &SamplingOptions::greedy(), 140);
    assert_eq!(g, c, "g3_tiny: 140 greedy tokens, GPU vs CPU");
}

/// An f16 KV cache (`GpuModel::set_kv_f16`) against the CPU reference storing K and V
/// rounded to f16 the same way (`KvCache::f16_storage`). The two sides' K and V differ by
/// summation order before rounding (more so where prefill runs on tensor cores), so values
/// near a rounding boundary land on neighbouring halves: an error of at most one f16 step
/// where the f16 cache itself costs half a step. The bound is therefore calibrated on the
/// model: max |GPU f16 − CPU f16| ≤ 2 × max |CPU f16 − CPU f32| + 1e-3 × std (the f32
/// criterion). Measured: lavapipe 1.4e-4 / 3.6e-4 × std (g4_dense / g3_tiny), the H100
/// 2.4e-3 × std on g4_dense; the f16 cache's own effect is 5.2e-3 / 2.1e-3 × std. Any
/// indexing or packing mistake errs by O(std). Decode token by token agrees with the
/// prefill within the same bound, and so does a snapshot of the f16 cache continued on the
/// CPU's f16 cache. On a model with
/// sliding and global layers and KV sharing, and on Gemma 3.
#[test]
fn f16_kv_cache_matches_cpu_f16_reference() {
    use rullama::runtime::snapshot;
    for model in ["g4_dense", "g3_tiny"] {
        let f = Arc::new(GgufFile::open(common::fixture(&format!("{model}.f32.gguf"))).unwrap());
        let mut gpu = GpuModel::load(f.clone()).unwrap();
        // At a long context the cache dominates: f16 takes about half (plus f32 staging
        // rows for one batch).
        let ctx = 1 << 16;
        let full = gpu.cache_bytes(ctx);
        gpu.set_kv_f16(true);
        let half = gpu.cache_bytes(ctx);
        assert!(half < full * 6 / 10, "{model}: an f16 cache of {ctx} takes {half} bytes, f32 {full}");
        let cpu = CpuModel::load(f.clone()).unwrap();
        let toks = tokens(model);
        let v = gpu.cfg.vocab;
        let no = AtomicBool::new(false);
        let mut cc = cpu.new_cache(toks.len()).f16_storage();
        let want = cpu.forward(&toks, &mut cc, Logits::All).unwrap();
        let exact = cpu.forward(&toks, &mut cpu.new_cache(toks.len()), Logits::All).unwrap();
        let sd = common::std_dev(&want);
        let max_diff = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max);
        let own = max_diff(&want, &exact);
        let bound = 2.0 * own + 1e-3 * sd;

        let mut cache = gpu.new_cache(toks.len());
        let prefill = gpu.forward(&toks, &mut cache, Logits::All, &no).unwrap();
        let e = max_diff(&prefill, &want);
        eprintln!("{model} f16 KV: GPU vs CPU {:.2e} × std; the f16 cache's own effect {:.2e} × std", e / sd, own / sd);
        assert!(e <= bound, "{model} f16 KV: GPU vs CPU max |Δ| {e:.3e} > {bound:.3e}");

        let mut cache = gpu.new_cache(toks.len());
        let mut dec = Vec::new();
        for &t in &toks {
            dec.extend(gpu.forward(&[t], &mut cache, Logits::Last, &no).unwrap());
        }
        let e = max_diff(&dec, &prefill);
        assert!(e <= bound, "{model} f16 KV: decode vs prefill max |Δ| {e:.3e} > {bound:.3e}");

        let mut first = gpu.new_cache(toks.len());
        gpu.forward(&toks[..5], &mut first, Logits::All, &no).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f16.kv");
        snapshot::save(&path, &gpu.cfg, &f, &first.export(&gpu.k).unwrap()).unwrap();
        let mut on_cpu = cpu.new_cache(toks.len()).f16_storage();
        on_cpu.import(snapshot::load(&path, &cpu.cfg, &f).unwrap()).unwrap();
        let got = cpu.forward(&toks[5..], &mut on_cpu, Logits::All).unwrap();
        let e = max_diff(&got, &want[5 * v..]);
        assert!(e <= bound, "{model} f16 KV snapshot continued on the CPU: max |Δ| {e:.3e} > {bound:.3e}");
    }
}
