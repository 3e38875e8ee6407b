//! Quantized matmul, expert matmul and embedding gather on the GPU against their CPU
//! references (`cpu::ops::{matmul, matmul_experts, embed}`) on the same raw blocks, for
//! every weight type the GPU takes, in both reduction variants (subgroups and workgroup
//! memory) and with matrices split into tiles. Runs on whatever adapter wgpu finds.
//!
//! Tolerances. The GPU dequantizes bit-exactly: every product in the block formulas
//! (scale × sub-scale, scale × quant) fits in f32's 24-bit significand, so a fused
//! multiply-add gives the same result as the CPU's separately rounded ops, leaving one
//! rounding per element as on the CPU. The only difference in a matmul is then the
//! order of the f32 sum (and fused multiply-adds in it): with ≤ ~1300 terms of random sign
//! that is a few ulp of the sum of |w·x|, measured at ≤ 1.5e-6 of max |y| on lavapipe
//! for every type and variant here; 1e-5 leaves a margin for other summation orders,
//! while any layout or indexing mistake errs by O(1) (one quant step in one weight shifts
//! its output by ~1e-3 of max |y|). The embedding
//! gather involves no sum and is compared element by element to 1 ulp (denormal inputs
//! may be flushed to zero by the GPU: an absolute allowance of scale · f32::MIN_POSITIVE).

mod common;

use std::sync::Arc;

use half::{bf16, f16};
use rand::{RngExt, SeedableRng};
use common::{coop_kernels, coop_kernels_required, kernels};
use rand_chacha::ChaCha8Rng;
use rullama::Error;
use rullama::cpu::ops::{self, QMatrix};
use rullama::gguf::{GgmlType, GgufFile};
use rullama::gpu::matmul::{MatvecIn, embed, matmul, matmul_experts};
use rullama::gpu::weights::upload_blocks;
use rullama::gpu::{Batch, GpuMatrix, Kernels, block_groups, kernel};

/// Every weight type in Ollama's Gemma GGUFs.
const TYPES: &[GgmlType] = &[
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
];

const TOL: f32 = 1e-5;

/// The reduction variants this device can run: workgroup memory, and subgroups if present.
fn variants() -> Vec<Kernels> {
    let mut wg = kernels();
    wg.use_subgroups = false;
    let mut v = vec![wg];
    if v[0].gpu.subgroups {
        v.push(kernels());
    }
    v
}

fn variant_name(k: &Kernels) -> &'static str {
    match (k.use_subgroups, k.int_dot) {
        (true, true) => "subgroups",
        (false, true) => "workgroup",
        (true, false) => "subgroups, f32 dot",
        (false, false) => "workgroup, f32 dot",
    }
}

/// For matvecs that may stage their input as integers: `variants()`, then the default with
/// the f32 dot products where the integer ones would be taken (Q4_K, Q6_K).
fn staged_variants() -> Vec<Kernels> {
    let mut v = variants();
    let mut f = kernels();
    f.int_dot = false;
    v.push(f);
    v
}

/// Byte offsets of the f16 scale fields in one block (layouts in src/gguf/dequant.rs).
fn scale_fields(ty: GgmlType) -> &'static [usize] {
    match ty {
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => &[0],
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4_K | GgmlType::Q5_K => &[0, 2],
        GgmlType::Q6_K => &[208],
        _ => &[],
    }
}

/// Columns per row: more than 4 × 256 (the workgroup size) so threads stride over several
/// vec4s, a whole number of blocks, and not a power of two.
fn cols_for(ty: GgmlType) -> usize {
    match ty.block_elems() {
        1 => 1036,
        32 => 1056,
        _ => 1280,
    }
}

/// Columns of at most 1024 (within the matvec's PRELOAD_MAX_COLS) for blocks of `ty`.
fn short_cols(ty: GgmlType) -> usize {
    match ty.block_elems() {
        1 => 520,
        32 => 640,
        _ => 768,
    }
}

/// `rows` random rows of type `ty`: plain floats in [-1, 1), or random bytes (every quant
/// bit pattern) whose f16 scale fields are overwritten by finite values of both signs.
fn random_matrix(rng: &mut ChaCha8Rng, ty: GgmlType, cols: usize, rows: usize) -> Vec<u8> {
    let n = cols * rows;
    let mut float = || rng.random_range(-1.0f32..1.0);
    match ty {
        GgmlType::F32 => (0..n).flat_map(|_| float().to_le_bytes()).collect(),
        GgmlType::F16 => (0..n).flat_map(|_| f16::from_f32(float()).to_le_bytes()).collect(),
        GgmlType::BF16 => (0..n).flat_map(|_| bf16::from_f32(float()).to_le_bytes()).collect(),
        _ => {
            let bytes = n / ty.block_elems() * ty.block_bytes();
            let mut data: Vec<u8> = (0..bytes).map(|_| rng.random::<u8>()).collect();
            for block in data.chunks_exact_mut(ty.block_bytes()) {
                for &off in scale_fields(ty) {
                    let sign = if rng.random::<bool>() { -1.0 } else { 1.0 };
                    let s = f16::from_f32(sign * 2f32.powf(rng.random_range(-10.0..-3.0)));
                    block[off..off + 2].copy_from_slice(&s.to_le_bytes());
                }
            }
            data
        }
    }
}

fn rand_vec(rng: &mut ChaCha8Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(-2.0f32..2.0)).collect()
}

fn max_rel(got: &[f32], want: &[f32]) -> f32 {
    assert_eq!(got.len(), want.len());
    assert!(got.iter().all(|v| v.is_finite()), "non-finite GPU output");
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-30);
    got.iter().zip(want).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max) / scale
}

/// Value written around the outputs, to check nothing outside them is touched.
const SENTINEL: f32 = 12345.0;

fn up(k: &Kernels, v: &[f32]) -> wgpu::Buffer {
    kernel::upload(&k.gpu, "test", bytemuck::cast_slice(v))
}

fn up_u32(k: &Kernels, v: &[u32]) -> wgpu::Buffer {
    kernel::upload(&k.gpu, "ids", bytemuck::cast_slice(v))
}

/// Run `record` into a fresh batch over an output buffer of `len` sentinels + 1 at the end,
/// returning the whole buffer.
fn run(k: &Kernels, len: usize, record: impl FnOnce(&mut Batch, &wgpu::Buffer)) -> Vec<f32> {
    let y = up(k, &vec![SENTINEL; len + 1]);
    let mut b = Batch::new(Arc::clone(&k.gpu), 64);
    record(&mut b, &y);
    b.submit().unwrap();
    kernel::read_f32(&k.gpu, &y, 0, len + 1).unwrap()
}

/// GPU matmul of `w` with `x` (n rows), x placed at element `x_off` and y at `y_off`.
fn gpu_matmul(k: &Kernels, w: &GpuMatrix, x: &[f32], n: usize, x_off: usize, y_off: usize) -> Vec<f32> {
    let mut xs = vec![f32::NAN; x_off];
    xs.extend_from_slice(x);
    let xb = up(k, &xs);
    let out = run(k, y_off + n * w.rows, |b, y| matmul(k, b, w, &xb, x_off, n, y, y_off).unwrap());
    assert!(out[..y_off].iter().chain(out.last()).all(|&v| v == SENTINEL), "writes outside y");
    out[y_off..y_off + n * w.rows].to_vec()
}

#[test]
fn matmul_matches_cpu_for_every_type() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for k in variants() {
        for &ty in TYPES {
            let cols = cols_for(ty);
            for (rows, n, x_off, y_off) in [(37, 1, 0, 0), (5, 3, 4, 3), (13, 9, 8, 1), (1, 2, 0, 0), (70, 37, 4, 2), (13, 70, 0, 1)] {
                let data = random_matrix(&mut rng, ty, cols, rows);
                let x = rand_vec(&mut rng, n * cols);
                let w = GpuMatrix::upload(&k, "w", ty, cols, rows, &data).unwrap();
                let got = gpu_matmul(&k, &w, &x, n, x_off, y_off);
                let want = ops::matmul(&x, n, &QMatrix::new(ty, cols, rows, &data).unwrap()).unwrap();
                let e = max_rel(&got, &want);
                assert!(e < TOL, "{ty} {} rows {rows} n {n}: rel err {e}", variant_name(&k));
            }
        }
    }
}

/// The gguf-py vectors of tests/fixtures/quant_refs.gguf as weights: realistic blocks from
/// gguf-py's quantizer and edge scales (zeros, subnormals, large values). Quantized types
/// only: the float fixtures hold values near the top of the range, whose sums overflow.
#[test]
fn matmul_on_gguf_py_blocks() {
    let f = GgufFile::open(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/quant_refs.gguf")).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    for k in variants() {
        for &ty in TYPES.iter().filter(|t| t.block_elems() > 1) {
            let raw = f.view(&format!("{ty}.raw")).unwrap();
            let (cols, rows) = (raw.info.row_len() as usize, raw.info.n_rows() as usize);
            // One token (the matvec kernel) and three.
            for n in [1, 3] {
                let x = rand_vec(&mut rng, n * cols);
                let w = GpuMatrix::upload(&k, "w", ty, cols, rows, raw.data).unwrap();
                let got = gpu_matmul(&k, &w, &x, n, 0, 0);
                let want = ops::matmul(&x, n, &QMatrix::new(ty, cols, rows, raw.data).unwrap()).unwrap();
                let e = max_rel(&got, &want);
                assert!(e < TOL, "{ty} {} n {n}: rel err {e}", variant_name(&k));
            }
        }
    }
}

#[test]
fn tiled_matmul_equals_untiled() {
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    for k in variants() {
        for &ty in TYPES {
            // One token (the matvec kernel) and three (the matmul kernel).
            for n in [1, 3] {
                let (cols, rows) = (cols_for(ty), 11);
                let data = random_matrix(&mut rng, ty, cols, rows);
                let x = rand_vec(&mut rng, n * cols);
                let rb = data.len() / rows;
                // Tiles of 3 rows (the limit is not a multiple of the row size).
                let tiled = GpuMatrix::upload_with_tile_limit(&k, "w", ty, cols, rows, 1, &data, (3 * rb + rb / 2) as u64).unwrap();
                assert_eq!(tiled.tiles().iter().map(|t| (t.row0, t.rows)).collect::<Vec<_>>(), [(0, 3), (3, 3), (6, 3), (9, 2)]);
                assert_eq!(tiled.bytes(), data.len() as u64);
                let whole = GpuMatrix::upload(&k, "w", ty, cols, rows, &data).unwrap();
                assert_eq!(whole.tiles().len(), 1);
                let got = gpu_matmul(&k, &tiled, &x, n, 0, 2);
                // Each output is computed by the same threads in the same order either way.
                assert_eq!(got, gpu_matmul(&k, &whole, &x, n, 0, 2), "{ty} {}", variant_name(&k));
                let want = ops::matmul(&x, n, &QMatrix::new(ty, cols, rows, &data).unwrap()).unwrap();
                assert!(max_rel(&got, &want) < TOL, "{ty}");
            }
        }
    }
}

#[test]
fn matmul_experts_matches_cpu() {
    let mut rng = ChaCha8Rng::seed_from_u64(10);
    let (experts, rpe, top_k, n) = (5, 6, 2, 3);
    for k in variants() {
        for &ty in TYPES {
            let cols = cols_for(ty);
            let rows = experts * rpe;
            let data = random_matrix(&mut rng, ty, cols, rows);
            let rb = data.len() / rows;
            // Two experts per tile (the limit allows 2.5): tiles at expert boundaries.
            let w = GpuMatrix::upload_with_tile_limit(&k, "experts", ty, cols, rows, rpe, &data, (5 * rpe * rb / 2) as u64).unwrap();
            assert_eq!(w.tiles().iter().map(|t| (t.row0, t.rows)).collect::<Vec<_>>(), [(0, 12), (12, 12), (24, 6)]);
            // Repeats across tokens, and experts in every tile.
            let ids: Vec<u32> = vec![4, 0, 2, 4, 1, 3];
            let idb = up_u32(&k, &ids);
            let q = QMatrix::new(ty, cols, rows, &data).unwrap();
            // One token takes the decode matvec, several the per-pair kernel.
            for (n, x_per_slot) in [1, n].into_iter().flat_map(|n| [(n, false), (n, true)]) {
                let x = rand_vec(&mut rng, if x_per_slot { n * top_k } else { n } * cols);
                let xb = up(&k, &x);
                let y_off = 5;
                let out = run(&k, y_off + n * top_k * rpe, |b, y| {
                    matmul_experts(&k, b, &w, rpe, &idb, top_k, &xb, 0, x_per_slot, n, y, y_off).unwrap()
                });
                assert!(out[..y_off].iter().chain(out.last()).all(|&v| v == SENTINEL), "writes outside y");
                let want = ops::matmul_experts(&x, n, &q, rpe, &ids[..n * top_k], top_k, x_per_slot).unwrap();
                let e = max_rel(&out[y_off..y_off + n * top_k * rpe], &want);
                assert!(e < TOL, "{ty} {} {n} tokens, x_per_slot {x_per_slot}: rel err {e}", variant_name(&k));
            }
        }
    }
}

#[test]
fn matmul_experts_decode_single_token() {
    // The decode shape: one token, all slots reading the same x row, untiled.
    let k = kernels();
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let (ty, experts, rpe, top_k) = (GgmlType::Q4_K, 8, 9, 4);
    let cols = cols_for(ty);
    let data = random_matrix(&mut rng, ty, cols, experts * rpe);
    let w = GpuMatrix::upload_stacked(&k, "experts", ty, cols, experts * rpe, rpe, &data).unwrap();
    let ids = [7u32, 2, 5, 0];
    let idb = up_u32(&k, &ids);
    let x = rand_vec(&mut rng, cols);
    let xb = up(&k, &x);
    let out = run(&k, top_k * rpe, |b, y| matmul_experts(&k, b, &w, rpe, &idb, top_k, &xb, 0, false, 1, y, 0).unwrap());
    let want = ops::matmul_experts(&x, 1, &QMatrix::new(ty, cols, experts * rpe, &data).unwrap(), rpe, &ids, top_k, false).unwrap();
    assert!(max_rel(&out[..top_k * rpe], &want) < TOL);
}

/// Element-wise: within 1 ulp of the reference, or both below the denormal threshold.
fn assert_close_ulp(got: &[f32], want: &[f32], scale: f32, what: &str) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ulp = f32::from_bits(w.abs().to_bits() + 1) - w.abs();
        let tol = ulp.max(scale.abs() * f32::MIN_POSITIVE);
        assert!(g == w || (g - w).abs() <= tol, "{what}: element {i} is {g:e}, CPU gives {w:e}");
    }
}

#[test]
fn embed_matches_cpu_rows() {
    let k = kernels();
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    let f = GgufFile::open(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/quant_refs.gguf")).unwrap();
    for &ty in TYPES {
        let cols = cols_for(ty);
        let rows = 10;
        let random = random_matrix(&mut rng, ty, cols, rows);
        let fixture = f.view(&format!("{ty}.raw")).unwrap();
        let sources = [(cols, rows, &random[..]), (fixture.info.row_len() as usize, fixture.info.n_rows() as usize, fixture.data)];
        for (cols, rows, data) in sources {
            let rb = data.len() / rows;
            let q = QMatrix::new(ty, cols, rows, data).unwrap();
            let ids: Vec<u32> = (0..7).map(|_| rng.random_range(0..rows as u32)).collect();
            let (ids_off, out_off, n) = (2, 3, ids.len() - 2);
            let scale = (cols as f32).sqrt();
            let want = ops::embed(&q, &ids[ids_off..], scale).unwrap();
            let idb = up_u32(&k, &ids);
            // Untiled, and in tiles of 3 rows (of 4 for Q6_K, whose tiles are whole groups
            // of 8 blocks on the GPU).
            for limit in [None, Some(block_groups::gpu_len(ty, 3 * rb) as u64)] {
                let table = match limit {
                    None => GpuMatrix::upload(&k, "table", ty, cols, rows, data).unwrap(),
                    Some(l) => GpuMatrix::upload_with_tile_limit(&k, "table", ty, cols, rows, 1, data, l).unwrap(),
                };
                let out = run(&k, out_off + n * cols, |b, o| embed(&k, b, &table, &idb, ids_off, n, scale, o, out_off).unwrap());
                assert!(out[..out_off].iter().chain(out.last()).all(|&v| v == SENTINEL), "writes outside the output");
                assert_close_ulp(&out[out_off..out_off + n * cols], &want, scale, &format!("{ty} {cols}x{rows} tiles {limit:?}"));
            }
        }
    }
}

#[test]
fn embed_of_id_past_table_is_zero() {
    let k = kernels();
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    // Two tiles of 8 one-block rows (a Q6_K tile is whole groups of 8 blocks on the GPU).
    let (ty, cols, rows) = (GgmlType::Q6_K, 256, 16);
    let data = random_matrix(&mut rng, ty, cols, rows);
    let table = GpuMatrix::upload_with_tile_limit(&k, "table", ty, cols, rows, 1, &data, 8 * 210).unwrap();
    assert_eq!(table.tiles().len(), 2);
    let idb = up_u32(&k, &[1, 16, 1_000_000, 11]);
    let out = run(&k, 4 * cols, |b, o| embed(&k, b, &table, &idb, 0, 4, 1.0, o, 0).unwrap());
    assert!(out[cols..3 * cols].iter().all(|&v| v == 0.0));
    let q = QMatrix::new(ty, cols, rows, &data).unwrap();
    assert_close_ulp(&out[..cols], &ops::embed(&q, &[1], 1.0).unwrap(), 1.0, "row 1");
    assert_close_ulp(&out[3 * cols..4 * cols], &ops::embed(&q, &[11], 1.0).unwrap(), 1.0, "row 11");
}

#[test]
fn bad_uploads_and_calls_are_errors() {
    let k = kernels();
    for ty in [GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::IQ4_XS, GgmlType::I32] {
        let cols = ty.block_elems().max(4);
        let data = vec![0u8; ty.bytes_for(cols as u64).unwrap() as usize];
        let err = GpuMatrix::upload(&k, "w", ty, cols, 1, &data).err().unwrap();
        assert!(matches!(err, Error::UnsupportedType(ref m) if m.contains(ty.name())), "{ty}: {err}");
    }
    let ty = GgmlType::Q8_0;
    assert!(matches!(GpuMatrix::upload(&k, "w", ty, 32, 2, &[0; 67]), Err(Error::Input(_))), "short data");
    assert!(matches!(GpuMatrix::upload(&k, "w", ty, 48, 1, &[0; 51]), Err(Error::Input(_))), "partial block");
    assert!(matches!(GpuMatrix::upload(&k, "w", GgmlType::F32, 6, 1, &[0; 24]), Err(Error::Input(_))), "cols % 4");
    assert!(matches!(GpuMatrix::upload_stacked(&k, "w", ty, 32, 3, 2, &[0; 102]), Err(Error::Input(_))), "groups");
    assert!(matches!(GpuMatrix::upload_with_tile_limit(&k, "w", ty, 64, 2, 1, &[0; 136], 60), Err(Error::Gpu(_))), "row > limit");

    let w = GpuMatrix::upload(&k, "w", ty, 32, 2, &[0; 68]).unwrap();
    let x = up(&k, &[0.0; 64]);
    let y = up(&k, &[0.0; 4]);
    let mut b = Batch::new(Arc::clone(&k.gpu), 8);
    assert!(matches!(matmul(&k, &mut b, &w, &x, 2, 1, &y, 0), Err(Error::Input(_))), "x_off % 4");
    assert!(matches!(matmul(&k, &mut b, &w, &x, 0, 3, &y, 0), Err(Error::Input(_))), "x too short");
    assert!(matches!(matmul(&k, &mut b, &w, &x, 0, 2, &y, 1), Err(Error::Input(_))), "y too short");
    // Experts of 3 rows do not divide 2 rows.
    let ids = up_u32(&k, &[0, 0]);
    assert!(matches!(matmul_experts(&k, &mut b, &w, 3, &ids, 1, &x, 0, false, 1, &y, 0), Err(Error::Input(_))));
}

/// The fused gate/up/GeGLU matvec equals the CPU's two products and GeGLU. GELU's tanh
/// differs by a few ulp between the GPU and libm, hence 2 × TOL; a row paired with the
/// wrong up row, or a missed chunk, is off by far more.
#[test]
fn matvec_geglu_matches_cpu() {
    use rullama::gpu::matmul::matvec_geglu;
    let mut rng = ChaCha8Rng::seed_from_u64(14);
    let k = kernels();
    for &ty in TYPES {
        let (cols, f) = (cols_for(ty), 37);
        let gate = random_matrix(&mut rng, ty, cols, f);
        let upw = random_matrix(&mut rng, ty, cols, f);
        let x = rand_vec(&mut rng, cols);
        let stacked: Vec<u8> = gate.iter().chain(&upw).copied().collect();
        let w = GpuMatrix::upload_stacked(&k, "gate_up", ty, cols, 2 * f, 2 * f, &stacked).unwrap();
        let xb = up(&k, &x);
        let got = run(&k, 1 + f + 1, |b, y| matvec_geglu(&k, b, &w, MatvecIn::Vector(&xb, 0), y, 1).unwrap());
        assert!(got[0] == SENTINEL && got[f + 1] == SENTINEL, "writes outside y");
        let mut want = ops::matmul(&x, 1, &QMatrix::new(ty, cols, f, &gate).unwrap()).unwrap();
        let u = ops::matmul(&x, 1, &QMatrix::new(ty, cols, f, &upw).unwrap()).unwrap();
        ops::geglu(&mut want, &u);
        let e = max_rel(&got[1..f + 1], &want);
        assert!(e < 2.0 * TOL, "{ty}: rel err {e}");
    }
}

/// The FFN's [gate; up] and GeGLU over many tokens (`matmul_geglu`) against the CPU's
/// products and GeGLU (2 × TOL, as above): on the f32 kernel and geglu_fused, and where
/// the device has tensor cores, with the product kernel's own GeGLU over interleaved rows
/// and without it. Shapes: pairs that fill no whole interleave block, partial token tiles,
/// the large tile (≥ 8192 rows of ≥ 512 columns, ≥ 256 tokens) and split weights in two
/// chunks (16384 columns: 2048 rows a chunk).
#[test]
fn matmul_geglu_matches_cpu() {
    use rullama::gpu::matmul::matmul_geglu;
    let mut rng = ChaCha8Rng::seed_from_u64(19);
    let mut f32_only = kernels();
    f32_only.use_coop = false;
    let mut ks: Vec<Kernels> = std::iter::once(f32_only).collect();
    if let Some(mut k) = coop_kernels() {
        k.coop_geglu = false;
        ks.push(k);
        ks.extend(coop_kernels());
        // The weights split by a pass where they would be staged from their blocks.
        ks.extend(coop_kernels().map(|mut k| {
            k.coop_blocks = false;
            k
        }));
    }
    for k in &ks {
        let on_coop = k.use_coop && k.gpu.coop;
        // 600 pairs over 40 tokens: one token tile, staged from blocks.
        let shapes: &[(GgmlType, usize, usize, usize)] = if on_coop {
            &[(GgmlType::Q4_K, 256, 37, 33), (GgmlType::Q6_K, 512, 100, 70), (GgmlType::Q4_K, 512, 4100, 260), (GgmlType::Q8_0, 16384, 1100, 20), (GgmlType::Q4_K, 512, 600, 40)]
        } else {
            &[(GgmlType::Q4_K, 256, 37, 33), (GgmlType::Q8_0, 64, 20, 9)]
        };
        for &(ty, cols, f, n) in shapes {
            let gate = random_matrix(&mut rng, ty, cols, f);
            let upw = random_matrix(&mut rng, ty, cols, f);
            let stacked: Vec<u8> = gate.iter().chain(&upw).copied().collect();
            let w = GpuMatrix::upload(k, "gate_up", ty, cols, 2 * f, &stacked).unwrap();
            let x = rand_vec(&mut rng, n * cols);
            let xb = up(k, &x);
            let got = run(k, 2 + 2 * f * n, |b, y| matmul_geglu(k, b, &w, &xb, 0, n, y, 2).unwrap());
            assert!(got[..2].iter().chain(got.last()).all(|&v| v == SENTINEL), "writes outside y");
            let mut want = ops::matmul(&x, n, &QMatrix::new(ty, cols, f, &gate).unwrap()).unwrap();
            let u = ops::matmul(&x, n, &QMatrix::new(ty, cols, f, &upw).unwrap()).unwrap();
            ops::geglu(&mut want, &u);
            let got: Vec<f32> = (0..n).flat_map(|t| got[2 + t * 2 * f..2 + t * 2 * f + f].to_vec()).collect();
            let tol = 2.0 * TOL * (cols as f32 / 1024.0).sqrt().max(1.0);
            let e = max_rel(&got, &want);
            assert!(e < tol, "{ty} [gate; up] {f} x {cols}, {n} tokens (tensor cores {on_coop}, their GeGLU {}): rel err {e}", k.coop_geglu);
        }
        // The tile rule must still send the 8200-row shape to the large tile.
        if on_coop && k.coop_geglu {
            assert!(k.compiled("matmul_coop/128x128/geglu"), "no shape took the 128 x 128 GeGLU tile");
        }
    }
}

/// split_f16's pairs: a stacked [gate; up] interleaved in blocks (gate rows, then the same
/// rows of up), tiled, with zero rows for the pairs past the last, against the rows split
/// one by one.
#[test]
fn split_pairs_interleave_rows() {
    use rullama::gpu::matmul_coop::{SplitJob, split_f16};
    let k = kernels();
    let mut rng = ChaCha8Rng::seed_from_u64(31);
    let (cols, f, half, tile): (usize, usize, usize, usize) = (64, 11, 4, 8);
    let pad = f.div_ceil(half) * 2 * half;
    let data = random_matrix(&mut rng, GgmlType::Q8_0, cols, 2 * f);
    let src = upload_blocks(&k, "src", GgmlType::Q8_0, &data);
    let split = |job: SplitJob| -> (Vec<u16>, Vec<u16>) {
        let mut b = Batch::new(Arc::clone(&k.gpu), 4);
        split_f16(&k, &mut b, &job, None).unwrap();
        b.submit().unwrap();
        let read = |buf: &wgpu::Buffer| bytemuck::cast_slice::<u8, u16>(&kernel::read_back(&k.gpu, buf, 0, (job.rows_pad * cols * 2) as u64).unwrap()).to_vec();
        (read(job.hi), read(job.lo))
    };
    let row_bytes = cols / 32 * 34;
    let parts = |rows: usize| (kernel::storage(&k.gpu, "hi", (rows * cols * 2) as u64), kernel::storage(&k.gpu, "lo", (rows * cols * 2) as u64));
    let (paired, plain) = (parts(pad), parts(2 * f));
    let job = SplitJob { src: &src, ty: GgmlType::Q8_0, byte0: 0, row_bytes, cols, rows: f, rows_pad: pad, scale: 16.0, hi: &paired.0, lo: &paired.1, tile_rows: tile, col_stride: 1, row_scale: None, pairs: Some((half, f)) };
    let (ph, pl) = split(job);
    let (h, l) = split(SplitJob { rows: 2 * f, rows_pad: 2 * f, hi: &plain.0, lo: &plain.1, tile_rows: 0, pairs: None, ..job });
    // Element (r, c) of the tiled layout (tiles of `tile` rows x 32 columns).
    let at = |r: usize, c: usize| ((r / tile) * (cols / 32) + c / 32) * (tile * 32) + (r % tile) * 32 + c % 32;
    for r in 0..pad {
        let pair = (r / (2 * half)) * half + r % half;
        let source = (pair < f).then(|| pair + if r % (2 * half) >= half { f } else { 0 });
        for c in 0..cols {
            let (gh, gl) = (ph[at(r, c)], pl[at(r, c)]);
            match source {
                Some(s) => assert_eq!((gh, gl), (h[s * cols + c], l[s * cols + c]), "row {r} (source {s}) column {c}"),
                None => assert_eq!((gh, gl), (0, 0), "padding row {r} column {c}"),
            }
        }
    }
    // Pairs need tiles and room for whole blocks.
    for bad in [SplitJob { tile_rows: 0, ..job }, SplitJob { rows_pad: pad - tile, ..job }] {
        let mut b = Batch::new(Arc::clone(&k.gpu), 4);
        assert!(split_f16(&k, &mut b, &bad, None).is_err());
    }
}

/// The gated matvec of the per-layer embeddings: gelu_tanh(w · x) times a vector read at an
/// offset, against the CPU's product and GeGLU (2 × TOL, as above).
#[test]
fn matvec_gelu_mul_matches_cpu() {
    use rullama::gpu::matmul::matvec_gelu_mul;
    let mut rng = ChaCha8Rng::seed_from_u64(15);
    let k = kernels();
    for &ty in TYPES {
        let (cols, rows, off) = (cols_for(ty), 37, 5);
        let data = random_matrix(&mut rng, ty, cols, rows);
        let x = rand_vec(&mut rng, cols);
        let other = rand_vec(&mut rng, off + rows);
        let w = GpuMatrix::upload(&k, "w", ty, cols, rows, &data).unwrap();
        let (xb, ob) = (up(&k, &x), up(&k, &other));
        let got = run(&k, rows + 1, |b, y| matvec_gelu_mul(&k, b, &w, MatvecIn::Vector(&xb, 0), &ob, off, y, 0).unwrap());
        assert_eq!(got[rows], SENTINEL, "writes outside y");
        let mut want = ops::matmul(&x, 1, &QMatrix::new(ty, cols, rows, &data).unwrap()).unwrap();
        ops::geglu(&mut want, &other[off..]);
        let e = max_rel(&got[..rows], &want);
        assert!(e < 2.0 * TOL, "{ty}: rel err {e}");
    }
}

/// A matvec over vocabulary-sized rows (8 or 16 invocations per row, as the LM heads take),
/// with a part-filled last workgroup, both reduction variants, against the CPU: Q8_0 (the
/// 270M's head), Q6_K (E2B's, in 64-element chunks: 3 blocks a row, so the last chunk step
/// is part-filled) and Q4_K, the last two staging x as integers, here from an offset and
/// over a wide range: runs of 16 scaled from 1e-6 to 1e6, one of zeros.
#[test]
fn matvec_of_vocabulary_rows_matches_cpu() {
    let mut rng = ChaCha8Rng::seed_from_u64(29);
    for ty in [GgmlType::Q8_0, GgmlType::Q6_K, GgmlType::Q4_K] {
        let (cols, rows, off) = (if ty == GgmlType::Q6_K { 768 } else { 256 }, 65_541, 8);
        let data = random_matrix(&mut rng, ty, cols, rows);
        let mut x = rand_vec(&mut rng, off + cols);
        for (i, v) in x[off..].iter_mut().enumerate() {
            *v *= 10f32.powi((i / 16) as i32 % 13 - 6);
        }
        x[off + 48..off + 64].fill(0.0);
        let want = ops::matmul(&x[off..], 1, &QMatrix::new(ty, cols, rows, &data).unwrap()).unwrap();
        for k in staged_variants() {
            let w = GpuMatrix::upload(&k, "head", ty, cols, rows, &data).unwrap();
            let xb = up(&k, &x);
            let got = run(&k, rows, |b, y| matmul(&k, b, &w, &xb, off, 1, y, 0).unwrap());
            assert_eq!(got[rows], SENTINEL, "writes outside y");
            let e = max_rel(&got[..rows], &want);
            assert!(e < TOL, "{ty} {}: rel err {e}", variant_name(&k));
        }
    }
}

/// A folded matvec over enough rows that each subgroup takes two and each workgroup
/// several row tiles, at E2B's row length (48 Q4_K chunks a row: past 512 workgroups'
/// worth, 519 tiles of 16 rows as [gate; up], two a workgroup; 1038 plain, three a
/// workgroup) and E4B's (80 chunks, five steps a lane: paired only from 16384 rows, so
/// 16400), plain and as [gate; up] with GeGLU, both reduction variants, with rows that
/// leave the last workgroup part-filled, against the CPU ops it replaces; the staged input
/// spans a wide range. Each case asserts the paired kernel ran (matmul::matvec_tpr).
#[test]
fn folded_matvec_of_many_rows_matches_cpu() {
    use rullama::gpu::matmul::{ResidualIn, matvec_geglu, matvec_input};
    let mut rng = ChaCha8Rng::seed_from_u64(23);
    for (cols, f, steps) in [(1536, 8300, 3), (2560, 8200, 5)] {
        folded_many_rows_case(&mut rng, cols, f, steps);
    }

    fn folded_many_rows_case(rng: &mut ChaCha8Rng, cols: usize, f: usize, steps: usize) {
        let (ty, eps) = (GgmlType::Q4_K, 1e-6);
        let gate = random_matrix(rng, ty, cols, f);
        let upw = random_matrix(rng, ty, cols, f);
        let stacked: Vec<u8> = gate.iter().chain(&upw).copied().collect();
        let (a, x, post, mut pre) = (rand_vec(rng, cols), rand_vec(rng, cols), rand_vec(rng, cols), rand_vec(rng, cols));
        // Inputs over twelve orders of magnitude, a run of 16 zeros and one of a single
        // outlier: the integer dot products scale each run of 16 by its own largest element.
        for (i, v) in pre.iter_mut().enumerate() {
            *v *= 10f32.powi((i % 13) as i32 - 6);
        }
        pre[32..48].fill(0.0);
        pre[64..80].iter_mut().for_each(|v| *v *= 1e-3);
        pre[70] = 1e3;
        let mut input = x.clone();
        ops::rms_norm_to(&a, &mut input, cols, Some(&post), eps, true);
        ops::rms_norm(&mut input, cols, Some(&pre), eps);
        let all = ops::matmul(&input, 1, &QMatrix::new(ty, cols, 2 * f, &stacked).unwrap()).unwrap();
        let mut geglu = all[..f].to_vec();
        ops::geglu(&mut geglu, &all[f..]);
        for k in staged_variants() {
            let (ab, xb, postb, preb) = (up(&k, &a), up(&k, &x), up(&k, &post), up(&k, &pre));
            let xo = up(&k, &vec![0.0; cols]);
            let r = ResidualIn { a: (&ab, 0), x_in: (&xb, 0), x_out: (&xo, 0), post: &postb, pre: Some(&preb), scale: 1.0, eps };
            let plain = GpuMatrix::upload(&k, "w", ty, cols, 2 * f, &stacked).unwrap();
            let got = run(&k, 2 * f, |b, y| matvec_input(&k, b, &plain, MatvecIn::Residual(r), y, 0).unwrap());
            assert_eq!(got[2 * f], SENTINEL, "writes outside y");
            let e = max_rel(&got[..2 * f], &all);
            assert!(e < 2.0 * TOL, "{cols} columns, plain {}: rel err {e}", variant_name(&k));
            let w = GpuMatrix::upload_stacked(&k, "gate_up", ty, cols, 2 * f, 2 * f, &stacked).unwrap();
            let got = run(&k, f, |b, y| matvec_geglu(&k, b, &w, MatvecIn::Residual(r), y, 0).unwrap());
            assert_eq!(got[f], SENTINEL, "writes outside y");
            let e = max_rel(&got[..f], &geglu);
            assert!(e < 2.0 * TOL, "{cols} columns, geglu {}: rel err {e}", variant_name(&k));
            for (tiles, kind) in [(3, "one"), (2, "pair")] {
                let name = format!("matvec/{ty}/ch32/tpr16/cpt{steps}/t{tiles}/rn{cols}/{kind}/");
                assert!(k.compiled_prefix(&name), "{cols} columns: no kernel {name}");
            }
        }
    }
}

/// A matvec that folds in the residual step before it (`ResidualIn`) against the CPU ops
/// it replaces: `x' = (x + rms_norm(a; post)) · scale`, then the matmul of `rms_norm(x';
/// pre)` (or of x' itself), with x' stored to its own buffer. Every type at two row lengths
/// (weights loaded before the step and after it), both reduction variants, offsets on every
/// vector, the plain and the gated (per-layer-embedding) matvec.
/// The staged input differs from the CPU's by the order of the norms' sums (a few ulp),
/// so the products keep TOL; x' (one rounding per op, same order) is held to 1e-6. A third
/// case has the step cancel x to ~1e-3 of its terms, where Σx'² taken from the inputs'
/// sums put the products 1.0e-2 off, so the matvec must reduce x' itself: both sides' x'
/// carry their rounding of the terms (~1e-7 of them, 1e-4 of x'), hence 1e-3 there.
#[test]
fn matvec_residual_input_matches_cpu() {
    use rullama::gpu::matmul::{ResidualIn, matvec_gelu_mul, matvec_input};
    let mut rng = ChaCha8Rng::seed_from_u64(19);
    for k in staged_variants() {
        for &ty in TYPES {
            // Rows past PRELOAD_MAX_COLS load their weights after the step, shorter ones before it.
            for cols in [cols_for(ty), short_cols(ty)] {
                let (rows, eps) = (37, 1e-6);
                let data = random_matrix(&mut rng, ty, cols, rows);
                let m = QMatrix::new(ty, cols, rows, &data).unwrap();
                let w = GpuMatrix::upload(&k, "w", ty, cols, rows, &data).unwrap();
                for (pre_norm, scale, cancel) in [(true, 0.7f32, false), (false, 1.0, false), (true, 0.7, true)] {
                    let (a, mut x) = (rand_vec(&mut rng, 3 + cols), rand_vec(&mut rng, 4 + cols));
                    let (post, pre) = (rand_vec(&mut rng, cols), rand_vec(&mut rng, cols));
                    if cancel {
                        // x = -RMS(a) · post + 1e-3 · noise.
                        let mut t = vec![0.0; cols];
                        ops::rms_norm_to(&a[3..], &mut t, cols, Some(&post), eps, true);
                        x[4..].iter_mut().zip(&t).for_each(|(v, t)| *v = 1e-3 * *v - t);
                    }
                    let (tol_y, tol_x) = if cancel { (1e-3, 1e-3) } else { (2.0 * TOL, 1e-6) };
                    let mut want_x = x[4..].to_vec();
                    ops::rms_norm_to(&a[3..], &mut want_x, cols, Some(&post), eps, true);
                    want_x.iter_mut().for_each(|v| *v *= scale);
                    let mut input = want_x.clone();
                    if pre_norm {
                        ops::rms_norm(&mut input, cols, Some(&pre), eps);
                    }
                    let want = ops::matmul(&input, 1, &m).unwrap();
                    let (ab, xb, postb, preb) = (up(&k, &a), up(&k, &x), up(&k, &post), up(&k, &pre));
                    let other = rand_vec(&mut rng, rows);
                    let ob = up(&k, &other);
                    for gated in [false, true] {
                        let xo = up(&k, &vec![SENTINEL; 2 + cols + 1]);
                        let r = ResidualIn {
                            a: (&ab, 3),
                            x_in: (&xb, 4),
                            x_out: (&xo, 2),
                            post: &postb,
                            pre: pre_norm.then_some(&preb),
                            scale,
                            eps,
                        };
                        let got = run(&k, rows + 1, |b, y| match gated {
                            false => matvec_input(&k, b, &w, MatvecIn::Residual(r), y, 0).unwrap(),
                            true => matvec_gelu_mul(&k, b, &w, MatvecIn::Residual(r), &ob, 0, y, 0).unwrap(),
                        });
                        let what = format!("{ty} {} pre {pre_norm} gated {gated} cancel {cancel}", variant_name(&k));
                        assert_eq!(got[rows], SENTINEL, "{what}: writes outside y");
                        let mut want = want.clone();
                        if gated {
                            ops::geglu(&mut want, &other);
                        }
                        let e = max_rel(&got[..rows], &want);
                        assert!(e < tol_y, "{what}: rel err {e}");
                        let got_x = kernel::read_f32(&k.gpu, &xo, 0, 2 + cols + 1).unwrap();
                        assert!(got_x[..2].iter().chain(got_x.last()).all(|&v| v == SENTINEL), "{what}: x' written outside");
                        let e = max_rel(&got_x[2..2 + cols], &want_x);
                        assert!(e < tol_x, "{what}: x' rel err {e}");
                        assert_eq!(kernel::read_f32(&k.gpu, &xb, 0, x.len()).unwrap(), x, "{what}: x_in untouched");
                    }
                }
            }
        }
    }
}

/// One token through a random `rows` x `cols` matrix of type `ty` against the CPU.
fn check_matvec(k: &Kernels, rng: &mut ChaCha8Rng, ty: GgmlType, rows: usize, cols: usize) {
    let data = random_matrix(rng, ty, cols, rows);
    let x = rand_vec(rng, cols);
    let w = GpuMatrix::upload(k, "w", ty, cols, rows, &data).unwrap();
    let got = gpu_matmul(k, &w, &x, 1, 0, 1);
    let want = ops::matmul(&x, 1, &QMatrix::new(ty, cols, rows, &data).unwrap()).unwrap();
    let e = max_rel(&got, &want);
    assert!(e < TOL, "{ty} {rows}x{cols}: rel err {e}");
}

/// Tall matrices (more than 4096 rows) take the matvec shape with four rows per invocation
/// group; every type, a row count that leaves a partial group.
#[test]
fn matvec_tall_matrices_match_cpu() {
    let mut rng = ChaCha8Rng::seed_from_u64(16);
    let k = kernels();
    for &ty in TYPES {
        for cols in [cols_for(ty), 2 * cols_for(ty)] {
            check_matvec(&k, &mut rng, ty, 4099, cols);
        }
    }
}

/// Short rows (the per-layer-embedding projection, 256 columns): at most 16 chunks a row
/// take 8 invocations a row, 32 rows a workgroup (matmul::matvec_tpr); every type, with a
/// partial last workgroup of rows.
#[test]
fn matvec_short_rows_match_cpu() {
    let mut rng = ChaCha8Rng::seed_from_u64(23);
    let k = kernels();
    for &ty in TYPES {
        for cols in [256, 512] {
            check_matvec(&k, &mut rng, ty, 1539, cols);
        }
    }
}

/// Long rows (the FFN's down projection): the matvec gives a row more invocations (64 to a
/// whole workgroup, see matmul::matvec_tpr); every type, at column counts that select
/// each width, with a partial last workgroup of rows.
#[test]
fn matvec_long_rows_match_cpu() {
    let mut rng = ChaCha8Rng::seed_from_u64(19);
    let k = kernels();
    for &ty in TYPES {
        for cols in [3072, 6144, 12288] {
            check_matvec(&k, &mut rng, ty, 7, cols);
        }
    }
}

/// Prefill sizes: every type, token and row counts that leave partial token tiles and row
/// groups, x rows wider than the matrix; on the f32 kernel and, where the device has tensor
/// cores, on matmul_coop.wgsl (its hi/lo f16 split keeps it within the same tolerance).
/// `RULLAMA_REQUIRE_COOP=1` makes a device without them fail (set where they are expected).
#[test]
fn prefill_matmul_matches_cpu() {
    let mut f32_only = kernels();
    f32_only.use_coop = false;
    let ks: Vec<Kernels> = std::iter::once(f32_only).chain(coop_kernels()).collect();
    for k in ks {
        prefill_matmul_case(&k);
    }
}

fn prefill_matmul_case(k: &Kernels) {
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    for &ty in TYPES {
        let cols = 1024;
        // (130 rows: a partial tensor-core tile of 128.)
        for (rows, n, stride) in [(70, 33, cols), (64, 64, cols + 8), (130, 129, cols), (33, 9, cols)] {
            let data = random_matrix(&mut rng, ty, cols, rows);
            let xs = rand_vec(&mut rng, n * stride);
            let w = GpuMatrix::upload(k, "w", ty, cols, rows, &data).unwrap();
            let xb = up(k, &xs);
            let got = run(k, 3 + n * rows + 1, |b, y| rullama::gpu::matmul::matmul_strided(k, b, &w, &xb, 0, stride, n, y, 3).unwrap());
            assert!(got[..3].iter().chain(got.last()).all(|&v| v == SENTINEL), "writes outside y");
            let x: Vec<f32> = xs.chunks(stride).flat_map(|r| r[..cols].to_vec()).collect();
            let want = ops::matmul(&x, n, &QMatrix::new(ty, cols, rows, &data).unwrap()).unwrap();
            let e = max_rel(&got[3..3 + n * rows], &want);
            assert!(e < TOL, "{ty} {rows}x{cols} n {n} stride {stride} (tensor cores {}): rel err {e}", k.use_coop);
        }
    }
}

/// Shapes only the tensor-core kernel's encoder treats specially (ignored by default:
/// `common::NEEDS_TENSOR_CORES`): its large tile (≥ 8192 rows of ≥ 512 columns and ≥ 256
/// tokens; from 1536 rows, split over the columns when the tiles alone are few) and weight
/// splits in several chunks (hi and lo over 128 MiB each). The last is Gemma 4 E2B's down projection at 512 tokens: 48 tiles of
/// 128 x 128, split 11 ways.
#[test]
#[ignore = "needs tensor cores: see common::NEEDS_TENSOR_CORES"]
fn coop_tiles_and_chunks_match_cpu() {
    let k = coop_kernels_required();
    let mut rng = ChaCha8Rng::seed_from_u64(23);
    // (Q6_K, 1536 columns, 1100 rows, 33 tokens): one token tile, weights staged from their
    // blocks, split-K over the columns.
    for (ty, cols, rows, n) in [(GgmlType::Q4_K, 512, 8200, 300), (GgmlType::Q6_K, 512, 8200, 257), (GgmlType::Q4_K, 1024, 1600, 260), (GgmlType::Q8_0, 16384, 4200, 40), (GgmlType::Q4_K, 6144, 1536, 512), (GgmlType::Q6_K, 1536, 1100, 33)] {
        let data = random_matrix(&mut rng, ty, cols, rows);
        let xs = rand_vec(&mut rng, n * cols);
        let w = GpuMatrix::upload(&k, "w", ty, cols, rows, &data).unwrap();
        let xb = up(&k, &xs);
        let got = run(&k, n * rows, |b, y| matmul(&k, b, &w, &xb, 0, n, y, 0).unwrap());
        assert_eq!(got[n * rows], SENTINEL, "writes past y");
        let want = ops::matmul(&xs, n, &QMatrix::new(ty, cols, rows, &data).unwrap()).unwrap();
        // The sum's rounding error grows with its length (~sqrt, random signs; tensor cores
        // also truncate in their f32 adds): TOL is set for rows of ~1000, so scale it.
        let tol = TOL * (cols as f32 / 1024.0).sqrt().max(1.0);
        let e = max_rel(&got[..n * rows], &want);
        assert!(e < tol, "{ty} {rows}x{cols} n {n}: rel err {e} (tolerance {tol})");
    }
    // The tile rule (matmul_coop::tile_for) must still send these shapes to the large tile.
    assert!(k.compiled("matmul_coop/128x128"), "no shape took the 128 x 128 tile");
}

/// Tensor-core products set to f16 inputs (`Kernels::set_coop_f16`) against the CPU's
/// product of the same f16-rounded inputs (x rows scaled by `row_scale_cpu`, weights by
/// 16, each rounded by `round_f16_cpu`, summed in f64): the two differ only in the
/// GPU's f32 sums, so TOL holds as for the f32-accurate kernel. Against the exact product
/// the rounding shows (~2^-12 relative per input), which the test also requires, so a
/// kernel still multiplying lo parts fails. Shapes: those the f32-accurate rule gives the
/// large tile (with GeGLU), which f16 products run on the small one, weights staged from
/// their blocks (one token tile) and split-K (ignored by default:
/// `common::NEEDS_TENSOR_CORES`).
#[test]
#[ignore = "needs tensor cores: see common::NEEDS_TENSOR_CORES"]
fn coop_f16_products_match_rounded_cpu() {
    use rullama::gpu::matmul_coop::{round_f16_cpu, row_scale_cpu};
    let k = coop_kernels_required();
    k.set_coop_f16(true);
    let mut rng = ChaCha8Rng::seed_from_u64(43);
    for (ty, cols, rows, n, geglu) in [(GgmlType::Q4_K, 512, 8200, 300, false), (GgmlType::Q4_K, 512, 8200, 300, true), (GgmlType::Q8_0, 1024, 130, 129, false), (GgmlType::Q6_K, 1536, 1100, 33, false), (GgmlType::Q4_K, 6144, 1536, 512, false)] {
        let data = random_matrix(&mut rng, ty, cols, rows);
        let xs = rand_vec(&mut rng, n * cols);
        let w = GpuMatrix::upload(&k, "w", ty, cols, rows, &data).unwrap();
        let xb = up(&k, &xs);
        // GeGLU writes each token's results at the start of a row of `rows` elements.
        let out_rows = if geglu { rows / 2 } else { rows };
        let got = run(&k, n * rows, |b, y| if geglu { rullama::gpu::matmul::matmul_geglu(&k, b, &w, &xb, 0, n, y, 0).unwrap() } else { matmul(&k, b, &w, &xb, 0, n, y, 0).unwrap() });
        assert_eq!(got[n * rows], SENTINEL, "writes past y");
        let got: Vec<f32> = got.chunks(rows).take(n).flat_map(|r| r[..out_rows].to_vec()).collect();
        let wv = rullama::gguf::dequant::dequantize(ty, &data, cols * rows).unwrap();
        let wr: Vec<f64> = wv.iter().map(|&v| f64::from(f32::from(round_f16_cpu(v * 16.0))) / 16.0).collect();
        let mut rounded = Vec::with_capacity(n * rows);
        for x in xs.chunks(cols) {
            let f = row_scale_cpu(x.iter().copied());
            let xr: Vec<f64> = x.iter().map(|&v| f64::from(f32::from(round_f16_cpu(v * f))) / f64::from(f)).collect();
            rounded.extend(wr.chunks(cols).map(|w| w.iter().zip(&xr).map(|(a, b)| a * b).sum::<f64>() as f32));
        }
        let exact = ops::matmul(&xs, n, &QMatrix::new(ty, cols, rows, &data).unwrap()).unwrap();
        let (mut want, mut exact_want) = (rounded, exact);
        if geglu {
            let half = |v: &[f32], up: bool| -> Vec<f32> { v.chunks(rows).flat_map(|r| if up { r[rows / 2..].to_vec() } else { r[..rows / 2].to_vec() }).collect() };
            let (mut g, u) = (half(&want, false), half(&want, true));
            ops::geglu(&mut g, &u);
            let (mut eg, eu) = (half(&exact_want, false), half(&exact_want, true));
            ops::geglu(&mut eg, &eu);
            (want, exact_want) = (g, eg);
        }
        let tol = TOL * (cols as f32 / 1024.0).sqrt().max(1.0) * if geglu { 2.0 } else { 1.0 };
        let e = max_rel(&got[..n * out_rows], &want);
        assert!(e < tol, "{ty} {rows}x{cols} n {n} geglu {geglu}: rel err {e} against the rounded inputs' product (tolerance {tol})");
        let off = max_rel(&got[..n * out_rows], &exact_want);
        assert!(off > 4.0 * tol, "{ty} {rows}x{cols} n {n} geglu {geglu}: within {off} of the exact product, as if no input were rounded");
    }
    assert!(k.compiled("matmul_coop/64x64/f16") && k.compiled("matmul_coop/64x64/geglu/f16"), "the small tile of f16 products did not run");
    assert!(!k.compiled_prefix("matmul_coop/128x128"), "f16 products took the large tile");
}

/// The x rows' scales split_f16.wgsl writes, against `row_scale_cpu` bit for bit: rows
/// whose largest magnitude spans f32's range (zeros, subnormals, 1e-37 and 1e38 at the
/// clamps, inf), read at an offset with a stride and, as attention reads V, across a
/// matrix (columns `width` apart); padding rows are left alone.
#[test]
fn split_row_scales_match_cpu() {
    use rullama::gpu::matmul_coop::{SplitJob, row_scale_cpu, split_f16};
    let k = kernels();
    let mut rng = ChaCha8Rng::seed_from_u64(37);
    let tops = [0.0, 1e-41, 1e-37, 3e-9, 0.75, 1.0, 1536.0, 1.1e6, 3e30, 1e38, f32::INFINITY];
    let (cols, n, pad) = (320, tops.len(), 16);
    let rows: Vec<Vec<f32>> = tops
        .iter()
        .map(|&top| {
            let mut r: Vec<f32> = (0..cols).map(|_| rng.random_range(-1.0f32..1.0) * top * 0.5).collect();
            let at = rng.random_range(0..cols);
            r[at] = if rng.random_bool(0.5) { top } else { -top };
            r
        })
        .collect();
    let want: Vec<f32> = rows.iter().map(|r| row_scale_cpu(r.iter().copied())).collect();
    assert_eq!(want[5], 2f32.powi(13), "1.0 lands at 2^13");
    assert_eq!(want[0], 1.0, "a row of zeros is left as it is");
    let (off, stride) = (7, cols + 5);
    let mut flat = vec![f32::NAN; off + n * stride];
    // Transposed: element (r, c) at off + c * width + r.
    let width = n + 3;
    let mut across = vec![f32::NAN; off + cols * width];
    for (r, row) in rows.iter().enumerate() {
        flat[off + r * stride..off + r * stride + cols].copy_from_slice(row);
        for (c, &v) in row.iter().enumerate() {
            across[off + c * width + r] = v;
        }
    }
    // A one-row weight job for the x job to ride along.
    let data = random_matrix(&mut rng, GgmlType::Q8_0, 32, 1);
    let src = upload_blocks(&k, "src", GgmlType::Q8_0, &data);
    let w_parts = (kernel::storage(&k.gpu, "hi", 64), kernel::storage(&k.gpu, "lo", 64));
    let job = SplitJob { src: &src, ty: GgmlType::Q8_0, byte0: 0, row_bytes: 34, cols: 32, rows: 1, rows_pad: 1, scale: 16.0, hi: &w_parts.0, lo: &w_parts.1, tile_rows: 0, col_stride: 1, row_scale: None, pairs: None };
    for (what, data, row_bytes, col_stride) in [("rows", &flat, stride * 4, 1), ("across", &across, 4, width)] {
        let xb = up(&k, data);
        let (xh, xl) = (kernel::storage(&k.gpu, "x_hi", (pad * cols * 2) as u64), kernel::storage(&k.gpu, "x_lo", (pad * cols * 2) as u64));
        let got = run(&k, pad, |b, xf| {
            let x_job = SplitJob { src: &xb, ty: GgmlType::F32, byte0: off * 4, row_bytes, cols, rows: n, rows_pad: pad, scale: 1.0, hi: &xh, lo: &xl, tile_rows: 16, col_stride, row_scale: Some(xf), pairs: None };
            split_f16(&k, b, &job, Some(&x_job)).unwrap()
        });
        for (r, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.to_bits(), w.to_bits(), "{what}: row {r} (largest {}) scale {g} against {w}", tops[r]);
        }
        assert!(got[n..].iter().all(|&v| v == SENTINEL), "{what}: scales written past the rows");
    }
}

/// Tensor-core prefill with activations far outside f16's range and far below it (rows
/// whose largest element is 3e7, 1e-6, 1, and ones with a single large outlier): each row
/// matches the CPU to TOL of its own size. A fixed scale turned such rows to inf or lost
/// the small ones' bits. Devices without tensor cores run the f32 kernel, which this
/// does not concern (ignored by default: `common::NEEDS_TENSOR_CORES`).
#[test]
#[ignore = "needs tensor cores: see common::NEEDS_TENSOR_CORES"]
fn coop_matmul_of_large_and_small_activations() {
    let k = coop_kernels_required();
    let mut rng = ChaCha8Rng::seed_from_u64(41);
    let (cols, rows) = (512, 70);
    let tops = [3e7f32, 1e-6, 1.0, 2e5, 1e-3, 5e6, 1.0, 1e-6, 3e7, 7.0, 0.5, 1e4];
    let n = tops.len();
    let mut xs = Vec::new();
    for (t, &top) in tops.iter().enumerate() {
        let mut r = rand_vec(&mut rng, cols);
        if t % 3 == 2 {
            // One outlier in an ordinary row, as real activations have.
            r[rng.random_range(0..cols)] = 4e6;
        }
        xs.extend(r.iter().map(|v| v * top / 2.0));
    }
    for ty in [GgmlType::Q4_K, GgmlType::F16, GgmlType::Q8_0] {
        let data = random_matrix(&mut rng, ty, cols, rows);
        let w = GpuMatrix::upload(&k, "w", ty, cols, rows, &data).unwrap();
        let got = gpu_matmul(&k, &w, &xs, n, 0, 0);
        let want = ops::matmul(&xs, n, &QMatrix::new(ty, cols, rows, &data).unwrap()).unwrap();
        for t in 0..n {
            let e = max_rel(&got[t * rows..(t + 1) * rows], &want[t * rows..(t + 1) * rows]);
            assert!(e < TOL, "{ty}: token {t} (largest {}): rel err {e}", tops[t]);
        }
    }
}

/// split_f16.wgsl against `split_f16_cpu` of the CPU's dequantized rows: hi exactly (it is
/// cut by a mask), lo to one f16 step (the GPU's f32 -> f16 rounding mode may differ), zero
/// rows past the data, and hi + lo · 2^-11 within 2^-21 of the value (normal f16 range).
/// F32 rows are read at an offset and a stride wider than the row, as activations are;
/// with every weight type they also ride along as the second job, of another shape. Every
/// type is split row-major and in tiles of 4 rows (the product kernel's layout). Set to
/// f16 products (`Kernels::set_coop_f16`), hi is `round_f16_cpu` of the value exactly and
/// the lo parts are left as they were.
#[test]
fn split_f16_matches_cpu() {
    for f16 in [false, true] {
        split_f16_matches_cpu_as(f16);
    }
}

fn split_f16_matches_cpu_as(f16: bool) {
    use rullama::gpu::matmul_coop::{SplitJob, round_f16_cpu, row_scale_cpu, split_f16, split_f16_cpu};
    let k = kernels();
    k.set_coop_f16(f16);
    let mut rng = ChaCha8Rng::seed_from_u64(29);
    // Rows of f32 at element 8 with a stride of cols + 12: (bytes, values).
    let activations = |rng: &mut ChaCha8Rng, rows: usize, cols: usize| -> (Vec<u8>, Vec<f32>) {
        let stride = cols + 12;
        let xs: Vec<f32> = (0..8 + rows * stride).map(|_| rng.random_range(-3000.0f32..3000.0) * rng.random_range(0.0f32..1.0).powi(6)).collect();
        let values: Vec<f32> = (0..rows).flat_map(|r| xs[8 + r * stride..8 + r * stride + cols].to_vec()).collect();
        (bytemuck::cast_slice(&xs).to_vec(), values)
    };
    // lo starts as all ones (a NaN pattern no split writes), so f16's untouched lo shows.
    let parts = |rows: usize, cols: usize| (kernel::storage(&k.gpu, "hi", (rows * cols * 2) as u64), kernel::upload(&k.gpu, "lo", &vec![0xFF; rows * cols * 2]));
    // Where element i (row-major, rows of `cols`) lies in tiles of `tile` rows x 32 columns.
    let at = |i: usize, cols: usize, tile: usize| -> usize {
        if tile == 0 {
            return i;
        }
        let (r, c) = (i / cols, i % cols);
        ((r / tile) * (cols / 32) + c / 32) * (tile * 32) + (r % tile) * 32 + c % 32
    };
    // `scale[r]`: what row r is multiplied by.
    let check = |what: &str, (hi, lo): &(wgpu::Buffer, wgpu::Buffer), values: &[f32], scale: &[f32], padded: usize, (cols, tile): (usize, usize)| {
        let read = |buf: &wgpu::Buffer| -> Vec<f16> {
            bytemuck::cast_slice::<u8, u16>(&kernel::read_back(&k.gpu, buf, 0, (padded * 2) as u64).unwrap()).iter().map(|&h| f16::from_bits(h)).collect()
        };
        let (tiled_h, tiled_l) = (read(hi), read(lo));
        let (gh, gl): (Vec<f16>, Vec<f16>) = (0..padded).map(|i| (tiled_h[at(i, cols, tile)], tiled_l[at(i, cols, tile)])).unzip();
        if f16 {
            for (i, v) in values.iter().enumerate() {
                let v = v * scale[i / cols];
                assert_eq!(gh[i].to_bits(), round_f16_cpu(v).to_bits(), "{what} element {i}: f16 of {v}");
            }
            assert!(gh[values.len()..].iter().all(|h| h.to_bits() == 0), "{what}: padding rows not zero");
            assert!(gl.iter().all(|l| l.to_bits() == 0xFFFF), "{what}: lo parts written");
            return;
        }
        for (i, v) in values.iter().enumerate() {
            let v = v * scale[i / cols];
            let (h, l) = split_f16_cpu(v);
            assert_eq!(gh[i].to_bits(), h.to_bits(), "{what} element {i}: hi of {v}");
            let step = f32::from(l).abs() * 2f32.powi(-10) + 2f32.powi(-24);
            assert!((f32::from(gl[i]) - f32::from(l)).abs() <= step, "{what} element {i}: lo {} against {}", gl[i], l);
            // Below f16's smallest normal (2^-14) hi is 0 and lo alone carries v, to f16's
            // precision: an absolute error under 2^-25, negligible in a product's sum.
            let back = f32::from(gh[i]) + f32::from(gl[i]) / 2048.0;
            let allowed = if v.abs() < 2f32.powi(-14) { v.abs() * 2f32.powi(-11) } else { v.abs() * 2f32.powi(-21) };
            assert!((back - v).abs() <= allowed + 2f32.powi(-35), "{what} element {i}: {back} for {v}");
        }
        assert!(gh[values.len()..].iter().chain(&gl[values.len()..]).all(|h| h.to_bits() == 0), "{what}: padding rows not zero");
    };
    let (cols, rows, pad) = (512, 5, 8);
    let (x_cols, x_rows, x_pad) = (96, 3, 16);
    let x_rs = up(&k, &[SENTINEL; 3]);
    for (&ty, tile) in TYPES.iter().flat_map(|ty| [(ty, 0), (ty, 4)]) {
        let (bytes, byte0, row_bytes, values) = if ty == GgmlType::F32 {
            let (bytes, values) = activations(&mut rng, rows, cols);
            (bytes, 32, (cols + 12) * 4, values)
        } else {
            let data = random_matrix(&mut rng, ty, cols, rows);
            let values = rullama::gguf::dequant::dequantize(ty, &data, cols * rows).unwrap();
            (data, 0, cols / ty.block_elems() * ty.block_bytes(), values)
        };
        let src = upload_blocks(&k, "src", ty, &bytes);
        let out = parts(pad, cols);
        let job = SplitJob { src: &src, ty, byte0, row_bytes, cols, rows, rows_pad: pad, scale: 16.0, hi: &out.0, lo: &out.1, tile_rows: tile, col_stride: 1, row_scale: None, pairs: None };
        let (x_bytes, x_values) = activations(&mut rng, x_rows, x_cols);
        let x_src = kernel::upload(&k.gpu, "x", &x_bytes);
        let x_out = parts(x_pad, x_cols);
        // Each row also by its own power of two (row_scale_cpu's), the job's scale after it.
        let x_job = SplitJob { src: &x_src, ty: GgmlType::F32, byte0: 32, row_bytes: (x_cols + 12) * 4, cols: x_cols, rows: x_rows, rows_pad: x_pad, scale: 0.5, hi: &x_out.0, lo: &x_out.1, tile_rows: tile, col_stride: 1, row_scale: Some(&x_rs), pairs: None };
        let along = ty != GgmlType::F32;
        let mut b = Batch::new(Arc::clone(&k.gpu), 4);
        split_f16(&k, &mut b, &job, along.then_some(&x_job)).unwrap();
        b.submit().unwrap();
        check(&format!("{ty} in tiles of {tile}"), &out, &values, &[16.0; 5], pad * cols, (cols, tile));
        if along {
            let factors: Vec<f32> = x_values.chunks(x_cols).map(|r| row_scale_cpu(r.iter().copied()) * 0.5).collect();
            assert_eq!(kernel::read_f32(&k.gpu, &x_rs, 0, x_rows).unwrap(), &factors.iter().map(|f| f * 2.0).collect::<Vec<f32>>()[..], "row scales");
            check(&format!("f32 along {ty} in tiles of {tile}"), &x_out, &x_values, &factors, x_pad * x_cols, (x_cols, tile));
        }
    }
    // The second job reading a matrix across (its columns `col_stride` apart, as attention
    // reads V transposed): rows of x are columns of a stored x_cols x width matrix.
    let width = x_rows + 5;
    let (m_bytes, _) = activations(&mut rng, 1, 8 + x_cols * width - 12);
    let m: Vec<f32> = bytemuck::cast_slice::<u8, f32>(&m_bytes).to_vec();
    let x_values: Vec<f32> = (0..x_rows).flat_map(|r| (0..x_cols).map(|c| m[8 + c * width + r]).collect::<Vec<_>>()).collect();
    assert!(m.len() >= 8 + x_cols * width);
    let x_src = kernel::upload(&k.gpu, "x", &m_bytes);
    let x_out = parts(x_pad, x_cols);
    let x_job = SplitJob { src: &x_src, ty: GgmlType::F32, byte0: 32, row_bytes: 4, cols: x_cols, rows: x_rows, rows_pad: x_pad, scale: 0.0625, hi: &x_out.0, lo: &x_out.1, tile_rows: 4, col_stride: width, row_scale: None, pairs: None };
    let data = random_matrix(&mut rng, GgmlType::Q8_0, cols, rows);
    let src = upload_blocks(&k, "src", GgmlType::Q8_0, &data);
    let out = parts(pad, cols);
    let job = SplitJob { src: &src, ty: GgmlType::Q8_0, byte0: 0, row_bytes: cols / 32 * 34, cols, rows, rows_pad: pad, scale: 16.0, hi: &out.0, lo: &out.1, tile_rows: 4, col_stride: 1, row_scale: None, pairs: None };
    let mut b = Batch::new(Arc::clone(&k.gpu), 4);
    split_f16(&k, &mut b, &job, Some(&x_job)).unwrap();
    b.submit().unwrap();
    check("f32 read across", &x_out, &x_values, &[0.0625; 3], x_pad * x_cols, (x_cols, 4));
    // The first job reads whole rows only, all scaled alike.
    for bad in [SplitJob { col_stride: 2, ..job }, SplitJob { row_scale: Some(&x_rs), ..job }] {
        let mut b = Batch::new(Arc::clone(&k.gpu), 4);
        assert!(split_f16(&k, &mut b, &bad, None).is_err());
    }
}

/// split_k_sum.wgsl against its CPU twin: the same adds in the same order, so equal to the
/// bit; it writes only its rows of each y row (sentinels around stay).
#[test]
fn split_k_sum_matches_cpu() {
    use rullama::gpu::matmul_coop::{split_k_sum, split_k_sum_cpu};
    let k = kernels();
    let mut rng = ChaCha8Rng::seed_from_u64(31);
    for (splits, n, rows) in [(1, 3, 7), (3, 5, 70), (6, 2, 300)] {
        let part = rand_vec(&mut rng, splits * n * rows);
        let (y_off, y_stride, row0) = (5, rows + 9, 4);
        let len = y_off + n * y_stride;
        let pb = up(&k, &part);
        let got = run(&k, len, |b, y| split_k_sum(&k, b, &pb, (splits, n, rows), y, (y_off, y_stride, row0)).unwrap());
        let want = split_k_sum_cpu(&part, splits, n, rows);
        for (i, v) in got.iter().enumerate() {
            let (t, c) = ((i.wrapping_sub(y_off)) / y_stride, (i.wrapping_sub(y_off)) % y_stride);
            let inside = i >= y_off && t < n && c >= row0 && c < row0 + rows;
            let expect = if inside { want[t * rows + c - row0] } else { SENTINEL };
            assert_eq!(v.to_bits(), expect.to_bits(), "splits {splits} n {n} rows {rows}: element {i}");
        }
    }
}

/// The split-K plan covers every column once, in ranges that are multiples of 32 and (when
/// split) at least 256 columns long; grids of 256 workgroups or more are not split, and
/// E2B's o and down projections get the measured splits: 8 and 11 of 48 workgroups
/// (128 × 128, f32-accurate), 6 of 192 (64 × 64, f16 products).
#[test]
fn split_k_plan_covers_columns() {
    use rullama::gpu::matmul_coop::{split_k_plan, split_target};
    for f16 in [false, true] {
        let target = split_target(f16);
        for groups in [1, 7, 32, 48, 192, 255, 256, 511, 512, 4000] {
            for cols in [32, 256, 640, 1536, 2048, 6144, 16384] {
                let (splits, per) = split_k_plan(groups, cols, target);
                assert!(splits >= 1 && per % 32 == 0, "groups {groups} cols {cols}");
                assert!(splits * per >= cols && (splits - 1) * per < cols, "groups {groups} cols {cols}: {splits} x {per}");
                assert!(splits == 1 || per >= 256, "groups {groups} cols {cols}: {splits} x {per}");
                assert!(groups < 256 || splits == 1, "groups {groups} cols {cols}: {splits} x {per}");
            }
        }
    }
    assert_eq!(split_k_plan(48, 2048, split_target(false)).0, 8);
    assert_eq!(split_k_plan(48, 6144, split_target(false)).0, 11);
    assert_eq!(split_k_plan(192, 2048, split_target(true)).0, 6);
    assert_eq!(split_k_plan(192, 6144, split_target(true)).0, 6);
    assert_eq!(split_k_plan(192, 2048, split_target(false)).0, 3);
}

/// Each type's `dq16` (16 elements of a row at once, which the tensor-core product uses
/// to stage weights from their blocks) against the CPU's dequantization, every 16-element
/// group of a few rows, on every adapter (CI's has no tensor cores to run the product).
/// Q6_K's rows lie in the GPU's grouped layout (`GpuMatrix::upload` regroups them).
#[test]
fn dq16_matches_cpu() {
    use rullama::gpu::kernel::{Access, KernelSource};
    use rullama::gpu::shaders;
    let k = kernels();
    let mut rng = ChaCha8Rng::seed_from_u64(51);
    #[repr(C)]
    #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
    struct P {
        groups: u32,
        per_row: u32,
        row_bytes: u32,
        pad: u32,
    }
    let harness = "struct P { groups: u32, per_row: u32, row_bytes: u32, pad: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<vec4<f32>>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x >= p.groups) {
        return;
    }
    let v = dq16((id.x / p.per_row) * p.row_bytes, (id.x % p.per_row) * 4u);
    for (var j = 0u; j < 4u; j++) {
        out[4u * id.x + j] = v[j];
    }
}
";
    let types: Vec<GgmlType> = TYPES.iter().copied().filter(|&ty| shaders::quant16(ty).is_some()).collect();
    assert!(types.len() >= 4, "the types with a dq16: {types:?}");
    for ty in types {
        // Rows of whole 16-element groups (the product's rows are multiples of 32).
        let (cols, rows) = (cols_for(ty) / 16 * 16, 3);
        let data = random_matrix(&mut rng, ty, cols, rows);
        let w = GpuMatrix::upload(&k, "w", ty, cols, rows, &data).unwrap();
        let mut code = shaders::quant16(ty).unwrap();
        code.push(harness);
        let kernel = k.get(&format!("dq16_test/{ty}"), || KernelSource { name: format!("dq16_test/{ty}"), code: code.concat(), entry: "main", buffers: vec![Access::Read, Access::ReadWrite] }).unwrap();
        let groups = rows * cols / 16;
        let out = up(&k, &vec![SENTINEL; rows * cols]);
        let p = P { groups: groups as u32, per_row: (cols / 16) as u32, row_bytes: w.row_bytes() as u32, pad: 0 };
        let mut b = Batch::new(Arc::clone(&k.gpu), 4);
        b.dispatch(&kernel, &[&w.tiles()[0].buffer, &out], &p, [groups.div_ceil(64) as u32, 1, 1]).unwrap();
        b.submit().unwrap();
        let got = kernel::read_f32(&k.gpu, &out, 0, rows * cols).unwrap();
        let want = rullama::gguf::dequant::dequantize(ty, &data, rows * cols).unwrap();
        let scale = want.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        for (i, (g, c)) in got.iter().zip(&want).enumerate() {
            // The same f32 operations as the CPU's; a fused multiply-add may round once less.
            assert!((g - c).abs() <= scale * 2f32.powi(-20), "{ty} element {i}: {g} against {c}");
        }
    }
}

/// The tensor-core kernel's source for both tile shapes (plain, GEGLU, GROUPED), with three
/// products and with one of f16-rounded inputs, passes naga's validation with every
/// capability, so CI (whose adapter has no cooperative matrices) still checks it compiles.
#[test]
fn coop_kernel_sources_validate() {
    use rullama::gpu::matmul_coop::{COOP_LARGE, COOP_SMALL};
    use wgpu::naga;
    // Every variant, and those that stage weights from each type's blocks.
    let sources = [COOP_SMALL, COOP_LARGE].into_iter().flat_map(|t| [false, true].map(|f16| (t, f16))).flat_map(|(t, f16)| {
        let blocks = TYPES.iter().filter(|&&ty| rullama::gpu::shaders::quant16(ty).is_some()).flat_map(move |&ty| {
            [(false, false), (true, false), (false, true)].map(|(geglu, grouped)| (t, f16, t.source_variant(geglu, grouped, Some(ty), f16).unwrap()))
        });
        [(false, false), (true, false), (false, true)].map(|(geglu, grouped)| (t, f16, t.source_variant(geglu, grouped, None, f16).unwrap())).into_iter().chain(blocks)
    });
    for (tile, f16, src) in sources {
        let module = naga::front::wgsl::parse_str(&src).unwrap_or_else(|e| panic!("{tile:?}: {}", e.emit_to_string(&src)));
        let mut v = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::all());
        let info = v.validate(&module).unwrap_or_else(|e| panic!("{tile:?}: {}", e.emit_to_string(&src)));
        // And it translates to SPIR-V as wgpu's Vulkan backend does: naga's writer has
        // panicked on cooperative-matrix stores whose pointer was computed in place.
        let options = naga::back::spv::Options { lang_version: (1, 6), ..Default::default() };
        let pipeline = naga::back::spv::PipelineOptions { shader_stage: naga::ShaderStage::Compute, entry_point: "main".into() };
        naga::back::spv::write_vec(&module, &info, &options, Some(&pipeline)).unwrap_or_else(|e| panic!("{tile:?}: {e}"));
        // The tile choice checks the device's limit against workgroup_bytes (the H100's
        // 48 KB holds the large tile to the byte), so it must be what the kernel declares.
        let mut layouter = naga::proc::Layouter::default();
        layouter.update(module.to_ctx()).unwrap();
        let declared: u32 = module.global_variables.iter().filter(|(_, g)| g.space == naga::AddressSpace::WorkGroup).map(|(_, g)| layouter[g.ty].size).sum();
        assert_eq!(declared as usize, tile.workgroup_bytes_of(f16), "{tile:?}, f16 {f16}");
    }
}

/// A stacked [q; k; v] matrix: one token routed part by part into three buffers at offsets
/// (and [q; k] with no third part), row ranges of it and all parts routed for several
/// tokens, against the CPU product of each part.
#[test]
fn stacked_parts_match_cpu() {
    use rullama::gpu::matmul::{matmul_routed, matmul_rows, matvec_routed};
    let mut rng = ChaCha8Rng::seed_from_u64(18);
    let k = kernels();
    for &ty in TYPES {
        let cols = cols_for(ty);
        let rows = [37, 9, 11];
        let parts: Vec<Vec<u8>> = rows.iter().map(|&r| random_matrix(&mut rng, ty, cols, r)).collect();
        let want = |x: &[f32], n: usize, i: usize| ops::matmul(x, n, &QMatrix::new(ty, cols, rows[i], &parts[i]).unwrap()).unwrap();
        for with_v in [true, false] {
            let used = if with_v { 3 } else { 2 };
            let data: Vec<u8> = parts[..used].concat();
            let total: usize = rows[..used].iter().sum();
            let w = GpuMatrix::upload_stacked(&k, "qkv", ty, cols, total, total, &data).unwrap();
            let x = rand_vec(&mut rng, cols);
            let xb = up(&k, &x);
            let outs: Vec<wgpu::Buffer> = (0..3).map(|i| up(&k, &vec![SENTINEL; 2 + rows[i] + 1])).collect();
            let v_rows = if with_v { rows[2] } else { 0 };
            let mut b = Batch::new(Arc::clone(&k.gpu), 4);
            matvec_routed(&k, &mut b, &w, MatvecIn::Vector(&xb, 0), [(&outs[0], 2, rows[0]), (&outs[1], 2, rows[1]), (&outs[2], 2, v_rows)]).unwrap();
            b.submit().unwrap();
            for i in 0..3 {
                let got = kernel::read_f32(&k.gpu, &outs[i], 0, 2 + rows[i] + 1).unwrap();
                assert!(got[..2].iter().chain(got.last()).all(|&v| v == SENTINEL), "{ty} part {i}: writes outside");
                if i < used {
                    let e = max_rel(&got[2..2 + rows[i]], &want(&x, 1, i));
                    assert!(e < TOL, "{ty} routed part {i}: rel err {e}");
                } else {
                    assert!(got.iter().all(|&v| v == SENTINEL), "{ty}: an absent part is not written");
                }
            }
            // Row ranges for several tokens (prefill).
            let n = 5;
            let xs = rand_vec(&mut rng, n * cols);
            let xsb = up(&k, &xs);
            let mut first = 0;
            for i in 0..used {
                let got = run(&k, 1 + n * rows[i] + 1, |b, y| matmul_rows(&k, b, &w, first, rows[i], &xsb, 0, n, y, 1).unwrap());
                assert!(got[0] == SENTINEL && *got.last().unwrap() == SENTINEL, "{ty} rows: writes outside");
                let e = max_rel(&got[1..1 + n * rows[i]], &want(&xs, n, i));
                assert!(e < TOL, "{ty} rows of part {i}: rel err {e}");
                first += rows[i];
            }
            // All parts routed for several tokens, on the tensor-core kernel where the
            // device has one (40 tokens).
            for n in [5, 40] {
                let xs = rand_vec(&mut rng, n * cols);
                let xsb = up(&k, &xs);
                let outs: Vec<wgpu::Buffer> = (0..3).map(|i| up(&k, &vec![SENTINEL; 2 + n * rows[i] + 1])).collect();
                let mut b = Batch::new(Arc::clone(&k.gpu), 16);
                matmul_routed(&k, &mut b, &w, &xsb, 0, n, [(&outs[0], 2, rows[0]), (&outs[1], 2, rows[1]), (&outs[2], 2, v_rows)]).unwrap();
                b.submit().unwrap();
                for i in 0..3 {
                    let got = kernel::read_f32(&k.gpu, &outs[i], 0, 2 + n * rows[i] + 1).unwrap();
                    assert!(got[..2].iter().chain(got.last()).all(|&v| v == SENTINEL), "{ty} n {n} part {i}: writes outside");
                    if i < used {
                        let e = max_rel(&got[2..2 + n * rows[i]], &want(&xs, n, i));
                        assert!(e < TOL, "{ty} n {n} routed part {i}: rel err {e}");
                    } else {
                        assert!(got.iter().all(|&v| v == SENTINEL), "{ty} n {n}: an absent part is not written");
                    }
                }
            }
        }
    }
}

/// moe_sort.wgsl against its CPU twin: each expert's first padded row and each tile's
/// expert exactly, and the map (whose order within a run is the GPU's) holding each
/// expert's pairs, each once, in its run, NONE in the padding and past the end. Ids past
/// the experts are left out. Runs on any adapter (lavapipe in CI).
#[test]
fn moe_sort_matches_cpu() {
    use rullama::gpu::moe::{SortLayout, moe_sort, moe_sort_cpu};
    let k = kernels();
    let mut rng = ChaCha8Rng::seed_from_u64(41);
    for (experts, pairs, bm) in [(5, 37, 4), (128, 4096, 64), (7, 1, 64), (3, 600, 16)] {
        // A few ids past the experts, and experts with no pairs (the last one).
        let ids: Vec<u32> = (0..pairs).map(|i| if i % 29 == 7 { experts as u32 + 2 } else { rng.random_range(0..experts.max(2) as u32 - 1) }).collect();
        let base = 11;
        let l = SortLayout::new(base, pairs, experts, bm);
        let info = up_u32(&k, &vec![0xABCD_u32; l.end() + 1]);
        let idb = up_u32(&k, &ids);
        let mut b = Batch::new(Arc::clone(&k.gpu), 4);
        moe_sort(&k, &mut b, &idb, pairs, &info, l).unwrap();
        b.submit().unwrap();
        let got: Vec<u32> = kernel::read_f32(&k.gpu, &info, 0, l.end() + 1).unwrap().iter().map(|v| v.to_bits()).collect();
        assert!(got[..base].iter().chain(got.last()).all(|&v| v == 0xABCD), "writes outside the layout");
        let (poff, tiles) = moe_sort_cpu(&ids, experts, bm);
        assert_eq!(got[l.poff_off..l.poff_off + experts + 1], poff[..], "{experts} experts, {pairs} pairs");
        assert_eq!(got[l.tile_off..l.tile_off + tiles.len()], tiles[..]);
        let map = &got[l.map_off..l.map_off + l.rows];
        for e in 0..experts {
            let run = &map[poff[e] as usize..poff[e + 1] as usize];
            let mut mine: Vec<u32> = run.iter().copied().filter(|&p| p != u32::MAX).collect();
            mine.sort_unstable();
            let want: Vec<u32> = (0..pairs as u32).filter(|&p| ids[p as usize] == e as u32).collect();
            assert_eq!(mine, want, "expert {e}'s run");
        }
        assert!(map[poff[experts] as usize..].iter().all(|&p| p == u32::MAX), "past the runs");
    }
    // A layout that does not match its sizes is refused.
    let l = SortLayout::new(0, 10, 4, 8);
    let mut b = Batch::new(Arc::clone(&k.gpu), 4);
    let info = up_u32(&k, &vec![0; l.end()]);
    assert!(moe_sort(&k, &mut b, &up_u32(&k, &[0; 20]), 20, &info, l).is_err());
}

/// The experts' products for a prefill's many tokens (`matmul_experts` from
/// EXPERTS_COOP_TOKENS tokens: on tensor cores, pairs grouped by expert) against the CPU,
/// per token and per pair x, with experts in tiles of two (several chunks), an expert no
/// pair picks, and y at an offset; on tensor cores with the weights staged from their
/// blocks and split by a pass. On devices without tensor cores the same call takes the
/// per-pair kernel, which this checks too. 2 × TOL as the other tensor-core cases.
#[test]
fn matmul_experts_of_many_tokens_match_cpu() {
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    // Tensor cores with the experts' weights staged from their blocks and split by a pass.
    let mut ks: Vec<Kernels> = coop_kernels().into_iter().chain(coop_kernels().map(|mut k| {
        k.coop_blocks = false;
        k
    })).collect();
    if ks.is_empty() {
        ks.push(kernels());
    }
    for k in &ks {
        for (ty, cols, experts, rpe, top_k, n) in [(GgmlType::Q4_K, 256, 5, 128, 2, 70), (GgmlType::Q6_K, 512, 9, 128, 3, 130), (GgmlType::Q5_0, 320, 4, 64, 2, 70), (GgmlType::Q8_0, 96, 4, 64, 3, 65)] {
            let rows = experts * rpe;
            let data = random_matrix(&mut rng, ty, cols, rows);
            let rb = data.len() / rows;
            let w = GpuMatrix::upload_with_tile_limit(k, "experts", ty, cols, rows, rpe, &data, (2 * rpe * rb) as u64).unwrap();
            assert!(w.tiles().len() > 1);
            // Expert 1 is never picked; slots of a token differ.
            let ids: Vec<u32> = (0..n * top_k)
                .map(|i| loop {
                    let e = rng.random_range(0..experts as u32);
                    if e != 1 && (i % top_k == 0 || e != (i as u32 * 7) % experts as u32) {
                        break e;
                    }
                })
                .collect();
            let idb = up_u32(k, &ids);
            let q = QMatrix::new(ty, cols, rows, &data).unwrap();
            for x_per_slot in [false, true] {
                let x = rand_vec(&mut rng, if x_per_slot { n * top_k } else { n } * cols);
                let xb = up(k, &x);
                let y_off = 3;
                let out = run(k, y_off + n * top_k * rpe, |b, y| matmul_experts(k, b, &w, rpe, &idb, top_k, &xb, 0, x_per_slot, n, y, y_off).unwrap());
                assert!(out[..y_off].iter().chain(out.last()).all(|&v| v == SENTINEL), "writes outside y");
                let want = ops::matmul_experts(&x, n, &q, rpe, &ids, top_k, x_per_slot).unwrap();
                let e = max_rel(&out[y_off..y_off + n * top_k * rpe], &want);
                assert!(e < 2.0 * TOL, "{ty} {experts} experts of {rpe} rows, {n} tokens, x_per_slot {x_per_slot} (tensor cores {}): rel err {e}", k.gpu.coop);
            }
            // On tensor cores the grouped product ran, staging this type's blocks or split
            // weights as the variant says.
            if k.use_coop && k.gpu.coop {
                let name = if k.coop_blocks { format!("matmul_coop/64x64/grouped/{ty}") } else { "matmul_coop/64x64/grouped".to_string() };
                assert!(k.compiled(&name), "{ty}: {name} did not run");
            }
        }
    }
}

/// split_f16 through moe_sort's map (the tensor-core expert product's split, which CI's
/// adapter can run though not the product): x row r of a chunk of experts is the pair in
/// padded row poff[e0] + r, its token's row split (scaled by its own power of two) or
/// zeros for padding, rows past the chunk's runs untouched; weight rows of an expert no
/// pair picks are not written, the others split as usual; and the x job alone
/// (`split_x`) writes the same x parts.
#[test]
fn split_through_expert_map() {
    use rullama::gpu::matmul_coop::{SplitJob, XMap, row_scale_cpu, split_f16_cpu, split_f16_mapped, split_x};
    use rullama::gpu::moe::{SortLayout, moe_sort};
    let k = kernels();
    let mut rng = ChaCha8Rng::seed_from_u64(43);
    let (experts, rpe, cols, n, top_k, bm) = (4, 8, 64, 6, 2, 4);
    let ids: Vec<u32> = (0..n * top_k).map(|i| [0, 1, 3][(i * 7 + i / 3) % 3]).collect();
    let (e0, e1) = (1, 4);
    let x: Vec<f32> = (0..n * cols).map(|_| rng.random_range(-50.0f32..50.0)).collect();
    let w: Vec<f32> = (0..experts * rpe * cols).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let x_rows = 16;
    let layout = SortLayout::new(x_rows, n * top_k, experts, bm);
    let info = up_u32(&k, &vec![0; layout.end()]);
    let bytes = |count: usize| kernel::upload(&k.gpu, "part", &vec![0xAB; count * 2]);
    let (wh, wl, xh, xl) = (bytes((e1 - e0) * rpe * cols), bytes((e1 - e0) * rpe * cols), bytes(x_rows * cols), bytes(x_rows * cols));
    let (wb, xb) = (up(&k, &w), up(&k, &x));
    let w_job = SplitJob { src: &wb, ty: GgmlType::F32, byte0: e0 * rpe * cols * 4, row_bytes: cols * 4, cols, rows: (e1 - e0) * rpe, rows_pad: (e1 - e0) * rpe, scale: 16.0, hi: &wh, lo: &wl, tile_rows: 0, col_stride: 1, row_scale: None, pairs: None };
    let x_job = SplitJob { src: &xb, ty: GgmlType::F32, byte0: 0, row_bytes: cols * 4, cols, rows: x_rows, rows_pad: x_rows, scale: 1.0, hi: &xh, lo: &xl, tile_rows: 0, col_stride: 1, row_scale: Some(&info), pairs: None };
    let mut b = Batch::new(Arc::clone(&k.gpu), 4);
    moe_sort(&k, &mut b, &up_u32(&k, &ids), n * top_k, &info, layout).unwrap();
    split_f16_mapped(&k, &mut b, &w_job, Some(&x_job), Some(XMap { layout, div: top_k, experts: (e0, e1), rpe, fixed_scale: false, pairs: None })).unwrap();
    b.submit().unwrap();
    let words: Vec<u32> = kernel::read_f32(&k.gpu, &info, 0, layout.end()).unwrap().iter().map(|v| v.to_bits()).collect();
    let halves = |buf: &wgpu::Buffer, count: usize| -> Vec<u16> { bytemuck::cast_slice::<u8, u16>(&kernel::read_back(&k.gpu, buf, 0, (count * 2) as u64).unwrap()).to_vec() };
    let (gxh, gwh) = (halves(&xh, x_rows * cols), halves(&wh, (e1 - e0) * rpe * cols));
    let (first, end) = (words[layout.poff_off + e0] as usize, words[layout.poff_off + e1] as usize);
    assert!(end - first <= x_rows);
    for r in 0..x_rows {
        let row = &gxh[r * cols..(r + 1) * cols];
        if first + r >= end {
            assert!(row.iter().all(|&h| h == 0xABAB), "row {r} past the chunk's runs was written");
            continue;
        }
        let pair = words[layout.map_off + first + r];
        if pair == u32::MAX {
            assert!(row.iter().all(|&h| h == 0), "padding row {r} not zero");
            continue;
        }
        let src = &x[(pair as usize / top_k) * cols..][..cols];
        let s = row_scale_cpu(src.iter().copied());
        assert_eq!(f32::from_bits(words[r]), s, "row {r}'s scale");
        let want: Vec<u16> = src.iter().map(|v| split_f16_cpu(v * s).0.to_bits()).collect();
        assert_eq!(row, &want[..], "row {r} (pair {pair})");
    }
    for (i, &h) in gwh.iter().enumerate() {
        let e = e0 + i / cols / rpe;
        let want = if e == 2 { 0xABAB } else { split_f16_cpu(w[e0 * rpe * cols + i] * 16.0).0.to_bits() };
        assert_eq!(h, want, "weight element {i} (expert {e})");
    }
    // The x job alone (products that stage their weights from blocks) writes the same parts.
    let (xh2, xl2) = (bytes(x_rows * cols), bytes(x_rows * cols));
    let mut b = Batch::new(Arc::clone(&k.gpu), 4);
    split_x(&k, &mut b, &SplitJob { hi: &xh2, lo: &xl2, ..x_job }, Some(XMap { layout, div: top_k, experts: (e0, e1), rpe, fixed_scale: false, pairs: None })).unwrap();
    b.submit().unwrap();
    assert_eq!(halves(&xh2, x_rows * cols), gxh, "x hi parts of the x job alone");
    assert_eq!(halves(&xl2, x_rows * cols), halves(&xl, x_rows * cols), "x lo parts of the x job alone");
    // With a fixed scale (rows gathered for a product's weight side) the rows take the
    // job's scale alone and no row scale is written; with a pair count, rows of pairs past
    // it are zeros as padding is.
    let marked: Vec<u32> = words.iter().enumerate().map(|(i, &v)| if i < x_rows { 0xDEAD_BEEF } else { v }).collect();
    let info2 = up_u32(&k, &marked);
    let (xh3, xl3) = (bytes(x_rows * cols), bytes(x_rows * cols));
    let mut b = Batch::new(Arc::clone(&k.gpu), 4);
    let fixed = SplitJob { hi: &xh3, lo: &xl3, scale: 16.0, row_scale: Some(&info2), ..x_job };
    let bound = 7;
    split_x(&k, &mut b, &fixed, Some(XMap { layout, div: top_k, experts: (e0, e1), rpe, fixed_scale: true, pairs: Some(bound) })).unwrap();
    b.submit().unwrap();
    let after: Vec<u32> = kernel::read_f32(&k.gpu, &info2, 0, x_rows).unwrap().iter().map(|v| v.to_bits()).collect();
    assert!(after.iter().all(|&v| v == 0xDEAD_BEEF), "a fixed-scale job wrote row scales");
    let got = halves(&xh3, x_rows * cols);
    let cut = (0..end - first).filter(|&r| words[layout.map_off + first + r] != u32::MAX && words[layout.map_off + first + r] as usize >= bound).count();
    assert!(cut > 0, "no row's pair is past the count");
    for r in 0..end - first {
        let pair = words[layout.map_off + first + r];
        let want: Vec<u16> = match pair {
            p if p as usize >= bound => vec![0; cols],
            _ => x[(pair as usize / top_k) * cols..][..cols].iter().map(|v| split_f16_cpu(v * 16.0).0.to_bits()).collect(),
        };
        assert_eq!(&got[r * cols..(r + 1) * cols], &want[..], "fixed-scale row {r} (pair {pair})");
    }
}

/// One token's experts of stacked [gate; up] with GeGLU in the decode matvec
/// (`matvec_experts_geglu`) against the CPU's product of each slot's expert and GeGLU, for
/// every type, experts in tiles of two (2 × TOL: tanh, as the other GeGLU cases).
#[test]
fn matvec_experts_geglu_matches_cpu() {
    use rullama::gpu::matmul::matvec_experts_geglu;
    let mut rng = ChaCha8Rng::seed_from_u64(44);
    let k = kernels();
    let (experts, fe, top_k) = (5, 6, 3);
    for &ty in TYPES {
        let cols = cols_for(ty);
        let rows = experts * 2 * fe;
        let data = random_matrix(&mut rng, ty, cols, rows);
        let rb = data.len() / rows;
        let w = GpuMatrix::upload_with_tile_limit(&k, "experts", ty, cols, rows, 2 * fe, &data, (2 * 2 * fe * rb) as u64).unwrap();
        assert!(w.tiles().len() > 1);
        let ids = [4u32, 0, 3];
        let x = rand_vec(&mut rng, cols);
        let (xb, idb) = (up(&k, &x), up_u32(&k, &ids));
        let out = run(&k, 2 + top_k * fe, |b, y| matvec_experts_geglu(&k, b, &w, fe, &idb, top_k, &xb, 0, y, 2).expect("shapes suit it").unwrap());
        assert!(out[..2].iter().chain(out.last()).all(|&v| v == SENTINEL), "writes outside y");
        let q = QMatrix::new(ty, cols, rows, &data).unwrap();
        let want: Vec<f32> = ids
            .iter()
            .flat_map(|&e| {
                let e = e as usize;
                let gu = ops::matmul(&x, 1, &q.slice_rows(e * 2 * fe, (e + 1) * 2 * fe)).unwrap();
                let mut g = gu[..fe].to_vec();
                ops::geglu(&mut g, &gu[fe..]);
                g
            })
            .collect();
        let e = max_rel(&out[2..2 + top_k * fe], &want);
        assert!(e < 2.0 * TOL, "{ty}: rel err {e}");
    }
}

/// Gemma 4's per-layer-embedding gate through the down projection, one token
/// (`matvec_ple_acc`, then `matvec_ple_gate`), against the CPU's ops in the model's order:
/// d = W_down · a, h2 = h + RMS(d) ⊙ w_post, g = gelu_tanh(W_gate · h2) ⊙ e, u = W_proj · g.
/// Shapes: down rows of 8 chunks (32 rows a workgroup, the last one part-filled), of many
/// (4 a workgroup) and of E2B's widest (12288 Q6_K columns, which the rule for these downs
/// keeps at 128 invocations a row: 2 rows a workgroup), gates of 32 and 256 (every
/// invocation), both reduction variants.
/// Tolerances: d is the plain matvec (TOL); h2 is the residual step's arithmetic in its
/// order on that d, so d's error and an ulp or two (TOL); u differs from the CPU's by the gate's sums in another order (H + RMS ·
/// D against W_gate · h2, and 64-bit fixed point at 2^-32 per term, ~1e-10 here), a few
/// ulp of Σ|terms| through GELU and W_proj (measured ≤ 1e-6 of max |u| on lavapipe):
/// TOL. A wrong row, copy or offset errs by O(1).
#[test]
fn matvec_ple_gate_through_down_matches_cpu() {
    use rullama::gpu::matmul::{PleAcc, PleGate, gate_transposed, matvec_ple_acc, matvec_ple_gate, ple_acc_words};
    let mut rng = ChaCha8Rng::seed_from_u64(23);
    let eps = 1e-6;
    for k in variants() {
        assert!(k.gpu.int64_atomics, "this device lacks 64-bit atomics: decode takes the gate's own matvec there, which other tests cover");
        for (down_ty, down_cols, hidden, pd, proj_ty) in
            [(GgmlType::Q4_K, 256, 132, 32, GgmlType::Q8_0), (GgmlType::Q6_K, 1280, 132, 256, GgmlType::Q4_K), (GgmlType::Q4_K, 2048, 64, 256, GgmlType::Q6_K), (GgmlType::Q6_K, 12288, 36, 256, GgmlType::Q4_K)]
        {
            let what = format!("{} down {down_ty} {hidden}x{down_cols}, gate {pd}", variant_name(&k));
            let down_data = random_matrix(&mut rng, down_ty, down_cols, hidden);
            let proj_data = random_matrix(&mut rng, proj_ty, pd, hidden);
            let (a, h, post) = (rand_vec(&mut rng, down_cols), rand_vec(&mut rng, hidden), rand_vec(&mut rng, hidden));
            let gate: Vec<f32> = rand_vec(&mut rng, pd * hidden).iter().map(|v| v * 0.1).collect();
            // The layer's per-layer inputs at an offset, and its sums after another layer's.
            let (e_off, layer) = (7, 2);
            let e = rand_vec(&mut rng, e_off + pd);
            let acc_off = layer * ple_acc_words(pd);

            let d_want = ops::matmul(&a, 1, &QMatrix::new(down_ty, down_cols, hidden, &down_data).unwrap()).unwrap();
            let mut h2_want = h.clone();
            ops::rms_norm_to(&d_want, &mut h2_want, hidden, Some(&post), eps, true);
            let mut g = ops::matmul(&h2_want, 1, &QMatrix::new(GgmlType::F32, hidden, pd, bytemuck::cast_slice(&gate)).unwrap()).unwrap();
            ops::geglu(&mut g, &e[e_off..]);
            let u_want = ops::matmul(&g, 1, &QMatrix::new(proj_ty, pd, hidden, &proj_data).unwrap()).unwrap();

            let down = GpuMatrix::upload(&k, "down", down_ty, down_cols, hidden, &down_data).unwrap();
            let proj = GpuMatrix::upload(&k, "proj", proj_ty, pd, hidden, &proj_data).unwrap();
            let (ab, hb, postb, eb) = (up(&k, &a), up(&k, &h), up(&k, &post), up(&k, &e));
            let gtb = up(&k, &gate_transposed(&gate, pd, hidden));
            let acc = up_u32(&k, &vec![0; 2 * (acc_off + ple_acc_words(pd) + 1)]);
            let (d, h2) = (up(&k, &vec![SENTINEL; hidden + 1]), up(&k, &vec![SENTINEL; hidden + 1]));
            let u = run(&k, hidden, |b, y| {
                let sums = PleAcc { gate_t: &gtb, h: &hb, post: &postb, acc: &acc, acc_off, pd };
                matvec_ple_acc(&k, b, &down, &ab, &d, sums).unwrap();
                let g = PleGate { acc: &acc, acc_off, e: (&eb, e_off), d: &d, h: &hb, post: &postb, h2: &h2, eps };
                matvec_ple_gate(&k, b, &proj, g, y).unwrap();
            });
            let (d_got, h2_got) = (kernel::read_f32(&k.gpu, &d, 0, hidden + 1).unwrap(), kernel::read_f32(&k.gpu, &h2, 0, hidden + 1).unwrap());
            assert!([d_got[hidden], h2_got[hidden], u[hidden]].iter().all(|&v| v == SENTINEL), "{what}: writes past the outputs");
            let words = kernel::read_f32(&k.gpu, &acc, 0, 2 * (acc_off + ple_acc_words(pd) + 1)).unwrap();
            assert!(words[..2 * acc_off].iter().chain(&words[words.len() - 2..]).all(|v| v.to_bits() == 0), "{what}: sums outside the layer's");
            let (ed, eh, eu) = (max_rel(&d_got[..hidden], &d_want), max_rel(&h2_got[..hidden], &h2_want), max_rel(&u[..hidden], &u_want));
            eprintln!("{what}: d {ed:.1e}, h2 {eh:.1e}, u {eu:.1e}");
            assert!(ed < TOL, "{what}: d rel err {ed}");
            assert!(eh < TOL, "{what}: h2 rel err {eh}");
            assert!(eu < TOL, "{what}: u rel err {eu}");
        }
        assert!(k.compiled_matching(|n| n.starts_with("matvec/Q6_K/ch16/tpr128/") && n.ends_with("/ple_acc256")), "the widest down did not take 128 a row");
        // Buffers too small for the layer's sums, or a gate the kernels do not take, are errors.
        let (hidden, pd) = (64, 32);
        let down = GpuMatrix::upload(&k, "down", GgmlType::F32, 256, hidden, &random_matrix(&mut rng, GgmlType::F32, 256, hidden)).unwrap();
        let proj = GpuMatrix::upload(&k, "proj", GgmlType::F32, 260, hidden, &random_matrix(&mut rng, GgmlType::F32, 260, hidden)).unwrap();
        let (x, v, gt) = (up(&k, &[0.0; 256]), up(&k, &[0.0; 64]), up(&k, &vec![0.0; hidden * pd]));
        let small = up_u32(&k, &vec![0; 2 * ple_acc_words(pd) - 1]);
        let mut b = Batch::new(Arc::clone(&k.gpu), 4);
        let sums = PleAcc { gate_t: &gt, h: &v, post: &v, acc: &small, acc_off: 0, pd };
        assert!(matches!(matvec_ple_acc(&k, &mut b, &down, &x, &v, sums), Err(Error::Input(_))), "short sums");
        let g = PleGate { acc: &small, acc_off: 0, e: (&v, 0), d: &v, h: &v, post: &v, h2: &v, eps };
        assert!(matches!(matvec_ple_gate(&k, &mut b, &proj, g, &v), Err(Error::Input(_))), "a gate of 260 (wider than a workgroup)");
    }
}
