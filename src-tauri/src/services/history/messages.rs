//! Messages: adding to a chat's tree, writing a streaming reply as it grows, finishing it,
//! and reading the path from the root to a message.

use std::collections::HashMap;

use rusqlite::{OptionalExtension, Row, params};

use super::chats::{DEFAULT_TITLE, clean_title};
use super::types::{Id, Message, Role, Status};
use super::{History, MESSAGE_COLUMNS, not_found, now_ms};
use crate::error::{AppError, AppResult};

#[derive(Debug, Clone)]
pub struct NewMessage<'a> {
    pub chat_id: Id,
    pub parent_id: Option<Id>,
    pub role: Role,
    pub content: &'a str,
    pub status: Status,
    pub model: Option<&'a str>,
}

/// How a reply ended, with its final text and numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplyEnd {
    pub status: Status,
    pub content: String,
    pub thinking: Option<String>,
    pub error: Option<String>,
    pub prompt_tokens: Option<u32>,
    pub reply_tokens: Option<u32>,
    pub tok_s: Option<f64>,
}

impl History {
    /// Add a message under `parent_id` (which must be in the same chat). The first user
    /// message of an untitled chat becomes its title.
    pub fn add_message(&self, m: &NewMessage) -> AppResult<Id> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let title: String = tx
            .query_row("SELECT title FROM chats WHERE id = ?1", [m.chat_id], |r| r.get(0))
            .optional()?
            .ok_or_else(|| not_found("Chat", m.chat_id))?;
        if let Some(parent) = m.parent_id {
            let parent_chat: Option<Id> =
                tx.query_row("SELECT chat_id FROM messages WHERE id = ?1", [parent], |r| r.get(0)).optional()?;
            if parent_chat != Some(m.chat_id) {
                return Err(AppError::Invalid(format!("Message {parent} is not part of chat {}.", m.chat_id)));
            }
        }
        let now = now_ms();
        tx.execute(
            "INSERT INTO messages (chat_id, parent_id, role, content, status, model, created)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![m.chat_id, m.parent_id, m.role.as_str(), m.content, m.status.as_str(), m.model, now],
        )?;
        let id = tx.last_insert_rowid();
        let new_title = (m.role == Role::User && title == DEFAULT_TITLE).then(|| clean_title(m.content)).flatten();
        tx.execute(
            "UPDATE chats SET updated = ?2, title = coalesce(?3, title) WHERE id = ?1",
            params![m.chat_id, now, new_title],
        )?;
        tx.commit()?;
        Ok(id)
    }

    /// Save the reply so far (its own small transaction; called as tokens arrive).
    pub fn update_reply(&self, id: Id, content: &str, thinking: Option<&str>) -> AppResult<()> {
        let n = self.conn().execute(
            "UPDATE messages SET content = ?2, thinking = ?3 WHERE id = ?1",
            params![id, content, thinking],
        )?;
        if n == 0 { Err(not_found("Message", id)) } else { Ok(()) }
    }

    pub fn finish_reply(&self, id: Id, end: &ReplyEnd) -> AppResult<()> {
        let n = self.conn().execute(
            "UPDATE messages SET status = ?2, content = ?3, thinking = ?4, error = ?5,
                    prompt_tokens = ?6, reply_tokens = ?7, tok_s = ?8 WHERE id = ?1",
            params![
                id,
                end.status.as_str(),
                end.content,
                end.thinking,
                end.error,
                end.prompt_tokens,
                end.reply_tokens,
                end.tok_s
            ],
        )?;
        if n == 0 { Err(not_found("Message", id)) } else { Ok(()) }
    }

    pub fn message(&self, id: Id) -> AppResult<(Id, Message)> {
        self.conn()
            .query_row(&format!("SELECT chat_id, {MESSAGE_COLUMNS} FROM messages WHERE id = ?1"), [id], |r| {
                Ok((r.get(0)?, message_from_row_at(r, 1)?))
            })
            .optional()?
            .ok_or_else(|| not_found("Message", id))
    }

    /// The messages from the root of `id`'s branch down to `id` itself.
    pub fn path_to(&self, id: Id) -> AppResult<Vec<Message>> {
        let (chat_id, _) = self.message(id)?;
        let conn = self.conn();
        let mut stmt = conn.prepare(&format!("SELECT {MESSAGE_COLUMNS} FROM messages WHERE chat_id = ?1"))?;
        let mut by_id: HashMap<Id, Message> =
            stmt.query_map([chat_id], message_from_row)?.map(|m| m.map(|m| (m.id, m))).collect::<Result<_, _>>()?;
        let mut path = Vec::new();
        let mut next = Some(id);
        while let Some(cur) = next {
            // The schema cannot express "no cycles"; a cycle (only possible by hand-editing)
            // ends the walk instead of looping.
            let Some(m) = by_id.remove(&cur) else { break };
            next = m.parent_id;
            path.push(m);
        }
        path.reverse();
        Ok(path)
    }
}

pub(super) fn message_from_row(r: &Row) -> rusqlite::Result<Message> {
    message_from_row_at(r, 0)
}

fn message_from_row_at(r: &Row, at: usize) -> rusqlite::Result<Message> {
    let word = |i: usize| -> rusqlite::Result<String> { r.get(at + i) };
    let bad = |i: usize, s: String| {
        rusqlite::Error::FromSqlConversionFailure(at + i, rusqlite::types::Type::Text, format!("unknown value {s:?}").into())
    };
    let role = word(2)?;
    let status = word(5)?;
    Ok(Message {
        id: r.get(at)?,
        parent_id: r.get(at + 1)?,
        role: Role::parse(&role).ok_or_else(|| bad(2, role.clone()))?,
        content: r.get(at + 3)?,
        thinking: r.get(at + 4)?,
        status: Status::parse(&status).ok_or_else(|| bad(5, status.clone()))?,
        error: r.get(at + 6)?,
        model: r.get(at + 7)?,
        prompt_tokens: r.get(at + 8)?,
        reply_tokens: r.get(at + 9)?,
        tok_s: r.get(at + 10)?,
        created: r.get(at + 11)?,
    })
}
