//! Why: `searchDocs` (issue 20) searches the mirrored documents' text the
//! way feeds search items (`m20261202_000014`): SQLite FTS5 over an
//! external-content table kept in step by triggers, or PostgreSQL's
//! generated `tsvector` under a GIN index. The text lives in a table of its
//! own, `docs_search`, one row per document, written by the sync engine
//! when it writes the document's file: `docs_documents` is keyed by
//! `(platform, remote_id)` and has no stable integer row id for FTS5's
//! `content_rowid`, and keeping kilobytes of body text out of the manifest
//! keeps the engine's reads of it small.

use sea_orm_migration::{prelude::*, sea_orm::DatabaseBackend};

#[derive(DeriveMigrationName)]
pub struct Migration;

const SQLITE_UP: [&str; 5] = [
    "CREATE TABLE docs_search (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        platform TEXT NOT NULL,
        remote_id TEXT NOT NULL,
        search_title TEXT NOT NULL,
        search_body TEXT NOT NULL,
        UNIQUE (platform, remote_id)
     )",
    "CREATE VIRTUAL TABLE docs_fts USING fts5(search_title, search_body, content='docs_search', content_rowid='id', tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER docs_fts_insert AFTER INSERT ON docs_search BEGIN
        INSERT INTO docs_fts(rowid, search_title, search_body) VALUES (new.id, new.search_title, new.search_body);
     END",
    "CREATE TRIGGER docs_fts_delete AFTER DELETE ON docs_search BEGIN
        INSERT INTO docs_fts(docs_fts, rowid, search_title, search_body) VALUES ('delete', old.id, old.search_title, old.search_body);
     END",
    "CREATE TRIGGER docs_fts_update AFTER UPDATE OF search_title, search_body ON docs_search BEGIN
        INSERT INTO docs_fts(docs_fts, rowid, search_title, search_body) VALUES ('delete', old.id, old.search_title, old.search_body);
        INSERT INTO docs_fts(rowid, search_title, search_body) VALUES (new.id, new.search_title, new.search_body);
     END",
];

const SQLITE_DOWN: [&str; 5] = [
    "DROP TRIGGER IF EXISTS docs_fts_update",
    "DROP TRIGGER IF EXISTS docs_fts_delete",
    "DROP TRIGGER IF EXISTS docs_fts_insert",
    "DROP TABLE IF EXISTS docs_fts",
    "DROP TABLE IF EXISTS docs_search",
];

const POSTGRES_UP: [&str; 2] = [
    "CREATE TABLE docs_search (
        id BIGSERIAL PRIMARY KEY,
        platform VARCHAR(16) NOT NULL,
        remote_id TEXT NOT NULL,
        search_title TEXT NOT NULL,
        search_body TEXT NOT NULL,
        search tsvector GENERATED ALWAYS AS (
            setweight(to_tsvector('simple', search_title), 'A') ||
            setweight(to_tsvector('simple', left(search_body, 200000)), 'B')
        ) STORED,
        UNIQUE (platform, remote_id)
     )",
    "CREATE INDEX idx_docs_search ON docs_search USING GIN (search)",
];

const POSTGRES_DOWN: [&str; 1] = ["DROP TABLE IF EXISTS docs_search"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    /// One transaction on SQLite too: the table, the FTS table and its
    /// triggers come and go together.
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        run(manager, &POSTGRES_UP, &SQLITE_UP).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        run(manager, &POSTGRES_DOWN, &SQLITE_DOWN).await
    }
}

/// The statements for the connection's backend, in order.
async fn run(manager: &SchemaManager<'_>, postgres: &[&str], sqlite: &[&str]) -> Result<(), DbErr> {
    let statements = match manager.get_database_backend() {
        DatabaseBackend::Postgres => postgres,
        _ => sqlite,
    };
    for statement in statements {
        manager
            .get_connection()
            .execute_unprepared(statement)
            .await?;
    }
    Ok(())
}
