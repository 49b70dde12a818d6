//! Why: search indexed markup. SQLite's FTS5 table read `items.content` as
//! stored, HTML and all, so `href`, `src`, `style` and `nbsp` matched
//! nearly every item and words split by a tag (`<b>T</b>rellis`) were not
//! found; and a word of Chinese or Japanese (written without spaces) was
//! found only as a whole run of characters, never inside one, on either
//! backend.
//!
//! Now each item carries what search reads: `search_title` and
//! `search_body`, the title and the content's plain text, with every CJK
//! character made a word of its own (`feeds::search::indexable`, computed
//! when the item is stored). SQLite's FTS5 table and PostgreSQL's
//! generated `tsvector` are rebuilt over them; a query's CJK run becomes a
//! phrase of its characters, so it is found inside a longer run.
//!
//! Rows stored before this migration are indexed from their title and
//! their content with tags removed by a pattern (PostgreSQL) or as they
//! were (SQLite), until the feed rewrites them.

use sea_orm_migration::{prelude::*, schema::*, sea_orm::DatabaseBackend};

#[derive(DeriveMigrationName)]
pub struct Migration;

const SQLITE_UP: [&str; 9] = [
    "DROP TRIGGER IF EXISTS items_fts_insert",
    "DROP TRIGGER IF EXISTS items_fts_delete",
    "DROP TRIGGER IF EXISTS items_fts_update",
    "DROP TABLE IF EXISTS items_fts",
    "CREATE VIRTUAL TABLE items_fts USING fts5(search_title, search_body, content='items', content_rowid='id', tokenize='unicode61 remove_diacritics 2')",
    "INSERT INTO items_fts(items_fts) VALUES ('rebuild')",
    "CREATE TRIGGER items_fts_insert AFTER INSERT ON items BEGIN
        INSERT INTO items_fts(rowid, search_title, search_body) VALUES (new.id, new.search_title, new.search_body);
     END",
    "CREATE TRIGGER items_fts_delete AFTER DELETE ON items BEGIN
        INSERT INTO items_fts(items_fts, rowid, search_title, search_body) VALUES ('delete', old.id, old.search_title, old.search_body);
     END",
    "CREATE TRIGGER items_fts_update AFTER UPDATE OF search_title, search_body ON items BEGIN
        INSERT INTO items_fts(items_fts, rowid, search_title, search_body) VALUES ('delete', old.id, old.search_title, old.search_body);
        INSERT INTO items_fts(rowid, search_title, search_body) VALUES (new.id, new.search_title, new.search_body);
     END",
];

const POSTGRES_UP: [&str; 5] = [
    "UPDATE items SET search_title = title, search_body = regexp_replace(left(content, 200000), '<[^>]*>', ' ', 'g')",
    "DROP INDEX IF EXISTS idx_items_search",
    "ALTER TABLE items DROP COLUMN search",
    "ALTER TABLE items ADD COLUMN search tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('simple', search_title), 'A') ||
        setweight(to_tsvector('simple', left(search_body, 200000)), 'B')
     ) STORED",
    "CREATE INDEX idx_items_search ON items USING GIN (search)",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    /// One transaction on SQLite too, as in `m20261201_000009`: the
    /// triggers and the FTS table are dropped and re-created under the same
    /// names, which must happen on one connection.
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in [Items::SearchTitle, Items::SearchBody] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Items::Table)
                        .add_column(text(column).default(""))
                        .to_owned(),
                )
                .await?;
        }
        let db = manager.get_connection();
        match manager.get_database_backend() {
            DatabaseBackend::Postgres => {
                for statement in POSTGRES_UP {
                    db.execute_unprepared(statement).await?;
                }
            }
            _ => {
                db.execute_unprepared(
                    "UPDATE items SET search_title = title, search_body = content",
                )
                .await?;
                for statement in SQLITE_UP {
                    db.execute_unprepared(statement).await?;
                }
            }
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        match manager.get_database_backend() {
            DatabaseBackend::Postgres => {
                for statement in POSTGRES_DOWN {
                    db.execute_unprepared(statement).await?;
                }
            }
            _ => {
                for statement in SQLITE_DOWN.into_iter().chain([SQLITE_DOWN_UPDATE]) {
                    db.execute_unprepared(statement).await?;
                }
            }
        }
        for column in [Items::SearchTitle, Items::SearchBody] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Items::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}

/// `down`: the index over `items(title, content)` of `m20261130_000003`.
const SQLITE_DOWN: [&str; 8] = [
    "DROP TRIGGER IF EXISTS items_fts_insert",
    "DROP TRIGGER IF EXISTS items_fts_delete",
    "DROP TRIGGER IF EXISTS items_fts_update",
    "DROP TABLE IF EXISTS items_fts",
    "CREATE VIRTUAL TABLE items_fts USING fts5(title, content, content='items', content_rowid='id', tokenize='unicode61 remove_diacritics 2')",
    "INSERT INTO items_fts(items_fts) VALUES ('rebuild')",
    "CREATE TRIGGER items_fts_insert AFTER INSERT ON items BEGIN
        INSERT INTO items_fts(rowid, title, content) VALUES (new.id, new.title, new.content);
     END",
    "CREATE TRIGGER items_fts_delete AFTER DELETE ON items BEGIN
        INSERT INTO items_fts(items_fts, rowid, title, content) VALUES ('delete', old.id, old.title, old.content);
     END",
];

const SQLITE_DOWN_UPDATE: &str = "CREATE TRIGGER items_fts_update AFTER UPDATE OF title, content ON items BEGIN
        INSERT INTO items_fts(items_fts, rowid, title, content) VALUES ('delete', old.id, old.title, old.content);
        INSERT INTO items_fts(rowid, title, content) VALUES (new.id, new.title, new.content);
     END";

const POSTGRES_DOWN: [&str; 4] = [
    "DROP INDEX IF EXISTS idx_items_search",
    "ALTER TABLE items DROP COLUMN search",
    "ALTER TABLE items ADD COLUMN search tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('simple', coalesce(title, '')), 'A') ||
        setweight(to_tsvector('simple', regexp_replace(left(coalesce(content, ''), 200000), '<[^>]*>', ' ', 'g')), 'B')
     ) STORED",
    "CREATE INDEX idx_items_search ON items USING GIN (search)",
];

#[derive(DeriveIden)]
enum Items {
    Table,
    SearchTitle,
    SearchBody,
}
