//! GgufWriter -> Gguf::parse round trip: every metadata value type, tensors of several types
//! with sizes that need padding, and the alignment of every tensor's data.

use rullama::gguf::{GgmlType, Gguf, GgufFile, GgufWriter, MetaValue, ValueType};

fn metadata() -> Vec<(String, MetaValue)> {
    use MetaValue as V;
    let strings = |v: &[&str]| V::Array(ValueType::String, v.iter().map(|s| V::String(s.to_string())).collect());
    vec![
        ("general.architecture".into(), V::String("gemma3".into())),
        ("t.u8".into(), V::U8(u8::MAX)),
        ("t.i8".into(), V::I8(i8::MIN)),
        ("t.u16".into(), V::U16(0xBEEF)),
        ("t.i16".into(), V::I16(-12345)),
        ("t.u32".into(), V::U32(u32::MAX)),
        ("t.i32".into(), V::I32(i32::MIN)),
        ("t.f32".into(), V::F32(-1.5e-42)), // subnormal: bits must survive
        ("t.f32_inf".into(), V::F32(f32::NEG_INFINITY)),
        ("t.f32_neg_zero".into(), V::F32(-0.0)),
        ("t.bool_true".into(), V::Bool(true)),
        ("t.bool_false".into(), V::Bool(false)),
        ("t.u64".into(), V::U64(u64::MAX)),
        ("t.i64".into(), V::I64(i64::MIN)),
        ("t.f64".into(), V::F64(std::f64::consts::E)),
        ("t.string_empty".into(), V::String(String::new())),
        ("t.string_unicode".into(), V::String("▁Gemma · 日本語 · ελληνικά · 🦀\n\t\"q\"".into())),
        ("ключ.名前".into(), V::String("unicode key".into())),
        ("t.array_empty".into(), V::Array(ValueType::U32, vec![])),
        ("t.array_empty_strings".into(), V::Array(ValueType::String, vec![])),
        ("t.array_u8".into(), V::Array(ValueType::U8, vec![V::U8(0), V::U8(7), V::U8(255)])),
        ("t.array_i16".into(), V::Array(ValueType::I16, vec![V::I16(-1), V::I16(i16::MAX)])),
        ("t.array_u64".into(), V::Array(ValueType::U64, vec![V::U64(1 << 40)])),
        ("t.array_f64".into(), V::Array(ValueType::F64, vec![V::F64(-0.25), V::F64(1e300)])),
        ("t.array_strings".into(), strings(&["<bos>", "", "▁▁", "<start_of_turn>", "🦀"])),
        (
            "t.array_nested".into(),
            V::Array(
                ValueType::Array,
                vec![
                    V::Array(ValueType::I32, vec![V::I32(1), V::I32(-2), V::I32(3)]),
                    V::Array(ValueType::I32, vec![]),
                    strings(&["a", "ß"]),
                    V::Array(ValueType::Array, vec![V::Array(ValueType::Bool, vec![V::Bool(true)])]),
                ],
            ),
        ),
    ]
}

/// (name, dims, type); sizes chosen so most data lengths are not multiples of the alignment.
const TENSORS: &[(&str, &[u64], GgmlType)] = &[
    ("a.f32", &[3, 5], GgmlType::F32),
    ("b.f16", &[7], GgmlType::F16),
    ("c.bf16", &[1, 3, 1], GgmlType::BF16),
    ("d.q8_0", &[32, 3], GgmlType::Q8_0),
    ("e.q4_0", &[64], GgmlType::Q4_0),
    ("f.i8", &[5], GgmlType::I8),
    ("g.q4_k", &[256, 1], GgmlType::Q4_K),
    ("h.q6_k", &[256, 2, 1, 1], GgmlType::Q6_K),
    ("i.f32_scalar", &[1], GgmlType::F32),
];

/// Deterministic non-repeating bytes, different per tensor.
fn bytes(seed: usize, n: usize) -> Vec<u8> {
    let mut x = 0x9E37_79B9u32.wrapping_mul(seed as u32 + 1);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

fn tensor_data() -> Vec<Vec<u8>> {
    TENSORS
        .iter()
        .enumerate()
        .map(|(i, (_, dims, ty))| bytes(i, ty.bytes_for(dims.iter().product()).unwrap() as usize))
        .collect()
}

fn build(alignment: Option<u32>) -> (GgufWriter, Vec<(String, MetaValue)>) {
    let mut w = GgufWriter::new();
    let mut meta = metadata();
    if let Some(a) = alignment {
        meta.insert(1, ("general.alignment".into(), MetaValue::U32(a)));
    }
    for (k, v) in &meta {
        w.set(k, v.clone());
    }
    for ((name, dims, ty), data) in TENSORS.iter().zip(tensor_data()) {
        w.add_tensor(name, dims, *ty, data).unwrap();
    }
    (w, meta)
}

fn check(alignment: Option<u32>) {
    let (w, meta) = build(alignment);
    let image = w.to_bytes();
    let g = Gguf::parse(&image).unwrap();
    let align = alignment.map_or(32, u64::from);

    assert_eq!(g.version, 3);
    assert_eq!(g.alignment, align);
    assert_eq!(g.metadata, meta);
    assert_eq!(g.data_offset % align, 0);
    assert_eq!(image.len() as u64 % align, 0, "the data section ends padded");

    assert_eq!(g.tensors.len(), TENSORS.len());
    let mut end = 0;
    for ((t, (name, dims, ty)), data) in g.tensors.iter().zip(TENSORS).zip(tensor_data()) {
        assert_eq!(t.name, *name);
        assert_eq!(t.dims, *dims);
        assert_eq!(t.ty, *ty);
        assert_eq!(t.n_elements, dims.iter().product::<u64>());
        assert_eq!(t.n_bytes, data.len() as u64);
        assert_eq!((g.data_offset + t.offset) % align, 0, "{name}: data not aligned to {align}");
        assert!(t.offset >= end, "{name} overlaps the previous tensor");
        end = t.offset + t.n_bytes;
        assert_eq!(g.tensor_bytes(&image, t), &data[..], "{name}");
        assert_eq!(g.tensor(name), Some(t));
    }

    // Re-encoding what was parsed gives the same bytes: float bits (-0.0, subnormals),
    // key order and padding all survived.
    let mut again = GgufWriter::new();
    for (k, v) in &g.metadata {
        again.set(k, v.clone());
    }
    for t in &g.tensors {
        again.add_tensor(&t.name, &t.dims, t.ty, g.tensor_bytes(&image, t).to_vec()).unwrap();
    }
    assert!(again.to_bytes() == image, "re-encoded file differs");
}

#[test]
fn round_trip_default_alignment() {
    check(None);
}

#[test]
fn round_trip_alignment_64() {
    check(Some(64));
}

#[test]
fn round_trip_alignment_8() {
    check(Some(8));
}

#[test]
fn write_to_disk_and_map() {
    let (w, meta) = build(Some(64));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rt.gguf");
    w.write(&path).unwrap();
    assert!(!dir.path().join("rt.gguf.partial").exists(), "temporary file renamed away");
    let f = GgufFile::open(&path).unwrap();
    assert_eq!(f.metadata, meta);
    assert_eq!(f.bytes(), &w.to_bytes()[..]);
    for ((name, _, _), data) in TENSORS.iter().zip(tensor_data()) {
        let v = f.view(name).unwrap();
        assert_eq!(v.data, &data[..], "{name}");
        assert_eq!(v.data.as_ptr() as usize % 64, 0, "{name}: mapped data aligned");
    }
    let a = f.view("a.f32").unwrap().as_f32().unwrap();
    assert_eq!(a.len(), 15);
}

#[test]
fn typed_setters_round_trip() {
    let mut w = GgufWriter::new();
    w.set_str("s", "x")
        .set_u32("u", 7)
        .set_f32("f", 0.5)
        .set_bool("b", true)
        .set_u32_array("ua", &[1, 2])
        .set_i32_array("ia", &[-1])
        .set_f32_array("fa", &[])
        .set_bool_array("ba", &[false, true])
        .set_str_array("sa", &["α", "β"])
        .set_u32("u", 8); // replaces, keeps position
    w.add_f32("t", &[2, 2], &[1.0, -2.0, 3.5, f32::MIN_POSITIVE]).unwrap();
    let image = w.to_bytes();
    let g = Gguf::parse(&image).unwrap();
    let keys: Vec<&str> = g.metadata.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["s", "u", "f", "b", "ua", "ia", "fa", "ba", "sa"]);
    assert_eq!(g.get_u32("u"), Some(8));
    assert_eq!(g.get_str("s"), Some("x"));
    assert_eq!(g.get_f32("f"), Some(0.5));
    assert_eq!(g.get("b"), Some(&MetaValue::Bool(true)));
    assert_eq!(g.get("fa"), Some(&MetaValue::Array(ValueType::F32, vec![])));
    assert_eq!(
        g.get("sa"),
        Some(&MetaValue::Array(ValueType::String, vec![MetaValue::String("α".into()), MetaValue::String("β".into())]))
    );
    let t = g.tensor("t").unwrap();
    let values: Vec<f32> = g.tensor_bytes(&image, t).chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(values, [1.0, -2.0, 3.5, f32::MIN_POSITIVE]);
}
