//! `rullama synth` writes models the engine loads: presets shrunk to test size keep every
//! structural feature (PLE, KV sharing, double-wide MLP, MoE with V := K, Gemma 3).

use std::sync::Arc;

use rullama::cpu::forward::{CpuModel, Logits};
use rullama::gguf::GgufFile;
use rullama::synth::{Preset, preset, write};

fn shrink(mut p: Preset) -> Preset {
    // 8 layers × PLE 32 = 256: the packed PLE table's rows stay whole Q6_K blocks.
    p.layers = if p.shared_kv > 0 { 8 } else { 6 };
    p.shared_kv = p.shared_kv.min(2);
    p.hidden = 256;
    p.ffn = 256;
    p.hd_swa = 64;
    // Gemma 3 has one head size for both kinds of layer.
    p.hd_global = if p.arch == "gemma3" { 64 } else { 128 };
    p.ple = p.ple.min(32);
    p.vocab = 600;
    p.moe = p.moe.map(|(_, used, _)| (8, used.min(2), 256));
    p
}

fn check(arch: &str, name: &str) {
    let p = shrink(preset(arch, name).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.gguf");
    write(&p, &path).unwrap();
    let f = Arc::new(GgufFile::open(&path).unwrap());
    let m = CpuModel::load(f).unwrap_or_else(|e| panic!("{arch} {name}: {e}"));
    assert_eq!(m.cfg.n_layers, p.layers);
    assert_eq!(m.cfg.layers.iter().filter(|l| l.kv_donor.is_some()).count(), p.shared_kv);
    assert_eq!(m.cfg.moe.is_some(), p.moe.is_some());
    if p.k_eq_v {
        assert!(m.cfg.layers.iter().any(|l| !l.has_v));
    }
    let mut cache = m.new_cache(16);
    let logits = m.forward(&[2, 500, 501, 502], &mut cache, Logits::All).unwrap();
    assert!(logits.iter().all(|v| v.is_finite()), "{arch} {name}: non-finite logits");
}

#[test]
fn gemma4_e2b_shaped() {
    check("gemma4", "e2b");
}

#[test]
fn gemma4_moe_shaped() {
    check("gemma4", "26b-a4b");
}

#[test]
fn gemma3_shaped() {
    check("gemma3", "270m");
}

#[test]
fn unknown_preset_is_an_error() {
    assert!(preset("gemma4", "99b").is_err());
}
