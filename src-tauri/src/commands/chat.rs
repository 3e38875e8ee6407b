use std::sync::Arc;

use tauri::ipc::Channel;

use super::{AppState, ChannelSink, blocking};
use crate::error::AppResult;
use crate::services::history::{Chat, ChatSummary, ExportFormat, Id, Sampling, SearchHit};
use crate::services::stream::StreamEvent;

#[tauri::command]
pub async fn list_chats(state: AppState<'_>) -> AppResult<Vec<ChatSummary>> {
    blocking(state, |s| s.history.list_chats()).await
}

#[tauri::command]
pub async fn create_chat(state: AppState<'_>, model: Option<String>) -> AppResult<ChatSummary> {
    blocking(state, move |s| s.history.create_chat(model.as_deref())).await
}

#[tauri::command]
pub async fn get_chat(state: AppState<'_>, id: Id) -> AppResult<Chat> {
    blocking(state, move |s| s.history.get_chat(id)).await
}

#[tauri::command]
pub async fn rename_chat(state: AppState<'_>, id: Id, title: String) -> AppResult<()> {
    blocking(state, move |s| s.history.rename_chat(id, &title)).await
}

#[tauri::command]
pub async fn delete_chat(state: AppState<'_>, id: Id) -> AppResult<()> {
    blocking(state, move |s| s.history.delete_chat(id)).await
}

#[tauri::command]
pub async fn pin_chat(state: AppState<'_>, id: Id, pinned: bool) -> AppResult<()> {
    blocking(state, move |s| s.history.pin_chat(id, pinned)).await
}

#[tauri::command]
pub async fn search_chats(state: AppState<'_>, query: String) -> AppResult<Vec<SearchHit>> {
    blocking(state, move |s| s.history.search(&query)).await
}

#[tauri::command]
pub async fn update_chat_settings(
    state: AppState<'_>,
    id: Id,
    system_prompt: Option<String>,
    sampling: Sampling,
) -> AppResult<()> {
    blocking(state, move |s| s.history.update_chat_settings(id, system_prompt.as_deref(), &sampling)).await
}

/// Returns the id of the assistant message being written; the reply streams on `on_event`.
#[tauri::command]
pub async fn send_message(
    state: AppState<'_>,
    chat_id: Id,
    content: String,
    parent_id: Option<Id>,
    thinking: bool,
    on_event: Channel<StreamEvent>,
) -> AppResult<Id> {
    blocking(state, move |s| {
        let reply = s.chat.send_message(chat_id, &content, parent_id, thinking, Arc::new(ChannelSink(on_event)))?;
        Ok(reply.assistant_message_id)
    })
    .await
}

#[tauri::command]
pub async fn regenerate(
    state: AppState<'_>,
    chat_id: Id,
    message_id: Id,
    thinking: bool,
    on_event: Channel<StreamEvent>,
) -> AppResult<Id> {
    blocking(state, move |s| {
        let reply = s.chat.regenerate(chat_id, message_id, thinking, Arc::new(ChannelSink(on_event)))?;
        Ok(reply.assistant_message_id)
    })
    .await
}

#[tauri::command]
pub async fn edit_message(
    state: AppState<'_>,
    chat_id: Id,
    message_id: Id,
    content: String,
    thinking: bool,
    on_event: Channel<StreamEvent>,
) -> AppResult<Id> {
    blocking(state, move |s| {
        let reply = s.chat.edit_message(chat_id, message_id, &content, thinking, Arc::new(ChannelSink(on_event)))?;
        Ok(reply.assistant_message_id)
    })
    .await
}

#[tauri::command]
pub async fn stop_generation(state: AppState<'_>) -> AppResult<()> {
    blocking(state, |s| {
        s.chat.stop();
        Ok(())
    })
    .await
}

#[tauri::command]
pub async fn export_chat(state: AppState<'_>, id: Id, format: ExportFormat) -> AppResult<String> {
    blocking(state, move |s| s.history.export_chat(id, format)).await
}

#[tauri::command]
pub async fn export_all(state: AppState<'_>, format: ExportFormat) -> AppResult<String> {
    blocking(state, move |s| s.history.export_all(format)).await
}

#[tauri::command]
pub async fn import_chats(state: AppState<'_>, json: String) -> AppResult<usize> {
    blocking(state, move |s| s.history.import_chats(&json)).await
}
