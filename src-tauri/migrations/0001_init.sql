-- Chats and their messages. Messages form a tree per chat (parent_id): editing a user
-- message or regenerating a reply adds a sibling, so earlier branches are kept.
-- Times are milliseconds since the Unix epoch.

CREATE TABLE chats (
    id            INTEGER PRIMARY KEY,
    title         TEXT    NOT NULL,
    pinned        INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1)),
    model         TEXT,
    system_prompt TEXT,
    sampling      TEXT    NOT NULL DEFAULT '{}',  -- JSON: temperature, top_k, top_p, ...
    created       INTEGER NOT NULL,
    updated       INTEGER NOT NULL
);

CREATE TABLE messages (
    id            INTEGER PRIMARY KEY,
    chat_id       INTEGER NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
    parent_id     INTEGER REFERENCES messages(id) ON DELETE CASCADE,
    role          TEXT    NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
    content       TEXT    NOT NULL DEFAULT '',
    thinking      TEXT,
    -- 'streaming' while a reply is being written; rows left 'streaming' by a crash become
    -- 'incomplete' when the app next opens the database.
    status        TEXT    NOT NULL DEFAULT 'complete'
                          CHECK (status IN ('complete', 'streaming', 'incomplete', 'error')),
    error         TEXT,
    model         TEXT,
    prompt_tokens INTEGER,
    reply_tokens  INTEGER,
    tok_s         REAL,
    created       INTEGER NOT NULL
);

CREATE INDEX messages_by_chat ON messages(chat_id, id);
CREATE INDEX messages_by_parent ON messages(parent_id);
CREATE INDEX chats_by_order ON chats(pinned DESC, updated DESC);

-- Full-text search. External-content tables: the text lives once, in the tables above.
-- A reply is indexed once it stops streaming, so the index is not rewritten per token.
CREATE VIRTUAL TABLE messages_fts USING fts5(
    content, content = 'messages', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE VIRTUAL TABLE chats_fts USING fts5(
    title, content = 'chats', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages WHEN new.status <> 'streaming' BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages WHEN old.status <> 'streaming' BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
-- One trigger, so the old text leaves the index before the new text enters it.
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content, status ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content)
        SELECT 'delete', old.id, old.content WHERE old.status <> 'streaming';
    INSERT INTO messages_fts(rowid, content)
        SELECT new.id, new.content WHERE new.status <> 'streaming';
END;

CREATE TRIGGER chats_fts_insert AFTER INSERT ON chats BEGIN
    INSERT INTO chats_fts(rowid, title) VALUES (new.id, new.title);
END;
CREATE TRIGGER chats_fts_delete AFTER DELETE ON chats BEGIN
    INSERT INTO chats_fts(chats_fts, rowid, title) VALUES ('delete', old.id, old.title);
END;
CREATE TRIGGER chats_fts_update AFTER UPDATE OF title ON chats BEGIN
    INSERT INTO chats_fts(chats_fts, rowid, title) VALUES ('delete', old.id, old.title);
    INSERT INTO chats_fts(rowid, title) VALUES (new.id, new.title);
END;
