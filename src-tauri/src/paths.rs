//! Where the app keeps its files: one data directory holding the chat database, the
//! settings file and the list of imported models.

use std::path::{Path, PathBuf};

use crate::error::{AppError, AppResult};

/// Overrides the data directory (tests and the end-to-end suite use throwaway ones).
pub const DATA_DIR_ENV: &str = "RULLAMA_DATA_DIR";

#[derive(Debug, Clone)]
pub struct AppPaths {
    data_dir: PathBuf,
}

impl AppPaths {
    pub fn new(data_dir: impl Into<PathBuf>) -> AppPaths {
        AppPaths { data_dir: data_dir.into() }
    }

    /// `$RULLAMA_DATA_DIR`, else the platform data dir (`~/.local/share/rullama` on Linux),
    /// the same directory the `rullama` CLI keeps its imported-models list in.
    pub fn from_env() -> AppResult<AppPaths> {
        if let Some(dir) = std::env::var_os(DATA_DIR_ENV).filter(|d| !d.is_empty()) {
            return Ok(AppPaths::new(dir));
        }
        directories::ProjectDirs::from("", "", "rullama")
            .map(|d| AppPaths::new(d.data_dir()))
            .ok_or_else(|| AppError::Io("Cannot find a home directory to keep the app's data in.".into()))
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    pub fn ensure(&self) -> AppResult<()> {
        std::fs::create_dir_all(&self.data_dir)
            .map_err(|e| AppError::io(format!("create the data directory {}", self.data_dir.display()), e))
    }

    pub fn database(&self) -> PathBuf {
        self.data_dir.join("rullama.db")
    }

    pub fn settings(&self) -> PathBuf {
        self.data_dir.join("settings.json")
    }

    pub fn imported_list(&self) -> PathBuf {
        self.data_dir.join("imported.json")
    }
}
