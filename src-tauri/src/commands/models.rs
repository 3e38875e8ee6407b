use std::path::PathBuf;

use rullama::store::ModelEntry;
use tauri::ipc::Channel;

use super::{AppState, blocking};
use crate::error::AppResult;
use crate::services::engine::LoadProgress;
use crate::services::worker::LoadedModel;

#[tauri::command]
pub async fn list_models(state: AppState<'_>) -> AppResult<Vec<ModelEntry>> {
    blocking(state, |s| s.models.list()).await
}

#[tauri::command]
pub async fn import_model(state: AppState<'_>, path: String) -> AppResult<ModelEntry> {
    blocking(state, move |s| s.models.import(&PathBuf::from(path))).await
}

#[tauri::command]
pub async fn forget_model(state: AppState<'_>, name: String) -> AppResult<()> {
    blocking(state, move |s| s.models.forget(&name)).await
}

#[tauri::command]
pub async fn load_model(state: AppState<'_>, name: String, on_progress: Channel<LoadProgress>) -> AppResult<LoadedModel> {
    blocking(state, move |s| {
        s.models.load(&name, Box::new(move |p| {
            let _ = on_progress.send(p);
        }))
    })
    .await
}

#[tauri::command]
pub async fn unload_model(state: AppState<'_>) -> AppResult<()> {
    blocking(state, |s| s.models.unload()).await
}

#[tauri::command]
pub async fn current_model(state: AppState<'_>) -> AppResult<Option<LoadedModel>> {
    blocking(state, |s| Ok(s.models.current())).await
}

/// A native file dialog for choosing a GGUF file to import; `None` when cancelled.
#[tauri::command]
pub async fn pick_gguf_file(app: tauri::AppHandle) -> AppResult<Option<String>> {
    crate::dialog::pick_gguf(app).await
}

/// A native save dialog for an export; writes `content` where the person chooses. `None`
/// when cancelled.
#[tauri::command]
pub async fn save_text_file(app: tauri::AppHandle, suggested_name: String, content: String) -> AppResult<Option<String>> {
    crate::dialog::save_text(app, suggested_name, content).await
}
