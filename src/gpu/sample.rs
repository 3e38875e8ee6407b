//! Sampling on the GPU (`shaders/sample/`): the arg-max for greedy decoding; for top-k /
//! top-p / min-p / temperature sampling the top candidates, then the pick among them for
//! the host's uniform draw, so only a token id comes back (or stays on the GPU as the next
//! step's input). CPU twins: `runtime::sampler::{argmax, pick_sorted}`,
//! `cpu::ops::top_k_candidates`.
//!
//! Large vectors take several passes: the first leaves kk candidates per chunk of 2048 in
//! scratch, the next reduces those, and the last writes the caller's buffers.

use bytemuck::{Pod, Zeroable};

use super::kernel::{Access, Batch, Kernels};
use super::{check_fits, launch, shaders, u32_of};
use crate::{Error, Result};

/// Entries one workgroup reduces (WG × PER in the shader).
const CHUNK: usize = 256 * 8;
/// Most candidates `top_k_candidates` returns: covers the usual top-k settings (40, 64, 100);
/// larger ones are sampled on the host from all logits.
pub const MAX_CANDIDATES: usize = 128;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    n: u32,
    in_off: u32,
    explicit_ids: u32,
    kk: u32,
    out_val_off: u32,
    out_id_off: u32,
    groups_x: u32,
}

/// Index of the largest of `logits[off..][..n]` (the first on ties), written as a u32 at
/// element `out_idx` of `out`. Input must be free of NaN.
pub fn argmax(k: &Kernels, b: &mut Batch, logits: &wgpu::Buffer, off: usize, n: usize, out: &wgpu::Buffer, out_idx: usize) -> Result<()> {
    check_fits("argmax", &[(out, out_idx + 1)])?;
    // The winning value is not wanted; it goes to a scratch word.
    let value = k.scratch("argmax/value", 4);
    select(k, b, logits, off, n, 1, (&value, 0), (out, out_idx))
}

/// The `kk` (1..=MAX_CANDIDATES) largest of `logits[off..][..n]`, largest first (equal values: lower
/// index first), as ids (u32) in `out_ids[..kk]` and values in `out_vals[..kk]`. Input must
/// be free of NaN.
#[allow(clippy::too_many_arguments)]
pub fn top_k_candidates(
    k: &Kernels,
    b: &mut Batch,
    logits: &wgpu::Buffer,
    off: usize,
    n: usize,
    kk: usize,
    out_ids: &wgpu::Buffer,
    out_vals: &wgpu::Buffer,
) -> Result<()> {
    if kk == 0 || kk > MAX_CANDIDATES {
        return Err(Error::Input(format!("top_k_candidates: kk = {kk} must be 1..={MAX_CANDIDATES}")));
    }
    check_fits("top_k_candidates", &[(out_ids, kk), (out_vals, kk)])?;
    select(k, b, logits, off, n, kk, (out_vals, 0), (out_ids, 0))
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct PickParams {
    n: u32,
    out_idx: u32,
    temperature: f32,
    top_p: f32,
    min_p: f32,
    u: f32,
}

/// Temperature sampling over `n` candidates (values best first, as `top_k_candidates`
/// leaves them) for the uniform draw `u`: the chosen id goes to element `out_idx` of `out`.
/// Same rules as `runtime::sampler::pick_sorted` (`o.top_k` must be 1..=MAX_CANDIDATES; `o.temperature` > 0).
#[allow(clippy::too_many_arguments)]
pub fn sample_pick(
    k: &Kernels,
    b: &mut Batch,
    cand_ids: &wgpu::Buffer,
    cand_vals: &wgpu::Buffer,
    o: &crate::runtime::SamplingOptions,
    u: f32,
    out: &wgpu::Buffer,
    out_idx: usize,
) -> Result<()> {
    let n = o.top_k;
    if n == 0 || n > MAX_CANDIDATES || o.temperature <= 0.0 {
        return Err(Error::Input(format!("sample_pick: top_k {n} must be 1..={MAX_CANDIDATES} and temperature {} above 0", o.temperature)));
    }
    check_fits("sample_pick", &[(cand_ids, n), (cand_vals, n), (out, out_idx + 1)])?;
    let p = PickParams { n: n as u32, out_idx: u32_of(out_idx, "sample_pick out_idx")?, temperature: o.temperature, top_p: o.top_p, min_p: o.min_p, u };
    let access = [Access::Read, Access::Read, Access::ReadWrite];
    launch(k, b, "sample_pick", &[shaders::SAMPLE_PICK], &access, &[cand_vals, cand_ids, out], 1, |_| p)
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct PenaltyParams {
    end: u32,
    window: u32,
    ring: u32,
    vocab: u32,
    penalty: f32,
    inv_penalty: f32,
}

/// Longest history window the GPU applies the repetition penalty over: the size of the
/// history ring a session keeps.
pub const PENALTY_RING: usize = 1024;

/// The repetition penalty on `logits[..vocab]` over the history entries `[end - window, end)`
/// of the ring `hist` (logical index i at element i % PENALTY_RING; `window` ≤ the ring and
/// ≤ `end`). Same rule as `runtime::sampler::apply_repeat_penalty`, positive logits within
/// 1 ulp (multiplied by the reciprocal: GPU division need not be correctly rounded).
#[allow(clippy::too_many_arguments)]
pub fn repeat_penalty(k: &Kernels, b: &mut Batch, logits: &wgpu::Buffer, vocab: usize, hist: &wgpu::Buffer, end: usize, window: usize, penalty: f32) -> Result<()> {
    if window > PENALTY_RING || window > end {
        return Err(Error::Input(format!("repeat_penalty: a window of {window} over {end} tokens (ring {PENALTY_RING})")));
    }
    check_fits("repeat_penalty", &[(logits, vocab), (hist, PENALTY_RING)])?;
    if window == 0 {
        return Ok(());
    }
    let p = PenaltyParams { end: u32_of(end, "repeat_penalty end")?, window: window as u32, ring: PENALTY_RING as u32, vocab: u32_of(vocab, "vocab")?, penalty, inv_penalty: 1.0 / penalty };
    launch(k, b, "repeat_penalty", &[shaders::REPEAT_PENALTY], &[Access::Read, Access::ReadWrite], &[hist, logits], 1, |_| p)
}

/// The passes of both ops; the last writes `vals_out`/`ids_out` at their element offsets.
#[allow(clippy::too_many_arguments)]
fn select(
    k: &Kernels,
    b: &mut Batch,
    logits: &wgpu::Buffer,
    off: usize,
    n: usize,
    kk: usize,
    vals_out: (&wgpu::Buffer, usize),
    ids_out: (&wgpu::Buffer, usize),
) -> Result<()> {
    if n == 0 || kk > n {
        return Err(Error::Input(format!("cannot select {kk} of {n} values")));
    }
    check_fits("top_k_candidates input", &[(logits, off + n)])?;
    u32_of(off + n, "top_k_candidates input end")?;
    let access = [Access::Read, Access::Read, Access::ReadWrite, Access::ReadWrite];
    // Ping-pong scratch: a pass may not read and write one buffer.
    let scratch = |i: usize, bytes: usize| {
        (k.scratch(&format!("top_k/vals{i}"), bytes as u64), k.scratch(&format!("top_k/ids{i}"), bytes as u64))
    };
    let (mut src_vals, mut src_ids, mut src_off, mut explicit) = (logits.clone(), k.dummy.clone(), off, false);
    let (mut len, mut pass) = (n, 0);
    loop {
        let groups = len.div_ceil(CHUNK);
        let last = groups == 1;
        let (dst_vals, dst_ids, val_off, id_off) = if last {
            (vals_out.0.clone(), ids_out.0.clone(), vals_out.1, ids_out.1)
        } else {
            let (v, i) = scratch(pass % 2, groups * kk * 4);
            (v, i, 0, 0)
        };
        let p = Params {
            n: len as u32,
            in_off: src_off as u32,
            explicit_ids: explicit as u32,
            kk: kk as u32,
            out_val_off: u32_of(val_off, "output offset")?,
            out_id_off: u32_of(id_off, "output offset")?,
            groups_x: 0,
        };
        let buffers = [&src_vals, &src_ids, &dst_vals, &dst_ids];
        let code = [shaders::TOP_K_CANDIDATES];
        launch(k, b, "top_k_candidates", &code, &access, &buffers, groups, |groups_x| Params { groups_x, ..p })?;
        if last {
            return Ok(());
        }
        (src_vals, src_ids, src_off, explicit) = (dst_vals, dst_ids, 0, true);
        len = groups * kk;
        pass += 1;
    }
}
