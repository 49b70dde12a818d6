//! Why: SQLite's ranked search reads, for every item the full-text match
//! finds, that item's `user_id` (whose items these are) and `pub_date`
//! (the tie-break) from the `items` row. Item rows grew wide (the content,
//! its sanitized HTML and the search text, kilobytes each), so a query
//! that matches most of a large library read many more pages than before
//! and got 4–7 % slower (`docs/benchmarks.md`, "Quiet paired re-run").
//! `idx_items_rank` holds just `(id, user_id, pub_date)`: the ranking reads
//! it instead of the rows (`INDEXED BY` in `feeds::search`), and the whole
//! rows are read for the fifty winners only. PostgreSQL ranks from its
//! `tsvector` column and needs no such index.

use sea_orm_migration::{prelude::*, sea_orm::DatabaseBackend};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        if manager.get_database_backend() == DatabaseBackend::Sqlite {
            manager
                .get_connection()
                .execute_unprepared(
                    "CREATE INDEX IF NOT EXISTS idx_items_rank ON items (id, user_id, pub_date)",
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        if manager.get_database_backend() == DatabaseBackend::Sqlite {
            manager
                .get_connection()
                .execute_unprepared("DROP INDEX IF EXISTS idx_items_rank")
                .await?;
        }
        Ok(())
    }
}
