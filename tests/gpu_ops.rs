//! GPU kernels against their CPU references (`cpu::ops`), on random inputs with odd sizes.
//! Runs on whatever adapter wgpu finds (lavapipe in CI).
//!
//! Tolerances: f32 sums in a different order differ by a few ulp per term; for the
//! reductions here (≤ a few thousand terms of O(1) values) 1e-5 relative is ample while
//! any indexing or formula mistake shows as O(1) error.

mod common;

use std::sync::Arc;

use rand::{RngExt, SeedableRng};
use common::{coop_kernels_required, kernels};
use rand_chacha::ChaCha8Rng;
use rullama::cpu::ops;
use half::f16;
use rullama::gpu::{Batch, Kernels, kernel};

/// The kernels as the device runs them and, where that uses subgroup reductions, with the
/// workgroup-memory reductions too (`gpu::reduce`): both are checked.
fn reduction_variants() -> Vec<Kernels> {
    let k = kernels();
    let mut v = vec![];
    if k.use_subgroups {
        let mut wg = Kernels::new(Arc::clone(&k.gpu));
        wg.use_subgroups = false;
        v.push(wg);
    }
    v.insert(0, k);
    v
}

fn rand_vec(rng: &mut ChaCha8Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(-2.0f32..2.0)).collect()
}

fn max_rel(got: &[f32], want: &[f32]) -> f32 {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-6);
    got.iter().zip(want).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max) / scale
}

fn up(k: &Kernels, v: &[f32]) -> wgpu::Buffer {
    kernel::upload(&k.gpu, "test", bytemuck::cast_slice(v))
}

#[test]
fn rms_norm_matches_cpu() {
    for k in reduction_variants() {
        rms_norm_matches_cpu_on(&k);
    }
}

fn rms_norm_matches_cpu_on(k: &Kernels) {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for (rows, n, weighted, off) in [(1, 1, true, 0), (3, 37, true, 5), (7, 256, false, 0), (2, 1153, true, 3), (2, 2600, true, 1)] {
        let x = rand_vec(&mut rng, off + rows * n);
        let w = rand_vec(&mut rng, n);
        let xb = up(k, &x);
        let wb = up(k, &w);
        let mut b = Batch::new(Arc::clone(&k.gpu), 4);
        rullama::gpu::norm::rms_norm(k, &mut b, &xb, off, rows, n, weighted.then_some(&wb), 1e-6).unwrap();
        b.submit().unwrap();
        let got = kernel::read_f32(&k.gpu, &xb, 0, x.len()).unwrap();
        let mut want = x.clone();
        ops::rms_norm(&mut want[off..], n, weighted.then_some(&w[..]), 1e-6);
        assert_eq!(&got[..off], &x[..off], "elements before the offset are untouched");
        let e = max_rel(&got, &want);
        assert!(e < 1e-5, "rows {rows} n {n}: rel err {e}");
    }
}

/// The norm with its input scaled and the sum after it (the per-layer-embedding inputs:
/// `(RMS(x · s) + y) · c`) against the CPU ops it replaces, both reduction variants, rows
/// longer than the kept registers (2600) included, offsets on x and y.
#[test]
fn rms_norm_add_matches_cpu() {
    for k in reduction_variants() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        for (rows, n, weighted, off, y_off) in [(3, 37, true, 5, 2), (35, 256, true, 0, 7), (2, 2600, false, 1, 0)] {
            let (x, w, y) = (rand_vec(&mut rng, off + rows * n), rand_vec(&mut rng, n), rand_vec(&mut rng, y_off + rows * n));
            let (xb, wb, yb) = (up(&k, &x), up(&k, &w), up(&k, &y));
            let mut b = Batch::new(Arc::clone(&k.gpu), 4);
            let add = Some((&yb, y_off, 0.707));
            rullama::gpu::norm::rms_norm_add(&k, &mut b, &xb, off, rows, n, 0.37, weighted.then_some(&wb), add, 1e-6).unwrap();
            b.submit().unwrap();
            let got = kernel::read_f32(&k.gpu, &xb, 0, x.len()).unwrap();
            let mut want = x.clone();
            ops::scale(&mut want[off..], 0.37);
            ops::rms_norm(&mut want[off..], n, weighted.then_some(&w[..]), 1e-6);
            for (o, e) in want[off..].iter_mut().zip(&y[y_off..]) {
                *o = (*o + e) * 0.707;
            }
            assert_eq!(&got[..off], &x[..off], "elements before the offset are untouched");
            let e = max_rel(&got, &want);
            assert!(e < 1e-5, "rows {rows} n {n}: rel err {e}");
        }
    }
}

fn up_u32(k: &Kernels, v: &[u32]) -> wgpu::Buffer {
    kernel::upload(&k.gpu, "test", bytemuck::cast_slice(v))
}

fn read_u32(k: &Kernels, buf: &wgpu::Buffer, offset: usize, n: usize) -> Vec<u32> {
    bytemuck::pod_collect_to_vec(&kernel::read_back(&k.gpu, buf, offset as u64 * 4, n as u64 * 4).unwrap())
}

fn batch(k: &Kernels) -> Batch {
    Batch::new(Arc::clone(&k.gpu), 16)
}

/// RoPE angles reach ~1.3e5 rad; the kernel forms them exactly as the reference does and
/// evaluates sin/cos to ~1e-7 absolute, so each rotated pair is off by a few 1e-7 of its
/// magnitude. 1e-5 relative leaves margin while a frequency or angle that differs by even
/// one f32 ulp at position 5000+ (~5e-4 rad) fails it.
#[test]
fn rope_neox_matches_cpu() {
    let k = kernels();
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    // (n_tokens, n_heads, head_dim, pos0, base, factors, pos_scale, x_off)
    type Case = (usize, usize, usize, usize, f32, bool, f32, usize);
    let cases: [Case; 6] = [
        (1, 1, 2, 0, 10000.0, false, 1.0, 0),
        (3, 2, 8, 7, 10000.0, false, 1.0, 3),
        (2, 3, 64, 5000, 10000.0, false, 1.0, 0),
        (2, 2, 256, 5000, 10000.0, false, 0.125, 5),
        (2, 1, 512, 131000, 1_000_000.0, true, 1.0, 1),
        (3, 2, 32, 131070, 10000.0, true, 1.0, 0),
    ];
    for (n_tokens, n_heads, hd, pos0, base, with_factors, pos_scale, off) in cases {
        let half = hd / 2;
        // Gemma 4's proportional RoPE: ones, then 1e30 (unrotated); also a plain divisor.
        let factors: Vec<f32> = (0..half).map(|j| if j < half / 4 { 1.0 } else if j % 3 == 0 { 4.0 } else { 1e30 }).collect();
        let x = rand_vec(&mut rng, off + n_tokens * n_heads * hd);
        let xb = up(&k, &x);
        let fb = up(&k, &factors);
        let mut b = batch(&k);
        rullama::gpu::rope::rope_neox(&k, &mut b, &xb, off, n_tokens, n_heads, hd, pos0, base, with_factors.then_some(&fb), pos_scale)
            .unwrap();
        b.submit().unwrap();
        let got = kernel::read_f32(&k.gpu, &xb, 0, x.len()).unwrap();
        let mut want = x.clone();
        for (t, row) in want[off..].chunks_exact_mut(n_heads * hd).enumerate() {
            ops::rope_neox(row, hd, pos0 + t, base, with_factors.then_some(&factors[..]), pos_scale);
        }
        assert_eq!(&got[..off], &x[..off], "elements before the offset are untouched");
        let e = max_rel(&got, &want);
        assert!(e < 1e-5, "hd {hd} pos0 {pos0}: rel err {e}");
    }
}

/// Sums, products and their composition are single correctly rounded f32 operations on both
/// sides, so they must agree exactly. GELU and softcap go through tanh, whose GPU and libm
/// versions differ by a few ulp: 2e-6 of the output scale.
#[test]
fn elementwise_ops_match_cpu() {
    use rullama::gpu::elementwise as ew;
    let k = kernels();
    let mut rng = ChaCha8Rng::seed_from_u64(3);

    // geglu on strided rows (per-layer slices of wider rows), with offsets.
    let (rows, width, gs, us, go, uo) = (3, 37, 50, 41, 4, 2);
    let gate = rand_vec(&mut rng, go + (rows - 1) * gs + width + 3);
    let upv = rand_vec(&mut rng, uo + (rows - 1) * us + width);
    let (gb, ub) = (up(&k, &gate), up(&k, &upv));
    let mut b = batch(&k);
    ew::geglu(&k, &mut b, &gb, go, gs, &ub, uo, us, rows, width).unwrap();
    b.submit().unwrap();
    let got = kernel::read_f32(&k.gpu, &gb, 0, gate.len()).unwrap();
    let mut want = gate.clone();
    for r in 0..rows {
        ops::geglu(&mut want[go + r * gs..go + r * gs + width], &upv[uo + r * us..uo + r * us + width]);
    }
    let e = max_rel(&got, &want);
    assert!(e < 2e-6, "geglu rel err {e}");
    for r in 0..rows {
        let gap = go + r * gs + width..(go + (r + 1) * gs).min(gate.len());
        assert_eq!(&got[gap.clone()], &gate[gap], "geglu leaves the rest of each row alone");
    }

    // geglu_fused: [gate | up] rows in one buffer.
    let (rows, width, off) = (5, 23, 3);
    let x: Vec<f32> = rand_vec(&mut rng, off + rows * 2 * width).iter().map(|v| v * 3.0).collect();
    let xb = up(&k, &x);
    let mut b = batch(&k);
    ew::geglu_fused(&k, &mut b, &xb, off, rows, width).unwrap();
    b.submit().unwrap();
    let got = kernel::read_f32(&k.gpu, &xb, 0, x.len()).unwrap();
    let mut want = x.clone();
    ops::geglu_fused(&mut want[off..], width);
    let e = max_rel(&got, &want);
    assert!(e < 2e-6, "geglu_fused rel err {e}");

    // softcap: values far past the cap must saturate, not turn into NaN.
    let n = 1001;
    let mut x: Vec<f32> = rand_vec(&mut rng, n + 2).iter().map(|v| v * 40.0).collect();
    x[7] = 1e4;
    x[8] = -3e5;
    let xb = up(&k, &x);
    let mut b = batch(&k);
    ew::softcap(&k, &mut b, &xb, 2, n, 30.0).unwrap();
    b.submit().unwrap();
    let got = kernel::read_f32(&k.gpu, &xb, 0, x.len()).unwrap();
    let mut want = x.clone();
    ops::softcap(&mut want[2..], 30.0);
    assert!(got.iter().all(|v| v.is_finite()));
    let e = max_rel(&got, &want);
    assert!(e < 2e-6, "softcap rel err {e}");

    // add, scale: exact, over many workgroups and a ragged tail.
    let n = 70001;
    let x = rand_vec(&mut rng, n + 5);
    let y = rand_vec(&mut rng, n + 1);
    let yb = up(&k, &y);
    let run = |f: &dyn Fn(&mut Batch, &wgpu::Buffer)| {
        let xb = up(&k, &x);
        let mut b = batch(&k);
        f(&mut b, &xb);
        b.submit().unwrap();
        kernel::read_f32(&k.gpu, &xb, 0, x.len()).unwrap()
    };
    let mut want = x.clone();
    ops::add(&mut want[5..], &y[1..]);
    assert_eq!(run(&|b, xb| ew::add(&k, b, xb, 5, &yb, 1, n).unwrap()), want, "add");
    let mut want = x.clone();
    ops::scale(&mut want[5..], -1.7);
    assert_eq!(run(&|b, xb| ew::scale(&k, b, xb, 5, n, -1.7).unwrap()), want, "scale");
}

/// Attention outputs are convex combinations of V rows (|v| < 2). Logits are dot products
/// of up to 512 terms summed in another order (relative error ~1e-6 of |logit| ≤ ~20), and
/// the online softmax rescales in other steps than the two-pass reference; both move the
/// weights by a few 1e-6 relative. 1e-5 of the output scale; a wrong mask, head or window
/// shows as O(0.1).
#[test]
fn attention_matches_cpu() {
    for k in reduction_variants() {
        attention_matches_cpu_on(&k);
    }
    // Prefill by per-token workgroups (attention.wgsl) instead of blocks of query rows.
    let mut rows = kernels();
    rows.tiled_attention = false;
    rows.coop_attention = false;
    attention_matches_cpu_on(&rows);
    // Where prefill of one KV head runs on tensor cores (gpu::attention_coop), the tiled
    // kernel those cases would otherwise take.
    let mut tiled = kernels();
    if tiled.gpu.coop {
        tiled.coop_attention = false;
        attention_matches_cpu_on(&tiled);
    }
}

/// Prefill attention on tensor cores (gpu::attention_coop) in several blocks of tokens, each
/// with its own key range (a small score block forces four blocks in each case), against
/// the CPU: Gemma 4 sliding and global shapes, one KV head and several (the grouped
/// products), a cache only as long as the prompt (the sliding layer's last padded key
/// range moves down into it). A cache too short for a
/// padded key range is refused before anything is recorded. Tolerance as
/// attention_matches_cpu. Ignored by default (`common::NEEDS_TENSOR_CORES`).
#[test]
#[ignore = "needs tensor cores: see common::NEEDS_TENSOR_CORES"]
fn coop_attention_in_blocks_matches_cpu() {
    use rullama::gpu::attention::KvCaches;
    use rullama::gpu::attention_coop::{CoopAttention, attention, usable};
    let k = coop_kernels_required();
    let mut rng = ChaCha8Rng::seed_from_u64(43);
    // (n_tokens, n_heads, head_dim, pos0, window, extra cache positions, score block bytes)
    // (n_tokens, n_heads, kv_heads, head_dim, pos0, window, extra cache positions, score block bytes)
    let cases = [
        (150, 8, 1, 256, 0, 40, 0, 1 << 18),
        (130, 4, 1, 256, 20, 0, 10, 1 << 17),
        (97, 8, 1, 512, 0, 0, 31, 1 << 17),
        (97, 8, 1, 512, 0, 0, 0, 1 << 17),
        (97, 8, 1, 512, 0, 0, 31, 1 << 16),
        // Several KV heads (grouped products): two query heads each, with a window, in two
        // blocks (the second's run of 150 rows padded to 192); one each (no grouping of
        // heads); four each, in two blocks.
        (150, 8, 4, 256, 0, 40, 0, 1 << 19),
        (130, 4, 4, 128, 20, 0, 50, 1 << 20),
        (100, 8, 2, 512, 0, 0, 60, 1 << 18),
    ];
    for (n, nh, kvh, hd, pos0, window, extra, block) in cases {
        let positions = pos0 + n;
        let q = rand_vec(&mut rng, 5 + n * nh * hd);
        let kc = rand_vec(&mut rng, (positions + extra) * kvh * hd);
        let vc = rand_vec(&mut rng, (positions + extra) * kvh * hd);
        let scale = 1.0 / (hd as f32).sqrt();
        let shape = ops::AttnShape { n_tokens: n, n_heads: nh, head_dim: hd, kv_heads: kvh, v_head_dim: hd, pos0, window, scale };
        let want = ops::attention(&q[5..], &kc[..positions * kvh * hd], &vc[..positions * kvh * hd], &shape);
        let (qb, kb, vb) = (up(&k, &q), up(&k, &kc), up(&k, &vc));
        let ob = up(&k, &vec![7.0f32; 3 + want.len() + 1]);
        let a = CoopAttention { shape, q_off: 5, out_off: 3, max_score_bytes: block };
        let kv = KvCaches { k: &kb, v: &vb, f16: false };
        assert!(usable(&k, &a, &kv));
        let mut b = Batch::new(Arc::clone(&k.gpu), 32);
        let ran = attention(&k, &mut b, &a, &qb, kv, &ob).unwrap();
        // 97 positions cannot hold the padded 128 keys of the last block, and 64 KiB blocks
        // would take more than four.
        let multiple = if kvh == 1 { 32 } else { 64 };
        let fits = window > 0 || positions + extra >= positions.div_ceil(multiple) * multiple;
        assert_eq!(ran, fits && block > 1 << 16, "tokens {n} pos0 {pos0} extra {extra} block {block}");
        if !ran {
            continue;
        }
        b.submit().unwrap();
        let got = kernel::read_f32(&k.gpu, &ob, 0, 3 + want.len() + 1).unwrap();
        assert!(got[..3].iter().chain(got.last()).all(|&v| v == 7.0), "writes outside the output");
        let e = max_rel(&got[3..3 + want.len()], &want);
        assert!(e < 1e-5, "tokens {n} heads {nh} hd {hd} pos0 {pos0} window {window} block {block}: rel err {e}");
    }
}

/// attention_softmax.wgsl against its CPU twin: rows of a block of tokens whose key range
/// starts before, at and past the window's first key, with keys past the last position;
/// rows longer than the kernel keeps in registers. Weights are exp of logit differences up
/// to 40, which a device's exp (through exp2, the argument scaled by log2 e) gets to
/// ~|x| · 2^-23 relative, ~5e-6: 1e-5 of the row's largest weight, as for attention.
#[test]
fn attention_softmax_matches_cpu() {
    use rullama::gpu::attention_coop::{ScoreRows, attention_softmax_cpu, softmax};
    let mut rng = ChaCha8Rng::seed_from_u64(41);
    for k in reduction_variants() {
        for r in [
            ScoreRows { rows: 24, nk: 64, heads: 8, pos0: 40, k_lo: 0, window: 0, scale: 0.3 },
            ScoreRows { rows: 12, nk: 96, heads: 4, pos0: 70, k_lo: 20, window: 16, scale: 1.0 },
            ScoreRows { rows: 6, nk: 1248, heads: 2, pos0: 1200, k_lo: 0, window: 0, scale: 2.0 },
        ] {
            let scores: Vec<f32> = (0..r.rows * r.nk).map(|_| rng.random_range(-10.0f32..10.0)).collect();
            let mut want = scores.clone();
            attention_softmax_cpu(&mut want, &r);
            let sb = up(&k, &scores);
            let mut b = batch(&k);
            softmax(&k, &mut b, &sb, &r).unwrap();
            b.submit().unwrap();
            let got = kernel::read_f32(&k.gpu, &sb, 0, scores.len()).unwrap();
            for (i, (g, w)) in got.chunks(r.nk).zip(want.chunks(r.nk)).enumerate() {
                assert!((w.iter().sum::<f32>() - 1.0).abs() < 1e-5, "{r:?} row {i}: weights sum to 1");
                let e = max_rel(g, w);
                assert!(e < 1e-5, "{r:?} row {i}: rel err {e}");
                assert!(g.iter().zip(w).all(|(g, w)| (*w == 0.0) == (*g == 0.0)), "{r:?} row {i}: the same keys masked");
            }
        }
    }
}

fn attention_matches_cpu_on(k: &Kernels) {
    use rullama::gpu::attention as ga;
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    // (n_tokens, n_heads, kv_heads, head_dim, v_head_dim, pos0, window, scale)
    type Case = (usize, usize, usize, usize, usize, usize, usize, f32);
    let cases: [Case; 21] = [
        (1, 4, 2, 32, 32, 0, 0, 1.0),
        // Decode shapes: Gemma 4 sliding (window) and global (512-wide) layers, a V width of
        // ten 4-element words (the V loads' key groups leave idle invocations).
        (1, 8, 1, 256, 256, 700, 512, 0.0625),
        (1, 8, 1, 512, 512, 1000, 0, 0.044),
        (1, 3, 1, 48, 40, 77, 0, 0.2),
        (3, 4, 2, 64, 48, 5, 0, 0.125),
        (4, 4, 1, 32, 40, 9, 5, 0.3),
        (1, 4, 2, 256, 256, 230, 0, 0.0625),
        (3, 4, 1, 256, 160, 201, 0, 0.0625),
        (2, 4, 2, 64, 64, 210, 5, 0.125),
        (70, 2, 1, 32, 36, 150, 100, 0.2),
        (1, 2, 1, 512, 512, 140, 0, 0.044),
        // Prefill: eight heads of one KV head (Gemma 4 global layers; four per workgroup), and
        // groups of three (one head per workgroup).
        (5, 8, 1, 512, 512, 40, 0, 0.044),
        (6, 6, 2, 64, 64, 30, 0, 0.1),
        // Prefill in blocks of query rows (attention_tiled.wgsl): Gemma 4 sliding layers from
        // position 0 with a window shorter than the prompt and a part block at the end,
        // Gemma 3 270M's four heads on one KV head after earlier turns, one KV head per query head.
        (37, 8, 1, 256, 256, 0, 16, 0.0625),
        (21, 4, 1, 256, 256, 50, 0, 0.0625),
        (45, 3, 3, 32, 32, 0, 0, 0.2),
        // Prefill long enough for tensor cores (gpu::attention_coop, one KV head): Gemma 4
        // sliding and global layers, Gemma 3 270M after earlier turns, a V width that is no
        // multiple of 32.
        (300, 8, 1, 256, 256, 0, 64, 0.0625),
        (256, 8, 1, 512, 512, 10, 0, 0.044),
        (260, 4, 1, 256, 256, 30, 0, 0.0625),
        (270, 2, 1, 64, 36, 3, 0, 0.3),
        // Two query tokens after a long history: attention_tiled.wgsl splits its one block
        // of rows 313 ways, the longest merge of any case (40 batches of 8).
        (2, 2, 1, 64, 64, 5000, 0, 0.125),
    ];
    // The caches are read in 4-element words: a V width that is not a multiple of 4 is refused.
    {
        let (qb, cb, ob) = (up(k, &[0.0; 64]), up(k, &[0.0; 64]), up(k, &[0.0; 64]));
        let caches = ga::KvCaches { k: &cb, v: &cb, f16: false };
        let mut b = batch(k);
        let e = ga::attention(k, &mut b, &qb, 0, 1, 1, 8, caches, 1, 6, 0, 0, 1.0, &ob, 0).unwrap_err();
        assert!(e.to_string().contains("multiples of 4"), "{e}");
    }
    for (ci, (n_tokens, n_heads, kv_heads, hd, vhd, pos0, window, scale)) in cases.into_iter().enumerate() {
        let positions = pos0 + n_tokens;
        // q at an odd offset and at a multiple of 4 (the tiled kernel's vec4 reads).
        let (q_off, out_off) = (3 + ci % 2, 2);
        let q = rand_vec(&mut rng, q_off + n_tokens * n_heads * hd);
        let kc = rand_vec(&mut rng, positions * kv_heads * hd);
        let vc = rand_vec(&mut rng, positions * kv_heads * vhd);
        let shape = ops::AttnShape { n_tokens, n_heads, head_dim: hd, kv_heads, v_head_dim: vhd, pos0, window, scale };
        let qb = up(k, &q);
        // f32 caches, and f16 caches (two halves per u32) against the CPU on the same
        // f16-rounded values: the kernels widen them exactly, so the tolerance is the same.
        for half_kv in [false, true] {
            let round = |v: &[f32]| -> Vec<f32> { v.iter().map(|&e| if half_kv { f16::from_f32(e).to_f32() } else { e }).collect() };
            let (kr, vr) = (round(&kc), round(&vc));
            let want = ops::attention(&q[q_off..], &kr, &vr, &shape);
            let (kb, vb) = if half_kv { (up_f16(k, &kr), up_f16(k, &vr)) } else { (up(k, &kr), up(k, &vr)) };
            let caches = ga::KvCaches { k: &kb, v: &vb, f16: half_kv };
            for split in [false, true] {
                let sentinel = vec![7.0f32; out_off + want.len() + 1];
                let ob = up(k, &sentinel);
                let mut b = batch(k);
                let f = if split { ga::attention_split } else { ga::attention };
                f(k, &mut b, &qb, q_off, n_tokens, n_heads, hd, caches, kv_heads, vhd, pos0, window, scale, &ob, out_off).unwrap();
                b.submit().unwrap();
                let got = kernel::read_f32(&k.gpu, &ob, 0, sentinel.len()).unwrap();
                assert_eq!(&got[..out_off], &sentinel[..out_off]);
                assert_eq!(got[out_off + want.len()], 7.0, "nothing written past the output");
                let e = max_rel(&got[out_off..out_off + want.len()], &want);
                assert!(e < 1e-5, "f16 {half_kv} split {split} tokens {n_tokens} heads {n_heads}:{kv_heads} hd {hd}/{vhd} pos0 {pos0} window {window}: rel err {e}");
            }
        }
    }
}

/// Decode attention that norms and rotates the new token's q, K and V itself
/// (`attention_decode`) against the CPU ops it replaces (per-head rms_norm, rope_neox, the
/// v norm) followed by attention over the cache holding the new row. The output has
/// attention's tolerance (1e-5 of the output scale: the norms add ~1e-7 relative). The new
/// cache row: K and V as the CPU norms them, to the RoPE test's 1e-5 of the row's scale
/// (f32: a device's division and sine are a few ulp off, at angles up to ~1e3 rad here),
/// or within one f16 step (f16 cache: the rounding boundary can fall between the two f32
/// results); every other cache element untouched. Split cases run with the kernel merging
/// its splits (whose arrival counters must return to 0 for the next case) and with an
/// attention_merge dispatch.
#[test]
fn attention_decode_prep_matches_cpu() {
    for mut k in reduction_variants() {
        // The kernel merges its splits only with @coherent storage; without it this would
        // test the attention_merge dispatch twice.
        assert!(k.gpu.coherent, "the device offers no @coherent storage");
        attention_decode_prep_matches_cpu_on(&k);
        // The split partials merged by an attention_merge dispatch instead of in the kernel.
        k.decode_merge = false;
        attention_decode_prep_matches_cpu_on(&k);
    }
}

fn attention_decode_prep_matches_cpu_on(k: &Kernels) {
    use rullama::gpu::attention as ga;
    let mut rng = ChaCha8Rng::seed_from_u64(41);
    // (heads, kv_heads, head_dim, v_head_dim, pos, window, q/k weighted, v normed, fresh K/V,
    // V is K, rope factors)
    type Case = (usize, usize, usize, usize, usize, usize, bool, bool, bool, bool, bool);
    let cases: [Case; 10] = [
        // Gemma 3 270M: weighted q/k norms, raw V, sliding window, split; and 63 splits,
        // which the merge takes in eight batches of 8 (attention::merge_batch).
        (4, 1, 256, 256, 700, 512, true, false, true, false, false),
        (4, 1, 256, 256, 2000, 0, true, false, true, false, false),
        // Gemma 4 global: 512 wide, V normed, rope factors, split; and V = K.
        (8, 1, 512, 512, 1000, 0, true, true, true, false, true),
        (8, 1, 512, 512, 40, 0, true, true, true, true, true),
        // One split of two tiles (a short history: attention::DECODE_ONE_SPLIT_KEYS).
        (4, 1, 256, 256, 50, 0, true, false, true, false, false),
        // One split (short history), first position, two KV heads.
        (4, 2, 64, 48, 0, 0, true, true, true, false, false),
        (4, 2, 64, 48, 9, 0, false, false, true, false, false),
        // A layer reading another's KV: q only.
        (8, 1, 256, 256, 300, 512, true, true, false, false, false),
        // Four splits, merged in one batch of 4, as E2B's sliding layers are early in a reply.
        (8, 1, 256, 256, 100, 512, true, false, true, false, false),
        (3, 1, 32, 32, 77, 0, true, false, false, false, false),
    ];
    let (eps, base, pos_scale, scale) = (1e-6f32, 10_000.0f32, 1.0f32, 0.0625f32);
    for (nh, kvh, hd, vhd, pos, window, weighted, v_norm, fresh, v_is_k, with_factors) in cases {
        let vhd = if v_is_k { hd } else { vhd };
        let q = rand_vec(&mut rng, nh * hd);
        let (wq, wk) = (rand_vec(&mut rng, hd), rand_vec(&mut rng, hd));
        let factors: Vec<f32> = (0..hd / 2).map(|j| if j % 3 == 0 { 1.0 } else { 1.0 + j as f32 }).collect();
        let kn = rand_vec(&mut rng, kvh * hd);
        let vn = if v_is_k { kn.clone() } else { rand_vec(&mut rng, kvh * vhd) };
        let kc = rand_vec(&mut rng, (pos + 1) * kvh * hd);
        let vc = rand_vec(&mut rng, (pos + 1) * kvh * vhd);
        // The CPU: q, and the new row when fresh, normed and rotated; the caches with that row.
        let fac = with_factors.then_some(&factors[..]);
        let mut qr = q.clone();
        ops::rms_norm(&mut qr, hd, weighted.then_some(&wq[..]), eps);
        ops::rope_neox(&mut qr, hd, pos, base, fac, pos_scale);
        let (mut kr, mut vr) = (kn.clone(), vn.clone());
        ops::rms_norm(&mut kr, hd, weighted.then_some(&wk[..]), eps);
        ops::rope_neox(&mut kr, hd, pos, base, fac, pos_scale);
        if v_norm {
            ops::rms_norm(&mut vr, vhd, None, eps);
        }
        let shape = ops::AttnShape { n_tokens: 1, n_heads: nh, head_dim: hd, kv_heads: kvh, v_head_dim: vhd, pos0: pos, window, scale };
        for half_kv in [false, true] {
            let round = |v: &[f32]| -> Vec<f32> { v.iter().map(|&e| if half_kv { f16::from_f32(e).to_f32() } else { e }).collect() };
            let (mut kw, mut vw) = (round(&kc), round(&vc));
            if fresh {
                kw[pos * kvh * hd..].copy_from_slice(&round(&kr));
                vw[pos * kvh * vhd..].copy_from_slice(&round(&vr));
            }
            let want = ops::attention(&qr, &kw, &vw, &shape);
            let (kb, vb) = if half_kv { (up_f16(k, &round(&kc)), up_f16(k, &round(&vc))) } else { (up(k, &kc), up(k, &vc)) };
            let (qb, knb, vnb, wqb, wkb, fb) = (up(k, &q), up(k, &kn), up(k, &vn), up(k, &wq), up(k, &wk), up(k, &factors));
            let fresh_kv = fresh.then(|| ga::FreshKv { k: &knb, v: if v_is_k { &knb } else { &vnb }, k_norm: Some(weighted.then_some(&wkb)), v_norm });
            let prep = ga::DecodePrep { q_norm: Some(weighted.then_some(&wqb)), fresh: fresh_kv, eps, base, factors: with_factors.then_some(&fb), pos_scale };
            let out = up(k, &vec![7.0f32; nh * vhd + 1]);
            let mut b = batch(k);
            let caches = ga::KvCaches { k: &kb, v: &vb, f16: half_kv };
            ga::attention_decode(k, &mut b, &qb, nh, hd, caches, kvh, vhd, pos, window, scale, &out, &prep).unwrap();
            b.submit().unwrap();
            let what = format!("f16 {half_kv} heads {nh}:{kvh} hd {hd}/{vhd} pos {pos} window {window} fresh {fresh} v=k {v_is_k}");
            let got = kernel::read_f32(&k.gpu, &out, 0, nh * vhd + 1).unwrap();
            assert_eq!(got[nh * vhd], 7.0, "{what}: nothing written past the output");
            let e = max_rel(&got[..nh * vhd], &want);
            assert!(e < 1e-5, "{what}: output rel err {e}");
            // The caches: the new row as the CPU made it (when fresh), all else as uploaded.
            let read = |buf: &wgpu::Buffer, n: usize| -> Vec<f32> {
                if half_kv {
                    let words: Vec<u32> = bytemuck::cast_slice(&kernel::read_back(&k.gpu, buf, 0, (n.div_ceil(2) * 4) as u64).unwrap()).to_vec();
                    words.iter().flat_map(|w| [f16::from_bits(*w as u16).to_f32(), f16::from_bits((*w >> 16) as u16).to_f32()]).take(n).collect()
                } else {
                    kernel::read_f32(&k.gpu, buf, 0, n).unwrap()
                }
            };
            for (buf, src, new, dim) in [(&kb, &kc, &kr, hd), (&vb, &vc, &vr, vhd)] {
                let got = read(buf, src.len());
                let row = pos * kvh * dim;
                assert_eq!(got[..row], round(&src[..row])[..], "{what}: cache rows before the new one untouched");
                let row_scale = new.iter().fold(0f32, |m, v| m.max(v.abs()));
                for (i, (g, w)) in got[row..].iter().zip(if fresh { &new[..] } else { &src[row..] }).enumerate() {
                    let tol = if !fresh { 0.0 } else if half_kv { f16::from_f32(*w).to_f32().abs().max(6.1e-5) / 1024.0 + 1e-5 * row_scale } else { 1e-5 * row_scale };
                    let w = if fresh { *w } else { round(&[*w])[0] };
                    assert!((g - w).abs() <= tol, "{what}: new cache row element {i}: {g} against {w}");
                }
            }
        }
    }
}

/// f16 values packed two per u32 (element 2j low), the f16 cache layout.
fn up_f16(k: &Kernels, v: &[f32]) -> wgpu::Buffer {
    let mut h: Vec<f16> = v.iter().map(|&e| f16::from_f32(e)).collect();
    h.resize(h.len().next_multiple_of(2), f16::ZERO);
    kernel::upload(&k.gpu, "f16", bytemuck::cast_slice(&h))
}

/// head_norm_rope's f16 output (the f16 KV cache) rounds to nearest exactly as `half` does
/// (pack2x16float), including values between f16 steps, subnormals and the largest finite
/// values (beyond f16's range pack2x16float is undefined: K and V are normed activations),
/// writes only its span of the caches (K and V of different sizes), leaves the f32 rows as
/// they were, and refuses odd offsets. Then normed and rotated K: the CPU ops' result rounded
/// to f16, within one f16 step (the f32 results differ by ~1e-6 relative, which can cross
/// a rounding boundary).
#[test]
fn head_norm_rope_f16_output_rounds_like_the_cpu() {
    use rullama::gpu::rope::{HeadGroup, head_norm_rope};
    let k = kernels();
    let mut rng = ChaCha8Rng::seed_from_u64(31);
    let (n, kd, vd, k_off, v_off) = (2, 514, 256, 6, 2);
    let mut ks = rand_vec(&mut rng, n * kd);
    ks[..6].copy_from_slice(&[1.0 + 1.0 / 4096.0, 3e-6, -7e-8, 65500.0, -1.0 - 3.0 / 4096.0, 0.0]);
    let vs: Vec<f32> = rand_vec(&mut rng, n * vd).iter().map(|v| v * 1e3).collect();
    let sentinel = 0x7E7E_7E7Eu32;
    let kc = kernel::upload(&k.gpu, "k", bytemuck::cast_slice(&vec![sentinel; (k_off + n * kd) / 2 + 3]));
    let vc = kernel::upload(&k.gpu, "v", bytemuck::cast_slice(&vec![sentinel; (v_off + n * vd) / 2 + 3]));
    let (qb, kb, vb) = (up(&k, &[0.5; 4]), up(&k, &ks), up(&k, &vs));
    let q = || HeadGroup { buf: &qb, off: 0, heads: 1, dim: 2, norm: None, rope: false, f16_out: None };
    let kg = |off: usize| HeadGroup { buf: &kb, off: 0, heads: 1, dim: kd, norm: None, rope: false, f16_out: Some((&kc, off)) };
    let vg = HeadGroup { buf: &vb, off: 0, heads: 1, dim: vd, norm: None, rope: false, f16_out: Some((&vc, v_off)) };
    let mut b = batch(&k);
    head_norm_rope(&k, &mut b, q(), Some(kg(k_off)), Some(vg), n, 0, 1e-6, 10000.0, None, 1.0).unwrap();
    b.submit().unwrap();
    let halves = |buf: &wgpu::Buffer| -> Vec<u16> {
        let words = (buf.size() / 4) as usize;
        let got: Vec<u32> = bytemuck::cast_slice(&kernel::read_back(&k.gpu, buf, 0, (words * 4) as u64).unwrap()).to_vec();
        got.iter().flat_map(|w| [*w as u16, (*w >> 16) as u16]).collect()
    };
    for (buf, src, off) in [(&kc, &ks, k_off), (&vc, &vs, v_off)] {
        for (i, &h) in halves(buf).iter().enumerate() {
            if i >= off && i < off + src.len() {
                let want = f16::from_f32(src[i - off]).to_bits();
                assert_eq!(h, want, "element {i}: {} -> {h:#06x}, want {want:#06x}", src[i - off]);
            } else {
                assert_eq!(h, 0x7E7E, "element {i} outside the span was written");
            }
        }
    }
    assert_eq!(kernel::read_f32(&k.gpu, &kb, 0, ks.len()).unwrap(), ks, "the f32 rows are left as they were");
    let mut b = batch(&k);
    assert!(head_norm_rope(&k, &mut b, q(), Some(kg(1)), None, n, 0, 1e-6, 10000.0, None, 1.0).is_err(), "odd offset");

    // Normed and rotated K (Gemma's shape), into the f16 cache.
    let (hd, pos0, base) = (256, 77, 1_000_000.0f32);
    let kr = rand_vec(&mut rng, n * hd);
    let wk = rand_vec(&mut rng, hd);
    let (krb, wkb, qb2) = (up(&k, &kr), up(&k, &wk), up(&k, &vec![0.5; n * hd]));
    let kc2 = kernel::upload(&k.gpu, "k", bytemuck::cast_slice(&vec![0u32; n * hd / 2]));
    let qg = HeadGroup { buf: &qb2, off: 0, heads: 1, dim: hd, norm: None, rope: true, f16_out: None };
    let kg = HeadGroup { buf: &krb, off: 0, heads: 1, dim: hd, norm: Some(Some(&wkb)), rope: true, f16_out: Some((&kc2, 0)) };
    let mut b = batch(&k);
    head_norm_rope(&k, &mut b, qg, Some(kg), None, n, pos0, 1e-6, base, None, 1.0).unwrap();
    b.submit().unwrap();
    let mut want = kr.clone();
    ops::rms_norm(&mut want, hd, Some(&wk), 1e-6);
    for (t, row) in want.chunks_exact_mut(hd).enumerate() {
        ops::rope_neox(row, hd, pos0 + t, base, None, 1.0);
    }
    let got: Vec<f32> = halves(&kc2).iter().map(|&h| f16::from_bits(h).to_f32()).collect();
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let step = f16::from_f32(*w).to_f32().abs().max(6.1e-5) / 1024.0;
        assert!((g - w).abs() <= step, "element {i}: {g} against {w}");
    }
}

/// Routing picks experts by comparing logits: ids must match exactly (random logits
/// have no near-ties; exact ties are built in and must resolve to the lower index). Weights
/// differ by the GPU's exp (a few ulp): 1e-5 relative. The combination sums top_k products
/// in the same order: 1e-6 of the output scale (fused multiply-add may round once less).
/// Neither kernel takes a workgroup reduction, so one kernel set covers them.
#[test]
fn moe_route_and_combine_match_cpu() {
    use rullama::gpu::moe;
    let k = &kernels();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for (n, n_experts, top_k, off) in [(1, 4, 1, 0), (5, 37, 3, 2), (6, 128, 8, 1), (2, 256, 32, 3)] {
        let mut logits = rand_vec(&mut rng, off + n * n_experts);
        // Token 0: all equal (picks 0..top_k); token 1 (if any): a tie at the top.
        logits[off..off + n_experts].fill(0.5);
        if n > 1 {
            let row = &mut logits[off + n_experts..off + 2 * n_experts];
            row[n_experts - 1] = 9.0;
            row[n_experts / 2] = 9.0;
        }
        let scale: Vec<f32> = (0..n_experts).map(|_| rng.random_range(0.5f32..2.0)).collect();
        let (want_ids, want_w) = ops::moe_route(&logits[off..], n_experts, top_k, &scale);
        let lb = up(k, &logits);
        let sb = up(k, &scale);
        let ids = kernel::storage(&k.gpu, "ids", (n * top_k * 4) as u64);
        let wts = kernel::storage(&k.gpu, "weights", (n * top_k * 4) as u64);
        let mut b = batch(k);
        moe::moe_route(k, &mut b, &lb, off, n, n_experts, top_k, &sb, &ids, &wts).unwrap();
        b.submit().unwrap();
        let got_ids = read_u32(k, &ids, 0, n * top_k);
        let got_w = kernel::read_f32(&k.gpu, &wts, 0, n * top_k).unwrap();
        assert_eq!(got_ids, want_ids, "{n_experts} experts top {top_k}");
        let e = max_rel(&got_w, &want_w);
        assert!(e < 1e-5, "{n_experts} experts top {top_k}: weight rel err {e}");

        let d = 29;
        let expert_out = rand_vec(&mut rng, n * top_k * d);
        let want = ops::moe_combine(&expert_out, &want_w, top_k, d);
        let eb = up(k, &expert_out);
        let ob = up(k, &vec![7.0f32; 4 + n * d]);
        let mut b = batch(k);
        moe::moe_combine(k, &mut b, &eb, &wts, n, top_k, d, &ob, 4).unwrap();
        b.submit().unwrap();
        let got = kernel::read_f32(&k.gpu, &ob, 0, 4 + n * d).unwrap();
        assert_eq!(&got[..4], &[7.0; 4]);
        let e = max_rel(&got[4..], &want);
        assert!(e < 1e-5, "combine rel err {e}");
    }
}

/// Selection copies values, so ids and values must match the reference exactly. Values are
/// quantised to produce many ties, which must resolve to the lower index. 50001 entries
/// take two passes; 300000 with kk = 64 take three.
#[test]
fn argmax_and_top_k_match_cpu() {
    use rullama::gpu::sample;
    let k = kernels();
    let mut rng = ChaCha8Rng::seed_from_u64(6);
    for (n, off, quant) in [(1, 0, false), (37, 3, true), (4096, 0, true), (5000, 1, false), (50001, 2, true), (300000, 0, false)] {
        let x: Vec<f32> = rand_vec(&mut rng, off + n).iter().map(|v| if quant { (v * 4.0).round() } else { *v }).collect();
        let xb = up(&k, &x);
        let out = up_u32(&k, &[9, 9, 9]);
        let mut b = batch(&k);
        sample::argmax(&k, &mut b, &xb, off, n, &out, 1).unwrap();
        b.submit().unwrap();
        let want = rullama::runtime::sampler::argmax(&x[off..]) as u32;
        assert_eq!(read_u32(&k, &out, 0, 3), vec![9, want, 9], "argmax n {n}");

        for kk in [1, 5, 64, 128] {
            if kk > n {
                continue;
            }
            let want = ops::top_k_candidates(&x[off..], kk);
            let ids = kernel::storage(&k.gpu, "ids", kk as u64 * 4);
            let vals = kernel::storage(&k.gpu, "vals", kk as u64 * 4);
            let mut b = batch(&k);
            sample::top_k_candidates(&k, &mut b, &xb, off, n, kk, &ids, &vals).unwrap();
            b.submit().unwrap();
            let got: Vec<(u32, f32)> = read_u32(&k, &ids, 0, kk)
                .into_iter()
                .zip(kernel::read_f32(&k.gpu, &vals, 0, kk).unwrap())
                .collect();
            assert_eq!(got, want, "top {kk} of {n}");
        }
    }
}

#[test]
fn rms_norm_to_matches_cpu() {
    for k in reduction_variants() {
        rms_norm_to_matches_cpu_on(&k);
    }
}

fn rms_norm_to_matches_cpu_on(k: &Kernels) {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for (rows, n, weighted, accumulate) in [(1, 5, true, false), (3, 640, true, true), (4, 37, false, true), (2, 1536, false, false), (2, 5000, true, true)] {
        let (so, dof) = (3, 7);
        let src = rand_vec(&mut rng, so + rows * n);
        let dst = rand_vec(&mut rng, dof + rows * n + 2);
        let w = rand_vec(&mut rng, n);
        let (sb, db, wb) = (up(k, &src), up(k, &dst), up(k, &w));
        let mut b = Batch::new(Arc::clone(&k.gpu), 4);
        rullama::gpu::norm::rms_norm_to(k, &mut b, &sb, so, &db, dof, rows, n, weighted.then_some(&wb), 1e-6, accumulate).unwrap();
        b.submit().unwrap();
        let got = kernel::read_f32(&k.gpu, &db, 0, dst.len()).unwrap();
        let mut want = dst.clone();
        ops::rms_norm_to(&src[so..], &mut want[dof..dof + rows * n], n, weighted.then_some(&w[..]), 1e-6, accumulate);
        assert_eq!(&got[..dof], &dst[..dof], "before the output is untouched");
        assert_eq!(&got[dof + rows * n..], &dst[dof + rows * n..], "after the output is untouched");
        let e = max_rel(&got, &want);
        assert!(e < 1e-5, "rows {rows} n {n} accumulate {accumulate}: rel err {e}");
    }
}

/// The GPU pick among sorted candidates equals the CPU rule for the same draw. Draws within
/// 1e-4 of a boundary between two candidates are left out (there the float sums of the two
/// devices may round to different sides); every other draw must agree exactly.
#[test]
fn sample_pick_matches_cpu() {
    use rullama::gpu::sample;
    use rullama::runtime::SamplingOptions;
    use rullama::runtime::sampler::pick_sorted;
    let k = kernels();
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut vals: Vec<f32> = rand_vec(&mut rng, 128).iter().map(|v| v * 3.0).collect();
    vals.sort_by(|a, b| b.total_cmp(a));
    let ids: Vec<u32> = (0..128).map(|_| rng.random_range(0..262144u32)).collect();
    let (vb, ib) = (up(&k, &vals), up_u32(&k, &ids));
    let draws: Vec<f32> = (0..40).map(|i| (i as f32 + 0.5) / 40.0).collect();
    let mut checked = 0;
    for o in [
        SamplingOptions { temperature: 0.8, top_k: 40, top_p: 0.95, min_p: 0.0, ..Default::default() },
        SamplingOptions { temperature: 1.5, top_k: 64, top_p: 1.0, min_p: 0.0, ..Default::default() },
        SamplingOptions { temperature: 0.3, top_k: 10, top_p: 0.5, min_p: 0.0, ..Default::default() },
        SamplingOptions { temperature: 2.0, top_k: 64, top_p: 1.0, min_p: 0.2, ..Default::default() },
        SamplingOptions { temperature: 1.0, top_k: 1, top_p: 1.0, min_p: 0.0, ..Default::default() },
        SamplingOptions { temperature: 1.3, top_k: 100, top_p: 0.98, min_p: 0.02, ..Default::default() },
        SamplingOptions { temperature: 2.0, top_k: 128, top_p: 1.0, min_p: 0.0, ..Default::default() },
    ] {
        let out = up_u32(&k, &vec![u32::MAX; draws.len()]);
        let mut b = Batch::new(Arc::clone(&k.gpu), draws.len());
        for (i, &u) in draws.iter().enumerate() {
            sample::sample_pick(&k, &mut b, &ib, &vb, &o, u, &out, i).unwrap();
        }
        b.submit().unwrap();
        let got = read_u32(&k, &out, 0, draws.len());
        let mut seen = std::collections::HashSet::new();
        for (i, &u) in draws.iter().enumerate() {
            let want = pick_sorted(&vals, &o, u);
            if pick_sorted(&vals, &o, (u - 1e-4).max(0.0)) != pick_sorted(&vals, &o, (u + 1e-4).min(0.9999)) {
                continue;
            }
            assert_eq!(got[i], ids[want], "{o:?} u {u}");
            seen.insert(want);
            checked += 1;
        }
        assert!(!seen.is_empty());
    }
    // Most draws are far from a boundary; the test would be empty otherwise.
    assert!(checked > 200, "only {checked} draws checked");
}

/// The fused per-head step (q norm + RoPE, k norm + RoPE, unweighted v norm) equals the
/// separate CPU ops in the same order, to the tolerance of the RoPE test above; the groups
/// sit at offsets in their own buffers and nothing around them is written.
#[test]
fn head_norm_rope_matches_cpu_ops() {
    for k in reduction_variants() {
        head_norm_rope_matches_cpu_ops_on(&k);
    }
}

fn head_norm_rope_matches_cpu_ops_on(k: &Kernels) {
    use rullama::gpu::rope::{HeadGroup, head_norm_rope};
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    // (n_tokens, q heads, kv heads, head dim, v dim, pos0, factors, q norm weighted, with k, v norm)
    let cases = [
        (1, 4, 1, 256, 256, 0, false, true, true, false),
        (3, 8, 2, 512, 512, 5000, true, true, true, true),
        (2, 2, 1, 64, 32, 131000, false, false, true, true),
        (2, 3, 1, 128, 128, 17, false, true, false, false),
    ];
    for (n, nh, kvh, hd, vhd, pos0, with_factors, q_weighted, with_k, v_norm) in cases {
        let (base, eps, scale) = (1_000_000.0f32, 1e-6f32, 1.0f32);
        let half = hd / 2;
        let factors: Vec<f32> = (0..half).map(|j| if j < half / 4 { 1.0 } else { 1e30 }).collect();
        let (qo, ko, vo) = (3, 5, 7);
        let q = rand_vec(&mut rng, qo + n * nh * hd + 2);
        let kk = rand_vec(&mut rng, ko + n * kvh * hd + 2);
        let v = rand_vec(&mut rng, vo + n * kvh * vhd + 2);
        let (wq, wk) = (rand_vec(&mut rng, hd), rand_vec(&mut rng, hd));
        let (qb, kb, vb, wqb, wkb, fb) = (up(k, &q), up(k, &kk), up(k, &v), up(k, &wq), up(k, &wk), up(k, &factors));
        let mut b = batch(k);
        let qg = HeadGroup { buf: &qb, off: qo, heads: nh, dim: hd, norm: Some(q_weighted.then_some(&wqb)), rope: true, f16_out: None };
        let kg = with_k.then_some(HeadGroup { buf: &kb, off: ko, heads: kvh, dim: hd, norm: Some(Some(&wkb)), rope: true, f16_out: None });
        let vg = (with_k && v_norm).then_some(HeadGroup { buf: &vb, off: vo, heads: kvh, dim: vhd, norm: Some(None), rope: false, f16_out: None });
        let f = with_factors.then_some(&fb);
        head_norm_rope(k, &mut b, qg, kg, vg, n, pos0, eps, base, f, scale).unwrap();
        b.submit().unwrap();
        let fw = with_factors.then_some(&factors[..]);
        let cpu = |x: &[f32], off: usize, heads: usize, dim: usize, w: Option<&[f32]>, rope: bool, norm: bool| {
            let mut want = x.to_vec();
            let body = &mut want[off..off + n * heads * dim];
            if norm {
                ops::rms_norm(body, dim, w, eps);
            }
            if rope {
                for (t, row) in body.chunks_exact_mut(heads * dim).enumerate() {
                    ops::rope_neox(row, dim, pos0 + t, base, fw, scale);
                }
            }
            want
        };
        let got_q = kernel::read_f32(&k.gpu, &qb, 0, q.len()).unwrap();
        let want_q = cpu(&q, qo, nh, hd, q_weighted.then_some(&wq[..]), true, true);
        assert!(max_rel(&got_q, &want_q) < 1e-5, "q: hd {hd} pos0 {pos0}: {}", max_rel(&got_q, &want_q));
        assert_eq!((&got_q[..qo], &got_q[q.len() - 2..]), (&q[..qo], &q[q.len() - 2..]));
        let got_k = kernel::read_f32(&k.gpu, &kb, 0, kk.len()).unwrap();
        let want_k = if with_k { cpu(&kk, ko, kvh, hd, Some(&wk[..]), true, true) } else { kk.clone() };
        assert!(max_rel(&got_k, &want_k) < 1e-5, "k: hd {hd}: {}", max_rel(&got_k, &want_k));
        let got_v = kernel::read_f32(&k.gpu, &vb, 0, v.len()).unwrap();
        let want_v = if with_k && v_norm { cpu(&v, vo, kvh, vhd, None, false, true) } else { v.clone() };
        assert!(max_rel(&got_v, &want_v) < 1e-5, "v: vhd {vhd}: {}", max_rel(&got_v, &want_v));
    }
}

/// The residual step (post-norm add, layer scale, next input norm) equals the CPU ops in
/// the same order: 1e-5 relative (sums over the row in another order).
#[test]
fn residual_norm_matches_cpu_ops() {
    for k in reduction_variants() {
        residual_norm_matches_cpu_ops_on(&k);
    }
}

fn residual_norm_matches_cpu_ops_on(k: &Kernels) {
    use rullama::gpu::norm::residual_norm;
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    // (rows, n, with scale, with next norm)
    for (rows, n, with_scale, with_pre) in [(1, 640, false, true), (3, 1536, true, true), (2, 37, true, false), (2, 5376, false, true)] {
        let (ao, xo, yo) = (4, 1, 2);
        let a = rand_vec(&mut rng, ao + rows * n);
        let x = rand_vec(&mut rng, xo + rows * n + 1);
        let y = vec![5.0f32; yo + rows * n + 1];
        let (wp, wn) = (rand_vec(&mut rng, n), rand_vec(&mut rng, n));
        let sc = [0.37f32];
        let (ab, xb, yb, wpb, wnb, scb) = (up(k, &a), up(k, &x), up(k, &y), up(k, &wp), up(k, &wn), up(k, &sc));
        let mut b = batch(k);
        let pre = with_pre.then_some((&yb, yo, &wnb));
        residual_norm(k, &mut b, (&ab, ao), (&xb, xo), rows, n, &wpb, with_scale.then_some(&scb), pre, 1e-6).unwrap();
        b.submit().unwrap();
        let mut want_x = x.clone();
        ops::rms_norm_to(&a[ao..], &mut want_x[xo..xo + rows * n], n, Some(&wp), 1e-6, true);
        if with_scale {
            want_x[xo..xo + rows * n].iter_mut().for_each(|v| *v *= sc[0]);
        }
        let mut want_y = y.clone();
        if with_pre {
            ops::rms_norm_to(&want_x[xo..xo + rows * n], &mut want_y[yo..yo + rows * n], n, Some(&wn), 1e-6, false);
        }
        let got_x = kernel::read_f32(&k.gpu, &xb, 0, x.len()).unwrap();
        let got_y = kernel::read_f32(&k.gpu, &yb, 0, y.len()).unwrap();
        assert!(max_rel(&got_x, &want_x) < 1e-5, "x: rows {rows} n {n}: {}", max_rel(&got_x, &want_x));
        assert!(max_rel(&got_y, &want_y) < 1e-5, "y: rows {rows} n {n}: {}", max_rel(&got_y, &want_y));
        assert_eq!((got_x[0], got_x[x.len() - 1]), (x[0], x[x.len() - 1]), "x outside the rows untouched");
    }
}

/// The repetition penalty over the GPU's history ring changes exactly the logits the CPU's
/// changes: negative ones by the same multiplication (bit-equal), positive ones by the
/// reciprocal instead of a division (within 1 ulp; GPU division is not correctly rounded
/// everywhere: it was off on an H100). Histories longer than the ring (wrapped), repeated
/// tokens, ids past the vocabulary, windows up to the ring.
#[test]
fn repeat_penalty_matches_cpu() {
    use rullama::gpu::sample::{PENALTY_RING, repeat_penalty};
    use rullama::runtime::SamplingOptions;
    use rullama::runtime::sampler::apply_repeat_penalty;
    let k = kernels();
    let mut rng = ChaCha8Rng::seed_from_u64(19);
    let vocab = 1000;
    for (len, last_n, penalty) in [(5usize, 64usize, 1.3f32), (300, 64, 0.8), (1500, 1024, 1.1), (1500, 200, 1.5)] {
        let history: Vec<u32> = (0..len).map(|_| if rng.random_range(0..20) == 0 { 5000 } else { rng.random_range(0..150u32) }).collect();
        let logits = rand_vec(&mut rng, vocab);
        let mut ring = vec![0u32; PENALTY_RING];
        for (i, &t) in history.iter().enumerate().skip(len.saturating_sub(PENALTY_RING)) {
            ring[i % PENALTY_RING] = t;
        }
        let (lb, hb) = (up(&k, &logits), up_u32(&k, &ring));
        let mut b = batch(&k);
        repeat_penalty(&k, &mut b, &lb, vocab, &hb, len, last_n.min(len), penalty).unwrap();
        b.submit().unwrap();
        let got = kernel::read_f32(&k.gpu, &lb, 0, vocab).unwrap();
        let mut want = logits.clone();
        apply_repeat_penalty(&mut want, &history, &SamplingOptions { repeat_penalty: penalty, repeat_last_n: last_n, ..Default::default() });
        for ((g, w), l) in got.iter().zip(&want).zip(&logits) {
            let ulp = f32::EPSILON * w.abs();
            assert!((g - w).abs() <= ulp, "len {len} last_n {last_n}: {g} vs {w}");
            assert_eq!(g == l, w == l, "the same logits change");
        }
        assert!(got != logits, "the penalty changed something");
    }
}

/// moe_norms.wgsl against the CPU's three RMS norms: x into the router's and the experts'
/// inputs with their weights, the dense output in place with its own; rows of whole vec4
/// words up to the kernel's 4096 (others are refused): one word, words past the
/// workgroup's first and last rounds, the longest. One rounding per op, in another order:
/// 1e-5.
#[test]
fn moe_norms_match_cpu() {
    for k in reduction_variants() {
        let mut rng = ChaCha8Rng::seed_from_u64(12);
        for (n, d) in [(1, 4), (1, 36), (3, 2816), (2, 4096)] {
            let (x, ffn) = (rand_vec(&mut rng, n * d), rand_vec(&mut rng, n * d));
            let (wr, we, wp) = (rand_vec(&mut rng, d), rand_vec(&mut rng, d), rand_vec(&mut rng, d));
            let (xb, fb, rb, eb) = (up(&k, &x), up(&k, &ffn), up(&k, &vec![9.0; n * d]), up(&k, &vec![9.0; n * d]));
            let (wrb, web, wpb) = (up(&k, &wr), up(&k, &we), up(&k, &wp));
            let mut b = Batch::new(Arc::clone(&k.gpu), 4);
            rullama::gpu::moe::moe_norms(&k, &mut b, &xb, &fb, (&rb, &wrb), (&eb, &web), &wpb, (n, d), 1e-6).unwrap();
            b.submit().unwrap();
            let norm = |v: &[f32], w: &[f32]| {
                let mut v = v.to_vec();
                ops::rms_norm(&mut v, d, Some(w), 1e-6);
                v
            };
            for (what, buf, want) in [("router", &rb, norm(&x, &wr)), ("experts", &eb, norm(&x, &we)), ("ffn", &fb, norm(&ffn, &wp))] {
                let got = kernel::read_f32(&k.gpu, buf, 0, n * d).unwrap();
                let e = max_rel(&got, &want);
                assert!(e < 1e-5, "{what} n {n} d {d}: rel err {e}");
            }
        }
        let long = up(&k, &vec![1.0; 4100]);
        let mut b = Batch::new(Arc::clone(&k.gpu), 4);
        for d in [4100, 37] {
            assert!(rullama::gpu::moe::moe_norms(&k, &mut b, &long, &long, (&long, &long), (&long, &long), &long, (1, d), 1e-6).is_err());
        }
    }
}

/// moe_combine_norm.wgsl against the CPU's combination then its accumulating norm
/// (`moe_combine`, `rms_norm_to`): top-8 on the 26B-A4B layout's rows, fewer slots than
/// the kernel's group of eight, more (two groups, the second part full), one slot, one
/// word; ffn starts random, so the add is checked too. Rows it cannot take are refused.
/// The slots are summed in order as on the CPU; the norm's sum in another order: 1e-5.
#[test]
fn moe_combine_norm_matches_cpu() {
    for k in reduction_variants() {
        let mut rng = ChaCha8Rng::seed_from_u64(13);
        for (n, top_k, d) in [(1, 8, 2816), (3, 3, 36), (2, 11, 4096), (2, 1, 1024), (1, 2, 4)] {
            let expert_out = rand_vec(&mut rng, n * top_k * d);
            let weights: Vec<f32> = (0..n * top_k).map(|_| rng.random_range(0.0f32..1.0)).collect();
            let (ffn, w) = (rand_vec(&mut rng, n * d), rand_vec(&mut rng, d));
            let mut want = ffn.clone();
            ops::rms_norm_to(&ops::moe_combine(&expert_out, &weights, top_k, d), &mut want, d, Some(&w), 1e-6, true);
            let (eb, wb, fb, pb) = (up(&k, &expert_out), up(&k, &weights), up(&k, &ffn), up(&k, &w));
            let mut b = Batch::new(Arc::clone(&k.gpu), 4);
            rullama::gpu::moe::moe_combine_norm(&k, &mut b, &eb, &wb, (n, top_k, d), &fb, &pb, 1e-6).unwrap();
            b.submit().unwrap();
            let got = kernel::read_f32(&k.gpu, &fb, 0, n * d).unwrap();
            let e = max_rel(&got, &want);
            assert!(e < 1e-5, "n {n} top {top_k} d {d}: rel err {e}");
        }
        let long = up(&k, &vec![1.0; 8 * 4100]);
        let mut b = Batch::new(Arc::clone(&k.gpu), 4);
        for (top_k, d) in [(1, 4100), (1, 37), (0, 36)] {
            assert!(rullama::gpu::moe::moe_combine_norm(&k, &mut b, &long, &long, (1, top_k, d), &long, &long, 1e-6).is_err());
        }
    }
}

/// `Kernels::left_out` (RULLAMA_LEAVE_OUT, for timing-only bounds): a kernel whose name
/// starts with a listed prefix is compiled but never dispatched, and only that one. Two
/// dispatches in one batch: `scale` left out, `add` not.
#[test]
fn left_out_kernels_are_not_dispatched() {
    use rullama::gpu::elementwise;
    for (left_out, want) in [(vec![], [3.0f32, 3.0, 3.0]), (vec!["sca".to_string()], [2.0, 2.0, 2.0])] {
        let mut k = kernels();
        k.left_out = left_out;
        let (x, y) = (up(&k, &[0.5; 3]), up(&k, &[1.5; 3]));
        let mut b = batch(&k);
        // x = 0.5 · 3 (left out: 0.5), then x += 1.5.
        elementwise::scale(&k, &mut b, &x, 0, 3, 3.0).unwrap();
        elementwise::add(&k, &mut b, &x, 0, &y, 0, 3).unwrap();
        b.submit().unwrap();
        assert_eq!(kernel::read_f32(&k.gpu, &x, 0, 3).unwrap(), want, "left out: {:?}", k.left_out);
        assert!(k.compiled("scale"), "a left-out kernel is still compiled");
    }
}
