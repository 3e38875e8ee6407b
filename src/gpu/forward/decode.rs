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

/// How many decode steps go into one submission, and how many may be in flight. wgpu makes
/// each submission wait on a semaphore the one before signals, which leaves the GPU idle
/// ~28 µs between submissions on an H100 (+5 µs for the tokens' copy and mapping;
/// examples/submit_gap_bench.rs): a 270M step is ~660 µs of kernels, so one submission per
/// step idled the GPU ~5% of the time. Groups are sized to about GROUP_TIME of decoding
/// (at the average time per step so far), so a fast model shares each submission's idle
/// among many steps while a slow GPU still streams its tokens smoothly and wastes little
/// work past the end of a reply.
struct Grouping {
    /// Steps per group at most, from the measured time per step.
    cap: usize,
    start: std::time::Instant,
    /// Steps whose tokens the host has read.
    read: usize,
}

/// The decoding time a group aims at: tokens then arrive in bursts of at most this.
const GROUP_TIME: std::time::Duration = std::time::Duration::from_millis(10);

/// Steps per group at most (the parameter buffers are sized for this many).
pub(super) const MAX_GROUP: usize = 16;

impl Grouping {
    fn new() -> Grouping {
        Grouping { cap: 2.min(max_group()), start: std::time::Instant::now(), read: 0 }
    }

    /// Steps in the next group after `submitted` steps. Groups grow (1, 1, 2, 3, 4, 6, 9,
    /// ...): the first step's recording and encoding are all the GPU waits for before
    /// decoding starts, and a group of n steps, recorded and then encoded in ~0.6 n step
    /// times on an H100, is ready before the GPU runs out of the 2n - 2 or more steps
    /// submitted before it.
    fn size(&self, submitted: usize) -> usize {
        (submitted / 2 + 1).min(self.cap)
    }

    /// Steps submitted beyond the accepted tokens: three groups, so the host records and
    /// encodes one while the GPU runs the other two. With one step per submission, one
    /// step ahead left the 270M layout's GPU idle while the host read a token, recorded a
    /// step and encoded it (H100, three alternated runs: 1,101-1,259 tok/s one ahead,
    /// 1,242-1,353 two, 1,336-1,357 three).
    fn ahead(&self) -> usize {
        3 * self.cap
    }

    /// A group of `steps` steps has been read. The average over every step so far (the
    /// first one's recording and encoding included) is steadier than the time between two
    /// reads, which is ~0 when a group was already done as the host turned to it.
    fn read(&mut self, steps: usize) {
        self.read += steps;
        let per_step = self.start.elapsed().as_secs_f64() / self.read as f64;
        self.cap = ((GROUP_TIME.as_secs_f64() / per_step.max(1e-6)) as usize).clamp(1, max_group());
    }
}

/// MAX_GROUP, or fewer under `RULLAMA_GROUP=N` (1 submits each step alone, for comparison).
fn max_group() -> usize {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *N.get_or_init(|| std::env::var("RULLAMA_GROUP").ok().and_then(|v| v.parse::<usize>().ok()).unwrap_or(MAX_GROUP).clamp(1, MAX_GROUP))
}

/// Slots of the on-GPU token ring: a group's input and picked tokens, rounded up. The
/// picked ones stay there until the copy after the group's last step; later groups run
/// after it in queue order, so only a group's own steps must not share a slot.
pub(super) const RING: usize = (MAX_GROUP + 1).next_power_of_two();

/// Where steps `first..first + steps` put their tokens in the ring (slots first + 1 ..=
/// first + steps): (first slot, count) for the run up to the ring's end and the run that
/// wraps to its start (empty when none does).
fn picked_slots(first: usize, steps: usize) -> [(usize, usize); 2] {
    let from = (first + 1) % RING;
    let head = steps.min(RING - from);
    [(from, head), (0, steps - head)]
}

/// Tokens `on` accepted (each is fed by the step of the same number), steps submitted, and
/// the steps of each group submitted, in order.
struct Counts {
    accepted: usize,
    submitted: usize,
    groups: Vec<usize>,
}

/// A submitted group of steps whose picked tokens are being copied to a mappable buffer.
struct Pending {
    staging: wgpu::Buffer,
    steps: usize,
    index: wgpu::SubmissionIndex,
    mapped: mpsc::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>,
}

/// A recorded group of steps for the submitter: its batch, its tokens' staging buffer and
/// where its `Pending` goes.
struct Job {
    batch: crate::gpu::Batch,
    staging: wgpu::Buffer,
    steps: usize,
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
            Pending { staging: job.staging, steps: job.steps, index, mapped }
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
        let mut counts = Counts { accepted: 1, submitted: 0, groups: Vec::new() };
        let result = self.run_steps(cache, sampler, history, cancel, on, &mut counts);
        // The cache holds the accepted tokens (all fed, unless the cache filled up); later
        // steps' KV is left to be overwritten.
        let Counts { accepted, submitted, groups } = counts;
        cache.len = base + accepted.min(submitted);
        if crate::gpu::kernel::step_profile() {
            let n = submitted.max(1) as f64;
            let us = |i: usize| HOST[i].swap(0, Ordering::Relaxed) as f64 / 1e3 / n;
            eprintln!("profile: decode per step: record {:.1} us, submit {:.1} us, wait {:.1} us ({submitted} steps)", us(0), us(1), us(2));
            // The last batches are the step groups; any before them, the prompt's.
            // A failed readback here must not replace the decode's own result.
            let spans = crate::gpu::kernel::batch_spans(&self.k.gpu).unwrap_or_else(|e| {
                eprintln!("profile: decode GPU spans unavailable: {e}");
                Vec::new()
            });
            let steps = &spans[spans.len().saturating_sub(groups.len())..];
            let sizes = &groups[groups.len() - steps.len()..];
            let median = |mut v: Vec<f64>| {
                v.sort_by(f64::total_cmp);
                v.get(v.len() / 2).copied().unwrap_or(0.0)
            };
            if steps.len() > 1 {
                // Per step: a batch's span over its steps, the idle before it over its steps.
                let busy = median(steps.iter().zip(sizes).map(|(s, &n)| (s.1 - s.0) / n as f64).collect());
                let idle: Vec<f64> = steps.windows(2).map(|w| w[1].0 - w[0].1).collect();
                let gap = median(idle.iter().zip(&sizes[1..]).map(|(t, &n)| t / n as f64).collect());
                eprintln!("profile: decode GPU per step: span {busy:.1} us, idle {gap:.1} us (medians over {} batches of up to {} steps)", steps.len(), sizes.iter().max().unwrap_or(&0));
                eprintln!(
                    "profile: decode GPU from the first batch's start to the last's end {:.1} us, idle in all {:.1} us, longest idle {:.1} us (after batch {:?})",
                    steps[steps.len() - 1].1 - steps[0].0,
                    idle.iter().sum::<f64>(),
                    idle.iter().cloned().fold(0.0, f64::max),
                    idle.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|m| m.0)
                );
            }
        }
        result
    }

    /// The pipeline of `decode_pipelined`, from the cache's current length; `counts` tracks
    /// what was accepted and submitted whatever the outcome. The host records each step
    /// while a submitter thread encodes and submits the one before (wgpu's encoding costs
    /// about as much host time as the recording), so both run in parallel with the GPU.
    fn run_steps(
        &self,
        cache: &GpuCache,
        sampler: &mut Sampler,
        history: &[u32],
        cancel: &AtomicBool,
        on: &mut dyn FnMut(u32) -> Result<bool>,
        counts: &mut Counts,
    ) -> Result<()> {
        std::thread::scope(|sc| {
            let (jobs, queue) = mpsc::channel::<Job>();
            sc.spawn(move || submitter(queue));
            // Returning drops `jobs`, which lets the submitter finish what it holds and stop.
            let base = cache.len;
            let Counts { accepted, submitted, groups } = counts;
            let mut pending: VecDeque<mpsc::Receiver<Result<Pending>>> = VecDeque::new();
            let mut grouping = Grouping::new();
            loop {
                // Step i feeds token i: submit it once token i - ahead was accepted (the host
                // does not know the tokens of the steps in between yet), while the cache has room.
                while *submitted < *accepted + grouping.ahead() && base + *submitted < cache.capacity {
                    let steps = grouping.size(*submitted).min(cache.capacity - base - *submitted);
                    // Step i's input token is history entry history.len() + i.
                    let (job, reply) = self.record_group(cache, base, *submitted, steps, history.len(), sampler)?;
                    pending.push_back(reply);
                    jobs.send(job).map_err(|_| Error::Gpu("the decode submitter stopped".into()))?;
                    *submitted += steps;
                    groups.push(steps);
                }
                let Some(p) = pending.pop_front() else {
                    // The cache is full: nothing can be fed, so the caller's next token cannot exist.
                    return Err(Error::Input(format!("the context of {} tokens is full", cache.capacity)));
                };
                let p = p.recv().map_err(|_| Error::Gpu("the decode submitter stopped".into()))??;
                let ids = self.read_tokens(p)?;
                grouping.read(ids.len());
                for id in ids {
                    if cancel.load(Ordering::Relaxed) {
                        return Err(Error::Cancelled);
                    }
                    if !on(id)? {
                        return Ok(());
                    }
                    *accepted += 1;
                }
            }
        })
    }

    /// Record steps `first..first + steps` (counted from the cache length `base`) into one
    /// batch, with the receiver of its `Pending` once the submitter has submitted it. Step i
    /// feeds the token in ring slot i % RING at position base + i (history entry
    /// `hist0 + i`) and picks the next into the following slot.
    fn record_group(&self, cache: &GpuCache, base: usize, first: usize, steps: usize, hist0: usize, sampler: &mut Sampler) -> Result<(Job, mpsc::Receiver<Result<Pending>>)> {
        let gpu = &self.k.gpu;
        let s = &cache.s;
        let o = sampler.opts.clone();
        let t0 = std::time::Instant::now();
        let staging = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("tokens"),
            size: (steps * 4) as u64,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut b = self.batch(cache);
        for j in 0..steps {
            let i = first + j;
            let (slot, out, hist_idx) = (i % RING, (i + 1) % RING, hist0 + i);
            let u = if o.temperature > 0.0 { sampler.draw() } else { 0.0 };
            b = self.record_layers(b, &s.ring, slot, 1, cache, base + i, None)?;
            if o.repeat_penalty != 1.0 {
                // The penalty sees the token this step feeds: append it to the history ring.
                let at = (hist_idx % crate::gpu::sample::PENALTY_RING) * 4;
                b.copy(&s.ring, (slot * 4) as u64, &s.hist, at as u64, 4);
            }
            self.record_pick(&mut b, s, 0, &o, u, hist_idx + 1, &s.ring, out)?;
        }
        // One copy of the picked tokens after the last step, not one per step: a copy
        // between steps would break the compute pass.
        let mut at = 0;
        for (slot, n) in picked_slots(first, steps) {
            b.copy(&s.ring, (slot * 4) as u64, &staging, (at * 4) as u64, (n * 4) as u64);
            at += n;
        }
        host_add(0, t0.elapsed());
        let (reply, rx) = mpsc::channel();
        Ok((Job { batch: b, staging, steps, reply }, rx))
    }

    /// Wait for a group of steps and read the tokens they picked.
    fn read_tokens(&self, p: Pending) -> Result<Vec<u32>> {
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
        Ok(bytemuck::pod_collect_to_vec::<u8, u32>(&bytes[..p.steps * 4]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_grow_to_the_cap() {
        let g = Grouping { cap: MAX_GROUP, start: std::time::Instant::now(), read: 0 };
        let mut submitted = 0;
        let sizes: Vec<usize> = (0..9)
            .map(|_| {
                let n = g.size(submitted);
                submitted += n;
                n
            })
            .collect();
        assert_eq!(sizes, [1, 1, 2, 3, 4, 6, 9, 14, 16]);
        assert_eq!(g.ahead(), 3 * MAX_GROUP);
    }

    #[test]
    fn picked_slots_cover_each_step_once_in_order() {
        for first in 0..3 * RING {
            for steps in 1..=MAX_GROUP {
                let slots: Vec<usize> = picked_slots(first, steps).iter().flat_map(|&(s, n)| s..s + n).collect();
                let want: Vec<usize> = (first + 1..=first + steps).map(|i| i % RING).collect();
                assert_eq!(slots, want, "first {first}, {steps} steps");
            }
        }
    }
}
