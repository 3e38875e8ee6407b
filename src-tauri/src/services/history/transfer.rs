//! Export chats as Markdown (for reading; the branch last written to) or JSON (everything,
//! every branch), and import that JSON back.

use std::collections::{HashMap, HashSet};

use rusqlite::params;
use serde::{Deserialize, Serialize};

use super::types::{Chat, Id, Message, Role, Sampling, Status};
use super::{History, now_ms};
use crate::error::{AppError, AppResult};

pub const EXPORT_FORMAT: &str = "rullama-chats";
pub const EXPORT_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ExportFormat {
    Markdown,
    Json,
}

#[derive(Debug, Serialize, Deserialize)]
struct ExportFile {
    format: String,
    version: u32,
    #[serde(default)]
    exported: i64,
    chats: Vec<ExportedChat>,
}

#[derive(Debug, Serialize, Deserialize)]
struct ExportedChat {
    title: String,
    #[serde(default)]
    pinned: bool,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    system_prompt: String,
    #[serde(default)]
    sampling: Sampling,
    created: i64,
    updated: i64,
    /// Ids are the exporting database's; import gives new ones and keeps the tree.
    messages: Vec<Message>,
}

impl History {
    pub fn export_chat(&self, id: Id, format: ExportFormat) -> AppResult<String> {
        let chat = self.get_chat(id)?;
        Ok(match format {
            ExportFormat::Markdown => markdown(&chat),
            ExportFormat::Json => json(vec![chat]),
        })
    }

    pub fn export_all(&self, format: ExportFormat) -> AppResult<String> {
        let chats = self.list_chats()?.into_iter().map(|c| self.get_chat(c.id)).collect::<AppResult<Vec<_>>>()?;
        Ok(match format {
            ExportFormat::Markdown => chats.iter().map(markdown).collect::<Vec<_>>().join("\n---\n\n"),
            ExportFormat::Json => json(chats),
        })
    }

    /// Import chats from an `export_*` JSON file, all or nothing. Returns how many.
    pub fn import_chats(&self, text: &str) -> AppResult<usize> {
        let file: ExportFile = serde_json::from_str(text)
            .map_err(|e| AppError::Invalid(format!("This is not a chat export from this app: {e}.")))?;
        if file.format != EXPORT_FORMAT {
            return Err(AppError::Invalid(format!("This file is not a chat export (format {:?}).", file.format)));
        }
        if file.version != EXPORT_VERSION {
            return Err(AppError::Invalid(format!(
                "This chat export is version {}; this app reads version {EXPORT_VERSION}.",
                file.version
            )));
        }
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        for chat in &file.chats {
            chat.sampling.validate()?;
            tx.execute(
                "INSERT INTO chats (title, pinned, model, system_prompt, sampling, created, updated)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    chat.title,
                    chat.pinned,
                    chat.model,
                    Some(chat.system_prompt.as_str()).filter(|s| !s.trim().is_empty()),
                    serde_json::to_string(&chat.sampling).expect("sampling serializes"),
                    chat.created,
                    chat.updated
                ],
            )?;
            let chat_id = tx.last_insert_rowid();
            let mut new_ids: HashMap<Id, Id> = HashMap::new();
            for m in parents_first(&chat.messages, &chat.title)? {
                // A reply that was streaming when exported was cut off.
                let status = if m.status == Status::Streaming { Status::Incomplete } else { m.status };
                tx.execute(
                    "INSERT INTO messages (chat_id, parent_id, role, content, thinking, status, error, model,
                                           prompt_tokens, reply_tokens, tok_s, created)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                    params![
                        chat_id,
                        m.parent_id.map(|p| new_ids[&p]),
                        m.role.as_str(),
                        m.content,
                        m.thinking,
                        status.as_str(),
                        m.error,
                        m.model,
                        m.prompt_tokens,
                        m.reply_tokens,
                        m.tok_s,
                        m.created
                    ],
                )?;
                new_ids.insert(m.id, tx.last_insert_rowid());
            }
        }
        tx.commit()?;
        Ok(file.chats.len())
    }
}

/// The messages ordered so every parent comes before its children; an export whose tree
/// refers to missing messages (or loops) is refused.
fn parents_first<'a>(messages: &'a [Message], title: &str) -> AppResult<Vec<&'a Message>> {
    let ids: HashMap<Id, &Message> = messages.iter().map(|m| (m.id, m)).collect();
    if ids.len() != messages.len() {
        return Err(AppError::Invalid(format!("The chat {title:?} in this export repeats a message id.")));
    }
    let mut placed: HashSet<Id> = HashSet::new();
    let mut order = Vec::with_capacity(messages.len());
    // Each pass places the messages whose parent is placed; a pass that places nothing
    // means a dangling or circular parent.
    let mut left: Vec<&Message> = messages.iter().collect();
    while !left.is_empty() {
        let before = left.len();
        left.retain(|m| match m.parent_id {
            Some(p) if !placed.contains(&p) => true,
            _ => {
                placed.insert(m.id);
                order.push(*m);
                false
            }
        });
        if left.len() == before {
            return Err(AppError::Invalid(format!(
                "The chat {title:?} in this export has a message whose parent is missing."
            )));
        }
    }
    Ok(order)
}

fn json(chats: Vec<Chat>) -> String {
    let file = ExportFile {
        format: EXPORT_FORMAT.into(),
        version: EXPORT_VERSION,
        exported: now_ms(),
        chats: chats
            .into_iter()
            .map(|c| ExportedChat {
                title: c.title,
                pinned: c.pinned,
                model: c.model,
                system_prompt: c.system_prompt,
                sampling: c.sampling,
                created: c.created,
                updated: c.updated,
                messages: c.messages,
            })
            .collect(),
    };
    serde_json::to_string_pretty(&file).expect("export serializes")
}

/// The conversation as last continued: the branch that ends in the newest message.
fn markdown(chat: &Chat) -> String {
    let mut out = format!("# {}\n\n", chat.title);
    out.push_str(&format!("*Created {} · last active {}*\n\n", utc_date(chat.created), utc_date(chat.updated)));
    if !chat.system_prompt.trim().is_empty() {
        let system = &chat.system_prompt;
        out.push_str(&format!("> **System prompt:** {}\n\n", system.trim().replace('\n', "\n> ")));
    }
    for m in newest_branch(&chat.messages) {
        let who = match (m.role, &m.model) {
            (Role::User, _) => "You".to_string(),
            (Role::System, _) => "System".to_string(),
            (Role::Assistant, Some(model)) => format!("Assistant ({model})"),
            (Role::Assistant, None) => "Assistant".to_string(),
        };
        out.push_str(&format!("## {who}\n\n"));
        if let Some(thinking) = m.thinking.as_deref().filter(|t| !t.trim().is_empty()) {
            out.push_str(&format!("<details><summary>Thinking</summary>\n\n{}\n\n</details>\n\n", thinking.trim()));
        }
        out.push_str(m.content.trim_end());
        out.push_str("\n\n");
        match m.status {
            Status::Incomplete => out.push_str("*(reply stopped before the end)*\n\n"),
            Status::Error => out.push_str(&format!(
                "*(reply failed: {})*\n\n",
                m.error.as_deref().unwrap_or("unknown error")
            )),
            Status::Complete | Status::Streaming => {}
        }
    }
    out
}

fn newest_branch(messages: &[Message]) -> Vec<&Message> {
    let by_id: HashMap<Id, &Message> = messages.iter().map(|m| (m.id, m)).collect();
    let mut path = Vec::new();
    let mut next = messages.iter().map(|m| m.id).max();
    while let Some(m) = next.and_then(|id| by_id.get(&id)) {
        if path.len() > messages.len() {
            break; // a loop, only possible by hand-editing the database
        }
        path.push(*m);
        next = m.parent_id;
    }
    path.reverse();
    path
}

/// `YYYY-MM-DD HH:MM UTC` from milliseconds since the epoch (proleptic Gregorian).
fn utc_date(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days → civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02} UTC", rem / 3600, rem % 3600 / 60)
}

#[cfg(test)]
mod tests {
    use super::utc_date;

    #[test]
    fn dates_match_known_instants() {
        // Reference instants from `date -u -d @SECONDS`.
        assert_eq!(utc_date(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc_date(951_782_400_000), "2000-02-29 00:00 UTC");
        assert_eq!(utc_date(1_700_000_000_000), "2023-11-14 22:13 UTC");
        assert_eq!(utc_date(4_107_542_400_000), "2100-03-01 00:00 UTC");
    }
}
