//! Full-text search over chat titles and message text (SQLite FTS5).
//!
//! What a person types is not passed to FTS5 as a query (its syntax would turn quotes,
//! dashes or `OR` into errors or operators): each word becomes a quoted prefix term, and
//! all must match.

use super::History;
use super::types::SearchHit;
use crate::error::AppResult;

const MAX_HITS: i64 = 50;
/// Tokens of context FTS5 puts in a snippet.
const SNIPPET_TOKENS: i64 = 16;

impl History {
    pub fn search(&self, query: &str) -> AppResult<Vec<SearchHit>> {
        let Some(fts) = fts_query(query) else { return Ok(Vec::new()) };
        let conn = self.conn();
        let mut hits = Vec::new();
        let mut titles = conn.prepare(
            "SELECT c.id, c.title FROM chats_fts JOIN chats c ON c.id = chats_fts.rowid
             WHERE chats_fts MATCH ?1 ORDER BY rank LIMIT ?2",
        )?;
        for hit in titles.query_map(rusqlite::params![fts, MAX_HITS], |r| {
            let title: String = r.get(1)?;
            Ok(SearchHit { chat_id: r.get(0)?, message_id: None, snippet: title.clone(), title })
        })? {
            hits.push(hit?);
        }
        let mut messages = conn.prepare(
            "SELECT m.chat_id, m.id, c.title, snippet(messages_fts, 0, '', '', '…', ?3)
             FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid JOIN chats c ON c.id = m.chat_id
             WHERE messages_fts MATCH ?1 ORDER BY rank LIMIT ?2",
        )?;
        for hit in messages.query_map(rusqlite::params![fts, MAX_HITS, SNIPPET_TOKENS], |r| {
            Ok(SearchHit { chat_id: r.get(0)?, message_id: Some(r.get(1)?), title: r.get(2)?, snippet: r.get(3)? })
        })? {
            hits.push(hit?);
        }
        Ok(hits)
    }
}

/// `hello wörld-2` → `"hello"* "wörld"* "2"*`; `None` when there is no word to look for.
/// Words are split the way the `unicode61` tokenizer splits them (letters and digits).
fn fts_query(query: &str) -> Option<String> {
    let terms: Vec<String> =
        query.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(|w| format!("\"{w}\"*")).collect();
    (!terms.is_empty()).then(|| terms.join(" "))
}

#[cfg(test)]
mod tests {
    use super::fts_query;

    #[test]
    fn queries_are_words_not_syntax() {
        assert_eq!(fts_query("hello wörld-2").as_deref(), Some("\"hello\"* \"wörld\"* \"2\"*"));
        assert_eq!(fts_query("\"unbalanced OR (x").as_deref(), Some("\"unbalanced\"* \"OR\"* \"x\"*"));
        assert_eq!(fts_query("  -- ** "), None);
    }
}
