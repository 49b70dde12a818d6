//! Why: no task update is a HOT update (each changes `status`, which the
//! dispatch and lease indexes are conditional on), so every write of a
//! task row — its insert, its claim, its end — adds an entry to every
//! index on `tasks`. Three of those entries per write served little:
//! - `idx_tasks_scope_generation` indexed every task, though only scoped
//!   work (node reconciliation) has a scope, and its readers always ask
//!   for one scope;
//! - `idx_tasks_owner_created` indexed every task, though
//!   server-initiated work (scheduled pulls, sweeps) has no owner, and its
//!   readers always ask for one owner (a member's task list, the foreign
//!   key's `ON DELETE SET NULL`);
//! - `idx_tasks_created` ordered the task list by `(created_at, id)`. Task
//!   ids are UUIDv7, minted when the task is created, so the primary key
//!   already holds that order: the list now pages by id.
//!
//! Now the scope and owner indexes hold only rows that have one, the
//! owner's (`idx_tasks_owner`) is ordered by id, and the created index is gone: an unscoped
//! system task's life writes nine fewer index entries.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

const SCOPE: &str = "idx_tasks_scope_generation";
/// Was `idx_tasks_owner_created`, on `(owner_id, created_at)` for every task.
const OWNER: &str = "idx_tasks_owner";
const OWNER_CREATED: &str = "idx_tasks_owner_created";
const CREATED: &str = "idx_tasks_created";

async fn drop_index(manager: &SchemaManager<'_>, name: &str) -> Result<(), DbErr> {
    manager
        .drop_index(Index::drop().name(name).table(Tasks::Table).to_owned())
        .await
}

/// An index on `columns`; `sparse`: only rows whose first column is set.
async fn create_index(
    manager: &SchemaManager<'_>,
    name: &str,
    columns: &[Tasks],
    sparse: bool,
) -> Result<(), DbErr> {
    let mut index = Index::create();
    index.name(name).table(Tasks::Table);
    for column in columns {
        index.col(*column);
    }
    if sparse {
        index.and_where(Expr::col(columns[0]).is_not_null());
    }
    manager.create_index(index.to_owned()).await
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    /// One transaction on SQLite too, as in `m20261201_000007`: a
    /// `CREATE INDEX` after a `DROP INDEX` of the same name must run on
    /// the same connection.
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for name in [SCOPE, OWNER_CREATED, CREATED] {
            drop_index(manager, name).await?;
        }
        create_index(manager, SCOPE, &[Tasks::Scope, Tasks::Generation], true).await?;
        create_index(manager, OWNER, &[Tasks::OwnerId, Tasks::Id], true).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for name in [SCOPE, OWNER] {
            drop_index(manager, name).await?;
        }
        create_index(manager, SCOPE, &[Tasks::Scope, Tasks::Generation], false).await?;
        create_index(
            manager,
            OWNER_CREATED,
            &[Tasks::OwnerId, Tasks::CreatedAt],
            false,
        )
        .await?;
        create_index(manager, CREATED, &[Tasks::CreatedAt, Tasks::Id], false).await
    }
}

#[derive(DeriveIden, Clone, Copy)]
enum Tasks {
    Table,
    Id,
    Scope,
    Generation,
    OwnerId,
    CreatedAt,
}
