//! The generation loop on both backends (the GPU's pipelined decode included): the same
//! tokens, the same stop reasons, every streamed token reported once.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rullama::cpu::forward::CpuModel;
use rullama::gguf::GgufFile;
use rullama::gpu::forward::GpuModel;
use rullama::runtime::{GenerateOptions, SamplingOptions, StopReason, TextModel, generate};
use rullama::tokenizer::Tokenizer;

/// Run `generate` and return the streamed ids and the stop reason. `cancel_after`: set the
/// cancel flag once that many tokens were streamed.
fn run<M: TextModel>(m: &M, tok: &Tokenizer, prompt: &[u32], context: usize, opts: &GenerateOptions, cancel_after: Option<usize>) -> (Vec<u32>, StopReason) {
    let cancel = AtomicBool::new(false);
    let mut ids = Vec::new();
    let stats = generate(m, tok, prompt, context, opts, &cancel, |ev| {
        ids.push(ev.id);
        if cancel_after == Some(ids.len()) {
            cancel.store(true, Ordering::Relaxed);
        }
    })
    .unwrap();
    assert_eq!(stats.generated_tokens, ids.len(), "every generated token streamed once");
    (ids, stats.stop)
}

#[test]
fn gpu_and_cpu_generate_alike() {
    let f = Arc::new(GgufFile::open(common::fixture("g4_dense.f32.gguf")).unwrap());
    let tok = Tokenizer::from_gguf(&f.gguf).unwrap();
    let gpu = GpuModel::load(f.clone()).unwrap();
    let cpu = CpuModel::load(f).unwrap();
    let prompt = &common::tokens("g4_dense")[..5];
    // All run pipelined on the GPU (top-k 100 within its candidates, the repetition penalty
    // over its history ring); the last one with a penalty window past the ring takes the
    // step-by-step path with the logits read back.
    let sampled = SamplingOptions { temperature: 0.9, top_k: 20, top_p: 0.9, seed: 5, ..Default::default() };
    for sampling in [
        SamplingOptions::greedy(),
        sampled.clone(),
        SamplingOptions { top_k: 100, ..sampled.clone() },
        SamplingOptions { repeat_penalty: 1.3, ..sampled.clone() },
        SamplingOptions { repeat_penalty: 1.3, repeat_last_n: 5000, ..sampled },
    ] {
        let opts = GenerateOptions { max_tokens: 6, sampling };
        // (context, cancel after, expected stop, expected count)
        let cases = [
            (64, None, StopReason::MaxTokens, 6),
            (prompt.len() + 3, None, StopReason::ContextFull, 3),
            (64, Some(2), StopReason::Cancelled, 2),
        ];
        for (context, cancel_after, stop, count) in cases {
            let (g, gs) = run(&gpu, &tok, prompt, context, &opts, cancel_after);
            let (c, cs) = run(&cpu, &tok, prompt, context, &opts, cancel_after);
            // A stop token would end both early with the same reason; these prompts do not hit one.
            assert_eq!((gs, g.len()), (stop, count), "GPU, context {context}");
            assert_eq!((cs, c.len()), (stop, count), "CPU, context {context}");
            assert_eq!(g, c, "GPU vs CPU tokens, context {context}");
        }
    }
}
