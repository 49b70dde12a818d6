//! The transactional outbox: [`emit`] writes an event in the caller's
//! transaction; the [`Publisher`] delivers committed events, in id order,
//! at least once, and records them published by moving one position (the
//! `outbox_position` row) past them.

use std::{sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use entity::outbox_event;
use sea_orm::{
    ConnectionTrait, DatabaseConnection, DbBackend, EntityTrait, FromQueryResult, Set, Statement,
};
use serde_json::Value;
use tokio::sync::{Notify, watch};
use uuid::Uuid;

use super::bus::{Event, EventBus};
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
        aggregate_id: Set(event.aggregate_id),
        owner_id: Set(event.owner_id),
        payload: Set(event.payload),
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

const BATCH: usize = 256;
const POSITION: &str = "publisher";

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

/// What the publisher reads of an event: the payload as its JSON text,
/// delivered as is.
const COLUMNS: &str =
    "id, topic, aggregate_id, owner_id, CAST(payload AS TEXT) AS payload, created_at";

#[derive(sea_orm::FromQueryResult)]
struct StoredEvent {
    id: i64,
    topic: String,
    aggregate_id: String,
    owner_id: Option<Uuid>,
    payload: String,
    created_at: DateTime<Utc>,
}

impl TryFrom<StoredEvent> for Event {
    type Error = serde_json::Error;

    fn try_from(row: StoredEvent) -> Result<Self, Self::Error> {
        Ok(Event {
            id: row.id,
            topic: row.topic,
            aggregate_id: row.aggregate_id,
            owner_id: row.owner_id,
            payload: serde_json::value::RawValue::from_string(row.payload)?,
            created_at: row.created_at,
        })
    }
}

/// The next page of the batch `position` is in: up to [`BATCH`] events in
/// id order. On PostgreSQL the batch needs its `next` snapshot first.
fn page_statement(backend: DbBackend, position: &Position) -> anyhow::Result<Statement> {
    Ok(match position {
        Position::Ids { after } => Statement::from_sql_and_values(
            backend,
            format!("SELECT {COLUMNS} FROM outbox_events WHERE id > $1 ORDER BY id LIMIT {BATCH}"),
            [(*after).into()],
        ),
        Position::Snapshots { done, next, after } => {
            let next = next
                .clone()
                .ok_or_else(|| anyhow::anyhow!("a batch without its snapshot"))?;
            // The batch's transactions started at or after `done`'s xmin
            // and before `next`'s xmax. Given as a closed range of plain
            // numbers, the planner sees how narrow it is and reads the
            // `xact_id` index. A batch's first page has no id bound:
            // `id > 0` spans the whole table, and the planner intersected
            // it with the range.
            let (low, _) = snapshot_bounds(done)?;
            let (_, high) = snapshot_bounds(&next)?;
            let mut values: Vec<sea_orm::Value> =
                vec![low.into(), high.into(), done.clone().into(), next.into()];
            let paged = if *after > 0 {
                values.push((*after).into());
                "AND id > $5 "
            } else {
                ""
            };
            Statement::from_sql_and_values(
                backend,
                format!(
                    "SELECT {COLUMNS} FROM outbox_events WHERE xact_id >= $1 AND xact_id < $2 \
                     AND NOT pg_visible_in_snapshot(xact_id::text::xid8, $3::pg_snapshot) \
                     AND pg_visible_in_snapshot(xact_id::text::xid8, $4::pg_snapshot) \
                     {paged}ORDER BY id LIMIT {BATCH}"
                ),
                values,
            )
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
    db.execute_raw(Statement::from_sql_and_values(
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
    ))
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
    let row = db
        .query_one_raw(Statement::from_sql_and_values(
            backend,
            format!(
                "SELECT COUNT(*) AS n FROM outbox_events e, outbox_position p \
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

/// Deletes published events created before `cutoff` (retention).
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

/// Delivers committed events, in id order, at least once, and moves the
/// publication position past them. Only the leading process publishes.
pub struct Publisher {
    db: DatabaseConnection,
    sink: Arc<dyn Sink>,
    /// Poked after commits that emitted events.
    wake: Arc<Notify>,
    /// `None` until loaded as leader.
    position: Option<Position>,
}

impl Publisher {
    pub fn new(db: DatabaseConnection, sink: Arc<dyn Sink>, wake: Arc<Notify>) -> Self {
        Publisher {
            db,
            sink,
            wake,
            position: None,
        }
    }

    /// Publishes the next page of events, if any. True when it published
    /// some: more may be pending at once.
    async fn poll(&mut self) -> anyhow::Result<bool> {
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
        let rows = StoredEvent::find_by_statement(page_statement(
            self.db.get_database_backend(),
            &position,
        )?)
        .all(&self.db)
        .await?;
        let full = rows.len() == BATCH;
        let last = rows.last().map(|row| row.id);
        let published = rows.len();
        if !rows.is_empty() {
            let events = rows
                .into_iter()
                .map(|row| Event::try_from(row).map(Arc::new))
                .collect::<Result<Vec<_>, _>>()?;
            self.sink.publish(&events).await?;
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
        Ok(published > 0)
    }

    /// Runs until `stop`, then flushes what is pending.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) {
        loop {
            if !self.sink.lead().await {
                // Another process publishes; reload the position if this one leads again.
                self.position = None;
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(2)) => continue,
                    _ = stop.wait_for(|stop| *stop) => return,
                }
            }
            match self.poll().await {
                Ok(true) => continue,
                Ok(false) => {}
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
            while let Ok(true) = self.poll().await {}
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
