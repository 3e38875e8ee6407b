//! Rullama desktop app: a Tauri shell over plain Rust services (`services`), exposed to
//! the web UI as commands (`commands`).

pub mod atomic;
pub mod commands;
mod dialog;
pub mod engine_local;
pub mod error;
pub mod paths;
pub mod services;

use std::sync::Arc;

use tauri::Manager;

use crate::paths::AppPaths;
use crate::services::Services;
use crate::services::settings::SettingsStore;

/// Build and run the app; returns when the last window closes. Call it from `main` before
/// any other thread starts.
pub fn run() {
    choose_adapter();
    let app = tauri::Builder::default()
        .setup(|app| {
            let paths = AppPaths::from_env()?;
            let services = Services::open(paths, Arc::new(engine_local::LocalEngine::from_env()), None)?;
            if services.recovered_replies > 0 {
                eprintln!("rullama: {} reply(s) cut off by an earlier crash were marked incomplete", services.recovered_replies);
            }
            if let Some(w) = services.settings.load_warning() {
                eprintln!("rullama: {w}");
            }
            app.manage(Arc::new(services));
            Ok(())
        })
        .invoke_handler(tauri::generate_handler![
            commands::models::list_models,
            commands::models::import_model,
            commands::models::forget_model,
            commands::models::load_model,
            commands::models::unload_model,
            commands::models::current_model,
            commands::models::pick_gguf_file,
            commands::models::save_text_file,
            commands::chat::list_chats,
            commands::chat::create_chat,
            commands::chat::get_chat,
            commands::chat::rename_chat,
            commands::chat::delete_chat,
            commands::chat::pin_chat,
            commands::chat::search_chats,
            commands::chat::update_chat_settings,
            commands::chat::send_message,
            commands::chat::regenerate,
            commands::chat::edit_message,
            commands::chat::stop_generation,
            commands::chat::export_chat,
            commands::chat::export_all,
            commands::chat::import_chats,
            commands::settings::get_settings,
            commands::settings::set_settings,
            commands::settings::list_adapters,
        ])
        .build(tauri::generate_context!());
    let app = match app {
        Ok(app) => app,
        Err(e) => {
            eprintln!("rullama: the app could not start: {e}");
            std::process::exit(1);
        }
    };
    app.run(|handle, event| {
        if let tauri::RunEvent::Exit = event
            && let Some(s) = handle.try_state::<Arc<Services>>()
        {
            // Stop a reply in progress so it is saved as incomplete, not left streaming.
            s.worker.shutdown();
        }
    });
}

/// Apply the GPU adapter chosen in Settings. The engine reads it once per process, so a
/// change takes effect at the next start; an explicit `RULLAMA_ADAPTER` wins.
fn choose_adapter() {
    if std::env::var_os("RULLAMA_ADAPTER").is_some() {
        return;
    }
    let Some(adapter) = AppPaths::from_env().ok().and_then(|p| SettingsStore::peek(&p.settings())).and_then(|s| s.gpu_adapter)
    else {
        return;
    };
    // SAFETY: `run` is called from `main` before any thread exists, so nothing can read
    // the environment concurrently.
    unsafe { std::env::set_var("RULLAMA_ADAPTER", engine_local::adapter_env_value(&adapter)) };
}
