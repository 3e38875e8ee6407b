//! Tauri commands: thin wrappers that move work off the async runtime and hand it to the
//! services. Names and argument shapes are the UI's contract.

pub mod chat;
pub mod models;
pub mod settings;

use std::sync::Arc;

use tauri::State;
use tauri::ipc::Channel;

use crate::error::{AppError, AppResult};
use crate::services::Services;
use crate::services::stream::{EventSink, StreamEvent};

pub type AppState<'a> = State<'a, Arc<Services>>;

/// Run service code on the blocking pool: it does file and database I/O, and loading a
/// model waits for the worker.
pub(crate) async fn blocking<T, F>(state: AppState<'_>, f: F) -> AppResult<T>
where
    T: Send + 'static,
    F: FnOnce(&Services) -> AppResult<T> + Send + 'static,
{
    let services = state.inner().clone();
    tauri::async_runtime::spawn_blocking(move || f(&services))
        .await
        .map_err(|e| AppError::Invalid(format!("Internal error: {e}")))?
}

/// Streams a reply to the webview.
pub(crate) struct ChannelSink(pub Channel<StreamEvent>);

impl EventSink for ChannelSink {
    fn send(&self, event: StreamEvent) {
        // The window may be gone (closed or reloaded); the reply is still saved.
        let _ = self.0.send(event);
    }
}
