//! The transactional outbox: [`emit`] writes an event in the caller's
//! transaction; the [`Publisher`] delivers committed events, in id order,
//! at least once, and marks them published.

use std::{
    collections::BTreeMap,
    sync::Arc,
    time::{Duration, Instant},
};

use chrono::Utc;
use entity::outbox_event;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, Set, sea_query::Expr,
};
use serde_json::Value;
use tokio::sync::{Notify, watch};
use uuid::Uuid;

use super::bus::{Event, EventBus};
use crate::error::AppResult;

/// An event to record.
pub struct NewEvent {
    pub topic: &'static str,
    pub aggregate_id: String,
    pub owner_id: Option<Uuid>,
    pub payload: Value,
}

/// Records events in the same transaction as the change they describe
/// (one statement however many).
pub async fn emit(txn: &impl ConnectionTrait, events: Vec<NewEvent>) -> AppResult<()> {
    if events.is_empty() {
        return Ok(());
    }
    let now = Utc::now();
    outbox_event::Entity::insert_many(events.into_iter().map(|event| outbox_event::ActiveModel {
        topic: Set(event.topic.to_owned()),
        aggregate_id: Set(event.aggregate_id),
        owner_id: Set(event.owner_id),
        payload: Set(event.payload),
        created_at: Set(now),
        published_at: Set(None),
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

const BATCH: u64 = 256;

/// A gap older than this is taken for a rolled-back transaction's id.
const GAP_MAX_AGE: Duration = Duration::from_secs(120);
/// At most this many gaps are followed (the oldest go first; the sweep
/// still finds whatever they hid).
const MAX_GAPS: usize = 1000;
/// How often the publisher also sweeps every id it has passed.
const SWEEP_EVERY: Duration = Duration::from_secs(30);

/// Where the publisher is in the outbox (pure bookkeeping, no I/O).
///
/// Published rows stay in the table (for retention), so "every unpublished
/// row" is a scan that grows with the table's history and with the dead
/// row versions that marking leaves until vacuum: at 160,000 events it
/// took 34 ms a batch. The publisher reads by id instead: rows above
/// `high`, plus the ids it skipped because they were not visible yet (a
/// transaction still open, or rolled back). Rows that committed late are
/// found among the gaps in the same poll as anything that followed them,
/// so per-aggregate order holds: the transaction of a later event of the
/// same aggregate waits for the earlier one's lock, so it commits after it.
#[derive(Debug)]
struct Cursor {
    /// Every id up to here has been seen, except the gaps.
    high: i64,
    /// Ids below `high` not seen yet, with when they were first missed.
    gaps: BTreeMap<i64, Instant>,
}

impl Cursor {
    fn new(high: i64) -> Self {
        Cursor {
            high,
            gaps: BTreeMap::new(),
        }
    }

    /// The ids to look for again.
    fn gaps(&self) -> Vec<i64> {
        self.gaps.keys().copied().collect()
    }

    /// Records the ids a scan above `high` returned (ascending), and ids
    /// found another way (gaps, the sweep).
    fn advance(&mut self, scanned: &[i64], found: &[i64], now: Instant) {
        for &id in found.iter().chain(scanned) {
            self.gaps.remove(&id);
        }
        for &id in scanned {
            if id <= self.high {
                continue;
            }
            // A jump larger than the bound only keeps its newest ids.
            for missing in (self.high + 1).max(id - MAX_GAPS as i64)..id {
                self.gaps.insert(missing, now);
            }
            self.high = id;
        }
        self.gaps
            .retain(|_, missed| now.saturating_duration_since(*missed) < GAP_MAX_AGE);
        while self.gaps.len() > MAX_GAPS {
            self.gaps.pop_first();
        }
    }
}

/// What one poll did.
struct Poll {
    published: usize,
    /// The scan above the cursor was full: there may be more at once.
    more: bool,
}

/// Delivers committed events, in id order, at least once, and marks them
/// published. Only the leading process publishes.
pub struct Publisher {
    db: DatabaseConnection,
    sink: Arc<dyn Sink>,
    /// Poked after commits that emitted events.
    wake: Arc<Notify>,
    /// `None` until the first poll as leader.
    cursor: Option<Cursor>,
    last_sweep: Option<Instant>,
}

impl Publisher {
    pub fn new(db: DatabaseConnection, sink: Arc<dyn Sink>, wake: Arc<Notify>) -> Self {
        Publisher {
            db,
            sink,
            wake,
            cursor: None,
            last_sweep: None,
        }
    }

    /// Where to start: just below the oldest unpublished row, or at the
    /// newest row (one scan of the table, once per leadership).
    async fn start_cursor(&self) -> anyhow::Result<Cursor> {
        let oldest = outbox_event::Entity::find()
            .filter(outbox_event::Column::PublishedAt.is_null())
            .order_by_asc(outbox_event::Column::Id)
            .one(&self.db)
            .await?;
        let high = match oldest {
            Some(row) => row.id - 1,
            None => outbox_event::Entity::find()
                .order_by_desc(outbox_event::Column::Id)
                .one(&self.db)
                .await?
                .map_or(0, |row| row.id),
        };
        Ok(Cursor::new(high))
    }

    /// Publishes what is pending: rows above the cursor, rows that
    /// appeared in its gaps, and now and then every unpublished row it has
    /// passed (the backstop for gaps given up on).
    async fn poll(&mut self) -> anyhow::Result<Poll> {
        if self.cursor.is_none() {
            self.cursor = Some(self.start_cursor().await?);
        }
        let (high, gaps) = self
            .cursor
            .as_ref()
            .map(|cursor| (cursor.high, cursor.gaps()))
            .unwrap_or_default();
        let now = Instant::now();
        // Above the cursor first, then the gaps: whatever a row seen above
        // waited for committed before it, so the later reads see it too.
        let scanned = outbox_event::Entity::find()
            .filter(outbox_event::Column::Id.gt(high))
            .order_by_asc(outbox_event::Column::Id)
            .limit(BATCH)
            .all(&self.db)
            .await?;
        let more = scanned.len() as u64 == BATCH;
        let mut found = Vec::new();
        if !gaps.is_empty() {
            found.extend(
                outbox_event::Entity::find()
                    .filter(outbox_event::Column::Id.is_in(gaps))
                    .all(&self.db)
                    .await?,
            );
        }
        if self
            .last_sweep
            .is_none_or(|last| now.duration_since(last) >= SWEEP_EVERY)
        {
            found.extend(
                outbox_event::Entity::find()
                    .filter(outbox_event::Column::PublishedAt.is_null())
                    .filter(outbox_event::Column::Id.lte(high))
                    .order_by_asc(outbox_event::Column::Id)
                    .limit(BATCH)
                    .all(&self.db)
                    .await?,
            );
            self.last_sweep = Some(now);
        }
        let scanned_ids: Vec<i64> = scanned.iter().map(|row| row.id).collect();
        let found_ids: Vec<i64> = found.iter().map(|row| row.id).collect();
        let pending: BTreeMap<i64, outbox_event::Model> = scanned
            .into_iter()
            .chain(found)
            .filter(|row| row.published_at.is_none())
            .map(|row| (row.id, row))
            .collect();
        let published: Vec<i64> = pending.keys().copied().collect();
        if !published.is_empty() {
            let events: Vec<Arc<Event>> = pending
                .into_values()
                .map(|row| {
                    Arc::new(Event {
                        id: row.id,
                        topic: row.topic,
                        aggregate_id: row.aggregate_id,
                        owner_id: row.owner_id,
                        payload: row.payload,
                        created_at: row.created_at,
                    })
                })
                .collect();
            self.sink.publish(&events).await?;
            // Marked only after delivery: a crash in between re-delivers (at least once).
            outbox_event::Entity::update_many()
                .col_expr(outbox_event::Column::PublishedAt, Expr::value(Utc::now()))
                .filter(outbox_event::Column::Id.is_in(published.iter().copied()))
                .exec(&self.db)
                .await?;
            metrics::counter!("trellis_outbox_published_total").increment(published.len() as u64);
        }
        // Only once delivered: a failed poll reads the same rows again,
        // from the same cursor.
        if let Some(cursor) = self.cursor.as_mut() {
            cursor.advance(&scanned_ids, &found_ids, now);
        }
        Ok(Poll {
            published: published.len(),
            more,
        })
    }

    /// Runs until `stop`, then flushes what is pending.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) {
        loop {
            if !self.sink.lead().await {
                // Another process publishes; start afresh if this one leads again.
                self.cursor = None;
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(2)) => continue,
                    _ = stop.wait_for(|stop| *stop) => return,
                }
            }
            match self.poll().await {
                Ok(Poll { more: true, .. }) => continue,
                Ok(_) => {}
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
            while let Ok(poll) = self.poll().await {
                if !poll.more && poll.published == 0 {
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_skipped_above_the_cursor_are_followed_as_gaps() {
        let now = Instant::now();
        let mut cursor = Cursor::new(10);
        cursor.advance(&[11, 12, 15, 16], &[], now);
        assert_eq!(cursor.high, 16);
        assert_eq!(cursor.gaps(), [13, 14]);
        // 14 committed late; 13 is still open.
        cursor.advance(&[17], &[14], now);
        assert_eq!(cursor.gaps(), [13]);
        // Rows at or below the cursor (seen again) change nothing.
        cursor.advance(&[12, 18], &[], now);
        assert_eq!((cursor.high, cursor.gaps()), (18, vec![13]));
    }

    #[test]
    fn old_gaps_are_given_up_and_their_number_is_bounded() {
        let start = Instant::now();
        let mut cursor = Cursor::new(0);
        cursor.advance(&[5], &[], start);
        assert_eq!(cursor.gaps(), [1, 2, 3, 4]);
        cursor.advance(&[], &[], start + GAP_MAX_AGE);
        assert!(cursor.gaps().is_empty(), "taken for rolled back");

        cursor.advance(&[5 + MAX_GAPS as i64 + 11], &[], start);
        assert_eq!(cursor.gaps().len(), MAX_GAPS);
        assert_eq!(cursor.gaps()[0], 16, "the oldest ids go first");
    }
}
