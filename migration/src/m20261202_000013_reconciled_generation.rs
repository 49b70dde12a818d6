//! Why: a resource task used to end as soon as a newer request existed
//! (`SUPERSEDED`), before any reconciliation had included its change, and
//! a request whose resource was gone when it applied ended `SUCCEEDED`.
//! Now a task ends only once its change is visible, and a request that
//! could not apply ends `FAILED`:
//! - `task_scopes.reconciled_generation`: every request of the scope up
//!   to this generation has been applied and its work reconciled. A
//!   client waits for `generation <= reconciledGeneration`. Existing
//!   scopes start at what was applied (for `resources`, the tree's
//!   `applied_generation`; others have no reconciliation and start at 0).
//! - `resource_rejections`: the requests a reconciliation pass found
//!   unappliable (their resource was gone), so the task that owns one
//!   ends `FAILED` with `NOT_FOUND` even when another task's pass met it.
//! - `resources.orphans_checked`: passes of several tasks now overlap, so
//!   a mutation may land between one pass's Mapping stage (orphans of the
//!   marked resources) and its Topology Sync. Topology Sync takes only the
//!   marked resources whose orphans were checked since their last change;
//!   a newer change clears the flag, and the next Mapping stage checks
//!   them again. Existing marks start unchecked.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(TaskScopes::Table)
                    .add_column(big_integer(TaskScopes::ReconciledGeneration).default(0))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Resources::Table)
                    .add_column(boolean(Resources::OrphansChecked).default(false))
                    .to_owned(),
            )
            .await?;
        manager
            .get_connection()
            .execute_unprepared(
                "UPDATE task_scopes SET reconciled_generation = \
                 (SELECT applied_generation FROM node_tree WHERE id = 1) \
                 WHERE scope = 'resources' AND EXISTS (SELECT 1 FROM node_tree WHERE id = 1)",
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(ResourceRejections::Table)
                    .col(pk_uuid(ResourceRejections::TaskId))
                    .col(string(ResourceRejections::Reason))
                    .col(timestamp_with_time_zone(ResourceRejections::CreatedAt))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(ResourceRejections::Table).to_owned())
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Resources::Table)
                    .drop_column(Resources::OrphansChecked)
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(TaskScopes::Table)
                    .drop_column(TaskScopes::ReconciledGeneration)
                    .to_owned(),
            )
            .await
    }
}

#[derive(DeriveIden)]
enum TaskScopes {
    Table,
    ReconciledGeneration,
}

#[derive(DeriveIden)]
enum Resources {
    Table,
    OrphansChecked,
}

#[derive(DeriveIden)]
enum ResourceRejections {
    Table,
    TaskId,
    Reason,
    CreatedAt,
}
