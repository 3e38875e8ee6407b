//! Plain Rust services behind the Tauri commands, usable and tested without Tauri.

pub mod chat;
pub mod engine;
pub mod generation;
pub mod history;
pub mod models;
pub mod settings;
pub mod stream;
pub mod worker;

#[cfg(test)]
pub mod script_engine;

use std::path::PathBuf;
use std::sync::Arc;

use self::chat::ChatService;
use self::engine::Engine;
use self::history::History;
use self::models::ModelService;
use self::settings::SettingsStore;
use self::worker::Worker;
use crate::error::AppResult;
use crate::paths::AppPaths;

/// Everything the commands use, built once at start-up.
pub struct Services {
    pub paths: AppPaths,
    pub history: Arc<History>,
    pub settings: Arc<SettingsStore>,
    pub worker: Arc<Worker>,
    pub models: ModelService,
    pub chat: ChatService,
    /// Replies a crash had left streaming, marked incomplete at start-up.
    pub recovered_replies: usize,
}

impl Services {
    pub fn open(paths: AppPaths, engine: Arc<dyn Engine>, ollama_dirs: Option<Vec<PathBuf>>) -> AppResult<Services> {
        paths.ensure()?;
        let (history, recovered_replies) = History::open(&paths.database())?;
        let history = Arc::new(history);
        let settings = Arc::new(SettingsStore::open(&paths.settings()));
        let worker = Arc::new(Worker::spawn(engine.clone()));
        let models = ModelService::new(&paths, ollama_dirs, worker.clone(), engine);
        // A missing or unreadable demo file only means it is not listed.
        let _ = models.adopt_demo_model();
        let chat = ChatService::new(history.clone(), worker.clone(), settings.clone());
        Ok(Services { paths, history, settings, worker, models, chat, recovered_replies })
    }
}
