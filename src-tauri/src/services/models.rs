//! Models: the catalog (Ollama's store, read in place, plus imported GGUF files), import and
//! forget, and loading through the model worker.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rullama::store::{Catalog, ModelEntry, Source, StoreOptions, imported};

use super::engine::{Engine, LoadProgress};
use super::worker::{LoadedModel, Worker};
use crate::error::{AppError, AppResult};
use crate::paths::AppPaths;

/// Where `scripts/demo-model` puts the real Gemma 3 270M, and the name it is listed under.
pub const DEMO_FILE: &str = "models/gemma-3-270m-q4_k_m.gguf";
pub const DEMO_NAME: &str = "gemma3:270m";

pub struct ModelService {
    data_dir: PathBuf,
    imported_list: PathBuf,
    /// `None`: `$OLLAMA_MODELS`, else `~/.ollama/models` and the Linux service store.
    ollama_dirs: Option<Vec<PathBuf>>,
    worker: Arc<Worker>,
    engine: Arc<dyn Engine>,
}

impl ModelService {
    pub fn new(paths: &AppPaths, ollama_dirs: Option<Vec<PathBuf>>, worker: Arc<Worker>, engine: Arc<dyn Engine>) -> Self {
        ModelService { data_dir: paths.data_dir().to_path_buf(), imported_list: paths.imported_list(), ollama_dirs, worker, engine }
    }

    /// List the demo model when its file is in the data dir but not imported yet (it was
    /// fetched without `scripts/demo-model` importing it, or the list was reset).
    pub fn adopt_demo_model(&self) -> AppResult<bool> {
        let file = self.data_dir.join(DEMO_FILE);
        if !file.is_file() {
            return Ok(false);
        }
        let canonical = std::fs::canonicalize(&file).map_err(|e| AppError::io(format!("read {}", file.display()), e))?;
        let list = imported::ImportedList::load(&self.imported_list)?;
        if list.files.iter().any(|f| f.path == canonical || f.name == DEMO_NAME) {
            return Ok(false);
        }
        imported::add(&self.imported_list, &file, Some(DEMO_NAME))?;
        Ok(true)
    }

    fn catalog(&self) -> AppResult<Catalog> {
        let opts = StoreOptions { ollama_dirs: self.ollama_dirs.clone(), imported_list: Some(self.imported_list.clone()) };
        Ok(Catalog::discover(&opts)?)
    }

    /// Every model, broken ones included (their status says why).
    pub fn list(&self) -> AppResult<Vec<ModelEntry>> {
        Ok(self.catalog()?.entries().to_vec())
    }

    /// Remember a GGUF file (it stays where it is) and return its entry.
    pub fn import(&self, path: &Path) -> AppResult<ModelEntry> {
        let added = imported::add(&self.imported_list, path, None)?;
        self.catalog()?
            .entries()
            .iter()
            .find(|e| e.source == Source::Imported && e.path.as_deref() == Some(added.path.as_path()))
            .cloned()
            .ok_or_else(|| AppError::NotFound(format!("{} was imported but is not in the model list.", path.display())))
    }

    /// Forget an imported model. Ollama's models belong to Ollama and are never removed here.
    pub fn forget(&self, name: &str) -> AppResult<()> {
        let catalog = self.catalog()?;
        let is_ollama = catalog.entries().iter().any(|e| e.name == name && e.source == Source::Ollama);
        let is_imported = catalog.entries().iter().any(|e| e.name == name && e.source == Source::Imported);
        if is_ollama && !is_imported {
            return Err(AppError::Invalid(format!(
                "{name} is in Ollama's model store, which this app only reads. Remove it with `ollama rm {name}`."
            )));
        }
        imported::remove(&self.imported_list, name)?;
        Ok(())
    }

    pub fn load(&self, name: &str, progress: Box<dyn FnMut(LoadProgress) + Send>) -> AppResult<LoadedModel> {
        let resolved = self.catalog()?.resolve(name)?;
        self.worker.load(resolved, progress)
    }

    pub fn unload(&self) -> AppResult<()> {
        self.worker.unload()
    }

    pub fn current(&self) -> Option<LoadedModel> {
        self.worker.current()
    }

    pub fn adapters(&self) -> Vec<String> {
        self.engine.adapters()
    }
}
