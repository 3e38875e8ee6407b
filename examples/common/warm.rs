//! Timing a GPU micro-benchmark warm. An idle GPU runs at a fraction of its clock and
//! takes ~0.2 s of load to reach the top (an H200: 345 to 1,980 MHz, `nvidia-smi`), and a
//! bench that uploads its data between timings lets it idle each time: batches of a few
//! dozen dispatches timed straight after read up to twice their kernels' cost in decode
//! (docs/performance-log.md, fifty-fifth session).

use std::time::Instant;

/// How long `best_warm` repeats a run before timing it.
const WARM_S: f64 = 0.3;

/// The least of three calls of `run` (each returning its seconds), after calling it for
/// WARM_S seconds.
pub fn best_warm<E>(mut run: impl FnMut() -> Result<f64, E>) -> Result<f64, E> {
    let warm = Instant::now();
    while warm.elapsed().as_secs_f64() < WARM_S {
        run()?;
    }
    let mut best = f64::MAX;
    for _ in 0..3 {
        best = best.min(run()?);
    }
    Ok(best)
}
