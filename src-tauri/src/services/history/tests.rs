use rusqlite::Connection;

use super::*;
use crate::error::AppError;

fn user<'a>(chat_id: Id, parent_id: Option<Id>, content: &'a str) -> NewMessage<'a> {
    NewMessage { chat_id, parent_id, role: Role::User, content, status: Status::Complete, model: None }
}

fn assistant<'a>(chat_id: Id, parent_id: Id, content: &'a str) -> NewMessage<'a> {
    NewMessage { chat_id, parent_id: Some(parent_id), role: Role::Assistant, content, status: Status::Complete, model: Some("m") }
}

fn complete(content: &str) -> ReplyEnd {
    ReplyEnd {
        status: Status::Complete,
        content: content.into(),
        thinking: None,
        error: None,
        prompt_tokens: Some(10),
        reply_tokens: Some(3),
        tok_s: Some(12.5),
    }
}

/// A chat with a user message and a reply: (chat, user, assistant).
fn exchange(h: &History, question: &str, answer: &str) -> (Id, Id, Id) {
    let chat = h.create_chat(Some("m")).unwrap().id;
    let u = h.add_message(&user(chat, None, question)).unwrap();
    let a = h.add_message(&assistant(chat, u, answer)).unwrap();
    (chat, u, a)
}

#[test]
fn chats_list_pinned_first_then_most_recent() {
    let h = History::open_in_memory().unwrap();
    let a = h.create_chat(None).unwrap().id;
    let b = h.create_chat(None).unwrap().id;
    let c = h.create_chat(None).unwrap().id;
    // Activity in `a` makes it the most recent; pinning `c` puts it on top regardless.
    std::thread::sleep(std::time::Duration::from_millis(5));
    h.add_message(&user(a, None, "hello")).unwrap();
    h.pin_chat(c, true).unwrap();
    let order: Vec<Id> = h.list_chats().unwrap().iter().map(|s| s.id).collect();
    assert_eq!(order, vec![c, a, b]);
    let listed = h.list_chats().unwrap();
    assert!(listed[0].pinned);
    assert_eq!(listed[1].last_message.as_deref(), Some("hello"));
    assert_eq!(listed[2].last_message, None);
}

#[test]
fn first_user_message_titles_the_chat_and_rename_overrides() {
    let h = History::open_in_memory().unwrap();
    let chat = h.create_chat(None).unwrap().id;
    assert_eq!(h.get_chat(chat).unwrap().title, "New chat");
    let u = h.add_message(&user(chat, None, "\n  How do llamas sleep?\nSecond line")).unwrap();
    assert_eq!(h.get_chat(chat).unwrap().title, "How do llamas sleep?");
    // Later messages do not retitle.
    h.add_message(&user(chat, Some(u), "Another question")).unwrap();
    assert_eq!(h.get_chat(chat).unwrap().title, "How do llamas sleep?");
    h.rename_chat(chat, "  Llamas  ").unwrap();
    assert_eq!(h.get_chat(chat).unwrap().title, "Llamas");
    assert!(matches!(h.rename_chat(chat, "   "), Err(AppError::Invalid(_))));
    assert!(matches!(h.rename_chat(9999, "x"), Err(AppError::NotFound(_))));
}

#[test]
fn long_titles_and_previews_are_cut_at_characters() {
    let h = History::open_in_memory().unwrap();
    let chat = h.create_chat(None).unwrap().id;
    let long = "é".repeat(300);
    h.add_message(&user(chat, None, &long)).unwrap();
    let title = h.get_chat(chat).unwrap().title;
    assert_eq!(title.chars().count(), 201);
    assert!(title.ends_with('…'));
    let preview = h.list_chats().unwrap()[0].last_message.clone().unwrap();
    assert_eq!(preview.chars().count(), 121);
}

#[test]
fn a_parent_must_be_in_the_same_chat() {
    let h = History::open_in_memory().unwrap();
    let (_, u1, _) = exchange(&h, "q", "a");
    let other = h.create_chat(None).unwrap().id;
    assert!(matches!(h.add_message(&user(other, Some(u1), "x")), Err(AppError::Invalid(_))));
    assert!(matches!(h.add_message(&user(424242, None, "x")), Err(AppError::NotFound(_))));
    assert!(h.get_chat(other).unwrap().messages.is_empty());
}

#[test]
fn branches_are_kept_and_paths_follow_parents() {
    let h = History::open_in_memory().unwrap();
    let (chat, u1, a1) = exchange(&h, "q1", "a1");
    let u2 = h.add_message(&user(chat, Some(a1), "q2")).unwrap();
    let a2 = h.add_message(&assistant(chat, u2, "a2")).unwrap();
    // Regenerate a2 (sibling under u2), and edit q2 (sibling under a1) with its own reply.
    let a2b = h.add_message(&assistant(chat, u2, "a2b")).unwrap();
    let u2b = h.add_message(&user(chat, Some(a1), "q2 edited")).unwrap();
    let a3 = h.add_message(&assistant(chat, u2b, "a3")).unwrap();

    let texts = |id| h.path_to(id).unwrap().into_iter().map(|m| m.content).collect::<Vec<_>>();
    assert_eq!(texts(a2), ["q1", "a1", "q2", "a2"]);
    assert_eq!(texts(a2b), ["q1", "a1", "q2", "a2b"]);
    assert_eq!(texts(a3), ["q1", "a1", "q2 edited", "a3"]);
    let all: Vec<Id> = h.get_chat(chat).unwrap().messages.iter().map(|m| m.id).collect();
    assert_eq!(all, vec![u1, a1, u2, a2, a2b, u2b, a3]);
}

#[test]
fn streaming_reply_is_saved_as_it_grows_and_finished() {
    let h = History::open_in_memory().unwrap();
    let chat = h.create_chat(None).unwrap().id;
    let u = h.add_message(&user(chat, None, "q")).unwrap();
    let a = h.add_message(&NewMessage { status: Status::Streaming, content: "", ..assistant(chat, u, "") }).unwrap();
    h.update_reply(a, "Hel", Some("hmm")).unwrap();
    let (_, m) = h.message(a).unwrap();
    assert_eq!((m.content.as_str(), m.thinking.as_deref(), m.status), ("Hel", Some("hmm"), Status::Streaming));
    h.finish_reply(a, &complete("Hello")).unwrap();
    let (in_chat, m) = h.message(a).unwrap();
    assert_eq!(in_chat, chat);
    assert_eq!(m.status, Status::Complete);
    assert_eq!(m.content, "Hello");
    assert_eq!(m.thinking, None);
    assert_eq!((m.prompt_tokens, m.reply_tokens, m.tok_s), (Some(10), Some(3), Some(12.5)));
}

#[test]
fn reopening_marks_streaming_replies_incomplete() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.db");
    let a = {
        let (h, recovered) = History::open(&path).unwrap();
        assert_eq!(recovered, 0);
        let chat = h.create_chat(None).unwrap().id;
        let u = h.add_message(&user(chat, None, "q")).unwrap();
        let a = h.add_message(&NewMessage { status: Status::Streaming, ..assistant(chat, u, "") }).unwrap();
        h.update_reply(a, "partial answer", None).unwrap();
        a
    };
    let (h, recovered) = History::open(&path).unwrap();
    assert_eq!(recovered, 1);
    let (_, m) = h.message(a).unwrap();
    assert_eq!((m.status, m.content.as_str()), (Status::Incomplete, "partial answer"));
    // Recovered text is searchable like any finished reply.
    assert_eq!(h.search("partial").unwrap().len(), 1);
    let mode: String = Connection::open(&path).unwrap().query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn search_finds_messages_and_titles_and_forgets_deleted_chats() {
    let h = History::open_in_memory().unwrap();
    let (chat, _, a) = exchange(&h, "Tell me about alpacas", "Alpacas are smaller than llamas.");
    let (other, _, _) = exchange(&h, "Café recipes", "Use fresh beans.");
    let hits = h.search("llama").unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!((hits[0].chat_id, hits[0].message_id), (chat, Some(a)));
    assert!(hits[0].snippet.contains("llamas"), "{:?}", hits[0].snippet);
    assert_eq!(hits[0].title, "Tell me about alpacas");

    // Diacritics are folded; title hits carry no message id.
    let hits = h.search("cafe").unwrap();
    assert!(hits.iter().any(|hit| hit.chat_id == other && hit.message_id.is_none()));
    assert!(hits.iter().any(|hit| hit.chat_id == other && hit.message_id.is_some()));

    // Several words must all match; FTS syntax in the query is just text.
    assert_eq!(h.search("smaller llamas").unwrap().len(), 1);
    assert_eq!(h.search("smaller zebras").unwrap().len(), 0);
    assert!(h.search("\"unbalanced AND (").unwrap().is_empty());
    assert!(h.search("   ").unwrap().is_empty());

    h.rename_chat(chat, "Camelids").unwrap();
    assert!(h.search("camelids").unwrap().iter().any(|hit| hit.chat_id == chat && hit.message_id.is_none()));
    assert!(h.search("alpacas").unwrap().iter().all(|hit| hit.message_id.is_some()));

    h.delete_chat(chat).unwrap();
    assert!(h.search("llamas").unwrap().is_empty());
    assert!(h.search("camelids").unwrap().is_empty());
    assert!(matches!(h.get_chat(chat), Err(AppError::NotFound(_))));
}

#[test]
fn streaming_text_is_indexed_only_once_finished() {
    let h = History::open_in_memory().unwrap();
    let chat = h.create_chat(None).unwrap().id;
    let u = h.add_message(&user(chat, None, "q")).unwrap();
    let a = h.add_message(&NewMessage { status: Status::Streaming, ..assistant(chat, u, "") }).unwrap();
    h.update_reply(a, "zebra", None).unwrap();
    assert!(h.search("zebra").unwrap().is_empty());
    h.finish_reply(a, &complete("zebra crossing")).unwrap();
    assert_eq!(h.search("crossing").unwrap().len(), 1);
    // A later edit of a finished message replaces its indexed text.
    h.finish_reply(a, &complete("giraffe")).unwrap();
    assert!(h.search("zebra").unwrap().is_empty());
    assert_eq!(h.search("giraffe").unwrap().len(), 1);
    // The index agrees with the table (FTS5's own consistency check).
    h.conn().execute("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')", []).unwrap();
    h.conn().execute("INSERT INTO chats_fts(chats_fts) VALUES ('integrity-check')", []).unwrap();
}

#[test]
fn chat_settings_are_validated_and_stored() {
    let h = History::open_in_memory().unwrap();
    let chat = h.create_chat(None).unwrap().id;
    assert_eq!(h.get_chat(chat).unwrap().sampling, Sampling::default());
    let s = Sampling { temperature: 0.0, top_k: 1, seed: Some(7), max_tokens: Some(64), ..Sampling::default() };
    h.update_chat_settings(chat, Some("Be brief."), &s).unwrap();
    let c = h.get_chat(chat).unwrap();
    assert_eq!((c.system_prompt.as_str(), &c.sampling), ("Be brief.", &s));
    // A blank system prompt means the model's default.
    h.update_chat_settings(chat, Some("  "), &s).unwrap();
    assert_eq!(h.get_chat(chat).unwrap().system_prompt, "");
    for bad in [
        Sampling { temperature: f32::NAN, ..Sampling::default() },
        Sampling { top_p: 0.0, ..Sampling::default() },
        Sampling { max_tokens: Some(0), ..Sampling::default() },
        Sampling { repeat_penalty: 0.0, ..Sampling::default() },
    ] {
        assert!(matches!(h.update_chat_settings(chat, None, &bad), Err(AppError::Invalid(_))), "{bad:?}");
    }
}

#[test]
fn json_export_imports_back_with_its_branches() {
    let h = History::open_in_memory().unwrap();
    let (chat, u1, a1) = exchange(&h, "q1", "a1");
    h.add_message(&assistant(chat, u1, "a1 again")).unwrap();
    let u2 = h.add_message(&user(chat, Some(a1), "q2")).unwrap();
    let a2 = h.add_message(&NewMessage { status: Status::Streaming, ..assistant(chat, u2, "") }).unwrap();
    h.update_reply(a2, "cut", Some("thought")).unwrap();
    h.update_chat_settings(chat, Some("sys"), &Sampling { top_k: 5, ..Sampling::default() }).unwrap();
    h.pin_chat(chat, true).unwrap();
    let json = h.export_chat(chat, ExportFormat::Json).unwrap();

    let fresh = History::open_in_memory().unwrap();
    assert_eq!(fresh.import_chats(&json).unwrap(), 1);
    let (orig, copy) = (h.get_chat(chat).unwrap(), fresh.get_chat(fresh.list_chats().unwrap()[0].id).unwrap());
    assert_eq!((&copy.title, copy.pinned, &copy.system_prompt, &copy.sampling), (&orig.title, orig.pinned, &orig.system_prompt, &orig.sampling));
    assert_eq!(copy.messages.len(), orig.messages.len());
    // Same tree: each message's parent has the same content as in the original.
    let parent_text = |c: &Chat, m: &Message| m.parent_id.map(|p| c.messages.iter().find(|x| x.id == p).unwrap().content.clone());
    for (o, c) in orig.messages.iter().zip(&copy.messages) {
        assert_eq!((&o.content, o.role, &o.thinking), (&c.content, c.role, &c.thinking));
        assert_eq!(parent_text(&orig, o), parent_text(&copy, c));
    }
    // The reply that was streaming during export comes back as incomplete.
    assert_eq!(copy.messages.last().unwrap().status, Status::Incomplete);

    // Exporting everything and importing again doubles the chats.
    let all = fresh.export_all(ExportFormat::Json).unwrap();
    assert_eq!(fresh.import_chats(&all).unwrap(), 1);
    assert_eq!(fresh.list_chats().unwrap().len(), 2);
}

#[test]
fn bad_imports_are_refused_whole() {
    let h = History::open_in_memory().unwrap();
    exchange(&h, "q", "a");
    let good: serde_json::Value = serde_json::from_str(&h.export_all(ExportFormat::Json).unwrap()).unwrap();
    let fresh = History::open_in_memory().unwrap();

    let mut dangling = good.clone();
    let mut second = good["chats"][0].clone();
    second["messages"][1]["parent_id"] = serde_json::json!(999_999);
    dangling["chats"].as_array_mut().unwrap().push(second);
    let mut newer = good.clone();
    newer["version"] = serde_json::json!(2);
    let mut other = good.clone();
    other["format"] = serde_json::json!("something-else");

    for bad in [dangling.to_string(), newer.to_string(), other.to_string(), "not json".into()] {
        assert!(matches!(fresh.import_chats(&bad), Err(AppError::Invalid(_))), "{bad}");
    }
    // The valid first chat of the dangling file was not kept either.
    assert!(fresh.list_chats().unwrap().is_empty());
}

#[test]
fn markdown_export_follows_the_newest_branch() {
    let h = History::open_in_memory().unwrap();
    let (chat, u1, _) = exchange(&h, "Question one", "Old answer");
    let a1b = h.add_message(&assistant(chat, u1, "New answer")).unwrap();
    h.finish_reply(a1b, &ReplyEnd { thinking: Some("pondering".into()), status: Status::Incomplete, ..complete("New answer") }).unwrap();
    let md = h.export_chat(chat, ExportFormat::Markdown).unwrap();
    assert!(md.starts_with("# Question one\n"), "{md}");
    assert!(md.contains("## You\n\nQuestion one"));
    assert!(md.contains("## Assistant (m)\n\n<details><summary>Thinking</summary>\n\npondering"));
    assert!(md.contains("New answer"));
    assert!(!md.contains("Old answer"));
    assert!(md.contains("stopped before the end"));
    let all = h.export_all(ExportFormat::Markdown).unwrap();
    assert!(all.contains("New answer"));
}

#[test]
fn schema_matches_the_frozen_copy_of_each_release() {
    let frozen = [include_str!("../../../schema/v1.sql")];
    assert_eq!(frozen.len(), schema::MIGRATIONS.len(), "freeze the schema of every migration in src-tauri/schema/");
    for (i, expected) in frozen.iter().enumerate() {
        let mut conn = Connection::open_in_memory().unwrap();
        schema::migrate_to(&mut conn, i + 1).unwrap();
        let got = schema::dump(&conn).unwrap();
        assert!(got == *expected, "schema v{} differs from src-tauri/schema/v{}.sql:\n{got}", i + 1, i + 1);
    }
}

#[test]
fn a_database_from_a_newer_app_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.db");
    drop(History::open(&path).unwrap());
    let future = schema::MIGRATIONS.len() + 1;
    Connection::open(&path).unwrap().pragma_update(None, "user_version", future as u32).unwrap();
    let err = History::open(&path).err().expect("newer schema must be refused");
    assert!(err.to_string().contains("newer version"), "{err}");
}

#[test]
fn data_written_at_each_release_survives_migration() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.db");
    {
        let mut conn = Connection::open(&path).unwrap();
        schema::migrate_to(&mut conn, 1).unwrap();
        conn.execute_batch(
            "INSERT INTO chats (id, title, created, updated) VALUES (1, 'Old chat', 1, 2);
             INSERT INTO messages (id, chat_id, role, content, created) VALUES (1, 1, 'user', 'kept text', 3);",
        )
        .unwrap();
    }
    let (h, _) = History::open(&path).unwrap();
    let chat = h.get_chat(1).unwrap();
    assert_eq!((chat.title.as_str(), chat.messages[0].content.as_str()), ("Old chat", "kept text"));
    assert_eq!(h.search("kept").unwrap().len(), 1);
}
