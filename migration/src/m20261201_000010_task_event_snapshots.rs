//! Why: on PostgreSQL every task write (insert, claim, end) rendered its
//! `task.updated` event as JSON in SQL — `json_build_object` over 19
//! fields, five of them timestamps through `to_char` — and stored it as
//! one outbox row per task. Measured on the job benchmark's statements,
//! rendering was about a third of PostgreSQL's work per job and the rows
//! (a heap tuple and two index entries each) a tenth more.
//!
//! Now a task write stores its events as one outbox row, whatever the
//! number of tasks it wrote: `tasks` holds a typed snapshot of each
//! written row (`task_event`, the fields a `Task` shows, in binary form,
//! nothing rendered), and the publisher renders them in Rust when it
//! reads them, with the code that renders `GET /tasks/{id}`.
//!
//! Such a row has no aggregate and no payload of its own (each snapshot
//! names its task and owner), so those columns may be null, and exactly
//! one of `payload` and `tasks` is set. SQLite keeps one row per event,
//! rendered by the writer: it has no composite types, and one writer at
//! a time.

use sea_orm_migration::{prelude::*, sea_orm::DbBackend};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        if manager.get_database_backend() != DbBackend::Postgres {
            return Ok(());
        }
        let db = manager.get_connection();
        // The attribute order is the order `jobs::model::TASK_EVENT_COLUMNS`
        // writes them in.
        db.execute_unprepared(
            "CREATE TYPE task_event AS (id uuid, kind text, queue text, status text, \
             stage text, stages_done integer, progress json, result json, error text, \
             attempt_count integer, max_attempts integer, scope text, generation bigint, \
             run_at timestamptz, created_at timestamptz, updated_at timestamptz, \
             started_at timestamptz, finished_at timestamptz, owner_id uuid)",
        )
        .await?;
        db.execute_unprepared(
            "ALTER TABLE outbox_events ADD COLUMN tasks task_event[], \
             ALTER COLUMN aggregate_id DROP NOT NULL, ALTER COLUMN payload DROP NOT NULL, \
             ADD CONSTRAINT outbox_events_one_body CHECK ((payload IS NULL) <> (tasks IS NULL))",
        )
        .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        if manager.get_database_backend() != DbBackend::Postgres {
            return Ok(());
        }
        let db = manager.get_connection();
        // Each snapshot becomes the one-event row it used to be, rendered
        // as the publisher renders it (timestamps in UTC with a `Z`).
        let at = |column: &str| {
            format!("to_char(s.{column} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')")
        };
        db.execute_unprepared(&format!(
            "INSERT INTO outbox_events (topic, aggregate_id, owner_id, payload, created_at, xact_id) \
             SELECT o.topic, s.id::text, s.owner_id, json_build_object('id', s.id, \
             'kind', s.kind, 'queue', upper(s.queue), 'status', s.status, \
             'stage', s.stage, 'stagesDone', s.stages_done, 'progress', s.progress, \
             'result', s.result, 'error', s.error, 'attemptCount', s.attempt_count, \
             'maxAttempts', s.max_attempts, 'scope', s.scope, 'generation', s.generation, \
             'runAt', {}, 'createdAt', {}, 'updatedAt', {}, 'startedAt', {}, \
             'finishedAt', {}, 'ownerId', s.owner_id), o.created_at, o.xact_id \
             FROM outbox_events o, unnest(o.tasks) WITH ORDINALITY AS s \
             WHERE o.tasks IS NOT NULL ORDER BY o.id, s.ordinality",
            at("run_at"),
            at("created_at"),
            at("updated_at"),
            at("started_at"),
            at("finished_at"),
        ))
        .await?;
        db.execute_unprepared(
            "DELETE FROM outbox_events WHERE tasks IS NOT NULL; \
             ALTER TABLE outbox_events DROP CONSTRAINT outbox_events_one_body, \
             DROP COLUMN tasks, ALTER COLUMN aggregate_id SET NOT NULL, \
             ALTER COLUMN payload SET NOT NULL; \
             DROP TYPE task_event",
        )
        .await?;
        Ok(())
    }
}
