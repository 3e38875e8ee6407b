//! KV snapshots: save a conversation's cache, restore it into a fresh one, continue, and get
//! the same logits as an uninterrupted run; snapshots from another model are refused.

mod common;

use std::sync::Arc;

use rullama::cpu::forward::{CpuModel, Logits};
use rullama::gguf::GgufFile;
use rullama::runtime::snapshot;

fn model(name: &str) -> CpuModel {
    CpuModel::load(Arc::new(GgufFile::open(common::fixture(name)).unwrap())).unwrap()
}

#[test]
fn restore_and_continue_equals_uninterrupted() {
    let m = model("g4_dense.f32.gguf");
    let toks: Vec<u32> = rullama::npy::read::<i32>(common::fixture("g4_dense.tokens.npy")).unwrap().data.iter().map(|&t| t as u32).collect();
    let mut whole = m.new_cache(toks.len());
    let want = m.forward(&toks, &mut whole, Logits::All).unwrap();

    let mut first = m.new_cache(toks.len());
    m.forward(&toks[..11], &mut first, Logits::All).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chat.kv");
    snapshot::save(&path, &m.cfg, &m.file, &first.export()).unwrap();

    let mut restored = m.new_cache(toks.len());
    restored.import(snapshot::load(&path, &m.cfg, &m.file).unwrap()).unwrap();
    assert_eq!(restored.len(), 11);
    let got = m.forward(&toks[11..], &mut restored, Logits::All).unwrap();
    let v = m.cfg.vocab;
    assert_eq!(got, want[11 * v..], "the restored cache continues exactly");
}

#[test]
fn refuses_other_models_and_broken_files() {
    let a = model("g4_dense.f32.gguf");
    let b = model("g4_dense.q8_0.gguf");
    let mut c = a.new_cache(8);
    a.forward(&[2, 10, 11], &mut c, Logits::Last).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.kv");
    snapshot::save(&path, &a.cfg, &a.file, &c.export()).unwrap();
    // Same layout, different weights.
    let e = snapshot::load(&path, &b.cfg, &b.file).err().expect("refused");
    assert!(e.to_string().contains("different model"), "{e}");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
    assert!(snapshot::load(&path, &a.cfg, &a.file).err().unwrap().to_string().contains("truncated"));
    std::fs::write(&path, b"junk").unwrap();
    assert!(snapshot::load(&path, &a.cfg, &a.file).err().unwrap().to_string().contains("not a KV snapshot"));
}
