-- user_version 1

-- index chats_by_order on chats
CREATE INDEX chats_by_order ON chats(pinned DESC, updated DESC);

-- index messages_by_chat on messages
CREATE INDEX messages_by_chat ON messages(chat_id, id);

-- index messages_by_parent on messages
CREATE INDEX messages_by_parent ON messages(parent_id);

-- table chats on chats
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

-- table chats_fts on chats_fts
CREATE VIRTUAL TABLE chats_fts USING fts5(
    title, content = 'chats', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);

-- table chats_fts_config on chats_fts_config
CREATE TABLE 'chats_fts_config'(k PRIMARY KEY, v) WITHOUT ROWID;

-- table chats_fts_data on chats_fts_data
CREATE TABLE 'chats_fts_data'(id INTEGER PRIMARY KEY, block BLOB);

-- table chats_fts_docsize on chats_fts_docsize
CREATE TABLE 'chats_fts_docsize'(id INTEGER PRIMARY KEY, sz BLOB);

-- table chats_fts_idx on chats_fts_idx
CREATE TABLE 'chats_fts_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;

-- table messages on messages
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

-- table messages_fts on messages_fts
CREATE VIRTUAL TABLE messages_fts USING fts5(
    content, content = 'messages', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);

-- table messages_fts_config on messages_fts_config
CREATE TABLE 'messages_fts_config'(k PRIMARY KEY, v) WITHOUT ROWID;

-- table messages_fts_data on messages_fts_data
CREATE TABLE 'messages_fts_data'(id INTEGER PRIMARY KEY, block BLOB);

-- table messages_fts_docsize on messages_fts_docsize
CREATE TABLE 'messages_fts_docsize'(id INTEGER PRIMARY KEY, sz BLOB);

-- table messages_fts_idx on messages_fts_idx
CREATE TABLE 'messages_fts_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;

-- trigger chats_fts_delete on chats
CREATE TRIGGER chats_fts_delete AFTER DELETE ON chats BEGIN
    INSERT INTO chats_fts(chats_fts, rowid, title) VALUES ('delete', old.id, old.title);
END;

-- trigger chats_fts_insert on chats
CREATE TRIGGER chats_fts_insert AFTER INSERT ON chats BEGIN
    INSERT INTO chats_fts(rowid, title) VALUES (new.id, new.title);
END;

-- trigger chats_fts_update on chats
CREATE TRIGGER chats_fts_update AFTER UPDATE OF title ON chats BEGIN
    INSERT INTO chats_fts(chats_fts, rowid, title) VALUES ('delete', old.id, old.title);
    INSERT INTO chats_fts(rowid, title) VALUES (new.id, new.title);
END;

-- trigger messages_fts_delete on messages
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages WHEN old.status <> 'streaming' BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;

-- trigger messages_fts_insert on messages
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages WHEN new.status <> 'streaming' BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END;

-- trigger messages_fts_update on messages
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content, status ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content)
        SELECT 'delete', old.id, old.content WHERE old.status <> 'streaming';
    INSERT INTO messages_fts(rowid, content)
        SELECT new.id, new.content WHERE new.status <> 'streaming';
END;
