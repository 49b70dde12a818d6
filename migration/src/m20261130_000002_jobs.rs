//! Why: every long operation (feed pulls, reconciliation, docs syncs,
//! gateway deliveries, sweeps) runs on one job runner whose truth is the
//! database, so that a worker killed at any instant loses nothing and
//! duplicates nothing (SPEC §3).
//!
//! - `tasks`: one row per task with its lease (`lease_owner`,
//!   `lease_expires_at`, `heartbeat_at`), attempts, stage progress and
//!   scope generation. `(queue, status, run_at)` serves dispatch; the
//!   `(status, lease_expires_at)` index serves the reaper.
//! - `idempotency_keys`: `(owner_key, key)` is the primary key, so of many
//!   concurrent identical requests exactly one inserts; the others read the
//!   winner's task. Rows outlive their tasks' completion (kept ≥ 24 h).
//! - `task_scopes`: the monotonic generation of each scope; a stage that
//!   finds a newer generation than its task's ends `SUPERSEDED`.
//! - `outbox_events`: events committed with the change they describe; the
//!   autoincrement id is the publication order.
//! - `periodic_runs`: the last period each periodic job fired in, advanced
//!   with a compare-and-set so one process fires it per period.
//! - `probe_effects`: effects of the built-in probe task; the unique
//!   `(task_id, stage)` pair makes a duplicated stage effect impossible to
//!   hide.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Tasks::Table)
                    .col(pk_uuid(Tasks::Id))
                    .col(string_len(Tasks::Kind, 64))
                    .col(string_len(Tasks::Queue, 16))
                    .col(json(Tasks::Payload))
                    .col(string_len(Tasks::PayloadHash, 64))
                    .col(uuid_null(Tasks::OwnerId))
                    .col(string_len_null(Tasks::IdempotencyKey, 255))
                    .col(string_len(Tasks::Status, 16))
                    .col(string_len_null(Tasks::Stage, 64))
                    .col(integer(Tasks::StagesDone).default(0))
                    .col(json_null(Tasks::Progress))
                    .col(json_null(Tasks::Result))
                    .col(text_null(Tasks::Error))
                    .col(string_len_null(Tasks::Scope, 255))
                    .col(big_integer_null(Tasks::Generation))
                    .col(string_len_null(Tasks::LeaseOwner, 128))
                    .col(timestamp_with_time_zone_null(Tasks::LeaseExpiresAt))
                    .col(timestamp_with_time_zone_null(Tasks::HeartbeatAt))
                    .col(integer(Tasks::AttemptCount).default(0))
                    .col(integer(Tasks::MaxAttempts))
                    .col(boolean(Tasks::CancelRequested).default(false))
                    .col(timestamp_with_time_zone(Tasks::RunAt))
                    .col(timestamp_with_time_zone(Tasks::CreatedAt))
                    .col(timestamp_with_time_zone(Tasks::UpdatedAt))
                    .col(timestamp_with_time_zone_null(Tasks::StartedAt))
                    .col(timestamp_with_time_zone_null(Tasks::FinishedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(Tasks::Table, Tasks::OwnerId)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::SetNull),
                    )
                    .to_owned(),
            )
            .await?;
        for (name, columns) in [
            (
                "idx_tasks_dispatch",
                vec![Tasks::Queue, Tasks::Status, Tasks::RunAt],
            ),
            (
                "idx_tasks_leases",
                vec![Tasks::Status, Tasks::LeaseExpiresAt],
            ),
            (
                "idx_tasks_owner_created",
                vec![Tasks::OwnerId, Tasks::CreatedAt],
            ),
            ("idx_tasks_created", vec![Tasks::CreatedAt, Tasks::Id]),
        ] {
            let mut index = Index::create();
            index.name(name).table(Tasks::Table);
            for column in columns {
                index.col(column);
            }
            manager.create_index(index.to_owned()).await?;
        }

        manager
            .create_table(
                Table::create()
                    .table(IdempotencyKeys::Table)
                    .col(string_len(IdempotencyKeys::OwnerKey, 64))
                    .col(string_len(IdempotencyKeys::Key, 255))
                    .col(string_len(IdempotencyKeys::PayloadHash, 64))
                    .col(uuid(IdempotencyKeys::TaskId))
                    .col(timestamp_with_time_zone(IdempotencyKeys::CreatedAt))
                    .col(timestamp_with_time_zone(IdempotencyKeys::ExpiresAt))
                    .primary_key(
                        Index::create()
                            .col(IdempotencyKeys::OwnerKey)
                            .col(IdempotencyKeys::Key),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_idempotency_keys_expires")
                    .table(IdempotencyKeys::Table)
                    .col(IdempotencyKeys::ExpiresAt)
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(TaskScopes::Table)
                    .col(string_len(TaskScopes::Scope, 255).primary_key())
                    .col(big_integer(TaskScopes::Generation))
                    .col(timestamp_with_time_zone(TaskScopes::UpdatedAt))
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(OutboxEvents::Table)
                    .col(big_integer(OutboxEvents::Id).auto_increment().primary_key())
                    .col(string_len(OutboxEvents::Topic, 128))
                    .col(string_len(OutboxEvents::AggregateId, 255))
                    .col(uuid_null(OutboxEvents::OwnerId))
                    .col(json(OutboxEvents::Payload))
                    .col(timestamp_with_time_zone(OutboxEvents::CreatedAt))
                    .col(timestamp_with_time_zone_null(OutboxEvents::PublishedAt))
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
            .create_table(
                Table::create()
                    .table(PeriodicRuns::Table)
                    .col(string_len(PeriodicRuns::Name, 128).primary_key())
                    .col(big_integer(PeriodicRuns::LastPeriod))
                    .col(timestamp_with_time_zone(PeriodicRuns::UpdatedAt))
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(ProbeEffects::Table)
                    .col(uuid(ProbeEffects::TaskId))
                    .col(integer(ProbeEffects::Stage))
                    .col(integer(ProbeEffects::Attempt))
                    .col(timestamp_with_time_zone(ProbeEffects::CreatedAt))
                    .primary_key(
                        Index::create()
                            .col(ProbeEffects::TaskId)
                            .col(ProbeEffects::Stage),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .from(ProbeEffects::Table, ProbeEffects::TaskId)
                            .to(Tasks::Table, Tasks::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            ProbeEffects::Table.into_iden(),
            PeriodicRuns::Table.into_iden(),
            OutboxEvents::Table.into_iden(),
            TaskScopes::Table.into_iden(),
            IdempotencyKeys::Table.into_iden(),
            Tasks::Table.into_iden(),
        ] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden)]
enum Users {
    Table,
    Id,
}

#[derive(DeriveIden)]
enum Tasks {
    Table,
    Id,
    Kind,
    Queue,
    Payload,
    PayloadHash,
    OwnerId,
    IdempotencyKey,
    Status,
    Stage,
    StagesDone,
    Progress,
    Result,
    Error,
    Scope,
    Generation,
    LeaseOwner,
    LeaseExpiresAt,
    HeartbeatAt,
    AttemptCount,
    MaxAttempts,
    CancelRequested,
    RunAt,
    CreatedAt,
    UpdatedAt,
    StartedAt,
    FinishedAt,
}

#[derive(DeriveIden)]
enum IdempotencyKeys {
    Table,
    OwnerKey,
    Key,
    PayloadHash,
    TaskId,
    CreatedAt,
    ExpiresAt,
}

#[derive(DeriveIden)]
enum TaskScopes {
    Table,
    Scope,
    Generation,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum OutboxEvents {
    Table,
    Id,
    Topic,
    AggregateId,
    OwnerId,
    Payload,
    CreatedAt,
    PublishedAt,
}

#[derive(DeriveIden)]
enum PeriodicRuns {
    Table,
    Name,
    LastPeriod,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum ProbeEffects {
    Table,
    TaskId,
    Stage,
    Attempt,
    CreatedAt,
}
