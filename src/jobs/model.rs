//! The runner's vocabulary: queues, statuses, the task as clients see it.

use async_graphql::{Enum, ID, Json, SimpleObject};
use chrono::{DateTime, Utc};
use entity::task;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

/// Queues by expected cost, each with its own worker pool, so light jobs
/// never wait behind heavy ones.
#[derive(Enum, Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Queue {
    /// `q:short`: quick jobs (a feed pull, a small reconciliation).
    Short,
    /// `q:medium`: jobs that may touch many rows.
    Medium,
    /// `q:long`: bulk jobs (docs syncs, bulk updates).
    Long,
}

impl Queue {
    pub const ALL: [Queue; 3] = [Queue::Short, Queue::Medium, Queue::Long];

    /// The column value and the metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Queue::Short => "short",
            Queue::Medium => "medium",
            Queue::Long => "long",
        }
    }

    /// The queue's name in the spec and in Redis: `q:short`…
    pub fn key(self) -> &'static str {
        match self {
            Queue::Short => "q:short",
            Queue::Medium => "q:medium",
            Queue::Long => "q:long",
        }
    }

    pub fn parse(value: &str) -> Option<Queue> {
        Queue::ALL.into_iter().find(|queue| queue.as_str() == value)
    }
}

/// Where a task is in its life.
#[derive(Enum, Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TaskStatus {
    /// Waiting for a worker (also between retries).
    Queued,
    /// A worker holds its lease.
    Running,
    Succeeded,
    /// Out of attempts, or a permanent error; `error` says why.
    Failed,
    /// A newer request for the same scope made this one moot.
    Superseded,
    Cancelled,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Queued => "QUEUED",
            TaskStatus::Running => "RUNNING",
            TaskStatus::Succeeded => "SUCCEEDED",
            TaskStatus::Failed => "FAILED",
            TaskStatus::Superseded => "SUPERSEDED",
            TaskStatus::Cancelled => "CANCELLED",
        }
    }

    pub fn parse(value: &str) -> Option<TaskStatus> {
        [
            TaskStatus::Queued,
            TaskStatus::Running,
            TaskStatus::Succeeded,
            TaskStatus::Failed,
            TaskStatus::Superseded,
            TaskStatus::Cancelled,
        ]
        .into_iter()
        .find(|status| status.as_str() == value)
    }

    /// No further change will happen.
    pub fn is_terminal(self) -> bool {
        !matches!(self, TaskStatus::Queued | TaskStatus::Running)
    }
}

/// A background task, as the API (GraphQL, `GET /tasks/{id}`, events) shows it.
#[derive(SimpleObject, Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub id: ID,
    /// What the task does, e.g. `feeds.pull` or `nodes.reconcile`.
    pub kind: String,
    pub queue: Queue,
    pub status: TaskStatus,
    /// The stage running or next to run (null for single-step tasks once done).
    pub stage: Option<String>,
    /// Stages committed so far.
    pub stages_done: i32,
    /// Kind-specific progress figures.
    pub progress: Option<Json<Value>>,
    /// Kind-specific outcome, once succeeded.
    pub result: Option<Json<Value>>,
    /// The last error, when a retry is pending or the task failed.
    pub error: Option<String>,
    pub attempt_count: i32,
    pub max_attempts: i32,
    pub scope: Option<String>,
    pub generation: Option<i64>,
    /// Not started before this instant (retry backoff).
    pub run_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    #[graphql(skip)]
    pub owner_id: Option<Uuid>,
}

impl From<&task::Model> for Task {
    fn from(model: &task::Model) -> Self {
        Task {
            id: ID(model.id.to_string()),
            kind: model.kind.clone(),
            queue: Queue::parse(&model.queue).unwrap_or(Queue::Short),
            status: TaskStatus::parse(&model.status).unwrap_or(TaskStatus::Failed),
            stage: model.stage.clone(),
            stages_done: model.stages_done,
            progress: model.progress.clone().map(Json),
            result: model.result.clone().map(Json),
            error: model.error.clone(),
            attempt_count: model.attempt_count,
            max_attempts: model.max_attempts,
            scope: model.scope.clone(),
            generation: model.generation,
            run_at: model.run_at,
            created_at: model.created_at,
            updated_at: model.updated_at,
            started_at: model.started_at,
            finished_at: model.finished_at,
            owner_id: model.owner_id,
        }
    }
}

/// [`Task`]'s JSON fields and the PostgreSQL expressions that render them
/// from a `tasks` row named `t`. Rendered where the row is written, the
/// `task.updated` event needs no round trip through Rust: a claim or a
/// group commit is one statement ([`task_json_sql`]).
const TASK_JSON_FIELDS: [(&str, &str); 19] = [
    ("id", "t.id"),
    ("kind", "t.kind"),
    ("queue", "upper(t.queue)"),
    ("status", "t.status"),
    ("stage", "t.stage"),
    ("stagesDone", "t.stages_done"),
    ("progress", "t.progress"),
    ("result", "t.result"),
    ("error", "t.error"),
    ("attemptCount", "t.attempt_count"),
    ("maxAttempts", "t.max_attempts"),
    ("scope", "t.scope"),
    ("generation", "t.generation"),
    ("runAt", "t.run_at"),
    ("createdAt", "t.created_at"),
    ("updatedAt", "t.updated_at"),
    ("startedAt", "t.started_at"),
    ("finishedAt", "t.finished_at"),
    ("ownerId", "t.owner_id"),
];

/// A `tasks` row `t` as [`Task`] JSON, in PostgreSQL: the same value
/// `serde_json::to_value(Task::from(&row))` gives (timestamps, the fields
/// named `…At`, in UTC with a `Z`, as chrono writes them). Built once: it
/// is part of every task write.
pub fn task_json_sql() -> &'static str {
    static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        let fields: Vec<String> = TASK_JSON_FIELDS
            .iter()
            .map(|(key, column)| {
                if key.ends_with("At") {
                    format!(
                        "'{key}', to_char({column} AT TIME ZONE 'UTC', \
                         'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
                    )
                } else {
                    format!("'{key}', {column}")
                }
            })
            .collect();
        format!("json_build_object({})", fields.join(", "))
    });
    &SQL
}

/// A request for background work.
#[derive(Debug, Clone)]
pub struct NewTask {
    pub kind: &'static str,
    pub queue: Queue,
    pub payload: Value,
    /// The user the task belongs to; `None` for server-initiated work.
    pub owner_id: Option<Uuid>,
    pub idempotency_key: Option<String>,
    /// Work on the same scope is ordered by generation; older work is superseded.
    pub scope: Option<String>,
    /// Overrides `TRELLIS_TASK_MAX_ATTEMPTS`.
    pub max_attempts: Option<i32>,
    /// Shown as `stage` until the first stage commits (set by the runner from the handler).
    pub first_stage: Option<&'static str>,
}

impl NewTask {
    pub fn new(kind: &'static str, queue: Queue, payload: Value) -> Self {
        NewTask {
            kind,
            queue,
            payload,
            owner_id: None,
            idempotency_key: None,
            scope: None,
            max_attempts: None,
            first_stage: None,
        }
    }
}

/// Topic of the event emitted on every task status or stage change.
pub const TASK_UPDATED: &str = "task.updated";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sql_rendering_names_every_field_of_a_task() {
        let model = crate::jobs::draft_model(&NewTask::new("probe", Queue::Short, Value::Null));
        let rendered = serde_json::to_value(Task::from(&model)).unwrap();
        let mut keys: Vec<&str> = rendered
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut sql_keys: Vec<&str> = TASK_JSON_FIELDS.iter().map(|(key, _)| *key).collect();
        keys.sort_unstable();
        sql_keys.sort_unstable();
        assert_eq!(keys, sql_keys);
    }
}
