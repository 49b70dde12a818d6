//! The transactional outbox: [`emit`] writes an event in the caller's
//! transaction; the [`Publisher`] delivers committed events, in id order,
//! at least once, and records them published by moving one position (the
//! `outbox_position` row) past them.
//!
//! A row of `outbox_events` is an entry: one event rendered by its writer
//! (`payload`), or, on PostgreSQL, the `task.updated` events of one task
//! write as typed snapshots of the rows it wrote (`tasks`, see
//! [`super::store::write_tasks_in`]), which the publisher renders. Either
//! way each event gets its own id ([`event_id`]).

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use chrono::{DateTime, Utc};
use entity::outbox_event;
use sea_orm::{
    ConnectionTrait, DatabaseConnection, DbBackend, EntityTrait, QueryResult, Set, Statement,
};
use serde_json::{Value, value::RawValue};
use tokio::sync::{Notify, watch};
use uuid::Uuid;

use super::{
    bus::{Event, EventBus},
    model::{TaskRecord, TaskSnapshot},
};
use crate::error::{AppError, AppResult};

/// An event to record.
pub struct NewEvent {
    pub topic: &'static str,
    pub aggregate_id: String,
    pub owner_id: Option<Uuid>,
    pub payload: Value,
}

/// Records events in the same transaction as the change they describe,
/// in one statement however many.
///
/// On PostgreSQL the events travel as one JSON array, so the statement
/// text is the same for every count and is prepared once per connection:
/// a `VALUES` list per count was a new text for each batch size (130 of
/// them in the job benchmark), parsed and planned every time.
pub async fn emit(txn: &impl ConnectionTrait, events: Vec<NewEvent>) -> AppResult<()> {
    if events.is_empty() {
        return Ok(());
    }
    let now = Utc::now();
    if txn.get_database_backend() == DbBackend::Postgres {
        #[derive(serde::Serialize)]
        struct Row<'a> {
            topic: &'a str,
            aggregate_id: &'a str,
            owner_id: Option<Uuid>,
            payload: &'a Value,
        }
        let rows: Vec<Row<'_>> = events
            .iter()
            .map(|event| Row {
                topic: event.topic,
                aggregate_id: &event.aggregate_id,
                owner_id: event.owner_id,
                payload: &event.payload,
            })
            .collect();
        let rows = serde_json::to_string(&rows).map_err(AppError::internal)?;
        txn.execute_raw(Statement::from_sql_and_values(
            DbBackend::Postgres,
            "INSERT INTO outbox_events (topic, aggregate_id, owner_id, payload, created_at) \
             SELECT e.topic, e.aggregate_id, e.owner_id, e.payload, $2 \
             FROM ROWS FROM (json_to_recordset($1::json) \
                  AS (topic text, aggregate_id text, owner_id uuid, payload json)) \
             WITH ORDINALITY AS e(topic, aggregate_id, owner_id, payload, n) ORDER BY e.n",
            [rows.into(), now.into()],
        ))
        .await?;
        return Ok(());
    }
    outbox_event::Entity::insert_many(events.into_iter().map(|event| outbox_event::ActiveModel {
        topic: Set(event.topic.to_owned()),
        aggregate_id: Set(Some(event.aggregate_id)),
        owner_id: Set(event.owner_id),
        payload: Set(Some(event.payload)),
        created_at: Set(now),
        ..Default::default()
    }))
    .exec_without_returning(txn)
    .await?;
    Ok(())
}

/// Where published events go: this process's bus, and Redis when configured.
#[async_trait::async_trait]
pub trait Sink: Send + Sync {
    /// Whether this process may publish now (one publisher at a time keeps
    /// events in outbox order across processes).
    async fn lead(&self) -> bool {
        true
    }

    async fn publish(&self, events: &[Arc<Event>]) -> anyhow::Result<()>;
}

/// Delivers to the in-process bus only (embedded mode).
pub struct LocalSink(pub EventBus);

#[async_trait::async_trait]
impl Sink for LocalSink {
    async fn publish(&self, events: &[Arc<Event>]) -> anyhow::Result<()> {
        for event in events {
            self.0.deliver(event.clone());
        }
        Ok(())
    }
}

const POSITION: &str = "publisher";

/// Entries per page: SQLite's hold one event each; a PostgreSQL entry of
/// task snapshots holds up to [`MAX_EVENTS_PER_ENTRY`] (a claim, a group
/// commit, an insert of tasks), so fewer of them make a page.
fn page_size(backend: DbBackend) -> usize {
    if backend == DbBackend::Postgres {
        32
    } else {
        256
    }
}

/// The most events one entry may hold: task writes stay below it
/// ([`super::store::MAX_TASKS_PER_WRITE`]), so [`event_id`]s never collide.
pub const MAX_EVENTS_PER_ENTRY: i64 = 1_000_000;

/// The id of the `index`-th event (from 0) of entry `entry`: unique, and
/// greater for a later event of the same aggregate.
pub fn event_id(entry: i64, index: i64) -> i64 {
    entry * MAX_EVENTS_PER_ENTRY + index
}

/// How far publication has come: the `outbox_position` row (pure
/// bookkeeping, no I/O). Events are published once, as a set, by moving
/// this position, not by marking each row.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Position {
    /// SQLite, where one writer at a time means ids become visible in
    /// order: every event up to `after` is published.
    Ids { after: i64 },
    /// PostgreSQL, where a transaction that took an id first may commit
    /// last: every event whose transaction `done` sees is published. The
    /// batch in progress is what `next` sees and `done` does not, read in
    /// id order and published up to `after`. A transaction still open when
    /// `next` was taken falls in a later batch, however long it stays open.
    Snapshots {
        done: String,
        next: Option<String>,
        after: i64,
    },
}

impl Position {
    /// The position once a page of the current batch, whose greatest id is
    /// `last`, has been delivered; `full` when the page may not have been
    /// the batch's last.
    fn after_page(&self, last: Option<i64>, full: bool) -> Position {
        match self {
            Position::Ids { after } => Position::Ids {
                after: last.unwrap_or(*after),
            },
            Position::Snapshots { done, next, after } => match next {
                Some(next) if !full => Position::Snapshots {
                    done: next.clone(),
                    next: None,
                    after: 0,
                },
                _ => Position::Snapshots {
                    done: done.clone(),
                    next: next.clone(),
                    after: last.unwrap_or(*after),
                },
            },
        }
    }
}

/// A PostgreSQL snapshot's `xmin` and `xmax` (its text form is
/// `xmin:xmax:xip,…`): every transaction below `xmin` had ended, none at or
/// above `xmax` had started.
fn snapshot_bounds(snapshot: &str) -> anyhow::Result<(i64, i64)> {
    let mut parts = snapshot.split(':');
    let mut bound = || -> anyhow::Result<i64> {
        Ok(parts
            .next()
            .ok_or_else(|| anyhow::anyhow!("malformed snapshot `{snapshot}`"))?
            .parse()?)
    };
    Ok((bound()?, bound()?))
}

/// The columns an entry's rows start with ([`entries_statement`]); on
/// PostgreSQL a task snapshot's follow them, then its place in the entry
/// (`ordinality`, from 1; null for an entry of one event).
const ENTRY_COLUMNS: &str = "o.id AS entry_id, o.topic AS entry_topic, \
     o.aggregate_id AS entry_aggregate_id, o.owner_id AS entry_owner_id, \
     CAST(o.payload AS TEXT) AS entry_payload, o.created_at AS entry_created_at";

/// Where a snapshot's columns begin: after the six of [`ENTRY_COLUMNS`].
const SNAPSHOT_AT: usize = 6;

/// What all events of an entry share.
struct EntryHeader {
    id: i64,
    topic: String,
    created_at: DateTime<Utc>,
}

/// The statement that reads the entries `filter` selects (a condition on
/// `outbox_events`, its parameters in `values`), in id order, at most
/// `limit` of them: one row an event, each starting with
/// [`ENTRY_COLUMNS`].
fn entries_statement(
    backend: DbBackend,
    filter: &str,
    limit: Option<usize>,
    values: Vec<sea_orm::Value>,
) -> Statement {
    let limit = limit.map(|n| format!(" LIMIT {n}")).unwrap_or_default();
    let entry = ENTRY_COLUMNS;
    let sql = if backend == DbBackend::Postgres {
        format!(
            "SELECT {entry}, s.* \
             FROM (SELECT * FROM outbox_events WHERE {filter} ORDER BY id{limit}) o \
             LEFT JOIN LATERAL unnest(o.tasks) WITH ORDINALITY AS s ON true \
             ORDER BY o.id, s.ordinality"
        )
    } else {
        format!(
            "SELECT {entry}, NULL AS ordinality FROM outbox_events o WHERE {filter} \
             ORDER BY o.id{limit}"
        )
    };
    Statement::from_sql_and_values(backend, sql, values)
}

/// Events read by [`entries_statement`], how many entries they came from
/// and the last entry's id (an unreadable entry counts: it is read, and
/// passed).
struct Page {
    events: Vec<Arc<Event>>,
    entries: usize,
    last_entry: Option<i64>,
}

async fn read_entries(db: &DatabaseConnection, statement: Statement) -> anyhow::Result<Page> {
    let rows = db.query_all_raw(statement).await?;
    let mut events = Vec::with_capacity(rows.len());
    let mut entries = 0;
    let mut header: Option<EntryHeader> = None;
    for row in &rows {
        let id: i64 = row.try_get("", "entry_id")?;
        let header = match header.take() {
            Some(same) if same.id == id => header.insert(same),
            _ => {
                entries += 1;
                header.insert(EntryHeader {
                    id,
                    topic: row.try_get("", "entry_topic")?,
                    created_at: row.try_get("", "entry_created_at")?,
                })
            }
        };
        match render(row, header) {
            Ok(Some(event)) => events.push(Arc::new(event)),
            Ok(None) => {}
            // Reading it again would fail again: one unreadable event must
            // not hold back every later one. It stays in the table.
            Err(error) => {
                metrics::counter!("trellis_outbox_unreadable_total").increment(1);
                tracing::error!(
                    entry = id,
                    error = format!("{error:#}"),
                    "skipping an unreadable outbox event"
                );
            }
        }
    }
    Ok(Page {
        events,
        entries,
        last_entry: header.map(|header| header.id),
    })
}

/// One event of an entry: its stored JSON, or its task snapshot rendered
/// as [`TaskRecord`] (the JSON of `GET /tasks/{id}`). `None` for an entry of
/// snapshots that holds none.
fn render(row: &QueryResult, entry: &EntryHeader) -> anyhow::Result<Option<Event>> {
    let index: Option<i64> = row.try_get("", "ordinality")?;
    let (aggregate_id, owner_id, payload, index) = match index {
        Some(index) => {
            let task = TaskRecord::from(TaskSnapshot::from_columns(row, SNAPSHOT_AT)?);
            (
                task.id.to_string(),
                task.owner_id,
                serde_json::value::to_raw_value(&task)?,
                index - 1,
            )
        }
        None => {
            // No payload and no snapshot: an empty array of snapshots (a
            // row has one or the other).
            let Some(payload) = row.try_get::<Option<String>>("", "entry_payload")? else {
                return Ok(None);
            };
            (
                row.try_get::<Option<String>>("", "entry_aggregate_id")?
                    .unwrap_or_default(),
                row.try_get("", "entry_owner_id")?,
                RawValue::from_string(payload)?,
                0,
            )
        }
    };
    if index >= MAX_EVENTS_PER_ENTRY {
        anyhow::bail!("outbox entry {} holds too many events", entry.id);
    }
    Ok(Some(Event {
        id: event_id(entry.id, index),
        topic: entry.topic.clone(),
        aggregate_id,
        owner_id,
        payload,
        created_at: entry.created_at,
    }))
}

/// Every stored event of `topic`, in id order, rendered as the publisher
/// delivers them, published or not (diagnostics and tests).
pub async fn stored_events(db: &DatabaseConnection, topic: &str) -> AppResult<Vec<Arc<Event>>> {
    let backend = db.get_database_backend();
    let statement = entries_statement(backend, "topic = $1", None, vec![topic.into()]);
    Ok(read_entries(db, statement)
        .await
        .map_err(AppError::internal)?
        .events)
}

/// The next page of the batch `position` is in: up to [`page_size`]
/// entries in id order. On PostgreSQL the batch needs its `next` snapshot
/// first.
fn page_statement(backend: DbBackend, position: &Position) -> anyhow::Result<Statement> {
    let limit = Some(page_size(backend));
    Ok(match position {
        Position::Ids { after } => {
            entries_statement(backend, "id > $1", limit, vec![(*after).into()])
        }
        Position::Snapshots { done, next, after } => {
            let next = next
                .clone()
                .ok_or_else(|| anyhow::anyhow!("a batch without its snapshot"))?;
            let in_batch = "NOT pg_visible_in_snapshot(xact_id::text::xid8, $1::pg_snapshot) \
                 AND pg_visible_in_snapshot(xact_id::text::xid8, $2::pg_snapshot)";
            let (low, _) = snapshot_bounds(done)?;
            let (_, high) = snapshot_bounds(&next)?;
            let mut values: Vec<sea_orm::Value> = vec![done.clone().into(), next.into()];
            let filter = if *after > 0 {
                // The batch's next page: its entries after the last one
                // delivered, read in id order from there (the primary
                // key), a page's worth. The transaction range of the first
                // page is left out here: the planner read the `xact_id`
                // index over it for every page, and a batch the publisher
                // had fallen behind on spans tens of thousands of
                // transactions, so each page re-read the whole batch
                // (20–50 ms a page on PostgreSQL after a 100k-task build).
                values.push((*after).into());
                format!("id > $3 AND {in_batch}")
            } else {
                // The batch's first page has no id bound (`id > 0` spans
                // the whole table): its transactions started at or after
                // `done`'s xmin and before `next`'s xmax. Given as a closed
                // range of plain numbers, the planner sees how narrow it
                // is and reads the `xact_id` index.
                values.push(low.into());
                values.push(high.into());
                format!("xact_id >= $3 AND xact_id < $4 AND {in_batch}")
            };
            entries_statement(backend, &filter, limit, values)
        }
    })
}

async fn load_position(db: &DatabaseConnection) -> anyhow::Result<Position> {
    let row = db
        .query_one_raw(Statement::from_sql_and_values(
            db.get_database_backend(),
            "SELECT done_snapshot, next_snapshot, after_id FROM outbox_position WHERE name = $1",
            [POSITION.into()],
        ))
        .await?
        .ok_or_else(|| {
            anyhow::anyhow!("the outbox position row is missing (migrations not applied?)")
        })?;
    let after = row.try_get::<i64>("", "after_id")?;
    Ok(match row.try_get::<Option<String>>("", "done_snapshot")? {
        Some(done) => Position::Snapshots {
            done,
            next: row.try_get("", "next_snapshot")?,
            after,
        },
        None => Position::Ids { after },
    })
}

async fn save_position(db: &DatabaseConnection, position: &Position) -> anyhow::Result<()> {
    let (done, next, after) = match position {
        Position::Ids { after } => (None, None, *after),
        Position::Snapshots { done, next, after } => (Some(done.clone()), next.clone(), *after),
    };
    crate::db::execute_write(
        db,
        Statement::from_sql_and_values(
            db.get_database_backend(),
            "UPDATE outbox_position SET done_snapshot = $1, next_snapshot = $2, after_id = $3, \
         updated_at = $4 WHERE name = $5",
            [
                done.into(),
                next.into(),
                after.into(),
                Utc::now().into(),
                POSITION.into(),
            ],
        ),
    )
    .await?;
    Ok(())
}

/// Whether an event (`e`) is at or before the position (`p`), in SQL.
fn published_sql(backend: DbBackend) -> &'static str {
    if backend == DbBackend::Postgres {
        "(e.xact_id IS NULL \
         OR pg_visible_in_snapshot(e.xact_id::text::xid8, p.done_snapshot::pg_snapshot) \
         OR (p.next_snapshot IS NOT NULL AND e.id <= p.after_id \
             AND pg_visible_in_snapshot(e.xact_id::text::xid8, p.next_snapshot::pg_snapshot)))"
    } else {
        "e.id <= p.after_id"
    }
}

/// How many committed events are not published yet.
pub async fn unpublished(db: &DatabaseConnection) -> AppResult<i64> {
    let backend = db.get_database_backend();
    let events = if backend == DbBackend::Postgres {
        "CAST(COALESCE(SUM(COALESCE(cardinality(e.tasks), 1)), 0) AS BIGINT)"
    } else {
        "COUNT(*)"
    };
    let row = db
        .query_one_raw(Statement::from_sql_and_values(
            backend,
            format!(
                "SELECT {events} AS n FROM outbox_events e, outbox_position p \
                 WHERE p.name = $1 AND NOT {}",
                published_sql(backend)
            ),
            [POSITION.into()],
        ))
        .await?;
    Ok(match row {
        Some(row) => row.try_get::<i64>("", "n")?,
        None => 0,
    })
}

/// Deletes published entries created before `cutoff` (retention), and
/// says how many.
pub async fn delete_published_before(
    db: &DatabaseConnection,
    cutoff: DateTime<Utc>,
) -> AppResult<u64> {
    let backend = db.get_database_backend();
    Ok(db
        .execute_raw(Statement::from_sql_and_values(
            backend,
            format!(
                "DELETE FROM outbox_events WHERE created_at < $1 AND id IN \
                 (SELECT e.id FROM outbox_events e, outbox_position p \
                  WHERE p.name = $2 AND e.created_at < $1 AND {})",
                published_sql(backend)
            ),
            [cutoff.into(), POSITION.into()],
        ))
        .await?
        .rows_affected())
}

/// After a page that did not fill, how long the publisher waits before it
/// reads again. Events of a busy second then leave in a few hundred pages,
/// not one per commit: each page costs a read, a Redis message and a
/// position write, and measured on the job benchmark, publishing at most
/// every 5 ms saved a tenth of the machine's CPU. An event waits at most
/// this much longer; the first of a quiet spell none.
const LINGER: Duration = Duration::from_millis(5);

/// How long a check that this process leads stands; see [`Publisher::leads`].
const LEAD_CHECK: Duration = Duration::from_secs(1);

/// What one poll found.
enum Polled {
    Nothing,
    /// Entries were read and passed; `full`: more may be waiting at once.
    Page {
        full: bool,
    },
}

/// Delivers committed events, in id order, at least once, and moves the
/// publication position past them. Only the leading process publishes.
pub struct Publisher {
    db: DatabaseConnection,
    sink: Arc<dyn Sink>,
    /// Poked after commits that emitted events.
    wake: Arc<Notify>,
    /// `None` until loaded as leader.
    position: Option<Position>,
    /// When this process last found that it leads.
    lead_checked: Option<Instant>,
}

impl Publisher {
    pub fn new(db: DatabaseConnection, sink: Arc<dyn Sink>, wake: Arc<Notify>) -> Self {
        Publisher {
            db,
            sink,
            wake,
            position: None,
            lead_checked: None,
        }
    }

    /// Publishes the next page of events, if any.
    async fn poll(&mut self) -> anyhow::Result<Polled> {
        let mut position = match self.position.take() {
            Some(position) => position,
            None => load_position(&self.db).await?,
        };
        if let Position::Snapshots {
            next: next @ None, ..
        } = &mut position
        {
            let row = self
                .db
                .query_one_raw(Statement::from_string(
                    DbBackend::Postgres,
                    "SELECT pg_current_snapshot()::text AS snapshot",
                ))
                .await?
                .ok_or_else(|| anyhow::anyhow!("no snapshot"))?;
            *next = Some(row.try_get::<String>("", "snapshot")?);
        }
        // Kept in memory across a failure below: the retry reads the same page.
        self.position = Some(position.clone());
        let backend = self.db.get_database_backend();
        let page = read_entries(&self.db, page_statement(backend, &position)?).await?;
        let full = page.entries == page_size(backend);
        let last = page.last_entry;
        let published = page.events.len();
        if published > 0 {
            self.sink.publish(&page.events).await?;
        }
        let advanced = position.after_page(last, full);
        // Saved only after delivery (a crash in between re-delivers: at
        // least once) and only when something was delivered: an empty
        // batch moves nothing anyone could miss.
        if published > 0 {
            save_position(&self.db, &advanced).await?;
            metrics::counter!("trellis_outbox_published_total").increment(published as u64);
        }
        self.position = Some(advanced);
        // Entries, not events: a page of unreadable entries was passed,
        // and what follows it is due at once.
        Ok(match page.entries {
            0 => Polled::Nothing,
            _ => Polled::Page { full },
        })
    }

    /// Whether this process leads, asking the sink at most once per
    /// [`LEAD_CHECK`] while it does (a Redis round trip otherwise per
    /// page). The lock it holds outlives that many times over, and a
    /// process that stalled longer asks again before its next page.
    async fn leads(&mut self) -> bool {
        if self
            .lead_checked
            .is_some_and(|checked| checked.elapsed() < LEAD_CHECK)
        {
            return true;
        }
        let leads = self.sink.lead().await;
        self.lead_checked = leads.then(Instant::now);
        leads
    }

    /// Runs until `stop`, then flushes what is pending.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) {
        loop {
            if !self.leads().await {
                // Another process publishes; reload the position if this one leads again.
                self.position = None;
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(2)) => continue,
                    _ = stop.wait_for(|stop| *stop) => return,
                }
            }
            match self.poll().await {
                Ok(Polled::Page { full: true }) => continue,
                Ok(Polled::Page { full: false }) => {
                    // The rest of a burst gathers while we linger: one
                    // read, one message and one position write then serve
                    // many commits.
                    tokio::select! {
                        _ = tokio::time::sleep(LINGER) => continue,
                        _ = stop.wait_for(|stop| *stop) => break,
                    }
                }
                Ok(Polled::Nothing) => {}
                Err(error) => tracing::warn!(
                    error = format!("{error:#}"),
                    "outbox publish failed; retrying"
                ),
            }
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                _ = stop.wait_for(|stop| *stop) => break,
            }
        }
        if self.sink.lead().await {
            while let Ok(Polled::Page { .. }) = self.poll().await {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_advance_to_the_last_delivered() {
        let start = Position::Ids { after: 10 };
        assert_eq!(
            start.after_page(Some(42), true),
            Position::Ids { after: 42 }
        );
        assert_eq!(
            start.after_page(Some(12), false),
            Position::Ids { after: 12 }
        );
        assert_eq!(start.after_page(None, false), start, "nothing new");
    }

    #[test]
    fn snapshot_bounds_are_read_from_the_text_form() {
        assert_eq!(snapshot_bounds("741:745:741,743").unwrap(), (741, 745));
        assert_eq!(snapshot_bounds("745:745:").unwrap(), (745, 745));
        assert!(snapshot_bounds("745").is_err());
        assert!(snapshot_bounds("x:745:").is_err());
    }

    #[test]
    fn a_snapshot_batch_is_paged_then_done() {
        let batch = Position::Snapshots {
            done: "10:12:".into(),
            next: Some("15:15:".into()),
            after: 0,
        };
        // A full page: more of this batch may follow, after its last id.
        let paged = batch.after_page(Some(300), true);
        assert_eq!(
            paged,
            Position::Snapshots {
                done: "10:12:".into(),
                next: Some("15:15:".into()),
                after: 300
            }
        );
        // The batch's last page: what `next` sees is now all published.
        let done = Position::Snapshots {
            done: "15:15:".into(),
            next: None,
            after: 0,
        };
        assert_eq!(paged.after_page(Some(310), false), done);
        assert_eq!(batch.after_page(None, false), done, "an empty batch");
    }
}
