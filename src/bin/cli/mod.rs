//! The CLI commands: thin wrappers over the engine library, printing for people or JSON.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use rullama::chat::{Message, RenderOptions, Template, is_chat_model};
use rullama::cpu::forward::Logits;
use rullama::gguf::{GgmlType, GgufFile};
use rullama::model::Config;
use rullama::runtime::{GenerateOptions, SamplingOptions, TextModel, generate};
use rullama::store::{Catalog, ResolvedModel, StoreOptions, imported};
use rullama::tokenizer::Tokenizer;
use rullama::{Error, Result};

pub use rullama::runtime::backend::{Backend, KvCacheType, PrefillPrecision};

#[derive(clap::Args)]
pub struct RunArgs {
    #[arg(long)]
    pub model: String,
    #[arg(long)]
    pub prompt: String,
    #[arg(long)]
    pub system: Option<String>,
    #[arg(long, default_value_t = 256)]
    pub max_tokens: usize,
    /// 0 = greedy.
    #[arg(long, default_value_t = 0.8)]
    pub temperature: f32,
    #[arg(long, default_value_t = 40)]
    pub top_k: usize,
    #[arg(long, default_value_t = 0.95)]
    pub top_p: f32,
    #[arg(long, default_value_t = 0.0)]
    pub min_p: f32,
    #[arg(long, default_value_t = 1.0)]
    pub repeat_penalty: f32,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Context length (default: 4096 or the model's, whichever is smaller).
    #[arg(long)]
    pub ctx: Option<usize>,
    /// Ask Gemma 4 to think first.
    #[arg(long)]
    pub think: bool,
    /// Plain text completion, no chat turns (the default for base models without a chat template).
    #[arg(long)]
    pub raw: bool,
    /// Default: the GPU where an adapter takes the model, else the CPU reference.
    #[arg(long)]
    pub backend: Option<Backend>,
    /// How the KV cache stores K and V (f16: half the GPU memory).
    #[arg(long, value_enum, default_value = "f32")]
    pub kv_cache: KvCacheType,
    /// Prefill's products on tensor cores: f32-accurate, or of f16-rounded inputs (faster
    /// prompts, logits further from the reference).
    #[arg(long, value_enum, default_value = "f32")]
    pub prefill_precision: PrefillPrecision,
    /// Print the engine and timing to stderr at the end.
    #[arg(long)]
    pub verbose: bool,
}

fn catalog(store: &StoreOptions) -> Result<Catalog> {
    let c = Catalog::discover(store)?;
    for w in c.warnings() {
        eprintln!("warning: {w}");
    }
    Ok(c)
}

fn resolve(store: &StoreOptions, model: &str) -> Result<ResolvedModel> {
    catalog(store)?.resolve(model)
}

fn open(store: &StoreOptions, model: &str) -> Result<(ResolvedModel, Arc<GgufFile>)> {
    let r = resolve(store, model)?;
    let f = Arc::new(GgufFile::open(&r.gguf)?);
    Ok((r, f))
}

fn json<T: serde::Serialize>(v: &T) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(v).map_err(|e| Error::Input(e.to_string()))?);
    Ok(())
}

fn bytes_h(n: u64) -> String {
    let units = ["B", "KB", "MB", "GB", "TB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1000.0 && u + 1 < units.len() {
        v /= 1000.0;
        u += 1;
    }
    if u == 0 { format!("{n} B") } else { format!("{v:.1} {}", units[u]) }
}

pub fn list(store: &StoreOptions, as_json: bool) -> Result<()> {
    let c = catalog(store)?;
    if as_json {
        return json(&c.entries());
    }
    if c.entries().is_empty() {
        let roots: Vec<String> = c.roots().iter().map(|r| r.display().to_string()).collect();
        println!("No models found (looked in: {}).", if roots.is_empty() { "no Ollama store".into() } else { roots.join(", ") });
        println!("Pull one with `ollama pull gemma4:e2b`, or add a GGUF with `rullama import FILE`.");
        return Ok(());
    }
    println!("{:<32} {:<8} {:>7} {:<8} {:>9} {:>8}  CAPABILITIES", "NAME", "FAMILY", "PARAMS", "QUANT", "SIZE", "CONTEXT");
    for e in c.entries() {
        let dash = || "-".to_string();
        let caps = if e.status.is_ok() { e.capabilities.join(",") } else { format!("BROKEN: {}", e.status) };
        println!(
            "{:<32} {:<8} {:>7} {:<8} {:>9} {:>8}  {}",
            e.name,
            e.family.clone().unwrap_or_else(dash),
            e.parameter_size.clone().unwrap_or_else(dash),
            e.quantization.clone().unwrap_or_else(dash),
            e.size.map(bytes_h).unwrap_or_else(dash),
            e.context_length.map(|c| c.to_string()).unwrap_or_else(dash),
            caps
        );
    }
    Ok(())
}

#[derive(serde::Serialize)]
struct LayerRow {
    index: usize,
    kind: &'static str,
    head_dim: usize,
    kv_heads: usize,
    ffn: usize,
    v: bool,
    kv_donor: Option<usize>,
}

pub fn info(store: &StoreOptions, model: &str, as_json: bool) -> Result<()> {
    let (r, f) = open(store, model)?;
    let cfg = Config::from_gguf(&f);
    let mut census: Vec<(GgmlType, usize, u64)> = Vec::new();
    for t in &f.tensors {
        match census.iter_mut().find(|c| c.0 == t.ty) {
            Some(c) => {
                c.1 += 1;
                c.2 += t.n_bytes;
            }
            None => census.push((t.ty, 1, t.n_bytes)),
        }
    }
    census.sort_by_key(|c| std::cmp::Reverse(c.2));
    let layers: Vec<LayerRow> = cfg
        .as_ref()
        .map(|c| {
            c.layers
                .iter()
                .map(|l| LayerRow {
                    index: l.index,
                    kind: l.kind.name(),
                    head_dim: l.head_dim,
                    kv_heads: l.n_kv_heads,
                    ffn: l.ffn_width,
                    v: l.has_v,
                    kv_donor: l.kv_donor,
                })
                .collect()
        })
        .unwrap_or_default();
    if as_json {
        let meta: serde_json::Map<String, serde_json::Value> = f
            .metadata
            .iter()
            .filter(|(k, _)| !k.starts_with("tokenizer.ggml.") || !matches!(k.as_str(), "tokenizer.ggml.tokens" | "tokenizer.ggml.scores" | "tokenizer.ggml.token_type" | "tokenizer.ggml.merges"))
            .map(|(k, v)| (k.clone(), serde_json::to_value(v).unwrap_or_default()))
            .collect();
        let census: Vec<_> = census
            .iter()
            .map(|(t, n, b)| serde_json::json!({"type": t.name(), "tensors": n, "bytes": b}))
            .collect();
        return json(&serde_json::json!({
            "entry": r.entry,
            "gguf_version": f.version,
            "metadata": meta,
            "tensor_types": census,
            "layers": layers,
            "config_error": cfg.as_ref().err().map(|e| e.to_string()),
        }));
    }
    let e = &r.entry;
    println!("{}", e.name);
    println!("  file          {}", r.gguf.display());
    println!("  architecture  {}", e.architecture.as_deref().unwrap_or("?"));
    println!("  parameters    {}", e.parameter_size.as_deref().unwrap_or("?"));
    println!("  quantization  {}", e.quantization.as_deref().unwrap_or("?"));
    println!("  size          {}", e.size.map(bytes_h).unwrap_or_default());
    println!("  context       {}", e.context_length.map(|c| c.to_string()).unwrap_or_default());
    println!("  capabilities  {}", e.capabilities.join(", "));
    println!("  status        {}", e.status);
    if let Ok(need) = rullama::gpu::forward::estimate_bytes(&f, 4096) {
        println!("  GPU memory    {} for a 4096-token context", bytes_h(need));
    }
    println!("metadata ({} keys, GGUF v{}):", f.metadata.len(), f.version);
    for (k, v) in &f.metadata {
        println!("  {k} = {}", v.summary());
    }
    println!("tensor types ({} tensors):", f.tensors.len());
    for (t, n, b) in &census {
        println!("  {:<6} {:>5} tensors {:>10}", t.name(), n, bytes_h(*b));
    }
    match &cfg {
        Ok(c) => {
            println!(
                "layers: {} × d{} ({} heads; window {}; {} KV-shared)",
                c.n_layers, c.hidden, c.n_heads, c.sliding_window, c.shared_kv_layers
            );
            for l in &layers {
                let donor = l.kv_donor.map(|d| format!("KV from {d}")).unwrap_or_default();
                let v = if l.v { "" } else { "V=K " };
                println!("  {:>3} {:<14} hd {:>3}  kv {:>2}  ffn {:>6}  {v}{donor}", l.index, l.kind, l.head_dim, l.kv_heads, l.ffn);
            }
        }
        Err(e) => println!("layers: not available ({e})"),
    }
    Ok(())
}

pub fn import(store: &StoreOptions, file: &Path, name: Option<&str>) -> Result<()> {
    let list = store
        .imported_list_path()
        .ok_or_else(|| Error::Store("no app data directory for the imported-models list".into()))?;
    let f = imported::add(&list, file, name)?;
    println!("imported {} → {}", f.name, f.path.display());
    Ok(())
}

pub fn forget(store: &StoreOptions, model: &str) -> Result<()> {
    let list = store
        .imported_list_path()
        .ok_or_else(|| Error::Store("no app data directory for the imported-models list".into()))?;
    let f = imported::remove(&list, model)?;
    println!("forgot {} (the file {} is untouched)", f.name, f.path.display());
    Ok(())
}

pub fn tokenize(store: &StoreOptions, model: &str, text: &str, bos: bool) -> Result<()> {
    let (_, f) = open(store, model)?;
    let tok = Tokenizer::from_gguf(&f)?;
    let ids = if bos { tok.encode_with_bos(text) } else { tok.encode(text) };
    json(&ids)
}

/// `one_by_one`: each token in a forward pass of its own (the decode path).
pub fn logits(store: &StoreOptions, model: &str, tokens: &[u32], out: &Path, backend: Backend, one_by_one: bool, prefill: PrefillPrecision) -> Result<()> {
    if tokens.is_empty() {
        return Err(Error::Input("--tokens is empty".into()));
    }
    let (_, f) = open(store, model)?;
    let mut m = backend.load(f, &mut |_| {})?;
    m.set_prefill_precision(prefill);
    let vocab = m.config().vocab;
    let mut cache = m.new_cache(tokens.len());
    let no = AtomicBool::new(false);
    let l = match one_by_one {
        false => TextModel::forward(&m, tokens, &mut cache, Logits::All, &no)?,
        true => {
            let mut l = Vec::with_capacity(tokens.len() * vocab);
            for t in tokens {
                l.extend(TextModel::forward(&m, std::slice::from_ref(t), &mut cache, Logits::Last, &no)?);
            }
            l
        }
    };
    rullama::npy::write_f32(out, &[tokens.len(), vocab], &l)
}

pub fn run(store: &StoreOptions, a: &RunArgs) -> Result<()> {
    if a.prompt.trim().is_empty() {
        return Err(Error::Input("the prompt is empty".into()));
    }
    let (r, f) = open(store, &a.model)?;
    let tok = Tokenizer::from_gguf(&f)?;
    let mut m = match a.backend {
        Some(b) => b.load(f.clone(), &mut |_| {})?,
        None => rullama::runtime::backend::gpu_or_cpu(|b, passed_over| {
            if let Some(why) = passed_over {
                eprintln!("note: no GPU for this model ({why}); running on the CPU reference");
            }
            b.load(f.clone(), &mut |_| {})
        })?,
    };
    m.set_kv_cache_type(a.kv_cache);
    m.set_prefill_precision(a.prefill_precision);
    let cfg = m.config();
    let prompt = if a.raw || !is_chat_model(&f) {
        if !a.raw {
            eprintln!("note: {} is a base model (no chat template); continuing the prompt as plain text", r.entry.name);
        }
        tok.encode_with_bos(&a.prompt)
    } else {
        let template = Template::for_model(cfg.arch.name(), &r.entry.name, r.entry.parameters)?;
        let mut messages = Vec::new();
        if let Some(s) = a.system.as_deref().or(r.system.as_deref()) {
            messages.push(Message::system(s));
        }
        messages.push(Message::user(a.prompt.as_str()));
        let text = template.render(&messages, &RenderOptions { thinking: a.think, ..Default::default() })?;
        tok.encode(&text)
    };
    let ctx = a.ctx.unwrap_or(4096).min(cfg.context_length.max(1));
    let opts = GenerateOptions {
        max_tokens: a.max_tokens,
        sampling: SamplingOptions {
            temperature: a.temperature,
            top_k: a.top_k,
            top_p: a.top_p,
            min_p: a.min_p,
            repeat_penalty: a.repeat_penalty,
            seed: a.seed,
            ..Default::default()
        },
    };
    let cancel = AtomicBool::new(false);
    let mut stdout = std::io::stdout().lock();
    let stats = generate(&m, &tok, &prompt, ctx, &opts, &cancel, |ev| {
        let _ = stdout.write_all(ev.text.as_bytes());
        let _ = stdout.flush();
    })?;
    println!();
    if a.verbose {
        eprintln!(
            "{}: prompt {} tokens in {:.2?} ({:.1} tok/s); reply {} tokens in {:.2?} ({:.1} tok/s); stop: {:?}",
            m.device_name(),
            stats.prompt_tokens,
            stats.prefill,
            stats.prefill_tok_s(),
            stats.generated_tokens,
            stats.decode,
            stats.decode_tok_s(),
            stats.stop
        );
    }
    Ok(())
}

#[derive(clap::Args)]
pub struct BenchArgs {
    #[arg(long)]
    pub model: String,
    #[arg(long, default_value_t = 512)]
    pub prompt_tokens: usize,
    #[arg(long, default_value_t = 128)]
    pub gen_tokens: usize,
    #[arg(long, default_value = "gpu")]
    pub backend: Backend,
    /// How the KV cache stores K and V (f16: half the GPU memory).
    #[arg(long, value_enum, default_value = "f32")]
    pub kv_cache: KvCacheType,
    /// Prefill's products on tensor cores: f32-accurate, or of f16-rounded inputs (faster
    /// prompts, logits further from the reference).
    #[arg(long, value_enum, default_value = "f32")]
    pub prefill_precision: PrefillPrecision,
    /// Repetitions; the best run is reported.
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Untimed runs before the repetitions, as llama-bench makes one: the first run
    /// compiles the GPU kernels it meets and finds the GPU at idle clocks, which put it
    /// at half the speed of the next on an H100 and skewed medians and means.
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// Decode with temperature sampling (with --top-k) instead of greedy (0).
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f32,
    /// Candidates temperature sampling draws from (the app's default: 64).
    #[arg(long, default_value_t = 64)]
    pub top_k: usize,
    #[arg(long)]
    pub json: bool,
}

#[derive(serde::Serialize)]
struct BenchReport {
    model: String,
    backend: String,
    device: String,
    load_s: f64,
    prompt_tokens: usize,
    gen_tokens: usize,
    prefill_tok_s: f64,
    ttft_ms: f64,
    decode_tok_s: f64,
    decode_ms_per_token: f64,
    weight_bytes: u64,
    cache_bytes: u64,
    /// Tables and scratch the GPU kernels made during the run (tensor-core prefill's splits).
    scratch_bytes: u64,
    /// Untimed runs made before the repetitions.
    warmup: usize,
    /// What prefill's tensor-core products were set to (`--prefill-precision`).
    prefill_precision: PrefillPrecision,
    /// Every repetition's figures, in order (the ones above are the best of them), so a
    /// comparison can take the same statistic from each engine (scripts/compare-llama-cpp).
    prefill_tok_s_reps: Vec<f64>,
    decode_tok_s_reps: Vec<f64>,
}

/// The median of `v` (the mean of the middle two for an even count).
fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

pub fn bench(store: &StoreOptions, a: &BenchArgs) -> Result<()> {
    let (r, f) = open(store, &a.model)?;
    let t0 = std::time::Instant::now();
    let mut m = a.backend.load(f, &mut |_| {})?;
    m.set_kv_cache_type(a.kv_cache);
    m.set_prefill_precision(a.prefill_precision);
    let load_s = t0.elapsed().as_secs_f64();
    let cfg = m.config().clone();
    // Ordinary-token ids spread over the vocabulary (no control tokens).
    let first = 1000.min(cfg.vocab / 2);
    let prompt: Vec<u32> = (0..a.prompt_tokens).map(|i| (first + (i * 7919) % (cfg.vocab - first)) as u32).collect();
    // The prompt and the gen_tokens steps the decode below times (the first token comes
    // from the prompt): no room for a step past them, which the GPU's decode would otherwise
    // run ahead and, in a group of steps, wait for.
    let ctx = a.prompt_tokens + a.gen_tokens;
    let cancel = AtomicBool::new(false);
    let (mut ttfts, mut decodes) = (Vec::new(), Vec::new());
    for rep in 0..a.warmup + a.reps.max(1) {
        let mut cache = m.new_cache(ctx);
        let opts = match a.temperature > 0.0 {
            true => SamplingOptions { temperature: a.temperature, top_k: a.top_k, seed: 1, ..SamplingOptions::default() },
            false => SamplingOptions::greedy(),
        };
        let mut sampler = rullama::runtime::Sampler::new(opts);
        let t = std::time::Instant::now();
        let id = m.next_token(&prompt, &mut cache, &mut sampler, &prompt, &cancel)?;
        let ttft = t.elapsed().as_secs_f64();
        let t = std::time::Instant::now();
        // Keep decoding whatever comes out (end-of-turn included) until gen_tokens are made.
        let mut made = 0;
        m.decode(id, &mut cache, &mut sampler, &prompt, &cancel, &mut |_| {
            made += 1;
            Ok(made <= a.gen_tokens)
        })?;
        if rep >= a.warmup {
            ttfts.push(ttft);
            decodes.push(t.elapsed().as_secs_f64());
        }
    }
    let ttft = ttfts.iter().copied().fold(f64::MAX, f64::min);
    let decode = decodes.iter().copied().fold(f64::MAX, f64::min);
    let report = BenchReport {
        model: r.entry.name.clone(),
        backend: format!("{:?}", a.backend).to_lowercase(),
        device: m.device_name(),
        load_s,
        prompt_tokens: a.prompt_tokens,
        gen_tokens: a.gen_tokens,
        prefill_tok_s: a.prompt_tokens as f64 / ttft,
        ttft_ms: ttft * 1e3,
        decode_tok_s: a.gen_tokens as f64 / decode,
        decode_ms_per_token: decode * 1e3 / a.gen_tokens.max(1) as f64,
        weight_bytes: m.weight_bytes(),
        cache_bytes: m.cache_bytes(ctx),
        scratch_bytes: m.scratch_bytes(),
        warmup: a.warmup,
        prefill_precision: a.prefill_precision,
        prefill_tok_s_reps: ttfts.iter().map(|t| a.prompt_tokens as f64 / t).collect(),
        decode_tok_s_reps: decodes.iter().map(|t| a.gen_tokens as f64 / t).collect(),
    };
    if std::env::var("RULLAMA_PROFILE").is_ok_and(|v| v == "kernels") {
        eprintln!("{}", rullama::gpu::kernel::kernel_profile_report());
    }
    if a.json {
        return json(&report);
    }
    println!(
        "{} on {} ({}): load {:.2} s | prefill {} tok{}: {:.1} tok/s (TTFT {:.1} ms) | decode {} tok: {:.1} tok/s ({:.2} ms/tok) | best of {} after {} untimed run{}; medians {:.1} / {:.1} tok/s | GPU memory ≈ {} weights + {} cache/activations + {} scratch",
        report.model,
        report.device,
        report.backend,
        report.load_s,
        report.prompt_tokens,
        if report.prefill_precision == PrefillPrecision::F16 { " (f16 products)" } else { "" },
        report.prefill_tok_s,
        report.ttft_ms,
        report.gen_tokens,
        report.decode_tok_s,
        report.decode_ms_per_token,
        report.decode_tok_s_reps.len(),
        report.warmup,
        if report.warmup == 1 { "" } else { "s" },
        median(&report.prefill_tok_s_reps),
        median(&report.decode_tok_s_reps),
        bytes_h(report.weight_bytes),
        bytes_h(report.cache_bytes),
        bytes_h(report.scratch_bytes)
    );
    Ok(())
}

pub fn synth(arch: &str, preset: &str, quant: &str, out: &Path) -> Result<()> {
    if !quant.eq_ignore_ascii_case("q4_k_m") {
        return Err(Error::Input(format!("quantization {quant} is not available; use q4_k_m")));
    }
    let p = rullama::synth::preset(arch, preset)?;
    rullama::synth::write(&p, out)?;
    println!("wrote {} ({})", out.display(), bytes_h(std::fs::metadata(out).map(|m| m.len()).unwrap_or(0)));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_of_odd_even_and_unsorted_runs() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[7.5]), 7.5);
        assert_eq!(median(&[]), 0.0);
    }
}
