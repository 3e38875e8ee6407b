use super::{AppState, blocking};
use crate::error::AppResult;
use crate::services::settings::Settings;

#[tauri::command]
pub async fn get_settings(state: AppState<'_>) -> AppResult<Settings> {
    blocking(state, |s| Ok(s.settings.get())).await
}

#[tauri::command]
pub async fn set_settings(state: AppState<'_>, settings: Settings) -> AppResult<()> {
    blocking(state, move |s| s.settings.set(settings)).await
}

/// GPU adapter names for the settings page (empty while the app runs on the CPU engine).
#[tauri::command]
pub async fn list_adapters(state: AppState<'_>) -> AppResult<Vec<String>> {
    blocking(state, |s| Ok(s.models.adapters())).await
}
