//! Pipelined decoding: the token a step picks stays on the GPU as the next step's input, so
//! the host records and submits later steps while the GPU still runs step i (a submitter
//! thread encodes and submits each step while the host records the next), and learns each
//! token from a 4-byte copy it maps afterwards. A step evaluated for a token the caller then
//! refuses (end of turn, a limit) is dropped from the cache: its KV lies past the cache's
//! length and is overwritten later.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use super::{GpuCache, GpuModel};
use crate::runtime::Sampler;
use crate::{Error, Result};

/// Steps submitted beyond the one whose token the host waits for. The host records a step
/// while the submitter encodes the one before; with one step ahead, a token's readback, a
/// step's recording and its encoding came one after another between the GPU finishing a
/// step and the next being queued, which left the GPU idle on the 270M layout (H100, three
/// alternated runs: 1,101-1,259 tok/s one ahead, 1,242-1,353 two, 1,336-1,357 three; E2B
/// within noise). Grouping two steps per submission instead measured 1,133-1,263.
const AHEAD: usize = 3;

/// Slots of the on-GPU token ring: the steps in flight (AHEAD + 1) and the slot the newest
/// writes, rounded up.
pub(super) const RING: usize = (AHEAD + 2).next_power_of_two();

/// A submitted step whose picked token is being copied to a mappable buffer.
struct Pending {
    staging: wgpu::Buffer,
    index: wgpu::SubmissionIndex,
    mapped: mpsc::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>,
}

/// A recorded step for the submitter: its batch, its token's staging buffer and where its
/// `Pending` goes.
struct Job {
    batch: crate::gpu::Batch,
    staging: wgpu::Buffer,
    reply: mpsc::Sender<Result<Pending>>,
}

/// Encode and submit jobs in order until the channel closes, mapping each step's staging
/// buffer once its batch is submitted (a mapping must follow the submission that copies
/// into the buffer).
fn submitter(queue: mpsc::Receiver<Job>) {
    for job in queue {
        let t0 = std::time::Instant::now();
        let pending = job.batch.submit_indexed().map(|index| {
            let (tx, mapped) = mpsc::channel();
            job.staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
                let _ = tx.send(r);
            });
            Pending { staging: job.staging, index, mapped }
        });
        host_add(1, t0.elapsed());
        let _ = job.reply.send(pending);
    }
}

/// Host time per decode step under `RULLAMA_PROFILE=1` (nanoseconds: recording,
/// submitting, waiting for the GPU), summed and printed once per call rather than per step,
/// since printing from inside the loop slowed the steps it measured. Waits near zero mean
/// the host, not the GPU, sets the pace.
static HOST: [std::sync::atomic::AtomicU64; 3] = [const { std::sync::atomic::AtomicU64::new(0) }; 3];

fn host_add(i: usize, d: std::time::Duration) {
    if crate::gpu::kernel::step_profile() {
        HOST[i].fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
    }
}

impl GpuModel {
    /// `TextModel::decode` for sampling rules the GPU applies itself (see `samples_on_gpu`).
    pub(super) fn decode_pipelined(
        &self,
        first: u32,
        cache: &mut GpuCache,
        sampler: &mut Sampler,
        history: &[u32],
        cancel: &AtomicBool,
        on: &mut dyn FnMut(u32) -> Result<bool>,
    ) -> Result<()> {
        let base = cache.len;
        if sampler.opts.repeat_penalty != 1.0 {
            self.upload_history(cache, history);
        }
        if first as usize >= self.cfg.vocab {
            return Err(Error::Input(format!("token id {first} is outside the vocabulary of {} tokens", self.cfg.vocab)));
        }
        if !on(first)? {
            return Ok(());
        }
        self.k.gpu.queue.write_buffer(&cache.s.ring, 0, bytemuck::bytes_of(&first));
        // Tokens `on` accepted (each is fed by the step of the same number), steps submitted.
        let mut counts = (1usize, 0usize);
        let result = self.run_steps(cache, sampler, history, cancel, on, &mut counts);
        // The cache holds the accepted tokens (all fed, unless the cache filled up); later
        // steps' KV is left to be overwritten.
        let (accepted, submitted) = counts;
        cache.len = base + accepted.min(submitted);
        if crate::gpu::kernel::step_profile() {
            let n = submitted.max(1) as f64;
            let us = |i: usize| HOST[i].swap(0, Ordering::Relaxed) as f64 / 1e3 / n;
            eprintln!("profile: decode per step: record {:.1} us, submit {:.1} us, wait {:.1} us ({submitted} steps)", us(0), us(1), us(2));
            // The last `submitted` batches are the steps; any before them, the prompt's.
            // A failed readback here must not replace the decode's own result.
            let spans = crate::gpu::kernel::batch_spans(&self.k.gpu).unwrap_or_else(|e| {
                eprintln!("profile: decode GPU spans unavailable: {e}");
                Vec::new()
            });
            let steps = &spans[spans.len().saturating_sub(submitted)..];
            let median = |mut v: Vec<f64>| {
                v.sort_by(f64::total_cmp);
                v.get(v.len() / 2).copied().unwrap_or(0.0)
            };
            if steps.len() > 1 {
                let busy = median(steps.iter().map(|s| s.1 - s.0).collect());
                let gap = median(steps.windows(2).map(|w| w[1].0 - w[0].1).collect());
                eprintln!("profile: decode GPU per batch: span {busy:.1} us, idle before the next {gap:.1} us (medians)");
            }
        }
        result
    }

    /// The pipeline of `decode_pipelined`, from the cache's current length; `counts` tracks
    /// (tokens accepted, steps submitted) whatever the outcome. The host records each step
    /// while a submitter thread encodes and submits the one before (wgpu's encoding costs
    /// about as much host time as the recording), so both run in parallel with the GPU.
    fn run_steps(
        &self,
        cache: &GpuCache,
        sampler: &mut Sampler,
        history: &[u32],
        cancel: &AtomicBool,
        on: &mut dyn FnMut(u32) -> Result<bool>,
        counts: &mut (usize, usize),
    ) -> Result<()> {
        std::thread::scope(|sc| {
            let (jobs, queue) = mpsc::channel::<Job>();
            sc.spawn(move || submitter(queue));
            // Returning drops `jobs`, which lets the submitter finish what it holds and stop.
            let base = cache.len;
            let (accepted, submitted) = counts;
            let mut pending: VecDeque<mpsc::Receiver<Result<Pending>>> = VecDeque::new();
            loop {
                // Step i feeds token i: submit it once token i - AHEAD was accepted (the host
                // does not know the tokens of the steps in between yet), while the cache has room.
                while *submitted < *accepted + AHEAD && base + *submitted < cache.capacity {
                    let u = if sampler.opts.temperature > 0.0 { sampler.draw() } else { 0.0 };
                    // Step i's input token is history entry history.len() + i.
                    let (job, reply) = self.record_step(cache, base + *submitted, *submitted % RING, history.len() + *submitted, &sampler.opts, u)?;
                    pending.push_back(reply);
                    jobs.send(job).map_err(|_| Error::Gpu("the decode submitter stopped".into()))?;
                    *submitted += 1;
                }
                let Some(p) = pending.pop_front() else {
                    // The cache is full: nothing can be fed, so the caller's next token cannot exist.
                    return Err(Error::Input(format!("the context of {} tokens is full", cache.capacity)));
                };
                let p = p.recv().map_err(|_| Error::Gpu("the decode submitter stopped".into()))??;
                let id = self.read_token(p)?;
                if cancel.load(Ordering::Relaxed) {
                    return Err(Error::Cancelled);
                }
                if !on(id)? {
                    return Ok(());
                }
                *accepted += 1;
            }
        })
    }

    /// Record the step that feeds the token in ring slot `slot` at position `pos` (history
    /// entry `hist_idx`) and picks the next into the following slot, with the receiver of
    /// its `Pending` once the submitter has submitted it.
    fn record_step(&self, cache: &GpuCache, pos: usize, slot: usize, hist_idx: usize, o: &crate::runtime::SamplingOptions, u: f32) -> Result<(Job, mpsc::Receiver<Result<Pending>>)> {
        let gpu = &self.k.gpu;
        let s = &cache.s;
        let out = (slot + 1) % RING;
        let t0 = std::time::Instant::now();
        let mut b = self.record_layers(self.batch(cache), &s.ring, slot, 1, cache, pos, None)?;
        if o.repeat_penalty != 1.0 {
            // The penalty sees the token this step feeds: append it to the history ring.
            let at = (hist_idx % crate::gpu::sample::PENALTY_RING) * 4;
            b.copy(&s.ring, (slot * 4) as u64, &s.hist, at as u64, 4);
        }
        self.record_pick(&mut b, s, 0, o, u, hist_idx + 1, &s.ring, out)?;
        let staging = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("token"),
            size: 4,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        b.copy(&s.ring, (out * 4) as u64, &staging, 0, 4);
        host_add(0, t0.elapsed());
        let (reply, rx) = mpsc::channel();
        Ok((Job { batch: b, staging, reply }, rx))
    }

    /// Wait for a step and read the token it picked.
    fn read_token(&self, p: Pending) -> Result<u32> {
        let gpu = &self.k.gpu;
        let t0 = std::time::Instant::now();
        gpu.wait_for(p.index)?;
        host_add(2, t0.elapsed());
        let r = match p.mapped.try_recv() {
            Ok(r) => r,
            // The mapping completes in a poll after the submission is done.
            Err(_) => {
                gpu.wait()?;
                p.mapped.recv().map_err(|_| Error::Gpu("token readback callback dropped".into()))?
            }
        };
        r.map_err(|e| Error::Gpu(format!("token readback failed: {e}")))?;
        let bytes = p.staging.slice(..).get_mapped_range().map_err(|e| Error::Gpu(format!("token readback map failed: {e}")))?.to_vec();
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }
}
