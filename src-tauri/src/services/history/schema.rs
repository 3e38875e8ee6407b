//! Numbered migrations. `PRAGMA user_version` records how many have run; each runs in its
//! own transaction, so a failure leaves the database at the previous version.

use rusqlite::Connection;

use crate::error::{AppError, AppResult};

/// Migration `n` (1-based) is `MIGRATIONS[n - 1]`. Released migrations are never edited;
/// changes go in a new file.
pub const MIGRATIONS: &[&str] = &[include_str!("../../../migrations/0001_init.sql")];

pub fn version(conn: &Connection) -> AppResult<u32> {
    Ok(conn.query_row("PRAGMA user_version", [], |r| r.get(0))?)
}

pub fn migrate(conn: &mut Connection) -> AppResult<()> {
    migrate_to(conn, MIGRATIONS.len())
}

/// Run the migrations up to version `target` (tests build each released version).
pub fn migrate_to(conn: &mut Connection, target: usize) -> AppResult<()> {
    let current = version(conn)? as usize;
    if current > MIGRATIONS.len() {
        return Err(AppError::Invalid(format!(
            "The chat history was written by a newer version of the app (schema {current}; this version knows {}). Update the app.",
            MIGRATIONS.len()
        )));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().take(target).skip(current) {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", (i + 1) as u32)?;
        tx.commit()?;
    }
    Ok(())
}

/// The schema as SQLite reports it, one object per paragraph, in a stable order; compared
/// with the frozen copy of each released version.
pub fn dump(conn: &Connection) -> AppResult<String> {
    let mut stmt = conn.prepare(
        "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type, name",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok(format!("-- {} {} on {}\n{};\n", r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?, r.get::<_, String>(3)?))
    })?;
    let mut out = format!("-- user_version {}\n", version(conn)?);
    for row in rows {
        out.push('\n');
        out.push_str(&row?);
    }
    Ok(out)
}
