//! The CPU reference forward against transformers (fp32) on the committed tiny fixtures,
//! and against transformers on the real Gemma 3 270M.
//!
//! Tolerance: max |Δ| ≤ 1e-3 × std(reference logits), with equal argmax everywhere. The
//! fixtures' logits have std ≈ 2, so this allows ~2e-3: f32 accumulation-order noise over
//! a handful of 64-wide layers is ~1e-5, while any real mistake (a norm, a RoPE pair, a
//! donor layer) moves logits by ≥ 0.1 (see scripts/fixtures/README.md).

mod common;

use std::sync::Arc;

use rullama::cpu::forward::{CpuModel, Logits};
use rullama::gguf::GgufFile;
use rullama::npy;
use common::{argmax, compare, std_dev, tokens};

fn load(name: &str) -> CpuModel {
    let f = GgufFile::open(common::fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    CpuModel::load(Arc::new(f)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn check_fixture(model: &str, variant: &str) {
    let m = load(&format!("{model}.{variant}.gguf"));
    let toks = tokens(model);
    let suffix = if variant == "f32" { String::new() } else { format!(".{variant}") };
    let want = npy::read::<f32>(common::fixture(&format!("{model}{suffix}.logits.npy"))).unwrap();
    assert_eq!(want.shape, vec![toks.len(), m.cfg.vocab]);
    assert!(toks.len() > m.cfg.sliding_window, "the sequence must be longer than the window");

    let mut cache = m.new_cache(toks.len());
    let all = m.forward(&toks, &mut cache, Logits::All).unwrap();
    let rel = compare(&format!("{model}.{variant} teacher-forced"), &all, &want.data, m.cfg.vocab);
    eprintln!("{model}.{variant}: max |Δ| = {rel:.2e} × std");

    // Incremental decode, one token at a time, must give the same logits.
    let mut cache = m.new_cache(toks.len());
    let mut inc = Vec::new();
    for &t in &toks {
        inc.extend(m.forward(&[t], &mut cache, Logits::Last).unwrap());
    }
    let d = inc.iter().zip(&all).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
    assert!(d <= 1e-5 * std_dev(&all), "{model}.{variant}: incremental vs teacher-forced differ by {d}");
}

#[test]
fn g4_dense_f32() {
    check_fixture("g4_dense", "f32");
}

#[test]
fn g4_dense_q8_0() {
    check_fixture("g4_dense", "q8_0");
}

#[test]
fn g4_moe_f32() {
    check_fixture("g4_moe", "f32");
}

#[test]
fn g4_moe_q8_0() {
    check_fixture("g4_moe", "q8_0");
}

#[test]
fn g3_tiny_f32() {
    check_fixture("g3_tiny", "f32");
}

#[test]
fn g3_tiny_q8_0() {
    check_fixture("g3_tiny", "q8_0");
}

#[test]
fn prefill_in_chunks_equals_all_at_once() {
    let m = load("g4_dense.f32.gguf");
    let toks = tokens("g4_dense");
    let mut cache = m.new_cache(toks.len());
    let all = m.forward(&toks, &mut cache, Logits::All).unwrap();
    let mut cache = m.new_cache(toks.len());
    let mut chunked = m.forward(&toks[..5], &mut cache, Logits::All).unwrap();
    chunked.extend(m.forward(&toks[5..17], &mut cache, Logits::All).unwrap());
    chunked.extend(m.forward(&toks[17..], &mut cache, Logits::All).unwrap());
    let d = chunked.iter().zip(&all).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
    assert!(d <= 1e-5 * std_dev(&all), "chunked prefill differs by {d}");
}

#[test]
fn truncating_the_cache_reuses_a_prefix() {
    let m = load("g4_moe.f32.gguf");
    let toks = tokens("g4_moe");
    let mut cache = m.new_cache(toks.len());
    let all = m.forward(&toks, &mut cache, Logits::All).unwrap();
    cache.truncate(10, &m.cfg);
    assert_eq!(cache.len(), 10);
    let rest = m.forward(&toks[10..], &mut cache, Logits::All).unwrap();
    let v = m.cfg.vocab;
    let d = rest.iter().zip(&all[10 * v..]).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
    assert!(d <= 1e-5 * std_dev(&all), "after truncate the logits differ by {d}");
}

#[test]
fn bad_input_is_an_error() {
    let m = load("g4_dense.f32.gguf");
    let mut cache = m.new_cache(4);
    assert!(m.forward(&[], &mut cache, Logits::Last).is_err());
    let e = m.forward(&[m.cfg.vocab as u32], &mut cache, Logits::Last).unwrap_err();
    assert!(e.to_string().contains("outside the vocabulary"), "{e}");
    let e = m.forward(&[2, 3, 4, 5, 6], &mut cache, Logits::Last).unwrap_err();
    assert!(e.to_string().contains("context"), "{e}");
    assert_eq!(cache.len(), 0, "a failed call leaves the cache unchanged");
}

/// The real Gemma 3 270M (Q4_K_M): teacher-forced argmax equals transformers' (run on the
/// same GGUF dequantized to f32) at ≥ 99% of the positions of a paragraph, and logits
/// correlate > 0.999 on a fixed vocabulary subset.
#[test]
fn real_gemma3_270m_matches_transformers() {
    let f = Arc::new(GgufFile::open(common::demo_gguf()).unwrap());
    let m = CpuModel::load(f).unwrap();
    let dir = "gemma3_270m_ref";
    let toks: Vec<u32> = npy::read::<i32>(common::fixture(&format!("{dir}/tokens.npy"))).unwrap().data.iter().map(|&t| t as u32).collect();
    let want_argmax = npy::read::<i32>(common::fixture(&format!("{dir}/argmax.npy"))).unwrap().data;
    let cols = npy::read::<i32>(common::fixture(&format!("{dir}/cols.npy"))).unwrap().data;
    let want = npy::read::<f32>(common::fixture(&format!("{dir}/logits.npy"))).unwrap().data;
    let mut cache = m.new_cache(toks.len());
    let all = m.forward(&toks, &mut cache, Logits::All).unwrap();
    let v = m.cfg.vocab;
    let agree = (0..toks.len()).filter(|&t| argmax(&all[t * v..(t + 1) * v]) as i32 == want_argmax[t]).count();
    let got: Vec<f32> = (0..toks.len()).flat_map(|t| cols.iter().map(move |&c| (t, c))).map(|(t, c)| all[t * v + c as usize]).collect();
    let corr = correlation(&got, &want);
    eprintln!("270M: argmax {agree}/{} positions, correlation {corr:.6}", toks.len());
    assert!(agree * 100 >= toks.len() * 99, "argmax agrees at only {agree}/{} positions", toks.len());
    assert!(corr > 0.999, "correlation {corr}");
}

fn correlation(a: &[f32], b: &[f32]) -> f64 {
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().map(|&x| x as f64).sum::<f64>() / n, b.iter().map(|&x| x as f64).sum::<f64>() / n);
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (&x, &y) in a.iter().zip(b) {
        let (dx, dy) = (x as f64 - ma, y as f64 - mb);
        sab += dx * dy;
        saa += dx * dx;
        sbb += dy * dy;
    }
    sab / (saa * sbb).sqrt()
}
