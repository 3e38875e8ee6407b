//! `rullama`: the command-line face of the engine.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cli;

#[derive(Parser)]
#[command(name = "rullama", version, about = "Run Gemma 3/4 models from your Ollama store, locally")]
struct Cli {
    /// Ollama models directory (default: $OLLAMA_MODELS, ~/.ollama/models and the Linux service path).
    #[arg(long, global = true, value_name = "DIR")]
    ollama_dir: Option<Vec<PathBuf>>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the models in the Ollama store and the imported GGUF files.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Describe a model: metadata, layer plan, tensor types.
    Info {
        /// An Ollama name (`gemma4:e2b`), an imported name, or a GGUF file path.
        model: String,
        #[arg(long)]
        json: bool,
    },
    /// Add a GGUF file to the catalog (nothing is copied).
    Import {
        file: PathBuf,
        /// Name to list it under (default: the file name).
        #[arg(long)]
        name: Option<String>,
    },
    /// Remove an imported model from the catalog (the file is kept).
    Forget { model: String },
    /// Tokenize text; prints a JSON array of ids.
    Tokenize {
        #[arg(long)]
        model: String,
        #[arg(long)]
        text: String,
        /// Prepend the model's BOS token.
        #[arg(long)]
        bos: bool,
    },
    /// Teacher-forced logits of a token sequence, saved as float32 [n_tokens, vocab] .npy.
    Logits {
        #[arg(long)]
        model: String,
        /// Comma-separated token ids.
        #[arg(long, value_delimiter = ',')]
        tokens: Vec<u32>,
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value = "cpu")]
        backend: cli::Backend,
        /// One token at a time (the decode path) instead of the whole sequence at once.
        #[arg(long)]
        one_by_one: bool,
        /// Prefill's products on tensor cores: f32-accurate, or of f16-rounded inputs.
        #[arg(long, value_enum, default_value = "f32")]
        prefill_precision: cli::PrefillPrecision,
    },
    /// Answer one prompt, streaming the reply to stdout.
    Run(cli::RunArgs),
    /// Measure load time, prefill and decode speed.
    Bench(cli::BenchArgs),
    /// Write a full-size random-weight model (same layout and tensor types as the published files).
    Synth {
        #[arg(long, default_value = "gemma4")]
        arch: String,
        /// e2b, e4b, 26b-a4b (gemma4); 270m (gemma3)
        #[arg(long)]
        preset: String,
        #[arg(long, default_value = "q4_k_m")]
        quant: String,
        #[arg(long)]
        out: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let store = rullama::store::StoreOptions { ollama_dirs: cli.ollama_dir, imported_list: None };
    let result = match cli.command {
        Command::List { json } => cli::list(&store, json),
        Command::Info { model, json } => cli::info(&store, &model, json),
        Command::Import { file, name } => cli::import(&store, &file, name.as_deref()),
        Command::Forget { model } => cli::forget(&store, &model),
        Command::Tokenize { model, text, bos } => cli::tokenize(&store, &model, &text, bos),
        Command::Logits { model, tokens, out, backend, one_by_one, prefill_precision } => cli::logits(&store, &model, &tokens, &out, backend, one_by_one, prefill_precision),
        Command::Run(args) => cli::run(&store, &args),
        Command::Bench(args) => cli::bench(&store, &args),
        Command::Synth { arch, preset, quant, out } => cli::synth(&arch, &preset, &quant, &out),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
