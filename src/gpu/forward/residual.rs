//! The residual stream of one recorded pass. A residual step (`x = (x + RMS(a) · post) ·
//! scale`, then the next block's input norm) is left pending; in decode (one token) the next
//! matvec that reads its result does it in its own workgroups (`matmul::ResidualIn`) and
//! writes the new residual to the other of two buffers, which saves a dispatch (~5 µs on an
//! H100) per step. Anything else flushes it as a `norm::residual_norm` dispatch first.

use crate::Result;
use crate::gpu::kernel::{Batch, Kernels};
use crate::gpu::matmul::{MatvecIn, ResidualIn};
use crate::gpu::norm;

/// A residual step: `a` (one block's output) post-normed by `post`, added, then the layer
/// scale (the buffer and its value) where there is one.
pub(super) struct Step<'a> {
    pub a: &'a wgpu::Buffer,
    pub post: &'a wgpu::Buffer,
    pub scale: Option<(&'a wgpu::Buffer, f32)>,
}

pub(super) struct Residual<'a> {
    cur: &'a wgpu::Buffer,
    other: &'a wgpu::Buffer,
    pending: Option<Step<'a>>,
    /// Matvecs may fold the pending step in (one token, and the device and shapes allow).
    fold: bool,
    rows: usize,
    n: usize,
    eps: f32,
}

impl<'a> Residual<'a> {
    /// The stream in `x` (with `spare`, a buffer of one row, to move it into when a step
    /// is folded) for `rows` rows of `n`.
    pub fn new(x: &'a wgpu::Buffer, spare: &'a wgpu::Buffer, fold: bool, rows: usize, n: usize, eps: f32) -> Residual<'a> {
        Residual { cur: x, other: spare, pending: None, fold: fold && rows == 1, rows, n, eps }
    }

    /// Where matvecs fold the residual step (one token), leave the step x += 0 pending
    /// (`zeros`: a row of zeros, used as both its output and its post-norm weights) so the
    /// first block's input norm goes into its matvec as well, not into an rms_norm_to
    /// dispatch of its own. The step changes no bit of x: RMS(0) is 1/√eps, finite for
    /// eps > 0, and its product with 0 is 0.
    pub fn start(&mut self, zeros: &'a wgpu::Buffer) {
        if self.fold && self.eps > 0.0 && self.pending.is_none() {
            self.pending = Some(Step { a: zeros, post: zeros, scale: None });
        }
    }

    /// The buffer holding the residual, once no step is pending.
    pub fn x(&self) -> &'a wgpu::Buffer {
        debug_assert!(self.pending.is_none(), "a residual step is pending");
        self.cur
    }

    /// For a kernel that makes the next residual itself (no step may be pending): the
    /// buffer holding the residual and the one to write it to, which then holds it.
    pub fn advance(&mut self) -> (&'a wgpu::Buffer, &'a wgpu::Buffer) {
        debug_assert!(self.pending.is_none(), "a residual step is pending");
        std::mem::swap(&mut self.cur, &mut self.other);
        (self.other, self.cur)
    }

    /// Leave `step` pending (flushing one that already is).
    pub fn push(&mut self, k: &Kernels, b: &mut Batch, step: Step<'a>) -> Result<()> {
        self.flush(k, b, None)?;
        self.pending = Some(step);
        Ok(())
    }

    /// Record the pending step as a dispatch, with the next block's input norm into `pre`
    /// = (y, weights) where given (also when no step is pending).
    pub fn flush(&mut self, k: &Kernels, b: &mut Batch, pre: Option<(&wgpu::Buffer, &wgpu::Buffer)>) -> Result<()> {
        let (rows, n, eps) = (self.rows, self.n, self.eps);
        match self.pending.take() {
            Some(s) => norm::residual_norm(k, b, (s.a, 0), (self.cur, 0), rows, n, s.post, s.scale.map(|s| s.0), pre.map(|(y, w)| (y, 0, w)), eps),
            None => match pre {
                Some((y, w)) => norm::rms_norm_to(k, b, self.cur, 0, y, 0, rows, n, Some(w), eps, false),
                None => Ok(()),
            },
        }
    }

    /// The input of the next block: the residual normed by `pre` (or the residual itself).
    /// When the next block is one matvec (`matvec`; every one of its matvecs may take the
    /// same input) in a pass that folds, the pending step goes into it; otherwise it is
    /// flushed and the input is `y` (with `pre`) or the residual buffer.
    ///
    /// Every workgroup of the matvec redoes the step, so its cost grows with the matvec
    /// while the dispatch it saves costs the same; yet folding into every matvec measured
    /// best. Decode on an H100 (Gemma 3 270M / Gemma 4 E2B layouts, tok/s): with naga's
    /// loop bounding (fourth session) no folding 664 / 194, into matvecs of up to 2048 rows
    /// 739 / 198, into all 718 / 191; without it (kernels now compile so) up to 2048 rows
    /// 1,015-1,025 / 266-277, all (E2B's [gate; up]: 6144 row pairs) 1,024-1,028 / 283-285,
    /// three alternated runs each.
    pub fn input(&mut self, k: &Kernels, b: &mut Batch, pre: Option<&'a wgpu::Buffer>, y: &'a wgpu::Buffer, matvec: bool) -> Result<MatvecIn<'a>> {
        if self.fold && matvec && let Some(s) = self.pending.take() {
            let r = ResidualIn {
                a: (s.a, 0),
                x_in: (self.cur, 0),
                x_out: (self.other, 0),
                post: s.post,
                pre,
                scale: s.scale.map_or(1.0, |s| s.1),
                eps: self.eps,
            };
            std::mem::swap(&mut self.cur, &mut self.other);
            return Ok(MatvecIn::Residual(r));
        }
        self.flush(k, b, pre.map(|w| (y, w)))?;
        Ok(match pre {
            Some(_) => MatvecIn::Vector(y, 0),
            None => MatvecIn::Vector(self.cur, 0),
        })
    }
}
