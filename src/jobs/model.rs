//! The runner's vocabulary: queues, statuses, the task as it is stored in
//! events and served over HTTP.

use async_graphql::Enum;
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

/// The stored values and the runner's: one variant each, so these
/// conversions are total and a new variant fails to compile until both
/// sides have it.
impl From<task::Queue> for Queue {
    fn from(queue: task::Queue) -> Self {
        match queue {
            task::Queue::Short => Queue::Short,
            task::Queue::Medium => Queue::Medium,
            task::Queue::Long => Queue::Long,
        }
    }
}

impl From<Queue> for task::Queue {
    fn from(queue: Queue) -> Self {
        match queue {
            Queue::Short => task::Queue::Short,
            Queue::Medium => task::Queue::Medium,
            Queue::Long => task::Queue::Long,
        }
    }
}

impl From<task::Status> for TaskStatus {
    fn from(status: task::Status) -> Self {
        match status {
            task::Status::Queued => TaskStatus::Queued,
            task::Status::Running => TaskStatus::Running,
            task::Status::Succeeded => TaskStatus::Succeeded,
            task::Status::Failed => TaskStatus::Failed,
            task::Status::Superseded => TaskStatus::Superseded,
            task::Status::Cancelled => TaskStatus::Cancelled,
        }
    }
}

impl From<TaskStatus> for task::Status {
    fn from(status: TaskStatus) -> Self {
        match status {
            TaskStatus::Queued => task::Status::Queued,
            TaskStatus::Running => task::Status::Running,
            TaskStatus::Succeeded => task::Status::Succeeded,
            TaskStatus::Failed => task::Status::Failed,
            TaskStatus::Superseded => task::Status::Superseded,
            TaskStatus::Cancelled => task::Status::Cancelled,
        }
    }
}

/// A background task as stored in its events and served by
/// `GET /tasks/{id}`: the JSON contract of the runner. The GraphQL `Task`
/// (`jobs::graphql::Task`) is built from it, so renaming a GraphQL field
/// never changes stored data.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskRecord {
    pub id: Uuid,
    /// What the task does, e.g. `feeds.pull` or `nodes.reconcile`.
    pub kind: String,
    pub queue: Queue,
    pub status: TaskStatus,
    /// The stage running or next to run (null for single-step tasks once done).
    pub stage: Option<String>,
    /// Stages committed so far.
    pub stages_done: i32,
    /// Kind-specific progress figures.
    pub progress: Option<Value>,
    /// Kind-specific outcome, once succeeded.
    pub result: Option<Value>,
    /// The last error, when a retry is pending or the task failed.
    pub error: Option<String>,
    pub attempt_count: i32,
    pub max_attempts: i32,
    pub scope: Option<String>,
    /// The task's place in its scope: a newer request has a larger one.
    pub generation: Option<i64>,
    /// The scope's work is done up to this generation (for `resources`:
    /// applied and reconciled into the tree), so `generation <=
    /// reconciledGeneration` says the task's change is visible. Read when
    /// the task is; not part of its events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconciled_generation: Option<i64>,
    /// Not started before this instant (retry backoff).
    #[serde(with = "utc_micros")]
    pub run_at: DateTime<Utc>,
    #[serde(with = "utc_micros")]
    pub created_at: DateTime<Utc>,
    #[serde(with = "utc_micros")]
    pub updated_at: DateTime<Utc>,
    #[serde(with = "utc_micros::option")]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(with = "utc_micros::option")]
    pub finished_at: Option<DateTime<Utc>>,
    pub owner_id: Option<Uuid>,
}

/// Instants in JSON (tasks, events): RFC 3339 in UTC to the microsecond,
/// the databases' precision, always 27 characters
/// (`2026-12-01T08:21:15.337649Z`), read back as any RFC 3339.
///
/// Written digit by digit: every task event carries five, and chrono's
/// general formatter (`core::fmt`, about 260 ns each here, against 55)
/// was the largest single cost of publishing events.
pub mod utc_micros {
    use chrono::{DateTime, Datelike, SecondsFormat, Timelike, Utc};
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes the instant's text into `text`; false, and nothing written,
    /// outside years 0–9999.
    fn write(instant: &DateTime<Utc>, text: &mut [u8; 27]) -> bool {
        let year = instant.year();
        if !(0..=9999).contains(&year) {
            return false;
        }
        let mut put = |at: usize, width: usize, mut value: u32| {
            for slot in text[at..at + width].iter_mut().rev() {
                *slot = b'0' + (value % 10) as u8;
                value /= 10;
            }
        };
        put(0, 4, year as u32);
        put(5, 2, instant.month());
        put(8, 2, instant.day());
        put(11, 2, instant.hour());
        put(14, 2, instant.minute());
        // A leap second is the 60th second, as chrono writes it.
        put(
            17,
            2,
            instant.second() + instant.nanosecond() / 1_000_000_000,
        );
        put(20, 6, (instant.nanosecond() % 1_000_000_000) / 1_000);
        for (at, separator) in [
            (4, b'-'),
            (7, b'-'),
            (10, b'T'),
            (13, b':'),
            (16, b':'),
            (19, b'.'),
            (26, b'Z'),
        ] {
            text[at] = separator;
        }
        true
    }

    pub fn serialize<S: Serializer>(
        instant: &DateTime<Utc>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let mut text = [0u8; 27];
        if write(instant, &mut text) {
            // ASCII digits and separators only.
            if let Ok(text) = std::str::from_utf8(&text) {
                return serializer.serialize_str(text);
            }
        }
        serializer.serialize_str(&instant.to_rfc3339_opts(SecondsFormat::Micros, true))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<DateTime<Utc>, D::Error> {
        DateTime::<Utc>::deserialize(deserializer)
    }

    /// The same for an instant that may be absent (`null`).
    pub mod option {
        use chrono::{DateTime, Utc};
        use serde::{Deserialize, Deserializer, Serializer};

        pub fn serialize<S: Serializer>(
            instant: &Option<DateTime<Utc>>,
            serializer: S,
        ) -> Result<S::Ok, S::Error> {
            match instant {
                Some(instant) => super::serialize(instant, serializer),
                None => serializer.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(
            deserializer: D,
        ) -> Result<Option<DateTime<Utc>>, D::Error> {
            Option::<DateTime<Utc>>::deserialize(deserializer)
        }
    }
}

impl From<TaskSnapshot> for TaskRecord {
    fn from(snapshot: TaskSnapshot) -> Self {
        TaskRecord {
            id: snapshot.id,
            kind: snapshot.kind,
            queue: Queue::parse(&snapshot.queue).unwrap_or(Queue::Short),
            status: TaskStatus::parse(&snapshot.status).unwrap_or(TaskStatus::Failed),
            stage: snapshot.stage,
            stages_done: snapshot.stages_done,
            progress: snapshot.progress,
            result: snapshot.result,
            error: snapshot.error,
            attempt_count: snapshot.attempt_count,
            max_attempts: snapshot.max_attempts,
            scope: snapshot.scope,
            generation: snapshot.generation,
            reconciled_generation: None,
            run_at: snapshot.run_at,
            created_at: snapshot.created_at,
            updated_at: snapshot.updated_at,
            started_at: snapshot.started_at,
            finished_at: snapshot.finished_at,
            owner_id: snapshot.owner_id,
        }
    }
}

impl From<&task::Model> for TaskRecord {
    fn from(model: &task::Model) -> Self {
        TaskRecord::from(TaskSnapshot::from(model))
    }
}

/// The fields of a task that [`TaskRecord`] shows, as columns: what a
/// `task.updated` event records of the task.
///
/// On PostgreSQL a task write stores one per row it wrote, in the SQL
/// composite type `task_event` ([`task_event_sql`]), binary and unrendered;
/// the outbox publisher reads them back into this and renders the event
/// with [`TaskRecord`]'s serialisation, the same as `GET /tasks/{id}`.
#[derive(Debug, Clone)]
pub struct TaskSnapshot {
    pub id: Uuid,
    pub kind: String,
    pub queue: String,
    pub status: String,
    pub stage: Option<String>,
    pub stages_done: i32,
    pub progress: Option<Value>,
    pub result: Option<Value>,
    pub error: Option<String>,
    pub attempt_count: i32,
    pub max_attempts: i32,
    pub scope: Option<String>,
    pub generation: Option<i64>,
    pub run_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub owner_id: Option<Uuid>,
}

impl From<&task::Model> for TaskSnapshot {
    fn from(model: &task::Model) -> Self {
        TaskSnapshot {
            id: model.id,
            kind: model.kind.clone(),
            queue: Queue::from(model.queue).as_str().to_owned(),
            status: TaskStatus::from(model.status).as_str().to_owned(),
            stage: model.stage.clone(),
            stages_done: model.stages_done,
            progress: model.progress.clone(),
            result: model.result.clone(),
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

impl TaskSnapshot {
    /// Reads a snapshot from a row whose columns from `first` on are
    /// [`TASK_EVENT_COLUMNS`], in that order (a `task_event` expanded with
    /// `.*`). By position: the publisher reads three per job, and looking
    /// each column up by name was a third of that.
    pub fn from_columns(row: &sea_orm::QueryResult, first: usize) -> Result<Self, sea_orm::DbErr> {
        let mut column = first;
        let mut next = || {
            column += 1;
            column - 1
        };
        Ok(TaskSnapshot {
            id: row.try_get_by_index(next())?,
            kind: row.try_get_by_index(next())?,
            queue: row.try_get_by_index(next())?,
            status: row.try_get_by_index(next())?,
            stage: row.try_get_by_index(next())?,
            stages_done: row.try_get_by_index(next())?,
            progress: row.try_get_by_index(next())?,
            result: row.try_get_by_index(next())?,
            error: row.try_get_by_index(next())?,
            attempt_count: row.try_get_by_index(next())?,
            max_attempts: row.try_get_by_index(next())?,
            scope: row.try_get_by_index(next())?,
            generation: row.try_get_by_index(next())?,
            run_at: row.try_get_by_index(next())?,
            created_at: row.try_get_by_index(next())?,
            updated_at: row.try_get_by_index(next())?,
            started_at: row.try_get_by_index(next())?,
            finished_at: row.try_get_by_index(next())?,
            owner_id: row.try_get_by_index(next())?,
        })
    }
}

/// The `tasks` columns a [`TaskSnapshot`] holds, in the attribute order of
/// the SQL type `task_event` (migration `m20261201_000010`) and of
/// [`TaskSnapshot::from_columns`].
pub const TASK_EVENT_COLUMNS: [&str; 19] = [
    "id",
    "kind",
    "queue",
    "status",
    "stage",
    "stages_done",
    "progress",
    "result",
    "error",
    "attempt_count",
    "max_attempts",
    "scope",
    "generation",
    "run_at",
    "created_at",
    "updated_at",
    "started_at",
    "finished_at",
    "owner_id",
];

/// A `tasks` row named `t` as a `task_event` snapshot, in PostgreSQL. No
/// field is rendered: the snapshot is the row's values in binary form.
/// Built once: it is part of every task write.
pub fn task_event_sql() -> &'static str {
    static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        let fields: Vec<String> = TASK_EVENT_COLUMNS
            .iter()
            .map(|column| format!("t.{column}"))
            .collect();
        format!("ROW({})::task_event", fields.join(", "))
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
    fn instants_are_written_to_the_microsecond_and_read_back() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct At {
            #[serde(with = "utc_micros")]
            at: DateTime<Utc>,
            #[serde(with = "utc_micros::option")]
            maybe: Option<DateTime<Utc>>,
        }
        let instant: DateTime<Utc> = "2026-12-01T08:21:15.337649Z".parse().unwrap();
        let value = At {
            at: instant,
            maybe: None,
        };
        let text = serde_json::to_string(&value).unwrap();
        assert_eq!(text, r#"{"at":"2026-12-01T08:21:15.337649Z","maybe":null}"#);
        assert_eq!(serde_json::from_str::<At>(&text).unwrap(), value);
        // Whole seconds and early years keep their zeros; nanoseconds are cut.
        let early: DateTime<Utc> = "0042-01-02T03:04:05.000000999Z".parse().unwrap();
        let text = serde_json::to_string(&At {
            at: early,
            maybe: Some(early),
        })
        .unwrap();
        assert_eq!(
            text,
            r#"{"at":"0042-01-02T03:04:05.000000Z","maybe":"0042-01-02T03:04:05.000000Z"}"#
        );
        // Chrono's spelling (as fewer digits) is read as well.
        let read: At =
            serde_json::from_str(r#"{"at":"2026-12-01T08:21:15.120Z","maybe":null}"#).unwrap();
        assert_eq!(read.at.timestamp_subsec_micros(), 120_000);
        // Outside years 0–9999, chrono writes it.
        let far = DateTime::<Utc>::from_timestamp(300_000_000_000, 0).unwrap();
        let text = serde_json::to_string(&At {
            at: far,
            maybe: None,
        })
        .unwrap();
        assert_eq!(serde_json::from_str::<At>(&text).unwrap().at, far);
    }

    #[test]
    fn a_snapshot_holds_every_field_of_a_task() {
        let model = crate::jobs::draft_model(&NewTask::new("probe", Queue::Short, Value::Null));
        let rendered = serde_json::to_value(TaskRecord::from(&model)).unwrap();
        let mut keys: Vec<String> = rendered.as_object().unwrap().keys().cloned().collect();
        let camel = |column: &str| {
            let mut words = column.split('_');
            let first = words.next().unwrap_or_default().to_owned();
            words.fold(first, |mut key, word| {
                key.push_str(&word[..1].to_uppercase());
                key.push_str(&word[1..]);
                key
            })
        };
        let mut columns: Vec<String> = TASK_EVENT_COLUMNS.iter().map(|c| camel(c)).collect();
        keys.sort_unstable();
        columns.sort_unstable();
        assert_eq!(keys, columns);
    }
}
