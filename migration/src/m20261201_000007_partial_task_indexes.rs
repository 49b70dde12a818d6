//! Why: the two task indexes led by `status` held every task ever run,
//! and PostgreSQL picked them for statements keyed by id. The claim of
//! named tasks (`id IN (…) AND status = 'QUEUED'`) and the group commit of
//! endings (`… AND status = 'RUNNING'`) were planned as bitmap scans of
//! "all QUEUED" or "all RUNNING" rows, estimated at a dozen from stale
//! statistics and found at 20,000 under load: 10 ms for a 30-task claim.
//! A queue table's status mix changes faster than statistics can follow,
//! so no index should offer "every row in this status" to the planner.
//!
//! Each index now holds exactly the rows its reader wants:
//! - `idx_tasks_dispatch`: `(queue, run_at, id) WHERE status = 'QUEUED'`,
//!   in claim order (`ORDER BY run_at, id`);
//! - `idx_tasks_leases`: `(lease_expires_at) WHERE status = 'RUNNING'`,
//!   for the reaper.
//!
//! Both stay as small as the work in flight, and a task's row is indexed
//! there only while it waits or runs, so a task's life writes two fewer
//! index entries.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

const DISPATCH: &str = "idx_tasks_dispatch";
const LEASES: &str = "idx_tasks_leases";

async fn drop_index(manager: &SchemaManager<'_>, name: &str) -> Result<(), DbErr> {
    manager
        .drop_index(Index::drop().name(name).table(Tasks::Table).to_owned())
        .await
}

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
        drop_index(manager, DISPATCH).await?;
        drop_index(manager, LEASES).await?;
        manager
            .create_index(
                Index::create()
                    .name(DISPATCH)
                    .table(Tasks::Table)
                    .col(Tasks::Queue)
                    .col(Tasks::RunAt)
                    .col(Tasks::Id)
                    .and_where(Expr::col(Tasks::Status).eq("QUEUED"))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name(LEASES)
                    .table(Tasks::Table)
                    .col(Tasks::LeaseExpiresAt)
                    .and_where(Expr::col(Tasks::Status).eq("RUNNING"))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        drop_index(manager, DISPATCH).await?;
        drop_index(manager, LEASES).await?;
        for (name, columns) in [
            (DISPATCH, vec![Tasks::Queue, Tasks::Status, Tasks::RunAt]),
            (LEASES, vec![Tasks::Status, Tasks::LeaseExpiresAt]),
        ] {
            let mut index = Index::create();
            index.name(name).table(Tasks::Table);
            for column in columns {
                index.col(column);
            }
            manager.create_index(index.to_owned()).await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden)]
enum Tasks {
    Table,
    Queue,
    Status,
    RunAt,
    Id,
    LeaseExpiresAt,
}
