//! Chats: create, list, read, rename, pin, delete, per-chat settings.

use rusqlite::{OptionalExtension, Row, params};

use super::messages::message_from_row;
use super::types::{Chat, ChatSummary, Id, Sampling};
use super::{History, MESSAGE_COLUMNS, not_found, now_ms};
use crate::error::{AppError, AppResult};

pub const DEFAULT_TITLE: &str = "New chat";
const TITLE_MAX_CHARS: usize = 200;
const PREVIEW_CHARS: usize = 120;

impl History {
    pub fn create_chat(&self, model: Option<&str>) -> AppResult<ChatSummary> {
        let now = now_ms();
        let sampling = serde_json::to_string(&Sampling::default()).expect("sampling serializes");
        let conn = self.conn();
        conn.execute(
            "INSERT INTO chats (title, model, sampling, created, updated) VALUES (?1, ?2, ?3, ?4, ?4)",
            params![DEFAULT_TITLE, model, sampling, now],
        )?;
        let id = conn.last_insert_rowid();
        Ok(ChatSummary { id, title: DEFAULT_TITLE.into(), pinned: false, model: model.map(Into::into), updated: now, last_message: None })
    }

    /// Pinned chats first, then the most recently active.
    pub fn list_chats(&self) -> AppResult<Vec<ChatSummary>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT c.id, c.title, c.pinned, c.model, c.updated,
                    (SELECT substr(m.content, 1, ?1) FROM messages m WHERE m.chat_id = c.id ORDER BY m.id DESC LIMIT 1)
             FROM chats c ORDER BY c.pinned DESC, c.updated DESC, c.id DESC",
        )?;
        let rows = stmt.query_map([PREVIEW_CHARS as i64 * 2], |r| {
            Ok(ChatSummary {
                id: r.get(0)?,
                title: r.get(1)?,
                pinned: r.get(2)?,
                model: r.get(3)?,
                updated: r.get(4)?,
                last_message: r.get::<_, Option<String>>(5)?.map(|s| preview(&s)),
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub fn get_chat(&self, id: Id) -> AppResult<Chat> {
        let conn = self.conn();
        let chat = conn
            .query_row(
                "SELECT id, title, pinned, model, system_prompt, sampling, created, updated FROM chats WHERE id = ?1",
                [id],
                chat_from_row,
            )
            .optional()?
            .ok_or_else(|| not_found("Chat", id))?;
        let mut stmt = conn.prepare(&format!("SELECT {MESSAGE_COLUMNS} FROM messages WHERE chat_id = ?1 ORDER BY id"))?;
        let messages = stmt.query_map([id], message_from_row)?.collect::<Result<_, _>>()?;
        Ok(Chat { messages, ..chat })
    }

    pub fn rename_chat(&self, id: Id, title: &str) -> AppResult<()> {
        let title = clean_title(title).ok_or_else(|| AppError::Invalid("A chat title cannot be empty.".into()))?;
        self.update_chat(id, "UPDATE chats SET title = ?2 WHERE id = ?1", params![id, title])
    }

    pub fn pin_chat(&self, id: Id, pinned: bool) -> AppResult<()> {
        self.update_chat(id, "UPDATE chats SET pinned = ?2 WHERE id = ?1", params![id, pinned])
    }

    pub fn delete_chat(&self, id: Id) -> AppResult<()> {
        self.update_chat(id, "DELETE FROM chats WHERE id = ?1", params![id])
    }

    /// `system_prompt: None` (or blank) means the model's own default.
    pub fn update_chat_settings(&self, id: Id, system_prompt: Option<&str>, sampling: &Sampling) -> AppResult<()> {
        sampling.validate()?;
        let system_prompt = system_prompt.filter(|s| !s.trim().is_empty());
        let sampling = serde_json::to_string(sampling).expect("sampling serializes");
        self.update_chat(
            id,
            "UPDATE chats SET system_prompt = ?2, sampling = ?3, updated = ?4 WHERE id = ?1",
            params![id, system_prompt, sampling, now_ms()],
        )
    }

    /// The model the chat last used, so reopening it can offer the same one.
    pub fn set_chat_model(&self, id: Id, model: &str) -> AppResult<()> {
        self.update_chat(id, "UPDATE chats SET model = ?2 WHERE id = ?1", params![id, model])
    }

    fn update_chat(&self, id: Id, sql: &str, params: impl rusqlite::Params) -> AppResult<()> {
        match self.conn().execute(sql, params)? {
            0 => Err(not_found("Chat", id)),
            _ => Ok(()),
        }
    }
}

pub(super) fn chat_from_row(r: &Row) -> rusqlite::Result<Chat> {
    let sampling: String = r.get(5)?;
    Ok(Chat {
        id: r.get(0)?,
        title: r.get(1)?,
        pinned: r.get(2)?,
        model: r.get(3)?,
        system_prompt: r.get::<_, Option<String>>(4)?.unwrap_or_default(),
        // Written by this app and validated, so a parse failure means hand-editing; the
        // chat stays usable with defaults.
        sampling: serde_json::from_str(&sampling).unwrap_or_default(),
        created: r.get(6)?,
        updated: r.get(7)?,
        messages: Vec::new(),
    })
}

/// A title from free text: first line, trimmed, at most `TITLE_MAX_CHARS` characters.
pub fn clean_title(text: &str) -> Option<String> {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(truncate_chars(line, TITLE_MAX_CHARS))
}

/// A one-line preview: whitespace runs collapsed, at most `PREVIEW_CHARS` characters.
fn preview(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    truncate_chars(&flat, PREVIEW_CHARS)
}

pub(super) fn truncate_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", s[..cut].trim_end()),
        None => s.to_string(),
    }
}
