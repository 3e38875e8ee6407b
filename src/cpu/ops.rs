//! CPU reference ops in plain f32. These are the oracles the GPU kernels are tested against,
//! so they favour clarity over speed (except `matmul`, which is threaded because the
//! reference runs real models in tests).

use crate::gguf::GgmlType;
use crate::gguf::dequant::dequantize_into;
use crate::{Error, Result};

/// `x * (mean(x²) + eps)^(-1/2) * w` over each row of `x` (`w = None`: unweighted).
pub fn rms_norm(x: &mut [f32], row: usize, w: Option<&[f32]>, eps: f32) {
    for r in x.chunks_exact_mut(row) {
        let ms = r.iter().map(|v| v * v).sum::<f32>() / row as f32;
        let s = 1.0 / (ms + eps).sqrt();
        match w {
            Some(w) => r.iter_mut().zip(w).for_each(|(v, w)| *v *= s * w),
            None => r.iter_mut().for_each(|v| *v *= s),
        }
    }
}

/// `dst = RMS(src)` row by row (`accumulate`: `dst += RMS(src)`): the out-of-place norm and
/// the residual add fused into a post-norm.
pub fn rms_norm_to(src: &[f32], dst: &mut [f32], row: usize, w: Option<&[f32]>, eps: f32, accumulate: bool) {
    let mut tmp = src.to_vec();
    rms_norm(&mut tmp, row, w, eps);
    if accumulate {
        add(dst, &tmp);
    } else {
        dst.copy_from_slice(&tmp);
    }
}

/// NeoX (rotate-half) RoPE on each `head_dim` slice of `x`, at position `pos`.
/// Pair j is (j, j + n/2), angle `pos * base^(-2j/n) / factor_j`; `factors` (`rope_freqs`)
/// of 1e30 leave a pair unrotated (Gemma 4's proportional RoPE).
pub fn rope_neox(x: &mut [f32], head_dim: usize, pos: usize, base: f32, factors: Option<&[f32]>, scale: f32) {
    let half = head_dim / 2;
    for h in x.chunks_exact_mut(head_dim) {
        for j in 0..half {
            let inv_freq = rope_inv_freq(base, head_dim, j);
            let ff = factors.map_or(1.0, |f| f[j]);
            let theta = pos as f32 * scale * inv_freq / ff;
            let (s, c) = theta.sin_cos();
            let (a, b) = (h[j], h[j + half]);
            h[j] = a * c - b * s;
            h[j + half] = b * c + a * s;
        }
    }
}

/// `base^(-2j/head_dim)`, the frequency of RoPE pair `j` (shared with the GPU encoder, which
/// uploads these so both sides turn by bit-identical angles).
pub fn rope_inv_freq(base: f32, head_dim: usize, j: usize) -> f32 {
    base.powf(-2.0 * j as f32 / head_dim as f32)
}

/// GELU, tanh approximation (`gelu_pytorch_tanh`).
pub fn gelu_tanh(x: f32) -> f32 {
    const K: f32 = 0.797_884_6; // sqrt(2/pi)
    0.5 * x * (1.0 + (K * (x + 0.044_715 * x * x * x)).tanh())
}

/// `gate <- gelu(gate) * up`.
pub fn geglu(gate: &mut [f32], up: &[f32]) {
    gate.iter_mut().zip(up).for_each(|(g, u)| *g = gelu_tanh(*g) * u);
}

/// Rows of `[gate(width) | up(width)]`: the gate half becomes `gelu(gate) * up`.
pub fn geglu_fused(x: &mut [f32], width: usize) {
    for row in x.chunks_exact_mut(2 * width) {
        let (g, u) = row.split_at_mut(width);
        geglu(g, u);
    }
}

/// In-place softmax.
pub fn softmax(x: &mut [f32]) {
    let m = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for v in x.iter_mut() {
        *v = (*v - m).exp();
        sum += *v;
    }
    x.iter_mut().for_each(|v| *v /= sum);
}

/// `c * tanh(x / c)`.
pub fn softcap(x: &mut [f32], c: f32) {
    x.iter_mut().for_each(|v| *v = c * (*v / c).tanh());
}

pub fn scale(x: &mut [f32], s: f32) {
    x.iter_mut().for_each(|v| *v *= s);
}

pub fn add(x: &mut [f32], y: &[f32]) {
    x.iter_mut().zip(y).for_each(|(a, b)| *a += b);
}

/// Shapes of one attention call (see `attention`).
#[derive(Debug, Clone, Copy)]
pub struct AttnShape {
    pub n_tokens: usize,
    pub n_heads: usize,
    pub head_dim: usize,
    pub kv_heads: usize,
    pub v_head_dim: usize,
    /// Position of the first query token.
    pub pos0: usize,
    /// Keys per query including itself (sliding window); 0 = all earlier positions.
    pub window: usize,
    pub scale: f32,
}

/// The first key position a query at `pos` sees: `pos + 1 - window` (sliding window), or 0
/// for `window` 0 or a window longer than the history.
pub fn first_key(pos: usize, window: usize) -> usize {
    if window > 0 { (pos + 1).saturating_sub(window) } else { 0 }
}

/// Causal attention of `q` (`[t][head][head_dim]`, RoPE'd) over cached keys and values
/// (`[pos][kv_head][head_dim]`, `[pos][kv_head][v_head_dim]`, holding positions
/// `0..pos0 + n_tokens`). Query `t` sits at `pos = pos0 + t` and sees keys
/// `max(0, pos + 1 - window)..=pos` (all `..=pos` when `window` is 0); head `h` reads KV head
/// `h / (n_heads / kv_heads)`. Returns `[t][head][v_head_dim]`.
pub fn attention(q: &[f32], k: &[f32], v: &[f32], s: &AttnShape) -> Vec<f32> {
    let (nh, hd, kvh, vhd) = (s.n_heads, s.head_dim, s.kv_heads, s.v_head_dim);
    let group = nh / kvh;
    let mut out = vec![0f32; s.n_tokens * nh * vhd];
    let mut scores = Vec::new();
    for t in 0..s.n_tokens {
        let pos = s.pos0 + t;
        let first = first_key(pos, s.window);
        for h in 0..nh {
            let kvhead = h / group;
            let qh = &q[(t * nh + h) * hd..(t * nh + h + 1) * hd];
            scores.clear();
            for p in first..=pos {
                let kp = &k[(p * kvh + kvhead) * hd..(p * kvh + kvhead + 1) * hd];
                scores.push(dot(qh, kp) * s.scale);
            }
            softmax(&mut scores);
            let o = &mut out[(t * nh + h) * vhd..(t * nh + h + 1) * vhd];
            for (w, p) in scores.iter().zip(first..=pos) {
                let vp = &v[(p * kvh + kvhead) * vhd..(p * kvh + kvhead + 1) * vhd];
                o.iter_mut().zip(vp).for_each(|(a, b)| *a += w * b);
            }
        }
    }
    out
}

/// MoE routing (spec §6.6) for `logits` `[n][n_experts]`: per token, softmax over all
/// experts, the `top_k` most probable (ties: lower index first), renormalised over those,
/// times `per_expert_scale[e]`. Returns `(ids, weights)`, each `[n][top_k]` in that order.
/// Computed as the GPU does (shaders/moe/moe_route.wgsl): softmax is monotone, so the
/// experts are ranked by logit, and the renormalised probabilities are softmax over the
/// chosen logits (the full softmax's denominator cancels), summed in rank order from the
/// top logit.
pub fn moe_route(logits: &[f32], n_experts: usize, top_k: usize, per_expert_scale: &[f32]) -> (Vec<u32>, Vec<f32>) {
    let mut ids = Vec::with_capacity(logits.len() / n_experts * top_k);
    let mut weights = Vec::with_capacity(ids.capacity());
    for row in logits.chunks_exact(n_experts) {
        let mut order: Vec<usize> = (0..n_experts).collect();
        order.sort_by(|&a, &b| row[b].total_cmp(&row[a]).then(a.cmp(&b)));
        let chosen = &order[..top_k];
        let top = row[chosen[0]];
        let total: f32 = chosen.iter().map(|&e| (row[e] - top).exp()).sum();
        for &e in chosen {
            ids.push(e as u32);
            weights.push((row[e] - top).exp() / total * per_expert_scale[e]);
        }
    }
    (ids, weights)
}

/// `out[t] = Σ_s weights[t*top_k + s] · expert_out[t*top_k + s]` (rows of `d`), summed in
/// slot order.
pub fn moe_combine(expert_out: &[f32], weights: &[f32], top_k: usize, d: usize) -> Vec<f32> {
    let n = weights.len() / top_k;
    let mut out = vec![0f32; n * d];
    for (t, o) in out.chunks_exact_mut(d).enumerate() {
        for s in t * top_k..(t + 1) * top_k {
            let e = &expert_out[s * d..(s + 1) * d];
            o.iter_mut().zip(e).for_each(|(a, b)| *a += weights[s] * b);
        }
    }
    out
}

/// The `k` largest values of `x` as `(index, value)`, largest first; equal values keep index
/// order, and -0.0 equals +0.0 (NaN counts as -inf).
pub fn top_k_candidates(x: &[f32], k: usize) -> Vec<(u32, f32)> {
    let key = |v: f32| if v.is_nan() { f32::NEG_INFINITY } else { v };
    let mut idx: Vec<u32> = (0..x.len() as u32).collect();
    idx.sort_by(|&a, &b| {
        let (va, vb) = (key(x[a as usize]), key(x[b as usize]));
        vb.partial_cmp(&va).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b))
    });
    idx.into_iter().take(k).map(|i| (i, x[i as usize])).collect()
}

/// A weight matrix in its stored encoding: `rows` rows of `cols` elements (ggml `ne = [cols, rows]`).
#[derive(Clone, Copy)]
pub struct QMatrix<'a> {
    pub ty: GgmlType,
    pub cols: usize,
    pub rows: usize,
    pub data: &'a [u8],
}

impl<'a> QMatrix<'a> {
    pub fn new(ty: GgmlType, cols: usize, rows: usize, data: &'a [u8]) -> Result<Self> {
        let need = ty.bytes_for((cols * rows) as u64).filter(|_| cols.is_multiple_of(ty.block_elems()));
        if need != Some(data.len() as u64) {
            return Err(Error::Input(format!("{ty} matrix {rows}x{cols} does not match {} bytes", data.len())));
        }
        Ok(QMatrix { ty, cols, rows, data })
    }

    pub fn row_bytes(&self) -> usize {
        self.cols / self.ty.block_elems() * self.ty.block_bytes()
    }

    /// Rows `[r0, r1)` as a smaller matrix (e.g. one expert of a stacked tensor).
    pub fn slice_rows(&self, r0: usize, r1: usize) -> QMatrix<'a> {
        let rb = self.row_bytes();
        QMatrix { ty: self.ty, cols: self.cols, rows: r1 - r0, data: &self.data[r0 * rb..r1 * rb] }
    }

    /// Dequantize row `r` into `out` (len `cols`).
    pub fn row_into(&self, r: usize, out: &mut [f32]) -> Result<()> {
        let rb = self.row_bytes();
        dequantize_into(self.ty, &self.data[r * rb..(r + 1) * rb], out)
    }
}

/// `y[t][r] = Σ_c w[r][c] · x[t][c]` for `n` input rows of `x` (`[n, cols]` → `[n, rows]`).
/// Each weight row is dequantized once and applied to every input row; rows are split
/// across threads.
pub fn matmul(x: &[f32], n: usize, w: &QMatrix) -> Result<Vec<f32>> {
    if x.len() != n * w.cols {
        return Err(Error::Input(format!("matmul: input {} is not {n}x{}", x.len(), w.cols)));
    }
    let threads = if w.rows * w.cols * n >= 1 << 20 { std::thread::available_parallelism().map_or(1, |p| p.get()) } else { 1 };
    matmul_on(x, n, w, threads)
}

/// `matmul` on up to `threads` threads.
fn matmul_on(x: &[f32], n: usize, w: &QMatrix, threads: usize) -> Result<Vec<f32>> {
    let mut y = vec![0f32; n * w.rows];
    let threads = threads.clamp(1, w.rows.max(1));
    let per = w.rows.div_ceil(threads);
    // Only as many workers as chunks: with many cores, `threads` chunks of `per` rows can
    // overshoot the matrix by more than a chunk (70 rows on 16 cores: 14 chunks of 5).
    let threads = w.rows.div_ceil(per);
    // Each thread produces a [rows_chunk, n] block (transposed), scattered into y afterwards.
    let parts: Vec<Result<Vec<f32>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (r0, r1) = (t * per, ((t + 1) * per).min(w.rows));
                s.spawn(move || -> Result<Vec<f32>> {
                    let mut row = vec![0f32; w.cols];
                    let mut out = vec![0f32; (r1 - r0) * n];
                    for r in r0..r1 {
                        w.row_into(r, &mut row)?;
                        for (i, xi) in x.chunks_exact(w.cols).enumerate() {
                            out[(r - r0) * n + i] = dot(&row, xi);
                        }
                    }
                    Ok(out)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("matmul worker panicked")).collect()
    });
    for (t, part) in parts.into_iter().enumerate() {
        let part = part?;
        let r0 = t * per;
        for (k, v) in part.iter().enumerate() {
            let (r, i) = (r0 + k / n, k % n);
            y[i * w.rows + r] = *v;
        }
    }
    Ok(y)
}

/// Expert matmul (ggml's mul_mat_id): `w` stacks experts of `rows_per_expert` rows; for
/// token t and slot s with e = `ids[t*top_k + s]`, output row `t*top_k + s` is expert e
/// applied to x row `t*top_k + s` (`x_per_slot`) or t. Output `[n*top_k, rows_per_expert]`.
pub fn matmul_experts(x: &[f32], n: usize, w: &QMatrix, rows_per_expert: usize, ids: &[u32], top_k: usize, x_per_slot: bool) -> Result<Vec<f32>> {
    let rpe = rows_per_expert;
    let experts = w.rows.checked_div(rpe).unwrap_or(0);
    if rpe == 0 || !w.rows.is_multiple_of(rpe) || ids.len() != n * top_k || ids.iter().any(|&e| e as usize >= experts) {
        return Err(Error::Input(format!("matmul_experts: {} ids for {n}x{top_k} slots over {experts} experts of {rpe} rows", ids.len())));
    }
    let x_rows = if x_per_slot { n * top_k } else { n };
    if x.len() != x_rows * w.cols {
        return Err(Error::Input(format!("matmul_experts: input {} is not {x_rows}x{}", x.len(), w.cols)));
    }
    let mut y = Vec::with_capacity(n * top_k * rpe);
    for (j, &e) in ids.iter().enumerate() {
        let xr = if x_per_slot { j } else { j / top_k };
        let expert = w.slice_rows(e as usize * rpe, (e as usize + 1) * rpe);
        y.extend(matmul(&x[xr * w.cols..(xr + 1) * w.cols], 1, &expert)?);
    }
    Ok(y)
}

/// Row gather: `scale ·` row `ids[t]` of `table`, for each id (`[ids.len(), cols]`).
pub fn embed(table: &QMatrix, ids: &[u32], scale: f32) -> Result<Vec<f32>> {
    let mut out = vec![0f32; ids.len() * table.cols];
    for (&id, o) in ids.iter().zip(out.chunks_exact_mut(table.cols)) {
        if id as usize >= table.rows {
            return Err(Error::Input(format!("embed: id {id} is past the {} rows of the table", table.rows)));
        }
        table.row_into(id as usize, o)?;
        o.iter_mut().for_each(|v| *v *= scale);
    }
    Ok(out)
}

/// Dot product with four independent accumulators (keeps the reference fast enough to run
/// real models while staying a plain f32 sum).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 4];
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for k in 0..4 {
            acc[k] += x[k] * y[k];
        }
    }
    let tail: f32 = ra.iter().zip(rb).map(|(x, y)| x * y).sum();
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

#[cfg(test)]
mod tests {
    #[test]
    fn matmul_splits_rows_over_any_thread_count() {
        use crate::gguf::GgmlType;
        let (cols, rows, n) = (8, 70, 3);
        let data: Vec<u8> = (0..cols * rows).flat_map(|i| ((i % 13) as f32 - 6.0).to_le_bytes()).collect();
        let w = super::QMatrix::new(GgmlType::F32, cols, rows, &data).unwrap();
        let x: Vec<f32> = (0..n * cols).map(|i| i as f32 * 0.5).collect();
        let one = super::matmul_on(&x, n, &w, 1).unwrap();
        for threads in [2, 16, 64, 200] {
            assert_eq!(super::matmul_on(&x, n, &w, threads).unwrap(), one, "{threads} threads");
        }
    }

    use super::*;

    #[test]
    fn rms_norm_unit_rms() {
        let mut x = vec![3.0, 4.0, 0.0, 0.0];
        rms_norm(&mut x, 4, None, 0.0);
        let ms: f32 = x.iter().map(|v| v * v).sum::<f32>() / 4.0;
        assert!((ms - 1.0).abs() < 1e-6);
        assert!((x[0] - 1.2).abs() < 1e-6);
    }

    #[test]
    fn rope_is_a_rotation_and_identity_at_zero() {
        let mut x: Vec<f32> = (0..8).map(|i| i as f32 - 3.5).collect();
        let orig = x.clone();
        rope_neox(&mut x, 8, 0, 10000.0, None, 1.0);
        assert_eq!(x, orig);
        rope_neox(&mut x, 8, 7, 10000.0, None, 1.0);
        for j in 0..4 {
            let before = orig[j].hypot(orig[j + 4]);
            let after = x[j].hypot(x[j + 4]);
            assert!((before - after).abs() < 1e-5);
        }
        // Pair 0 has frequency 1: angle 7 rad.
        let (s, c) = 7f32.sin_cos();
        assert!((x[0] - (orig[0] * c - orig[4] * s)).abs() < 1e-5);
    }

    #[test]
    fn rope_factor_1e30_leaves_pairs_unrotated() {
        let mut x: Vec<f32> = (0..8).map(|i| i as f32 + 1.0).collect();
        let orig = x.clone();
        rope_neox(&mut x, 8, 5, 1e6, Some(&[1.0, 1e30, 1e30, 1e30]), 1.0);
        assert_ne!(x[0], orig[0]);
        assert_eq!(&x[1..4], &orig[1..4]);
        assert_eq!(&x[5..8], &orig[5..8]);
    }

    #[test]
    fn gelu_known_values() {
        // torch.nn.functional.gelu(x, approximate="tanh")
        assert!((gelu_tanh(1.0) - 0.841_192).abs() < 1e-6);
        assert!((gelu_tanh(-0.5) + 0.154_286).abs() < 1e-6);
        assert_eq!(gelu_tanh(0.0), 0.0);
    }

    #[test]
    fn matmul_experts_picks_expert_rows_and_x_rows() {
        // 3 experts of 2 rows over 4 columns; row r of expert e is all (10e + r).
        let w: Vec<f32> = (0..3 * 2).flat_map(|row| [(10 * (row / 2) + row % 2) as f32; 4]).collect();
        let m = QMatrix::new(GgmlType::F32, 4, 6, bytemuck::cast_slice(&w)).unwrap();
        let x = [1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5];
        // 2 tokens, top 2: token 0 -> experts 2, 0; token 1 -> experts 1, 1.
        let y = matmul_experts(&x, 2, &m, 2, &[2, 0, 1, 1], 2, false).unwrap();
        assert_eq!(y, [80.0, 84.0, 0.0, 4.0, 20.0, 22.0, 20.0, 22.0]);
        // One x row per slot.
        let xs = [x[..4].to_vec(), x[4..].to_vec(), x[..4].to_vec(), x[4..].to_vec()].concat();
        let y = matmul_experts(&xs, 2, &m, 2, &[2, 0, 1, 1], 2, true).unwrap();
        assert_eq!(y, [80.0, 84.0, 0.0, 2.0, 40.0, 44.0, 20.0, 22.0]);
        assert!(matmul_experts(&x, 2, &m, 2, &[3, 0, 1, 1], 2, false).is_err(), "expert id past the stack");
        assert!(matmul_experts(&x, 2, &m, 4, &[0, 0, 1, 1], 2, false).is_err(), "6 rows are not experts of 4");
    }

    #[test]
    fn embed_scales_rows_and_rejects_bad_ids() {
        let w: Vec<f32> = (0..12).map(|i| i as f32).collect();
        let m = QMatrix::new(GgmlType::F32, 4, 3, bytemuck::cast_slice(&w)).unwrap();
        assert_eq!(embed(&m, &[2, 0], 0.5).unwrap(), [4.0, 4.5, 5.0, 5.5, 0.0, 0.5, 1.0, 1.5]);
        assert!(embed(&m, &[3], 1.0).is_err());
    }

    #[test]
    fn matmul_matches_naive_and_threads_agree() {
        let (n, cols, rows) = (3, 64, 70);
        let w: Vec<f32> = (0..rows * cols).map(|i| ((i * 7919) % 13) as f32 - 6.0).collect();
        let x: Vec<f32> = (0..n * cols).map(|i| ((i * 31) % 5) as f32 * 0.5).collect();
        let m = QMatrix::new(GgmlType::F32, cols, rows, bytemuck::cast_slice(&w)).unwrap();
        let y = matmul(&x, n, &m).unwrap();
        for t in 0..n {
            for r in 0..rows {
                let want: f32 = (0..cols).map(|c| w[r * cols + c] * x[t * cols + c]).sum();
                assert!((y[t * rows + r] - want).abs() < 1e-3, "{t} {r}");
            }
        }
        assert!(matmul(&x[1..], n, &m).is_err());
    }
}
