//! The native "choose a model file" dialog.

use std::sync::mpsc;

use crate::error::{AppError, AppResult};

/// Ask for a GGUF file. GTK dialogs must run on the thread that owns GTK (Tauri's main
/// thread); this waits for the answer on the blocking pool.
pub async fn pick_gguf(app: tauri::AppHandle) -> AppResult<Option<String>> {
    let (tx, rx) = mpsc::channel();
    app.run_on_main_thread(move || {
        let file = rfd::FileDialog::new()
            .set_title("Choose a GGUF model file")
            .add_filter("GGUF model", &["gguf"])
            .add_filter("All files", &["*"])
            .pick_file();
        let _ = tx.send(file);
    })
    .map_err(|e| AppError::Invalid(format!("Cannot open the file dialog: {e}")))?;
    let picked = tauri::async_runtime::spawn_blocking(move || rx.recv().ok().flatten())
        .await
        .map_err(|e| AppError::Invalid(format!("Cannot open the file dialog: {e}")))?;
    Ok(picked.map(|p| p.to_string_lossy().into_owned()))
}
