//! The `rullama` command line, run as a user would: a throwaway HOME/XDG profile, a fake
//! Ollama store holding a fixture model, and the committed transformers references.

mod common;

use std::path::Path;
use std::process::{Command, Output};

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    /// A profile with an Ollama store that holds `tests/fixtures/g4_moe.f32.gguf` as `tiny:moe`.
    fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("ollama");
        let blob_src = common::fixture("g4_moe.f32.gguf");
        let bytes = std::fs::read(&blob_src).unwrap();
        let digest = "ab".repeat(32);
        std::fs::create_dir_all(store.join("blobs")).unwrap();
        std::fs::write(store.join(format!("blobs/sha256-{digest}")), &bytes).unwrap();
        let mdir = store.join("manifests/registry.ollama.ai/library/tiny");
        std::fs::create_dir_all(&mdir).unwrap();
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": format!("sha256:{digest}"), "size": bytes.len()}]
        });
        std::fs::write(mdir.join("moe"), manifest.to_string()).unwrap();
        Env { dir }
    }

    fn run(&self, args: &[&str]) -> Output {
        let home = self.dir.path().join("home");
        Command::new(env!("CARGO_BIN_EXE_rullama"))
            .args(args)
            .env("HOME", &home)
            .env("XDG_DATA_HOME", home.join(".local/share"))
            .env("OLLAMA_MODELS", self.dir.path().join("ollama"))
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(o.status.success(), "rullama {args:?} failed: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    }

    fn err(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(!o.status.success(), "rullama {args:?} should fail");
        String::from_utf8(o.stderr).unwrap()
    }
}

#[test]
fn list_shows_store_and_imported_models() {
    let env = Env::new();
    let out = env.ok(&["list", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let names: Vec<&str> = v.as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["tiny:moe"]);
    assert!(v[0]["capabilities"].as_array().unwrap().iter().any(|c| c == "moe"));

    let imported = common::fixture("g3_tiny.f32.gguf");
    env.ok(&["import", imported.to_str().unwrap(), "--name", "tiny:g3"]);
    let text = env.ok(&["list"]);
    assert!(text.contains("tiny:moe") && text.contains("tiny:g3"), "{text}");
    env.ok(&["forget", "tiny:g3"]);
    assert!(!env.ok(&["list"]).contains("tiny:g3"));
    assert!(imported.exists(), "forget never deletes the file");
}

#[test]
fn info_shows_layer_plan() {
    let env = Env::new();
    let out = env.ok(&["info", "tiny:moe", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["metadata"]["general.architecture"], "gemma4");
    let layers = v["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 4);
    assert_eq!(layers[1]["kind"], "global");
    assert_eq!(layers[1]["v"], false, "global layers of the MoE fixture have no attn_v");
    let text = env.ok(&["info", "tiny:moe"]);
    assert!(text.contains("V=K"), "{text}");
}

#[test]
fn logits_match_the_transformers_reference() {
    let env = Env::new();
    let toks = rullama::npy::read::<i32>(common::fixture("g4_moe.tokens.npy")).unwrap().data;
    let list = toks.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(",");
    let want = rullama::npy::read::<f32>(common::fixture("g4_moe.logits.npy")).unwrap();
    // The whole sequence in one pass, and the decode path token by token (row t sees
    // tokens ..= t either way), each into a file of its own.
    for (name, file, extra) in [("all at once", "all.npy", None), ("one by one", "one.npy", Some("--one-by-one"))] {
        let out = env.dir.path().join(file);
        let mut args = vec!["logits", "--model", "tiny:moe", "--tokens", &list, "--out", out.to_str().unwrap()];
        args.extend(extra);
        env.ok(&args);
        let got = rullama::npy::read::<f32>(&out).unwrap();
        assert_eq!(got.shape, want.shape, "{name}");
        let max = got.data.iter().zip(&want.data).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
        assert!(max < 2e-3, "{name}: max |Δ| {max}");
    }
}

#[test]
fn tokenize_and_run_on_the_demo_model() {
    let env = Env::new();
    let demo = common::demo_gguf();
    let m = demo.to_str().unwrap();
    let ids: Vec<u32> = serde_json::from_str(&env.ok(&["tokenize", "--model", m, "--text", "The capital of France is", "--bos"])).unwrap();
    assert_eq!(ids, [2, 818, 5279, 529, 7001, 563], "ids published in the oracle notes (llama.cpp, HF)");
    let greedy = ["run", "--model", m, "--prompt", "The capital of France is", "--temperature", "0", "--max-tokens", "8"];
    let run = |extra: &[&str]| env.ok(&[&greedy[..], extra].concat());
    let out = run(&["--backend", "cpu"]);
    assert!(out.contains("France"), "a greedy continuation names France again: {out:?}");
    // The GPU engine (lavapipe in CI) gives the same greedy reply, and so does the default,
    // which takes the GPU where an adapter takes the model (`--verbose` names the engine).
    assert_eq!(run(&["--backend", "gpu"]), out, "GPU and CPU greedy replies differ");
    let default = env.run(&[&greedy[..], &["--verbose"]].concat());
    let said = String::from_utf8_lossy(&default.stderr);
    assert!(default.status.success(), "the default engine failed: {said}");
    assert_eq!(String::from_utf8_lossy(&default.stdout), out, "the default engine's greedy reply differs");
    assert!(!said.contains("CPU (f32 reference)") && !said.contains("no GPU"), "the default engine is not the GPU: {said}");
}

/// `rullama bench` on the GPU (lavapipe in CI) with a store model: its JSON report has
/// every figure, positive, the memory split into weights, cache and the kernels' scratch
/// (made during the run), one figure per timed repetition (warm-up runs left out), the
/// prefill precision it ran, and the text form says the same. Timings are not checked.
#[test]
fn bench_reports_speed_and_memory() {
    let env = Env::new();
    let args = ["bench", "--model", "tiny:moe", "--backend", "gpu", "--prompt-tokens", "12", "--gen-tokens", "3"];
    let r: serde_json::Value = serde_json::from_str(&env.ok(&[&args[..], &["--json", "--warmup", "2"]].concat())).unwrap();
    for key in ["load_s", "prefill_tok_s", "ttft_ms", "decode_tok_s", "decode_ms_per_token", "weight_bytes", "cache_bytes", "scratch_bytes"] {
        assert!(r[key].as_f64().is_some_and(|v| v > 0.0), "{key} in {r}");
    }
    assert_eq!((r["prompt_tokens"].as_u64(), r["gen_tokens"].as_u64(), r["backend"].as_str()), (Some(12), Some(3), Some("gpu")));
    // One figure per repetition (three by default), the reported one their best.
    for (reps, best) in [("prefill_tok_s_reps", "prefill_tok_s"), ("decode_tok_s_reps", "decode_tok_s")] {
        let v: Vec<f64> = r[reps].as_array().unwrap_or_else(|| panic!("{reps} in {r}")).iter().filter_map(|x| x.as_f64()).collect();
        assert_eq!(v.len(), 3, "{reps} in {r}");
        let max = v.iter().copied().fold(0.0, f64::max);
        assert!(v.iter().all(|&x| x > 0.0) && (max - r[best].as_f64().unwrap()).abs() <= 1e-9 * max, "{reps} against {best} in {r}");
    }
    // Untimed runs are not repetitions (two asked for here, one by default below).
    assert_eq!(r["warmup"].as_u64(), Some(2), "{r}");
    // The prefill precision is f32 unless asked, and the report says which ran.
    assert_eq!(r["prefill_precision"].as_str(), Some("f32"), "{r}");
    let text = env.ok(&[&args[..], &["--reps", "2", "--prefill-precision", "f16"]].concat());
    assert!(text.contains("prefill 12 tok (f16 products)") && text.contains("decode 3 tok") && text.contains("best of 2 after 1 untimed run; medians"), "{text}");
    assert!(text.contains("scratch"), "{text}");
}

#[test]
fn bad_input_gives_clear_errors() {
    let env = Env::new();
    assert!(env.err(&["info", "nope:missing"]).contains("not found"));
    let junk = env.dir.path().join("junk.gguf");
    std::fs::write(&junk, b"not a model").unwrap();
    assert!(env.err(&["info", junk.to_str().unwrap()]).contains("GGUF"));
    let e = env.err(&["logits", "--model", "tiny:moe", "--tokens", "2,999999", "--out", "/dev/null"]);
    assert!(e.contains("outside the vocabulary"), "{e}");
    assert!(env.err(&["run", "--model", "tiny:moe", "--prompt", "  "]).contains("empty"));
    assert!(env.err(&["import", "/nonexistent/file.gguf"]).contains("file.gguf"));
    assert!(!Path::new("/nonexistent").exists());
}
