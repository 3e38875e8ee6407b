//! Chat history in one SQLite database (WAL mode): chats, their message trees, full-text
//! search, export and import.
//!
//! Every write is its own transaction. Streaming replies are written as they grow, so a
//! crash loses nothing that was shown; `open` turns replies left `streaming` by a crash
//! into `incomplete`.

mod chats;
mod messages;
pub mod schema;
mod search;
mod transfer;
pub mod types;

#[cfg(test)]
mod tests;

use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::Connection;

pub use messages::{NewMessage, ReplyEnd};
pub use transfer::ExportFormat;
pub use types::{Chat, ChatSummary, Id, Message, Role, Sampling, SearchHit, Status};

use crate::error::{AppError, AppResult};

pub struct History {
    conn: Mutex<Connection>,
}

impl History {
    /// Open (creating if needed) and migrate the database at `path`, then mark replies a
    /// crash left streaming as incomplete. Returns how many were recovered.
    pub fn open(path: &Path) -> AppResult<(History, usize)> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| AppError::io(format!("create {}", dir.display()), e))?;
        }
        let conn = Connection::open(path)?;
        // WAL: readers never block the streaming writer. NORMAL sync in WAL mode survives
        // an application crash (only a power cut can lose the last commits).
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        Self::setup(conn)
    }

    pub fn open_in_memory() -> AppResult<History> {
        Ok(Self::setup(Connection::open_in_memory()?)?.0)
    }

    fn setup(mut conn: Connection) -> AppResult<(History, usize)> {
        conn.busy_timeout(Duration::from_secs(5))?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        schema::migrate(&mut conn)?;
        let history = History { conn: Mutex::new(conn) };
        let recovered = history.recover_streaming()?;
        Ok((history, recovered))
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave a half transaction behind (rusqlite
        // rolls back on drop), so the connection is still good.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Replies still `streaming` when no writer is running were cut off by a crash.
    pub fn recover_streaming(&self) -> AppResult<usize> {
        Ok(self.conn().execute("UPDATE messages SET status = 'incomplete' WHERE status = 'streaming'", [])?)
    }

    pub fn schema_dump(&self) -> AppResult<String> {
        schema::dump(&self.conn())
    }
}

/// Column order read by `messages::message_from_row`.
const MESSAGE_COLUMNS: &str =
    "id, parent_id, role, content, thinking, status, error, model, prompt_tokens, reply_tokens, tok_s, created";

pub(crate) fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

fn not_found(what: &str, id: Id) -> AppError {
    AppError::NotFound(format!("{what} {id} does not exist (it may have been deleted)."))
}
