//! Why: the outbox publisher marked every event it delivered with
//! `published_at`: one more row update per event (three per job), an
//! index entry each, and one statement text per batch size. That was a
//! fifth of PostgreSQL's work in the job benchmark. And to find events
//! whose transaction committed late it followed skipped ids for 120 s and
//! swept for stragglers every 30 s: a heuristic, not a guarantee.
//!
//! Publication is now a position, like a consumer offset, kept in one row
//! of `outbox_position` and moved in the same step as delivery:
//! - PostgreSQL: events carry the id of the transaction that wrote them
//!   (`xact_id`, filled by default). The position is a transaction
//!   snapshot: every event whose transaction is visible in `done_snapshot`
//!   is published. The next batch is what a newer snapshot sees and
//!   `done_snapshot` does not (the way PgQ cuts batches), read in id order
//!   and paged with `after_id`. A transaction that commits late is simply
//!   in a later batch; nothing is given up on.
//! - SQLite has one writer at a time, so ids become visible in order:
//!   every event up to `after_id` is published.
//!
//! Events unpublished at migration time are published after it: on
//! PostgreSQL they get this migration's transaction id, which the initial
//! snapshot (taken before anything here wrote) does not see.

use sea_orm_migration::{
    prelude::*,
    schema::*,
    sea_orm::{ConnectionTrait, DbBackend, Statement},
};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    /// One transaction on SQLite too: every statement then runs on the
    /// same connection and nothing is half done. (Through a pool, the
    /// `CREATE INDEX` after a `DROP INDEX` ran on another connection whose
    /// read snapshot still held the dropped index, and failed.)
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        let postgres = manager.get_database_backend() == DbBackend::Postgres;
        // First, before this transaction has an id of its own.
        let snapshot = if postgres {
            let row = db
                .query_one_raw(Statement::from_string(
                    DbBackend::Postgres,
                    "SELECT pg_current_snapshot()::text AS snapshot",
                ))
                .await?
                .ok_or_else(|| DbErr::Custom("no snapshot".into()))?;
            Some(row.try_get::<String>("", "snapshot")?)
        } else {
            None
        };

        manager
            .create_table(
                Table::create()
                    .table(OutboxPosition::Table)
                    .col(string_len(OutboxPosition::Name, 64).primary_key())
                    .col(text_null(OutboxPosition::DoneSnapshot))
                    .col(text_null(OutboxPosition::NextSnapshot))
                    .col(big_integer(OutboxPosition::AfterId))
                    .col(timestamp_with_time_zone(OutboxPosition::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .drop_index(
                Index::drop()
                    .name("idx_outbox_events_published")
                    .table(OutboxEvents::Table)
                    .to_owned(),
            )
            .await?;

        if postgres {
            // The default comes last: added with the column, it would be
            // evaluated for every existing row, published ones included.
            db.execute_unprepared("ALTER TABLE outbox_events ADD COLUMN xact_id BIGINT")
                .await?;
            db.execute_unprepared(
                "UPDATE outbox_events SET xact_id = pg_current_xact_id()::text::bigint \
                 WHERE published_at IS NULL",
            )
            .await?;
            db.execute_unprepared(
                "ALTER TABLE outbox_events \
                 ALTER COLUMN xact_id SET DEFAULT (pg_current_xact_id()::text::bigint)",
            )
            .await?;
            manager
                .create_index(
                    Index::create()
                        .name("idx_outbox_events_xact")
                        .table(OutboxEvents::Table)
                        .col(OutboxEvents::XactId)
                        .to_owned(),
                )
                .await?;
            db.execute_raw(Statement::from_sql_and_values(
                DbBackend::Postgres,
                "INSERT INTO outbox_position (name, done_snapshot, after_id, updated_at) \
                 VALUES ('publisher', $1, 0, now())",
                [snapshot.into()],
            ))
            .await?;
        } else {
            manager
                .alter_table(
                    Table::alter()
                        .table(OutboxEvents::Table)
                        .add_column(big_integer_null(OutboxEvents::XactId))
                        .to_owned(),
                )
                .await?;
            db.execute_unprepared(
                "INSERT INTO outbox_position (name, after_id, updated_at) VALUES ('publisher', \
                 COALESCE((SELECT MIN(id) - 1 FROM outbox_events WHERE published_at IS NULL), \
                 (SELECT MAX(id) FROM outbox_events), 0), CURRENT_TIMESTAMP)",
            )
            .await?;
        }
        manager
            .alter_table(
                Table::alter()
                    .table(OutboxEvents::Table)
                    .drop_column(OutboxEvents::PublishedAt)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // Events come back as published; the publisher starts again at the newest.
        manager
            .alter_table(
                Table::alter()
                    .table(OutboxEvents::Table)
                    .add_column(timestamp_with_time_zone_null(OutboxEvents::PublishedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .get_connection()
            .execute_unprepared("UPDATE outbox_events SET published_at = created_at")
            .await?;
        if manager.get_database_backend() == DbBackend::Postgres {
            manager
                .drop_index(
                    Index::drop()
                        .name("idx_outbox_events_xact")
                        .table(OutboxEvents::Table)
                        .to_owned(),
                )
                .await?;
        }
        manager
            .alter_table(
                Table::alter()
                    .table(OutboxEvents::Table)
                    .drop_column(OutboxEvents::XactId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_outbox_events_published")
                    .table(OutboxEvents::Table)
                    .col(OutboxEvents::PublishedAt)
                    .col(OutboxEvents::Id)
                    .to_owned(),
            )
            .await?;
        manager
            .drop_table(Table::drop().table(OutboxPosition::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
enum OutboxEvents {
    Table,
    Id,
    PublishedAt,
    XactId,
}

#[derive(DeriveIden)]
enum OutboxPosition {
    Table,
    Name,
    DoneSnapshot,
    NextSnapshot,
    AfterId,
    UpdatedAt,
}
