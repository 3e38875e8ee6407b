//! The model catalog: every model in the Ollama stores plus the imported GGUF files, listed
//! with their facts, and name → files resolution for loading.
//!
//! Listing never fails because of one bad model: a broken manifest, a missing blob or a
//! corrupt GGUF becomes an entry whose status says what is wrong.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::entry::{ModelEntry, Source, modified_secs};
use super::imported::{ImportedFile, ImportedList, default_list_path};
use super::name::ModelName;
use super::ollama::{LayerKind, ManifestRef, ModelConfig, OllamaStore, RootEnv, read_capped};
use super::status::Problem;
use crate::{Error, Result};

/// Text layers (template, system prompt, params, license) are small; this bounds a hostile one.
const TEXT_LAYER_CAP: u64 = 4 << 20;

#[derive(Debug, Clone, Default)]
pub struct StoreOptions {
    /// Ollama model roots to scan, in order (`--ollama-dir`). When set, the environment is
    /// not consulted and each directory must exist.
    pub ollama_dirs: Option<Vec<PathBuf>>,
    /// The imported-models list file; default `imported::default_list_path()`.
    pub imported_list: Option<PathBuf>,
}

impl StoreOptions {
    /// The roots that will be scanned: the explicit ones, else `$OLLAMA_MODELS` or
    /// `~/.ollama/models`, plus the Linux service store when readable.
    pub fn roots(&self) -> Vec<PathBuf> {
        self.ollama_dirs.clone().unwrap_or_else(|| RootEnv::from_system().roots())
    }

    pub fn imported_list_path(&self) -> Option<PathBuf> {
        self.imported_list.clone().or_else(default_list_path)
    }
}

/// Everything needed to load a model: the GGUF and the manifest's other layers, with the
/// small text layers already read.
#[derive(Debug, Clone, Serialize)]
pub struct ResolvedModel {
    pub entry: ModelEntry,
    pub gguf: PathBuf,
    /// Separate multimodal projector GGUFs (older Ollama models; Gemma 4 has none).
    pub projectors: Vec<PathBuf>,
    /// LoRA adapter GGUFs.
    pub adapters: Vec<PathBuf>,
    /// Go text/template prompt template.
    pub template: Option<String>,
    /// Default system prompt.
    pub system: Option<String>,
    /// Default options, e.g. `{"stop": ["<turn|>"]}`.
    pub params: Option<serde_json::Value>,
    /// Few-shot messages.
    pub messages: Option<serde_json::Value>,
    pub licenses: Vec<String>,
    pub config: Option<ModelConfig>,
}

/// Blob paths of an Ollama model's layers, checked at discovery.
#[derive(Debug, Clone, Default)]
struct Layers {
    projectors: Vec<PathBuf>,
    adapters: Vec<PathBuf>,
    template: Option<PathBuf>,
    system: Option<PathBuf>,
    params: Option<PathBuf>,
    messages: Option<PathBuf>,
    licenses: Vec<PathBuf>,
    config: Option<ModelConfig>,
}

#[derive(Debug, Clone)]
struct Record {
    entry: ModelEntry,
    /// The Ollama name, for matching `gemma4` against `gemma4:latest` and full host paths.
    ollama_name: Option<ModelName>,
    layers: Layers,
}

#[derive(Debug, Clone)]
pub struct Catalog {
    entries: Vec<ModelEntry>,
    records: Vec<Record>,
    roots: Vec<PathBuf>,
    imported_list: Option<PathBuf>,
    warnings: Vec<String>,
}

impl Catalog {
    /// Scan the Ollama roots and the imported list. Fails only when an explicitly given
    /// directory does not exist or cannot be read; everything else is in the entries'
    /// statuses or in `warnings()`.
    pub fn discover(opts: &StoreOptions) -> Result<Catalog> {
        let explicit = opts.ollama_dirs.is_some();
        let roots = opts.roots();
        let mut warnings = Vec::new();
        let mut records = Vec::new();
        for root in &roots {
            match OllamaStore::open(root) {
                Ok(Some(store)) => {
                    for m in store.manifests(&mut warnings) {
                        records.push(ollama_record(&store, m));
                    }
                }
                Ok(None) if explicit => {
                    return Err(Error::Store(format!("the models directory {} does not exist", root.display())));
                }
                Ok(None) => {}
                Err(e) if explicit => return Err(Error::io(root, e)),
                Err(e) => warnings.push(format!("skipping Ollama store {}: {e}", root.display())),
            }
        }

        let imported_list = opts.imported_list_path();
        if let Some(list) = &imported_list {
            match ImportedList::load(list) {
                Ok(list) => records.extend(list.files.iter().map(imported_record)),
                Err(e) => warnings.push(e.to_string()),
            }
        }

        // Stable sort: models of the same name in several roots keep the roots' order,
        // which is the order `resolve` prefers them in.
        records.sort_by(|a, b| (a.entry.source as u8, &a.entry.name).cmp(&(b.entry.source as u8, &b.entry.name)));
        let entries = records.iter().map(|r| r.entry.clone()).collect();
        Ok(Catalog { entries, records, roots, imported_list, warnings })
    }

    pub fn entries(&self) -> &[ModelEntry] {
        &self.entries
    }

    /// The Ollama roots that were considered (existing or not).
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    pub fn imported_list(&self) -> Option<&Path> {
        self.imported_list.as_deref()
    }

    /// Non-fatal problems met while scanning (unreadable directories, a bad imported list).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Find a model by listed name (`gemma4:e2b`, an imported name), by Ollama name with
    /// defaults filled (`gemma4` is `gemma4:latest`; `registry.ollama.ai/library/gemma4:e2b`),
    /// or by the path of a GGUF file. A broken model is an error saying why.
    pub fn resolve(&self, query: &str) -> Result<ResolvedModel> {
        let by_name: Vec<&Record> = self.records.iter().filter(|r| r.entry.name == query).collect();
        let by_ollama_name: Vec<&Record> = match ModelName::parse(query) {
            Some(n) => self.records.iter().filter(|r| r.ollama_name.as_ref().is_some_and(|o| o.matches(&n))).collect(),
            None => Vec::new(),
        };
        let found = [by_name, by_ollama_name]
            .into_iter()
            .find(|c| !c.is_empty())
            .map(|c| c.iter().find(|r| r.entry.status.is_ok()).copied().unwrap_or(c[0]).clone());
        let record = match found {
            Some(r) => r,
            None => self.resolve_path(query)?,
        };
        load_record(record)
    }

    /// A path to a GGUF file: its imported entry if it was imported, else a one-off entry.
    fn resolve_path(&self, query: &str) -> Result<Record> {
        let path = Path::new(query);
        let canonical = fs::canonicalize(path).map_err(|_| Error::ModelNotFound(query.to_string()))?;
        if !canonical.is_file() {
            return Err(Error::ModelNotFound(query.to_string()));
        }
        let imported = self
            .records
            .iter()
            .find(|r| r.entry.source == Source::Imported && r.entry.path.as_deref() == Some(canonical.as_path()));
        Ok(match imported {
            Some(r) => r.clone(),
            None => file_record(&canonical, Source::File, canonical.display().to_string()),
        })
    }
}

fn ollama_record(store: &OllamaStore, m: ManifestRef) -> Record {
    let mut entry = ModelEntry::new(m.name.to_string(), Source::Ollama);
    entry.manifest = Some(m.path.clone());
    entry.modified = modified_secs(&m.path);
    let mut layers = Layers::default();
    let record = |entry, layers| Record { entry, ollama_name: Some(m.name.clone()), layers };

    let manifest = match store.read_manifest(&m.path) {
        Ok(manifest) => manifest,
        Err(p) => {
            entry.flag(p);
            return record(entry, layers);
        }
    };
    let config = manifest.config.as_ref().and_then(|l| store.read_config(l).map_err(|p| entry.flag(p)).ok());
    entry.family = config.as_ref().and_then(|c| c.model_family.clone());

    if manifest.model_layer().is_none() {
        // A safetensors (MLX) model is a manifest of per-tensor layers; its blobs are not
        // checked one by one since rullama cannot run it anyway.
        let format = config.as_ref().and_then(|c| c.model_format.clone()).filter(|f| f != "gguf").or_else(|| {
            let tensors = manifest.layers.iter().any(|l| l.media_type == "application/vnd.ollama.image.tensor");
            tensors.then(|| "safetensors".to_string())
        });
        entry.flag(match format {
            Some(format) => Problem::UnsupportedFormat { format },
            None => Problem::MissingModelLayer,
        });
        layers.config = config;
        return record(entry, layers);
    }

    // Every layer is checked: Ollama itself refuses a model with any blob missing.
    let mut model = None;
    for layer in &manifest.layers {
        let path = match store.blob(layer) {
            Ok(path) => path,
            Err(p) => {
                entry.flag(p);
                continue;
            }
        };
        // A later layer of a single-valued kind replaces an earlier one, as in Ollama.
        match layer.kind() {
            LayerKind::Model => model = Some(path),
            LayerKind::Projector => layers.projectors.push(path),
            LayerKind::Adapter => layers.adapters.push(path),
            LayerKind::Template => layers.template = Some(path),
            LayerKind::System => layers.system = Some(path),
            LayerKind::Params => layers.params = Some(path),
            LayerKind::Messages => layers.messages = Some(path),
            LayerKind::License => layers.licenses.push(path),
            LayerKind::Other => {}
        }
    }
    if let Some(model) = model {
        entry.describe(&model, config.as_ref(), !layers.projectors.is_empty());
    }
    layers.config = config;
    record(entry, layers)
}

fn imported_record(f: &ImportedFile) -> Record {
    file_record(&f.path, Source::Imported, f.name.clone())
}

fn file_record(path: &Path, source: Source, name: String) -> Record {
    let mut entry = ModelEntry::new(name, source);
    match fs::metadata(path) {
        Ok(_) => {
            entry.modified = modified_secs(path);
            entry.describe(path, None, false);
        }
        Err(e) => {
            entry.path = Some(path.to_path_buf());
            entry.flag(match e.kind() {
                std::io::ErrorKind::NotFound => Problem::MissingFile { path: path.to_path_buf() },
                _ => Problem::Unreadable { path: path.to_path_buf(), detail: e.to_string() },
            });
        }
    }
    Record { entry, ollama_name: None, layers: Layers::default() }
}

fn load_record(r: Record) -> Result<ResolvedModel> {
    if let Some(problem) = r.entry.status.problem() {
        return Err(Error::Store(format!("{} cannot be used: {problem}", r.entry.name)));
    }
    let gguf = r.entry.path.clone().ok_or_else(|| Error::Store(format!("{} has no model file", r.entry.name)))?;
    let l = r.layers;
    let text = |p: &Option<PathBuf>| p.as_deref().map(read_text).transpose();
    let json = |p: &Option<PathBuf>| -> Result<Option<serde_json::Value>> {
        p.as_deref()
            .map(|p| {
                serde_json::from_str(&read_text(p)?)
                    .map_err(|e| Error::Store(format!("layer {} is not valid JSON: {e}", p.display())))
            })
            .transpose()
    };
    Ok(ResolvedModel {
        template: text(&l.template)?,
        system: text(&l.system)?,
        params: json(&l.params)?,
        messages: json(&l.messages)?,
        licenses: l.licenses.iter().map(|p| read_text(p)).collect::<Result<_>>()?,
        projectors: l.projectors,
        adapters: l.adapters,
        config: l.config,
        gguf,
        entry: r.entry,
    })
}

fn read_text(path: &Path) -> Result<String> {
    let bytes =
        read_capped(path, TEXT_LAYER_CAP).map_err(|e| Error::Store(format!("layer {}: {e}", path.display())))?;
    String::from_utf8(bytes).map_err(|_| Error::Store(format!("layer {} is not UTF-8 text", path.display())))
}
