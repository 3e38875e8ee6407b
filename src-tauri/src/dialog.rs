//! Native file dialogs: choosing a model file to import, and saving an export (the webview
//! ignores `<a download>` links, so exports are written by the app).

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

/// Ask where to save `content` (suggesting `name`) and write it there. `None` when the
/// person cancels. The file is written whole or not at all (temp file + rename).
pub async fn save_text(app: tauri::AppHandle, name: String, content: String) -> AppResult<Option<String>> {
    let (tx, rx) = mpsc::channel();
    app.run_on_main_thread(move || {
        let path = rfd::FileDialog::new().set_title("Save export").set_file_name(&name).save_file();
        let _ = tx.send(path);
    })
    .map_err(|e| AppError::Invalid(format!("Cannot open the save dialog: {e}")))?;
    let path = tauri::async_runtime::spawn_blocking(move || rx.recv().ok().flatten())
        .await
        .map_err(|e| AppError::Invalid(format!("Cannot open the save dialog: {e}")))?;
    let Some(path) = path else { return Ok(None) };
    write_whole(&path, content.as_bytes())?;
    Ok(Some(path.to_string_lossy().into_owned()))
}

/// Write `bytes` to `path` through a temporary file beside it, so a failure leaves any
/// earlier file untouched.
pub fn write_whole(path: &std::path::Path, bytes: &[u8]) -> AppResult<()> {
    let tmp = path.with_extension("partial");
    let fail = |e: std::io::Error| AppError::io(format_args!("save {}", path.display()), e);
    std::fs::write(&tmp, bytes).map_err(fail)?;
    std::fs::rename(&tmp, path).map_err(fail)
}

#[cfg(test)]
mod tests {
    #[test]
    fn write_whole_replaces_and_reports_errors() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("chat.md");
        std::fs::write(&p, "old").unwrap();
        super::write_whole(&p, b"# new").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "# new");
        assert!(!p.with_extension("partial").exists());
        let e = super::write_whole(&dir.path().join("missing/dir/x.md"), b"x").unwrap_err();
        assert!(e.to_string().contains("Cannot save"), "{e}");
    }
}
