//! Token sampling: repetition penalty, then greedy or temperature with top-k, top-p and min-p.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SamplingOptions {
    /// 0 means greedy.
    pub temperature: f32,
    /// 0 disables.
    pub top_k: usize,
    /// 1.0 disables.
    pub top_p: f32,
    /// 0.0 disables.
    pub min_p: f32,
    /// 1.0 disables.
    pub repeat_penalty: f32,
    /// How many recent tokens the penalty looks at.
    pub repeat_last_n: usize,
    pub seed: u64,
}

impl Default for SamplingOptions {
    fn default() -> Self {
        SamplingOptions { temperature: 0.8, top_k: 40, top_p: 0.95, min_p: 0.0, repeat_penalty: 1.0, repeat_last_n: 64, seed: 0 }
    }
}

impl SamplingOptions {
    pub fn greedy() -> Self {
        SamplingOptions { temperature: 0.0, ..Self::default() }
    }
}

pub struct Sampler {
    pub opts: SamplingOptions,
    rng: ChaCha8Rng,
}

impl Sampler {
    pub fn new(opts: SamplingOptions) -> Self {
        let rng = ChaCha8Rng::seed_from_u64(opts.seed);
        Sampler { opts, rng }
    }

    /// Pick the next token from `logits`, given the tokens so far (`history`) for the penalty.
    pub fn sample(&mut self, logits: &[f32], history: &[u32]) -> u32 {
        let mut logits = logits.to_vec();
        let o = &self.opts;
        apply_repeat_penalty(&mut logits, history, o);
        if o.temperature <= 0.0 {
            return argmax(&logits) as u32;
        }
        let mut cand: Vec<(u32, f32)> = logits.iter().enumerate().map(|(i, &l)| (i as u32, l)).collect();
        // Best first; equal values: lower id first (a total order, so selecting the top k and
        // sorting those gives exactly the head of a full sort, without sorting 262144 logits).
        let order = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if self.opts.top_k > 0 && self.opts.top_k < cand.len() {
            cand.select_nth_unstable_by(self.opts.top_k - 1, order);
            cand.truncate(self.opts.top_k);
        }
        cand.sort_unstable_by(order);
        let vals: Vec<f32> = cand.iter().map(|c| c.1).collect();
        let u = self.draw();
        cand[pick_sorted(&vals, &self.opts, u)].0
    }

    /// The next uniform number in [0, 1) of this sampler's stream: one per sampled token
    /// (temperature > 0), in order, whichever device applies the rules to it.
    pub fn draw(&mut self) -> f32 {
        self.rng.random::<f32>()
    }
}

/// The repetition penalty on `logits`: each distinct token among the last `repeat_last_n`
/// of `history` has its logit divided by the penalty when positive, multiplied when not
/// (llama.cpp's rule). `shaders/sample/repeat_penalty.wgsl` is its GPU twin.
pub fn apply_repeat_penalty(logits: &mut [f32], history: &[u32], o: &SamplingOptions) {
    if o.repeat_penalty == 1.0 || o.repeat_last_n == 0 {
        return;
    }
    let start = history.len().saturating_sub(o.repeat_last_n);
    let mut seen = std::collections::HashSet::new();
    for &t in &history[start..] {
        if let Some(l) = logits.get_mut(t as usize).filter(|_| seen.insert(t)) {
            *l = if *l > 0.0 { *l / o.repeat_penalty } else { *l * o.repeat_penalty };
        }
    }
}

/// Which of `vals` (candidate logits, best first) temperature sampling picks for the uniform
/// draw `u`: softmax at `o.temperature` over the first `o.top_k` (0: all), cut by top-p and
/// min-p, then the candidate where `u` × the kept mass falls. `shaders/sample/sample_pick.wgsl`
/// is its GPU twin.
pub fn pick_sorted(vals: &[f32], o: &SamplingOptions, u: f32) -> usize {
    let n = if o.top_k > 0 { o.top_k.min(vals.len()) } else { vals.len() };
    let max = vals[0];
    let mut probs: Vec<f32> = vals[..n].iter().map(|v| ((v - max) / o.temperature).exp()).collect();
    let sum: f32 = probs.iter().sum();
    probs.iter_mut().for_each(|p| *p /= sum);
    let mut keep = probs.len();
    if o.top_p < 1.0 {
        let mut acc = 0.0;
        for (i, p) in probs.iter().enumerate() {
            acc += p;
            if acc >= o.top_p {
                keep = i + 1;
                break;
            }
        }
    }
    if o.min_p > 0.0 {
        let floor = probs[0] * o.min_p;
        keep = keep.min(probs.iter().take_while(|&&p| p >= floor).count().max(1));
    }
    let total: f32 = probs[..keep].iter().sum();
    let mut r = u * total;
    for (i, p) in probs[..keep].iter().enumerate() {
        r -= p;
        if r <= 0.0 {
            return i;
        }
    }
    keep - 1
}

/// Index of the largest value (first on ties).
pub fn argmax(x: &[f32]) -> usize {
    let mut best = 0;
    for (i, v) in x.iter().enumerate() {
        if *v > x[best] {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_picks_argmax() {
        let mut s = Sampler::new(SamplingOptions::greedy());
        assert_eq!(s.sample(&[0.1, 3.0, -1.0, 3.0], &[]), 1);
    }

    #[test]
    fn repeat_penalty_changes_greedy_choice() {
        let opts = SamplingOptions { repeat_penalty: 2.0, ..SamplingOptions::greedy() };
        let mut s = Sampler::new(opts);
        assert_eq!(s.sample(&[1.0, 3.0, 2.0], &[1]), 2);
    }

    /// Selecting the top k before sorting picks exactly what a full sort would (ties included).
    #[test]
    fn top_k_selection_equals_full_sort() {
        let logits: Vec<f32> = (0..5000).map(|i| ((i * 7919) % 97) as f32 * 0.05).collect();
        for top_k in [1, 5, 40, 100, 4999, 5000, 6000] {
            let opts = SamplingOptions { temperature: 0.9, top_k, top_p: 0.97, seed: 9, ..Default::default() };
            let mut fast = Sampler::new(opts.clone());
            let mut draws = Sampler::new(opts.clone());
            let mut full: Vec<(u32, f32)> = logits.iter().enumerate().map(|(i, &l)| (i as u32, l)).collect();
            full.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            let vals: Vec<f32> = full.iter().map(|c| c.1).collect();
            for _ in 0..50 {
                let want = full[pick_sorted(&vals, &opts, draws.draw())].0;
                assert_eq!(fast.sample(&logits, &[]), want, "top_k {top_k}");
            }
        }
    }

    #[test]
    fn top_k_one_is_greedy_and_seed_is_reproducible() {
        let logits: Vec<f32> = (0..50).map(|i| ((i * 37) % 11) as f32 * 0.3).collect();
        let mut s = Sampler::new(SamplingOptions { top_k: 1, temperature: 1.0, ..Default::default() });
        assert_eq!(s.sample(&logits, &[]) as usize, argmax(&logits));
        let run = |seed| {
            let mut s = Sampler::new(SamplingOptions { seed, temperature: 1.5, top_k: 0, top_p: 1.0, ..Default::default() });
            (0..20).map(|_| s.sample(&logits, &[])).collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }

    #[test]
    fn top_p_and_min_p_cut_the_tail() {
        // One dominant token: p(0) ≈ 0.97 at temperature 1.
        let logits = [5.0, 1.0, 0.5, 0.0];
        for opts in [
            SamplingOptions { top_p: 0.5, top_k: 0, temperature: 1.0, ..Default::default() },
            SamplingOptions { min_p: 0.1, top_k: 0, top_p: 1.0, temperature: 1.0, ..Default::default() },
        ] {
            let mut s = Sampler::new(opts);
            assert!((0..200).all(|_| s.sample(&logits, &[]) == 0));
        }
        // Without the cut, the tail is sampled sometimes.
        let mut s = Sampler::new(SamplingOptions { top_k: 0, top_p: 1.0, temperature: 3.0, ..Default::default() });
        assert!((0..200).any(|_| s.sample(&logits, &[]) != 0));
    }
}
