//! The Redis backend: dispatch across any number of worker processes, and
//! the cross-process event bus.
//!
//! Dispatch: a committed, due task's id is `LPUSH`ed onto `<prefix>:q:<queue>`;
//! a not-yet-due one (retry backoff) waits in the `<prefix>:delayed` sorted
//! set until a mover pushes it. Workers take ids with `BLMOVE` into their own
//! `<prefix>:processing:<worker>` list (reliable fetch: the id is never only
//! in flight) on a dedicated connection without response timeout (blocking
//! commands would trip the default one), then claim the task in the
//! database, clearing the batch from that list: from then on the task's
//! lease guards it. Nothing is lost when a worker dies: its task's lease expires,
//! the reaper requeues it in the database and announces it again; and when a
//! queue list is empty while the database still has due `QUEUED` tasks
//! (a push lost between commit and Redis, or a Redis restart), a resync pushes
//! them. Duplicate ids are harmless: the claim is conditional.
//!
//! Events: the outbox publisher (one leader at a time, by a Redis lock)
//! `PUBLISH`es them to `<prefix>:events`, a JSON array of up to 256 to a
//! message behind the publisher's id, and feeds its own bus directly;
//! every other process subscribes and feeds its own in-process bus.

use std::{sync::Arc, time::Duration};

use chrono::Utc;
use entity::task;
use futures_util::StreamExt;
use redis::{AsyncCommands, aio::MultiplexedConnection};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use tokio::{
    sync::{Mutex, watch},
    task::JoinHandle,
};
use uuid::Uuid;

use super::{
    Jobs,
    bus::{Event, EventBus},
    dispatch::Dispatcher,
    model::Queue,
    outbox::Sink,
    store::{self, Claim},
};
use crate::error::{AppError, AppResult};

#[derive(Clone)]
pub struct RedisKeys {
    prefix: String,
}

impl RedisKeys {
    pub fn new(prefix: &str) -> Self {
        RedisKeys {
            prefix: prefix.to_owned(),
        }
    }

    fn queue(&self, queue: Queue) -> String {
        format!("{}:{}", self.prefix, queue.key())
    }

    fn processing(&self, worker: &str, queue: Queue) -> String {
        format!("{}:processing:{worker}:{}", self.prefix, queue.as_str())
    }

    /// Every worker's processing lists, for `SCAN`.
    fn every_processing(&self) -> String {
        format!("{}:processing:*", self.prefix)
    }

    /// The worker a processing list belongs to and its queue.
    fn processing_owner<'k>(&self, key: &'k str) -> Option<(&'k str, Queue)> {
        let rest = key
            .strip_prefix(self.prefix.as_str())?
            .strip_prefix(":processing:")?;
        let (worker, queue) = rest.rsplit_once(':')?;
        Some((worker, Queue::parse(queue)?))
    }

    /// Present while the worker runs: renewed by its maintenance loop.
    fn alive(&self, worker: &str) -> String {
        format!("{}:alive:{worker}", self.prefix)
    }

    fn delayed(&self) -> String {
        format!("{}:delayed", self.prefix)
    }

    fn events(&self) -> String {
        format!("{}:events", self.prefix)
    }

    fn publisher_lock(&self) -> String {
        format!("{}:outbox-publisher", self.prefix)
    }
}

/// Opens a connection for blocking commands: no response timeout.
async fn blocking_connection(client: &redis::Client) -> redis::RedisResult<MultiplexedConnection> {
    client
        .get_multiplexed_async_connection_with_config(
            &redis::AsyncConnectionConfig::new()
                .set_response_timeout(None)
                .set_connection_timeout(Some(Duration::from_secs(5))),
        )
        .await
}

pub struct RedisDispatcher {
    client: redis::Client,
    commands: redis::aio::ConnectionManager,
    keys: RedisKeys,
    worker_id: String,
    /// One blocking connection per queue loop.
    blocking: [Mutex<Option<MultiplexedConnection>>; 3],
}

impl RedisDispatcher {
    pub fn new(
        client: redis::Client,
        commands: redis::aio::ConnectionManager,
        keys: RedisKeys,
        worker_id: String,
    ) -> Self {
        RedisDispatcher {
            client,
            commands,
            keys,
            worker_id,
            blocking: std::array::from_fn(|_| Mutex::new(None)),
        }
    }

    fn internal(error: redis::RedisError) -> AppError {
        AppError::internal(anyhow::Error::new(error).context("redis"))
    }

    /// Moves up to `max` waiting ids of a queue to our processing list.
    async fn take_ids(&self, queue: Queue, max: usize) -> AppResult<Vec<Uuid>> {
        let mut conn = self.commands.clone();
        let ids: Vec<String> = redis::cmd("EVAL")
            .arg(TAKE_SCRIPT)
            .arg(2)
            .arg(self.keys.queue(queue))
            .arg(self.keys.processing(&self.worker_id, queue))
            .arg(max)
            .query_async(&mut conn)
            .await
            .map_err(Self::internal)?;
        Ok(self.parse_ids(queue, ids))
    }

    /// The ids as task ids; anything else is dropped from our processing
    /// list (nothing else pushes there, so it would only linger).
    fn parse_ids(&self, queue: Queue, ids: Vec<String>) -> Vec<Uuid> {
        let (uuids, junk): (Vec<_>, Vec<_>) = ids
            .into_iter()
            .map(|id| Uuid::parse_str(&id).map_err(|_| id))
            .partition(Result::is_ok);
        let junk: Vec<String> = junk.into_iter().filter_map(Result::err).collect();
        if !junk.is_empty() {
            tracing::warn!(
                count = junk.len(),
                queue = queue.key(),
                "dropping ids that are not task ids from Redis"
            );
            self.clear(queue, junk);
        }
        uuids.into_iter().filter_map(Result::ok).collect()
    }

    /// Removes ids from our processing list, off the caller's path.
    fn clear(&self, queue: Queue, ids: Vec<String>) {
        let processing = self.keys.processing(&self.worker_id, queue);
        let mut pipe = redis::pipe();
        for id in &ids {
            pipe.lrem(&processing, 1, id).ignore();
        }
        let mut conn = self.commands.clone();
        tokio::spawn(async move {
            if let Err(error) = pipe.query_async::<()>(&mut conn).await {
                // Left over, they only cost memory: nothing reads them back
                // as work, the database decides.
                tracing::warn!(count = ids.len(), error = %error, "clearing claimed ids from Redis failed");
            }
        });
    }

    /// Waits up to a second for one id of an empty queue, on the queue's
    /// blocking connection.
    async fn wait_for_one(
        &self,
        queue: Queue,
        source: &str,
        processing: &str,
    ) -> AppResult<Option<String>> {
        let mut slot = self.blocking[queue as usize].lock().await;
        if slot.is_none() {
            *slot = Some(
                blocking_connection(&self.client)
                    .await
                    .map_err(Self::internal)?,
            );
        }
        let Some(conn) = slot.as_mut() else {
            return Ok(None);
        };
        let first: redis::RedisResult<Option<String>> = conn
            .blmove(
                source,
                processing,
                redis::Direction::Right,
                redis::Direction::Left,
                1.0,
            )
            .await;
        first.map_err(|error| {
            *slot = None;
            Self::internal(error)
        })
    }

    /// Moves delayed ids whose time has come onto their queue. `ZREM`
    /// decides which mover pushes each, so several movers never double it.
    async fn move_due(&self) -> redis::RedisResult<usize> {
        let mut conn = self.commands.clone();
        let now = Utc::now().timestamp_millis();
        let due: Vec<String> = conn
            .zrangebyscore_limit(self.keys.delayed(), "-inf", now, 0, 256)
            .await?;
        let mut moved = 0;
        for member in due {
            let removed: i64 = conn.zrem(self.keys.delayed(), &member).await?;
            if removed == 1
                && let Some((queue, id)) = member.split_once('|')
                && let Some(queue) = Queue::parse(queue)
            {
                conn.lpush::<_, _, ()>(self.keys.queue(queue), id).await?;
                moved += 1;
            }
        }
        Ok(moved)
    }

    /// Says this worker is alive for [`ALIVE_FOR`].
    async fn renew_alive(&self) -> redis::RedisResult<()> {
        let mut conn = self.commands.clone();
        conn.pset_ex(
            self.keys.alive(&self.worker_id),
            1,
            ALIVE_FOR.as_millis() as u64,
        )
        .await
    }

    /// Gives the ids in the processing lists of workers that are gone (no
    /// `alive` key) back to their queues and deletes the lists: a worker
    /// that died (or was renamed) leaves nothing behind forever. A task
    /// whose id comes back twice is harmless: its claim is conditional.
    async fn sweep_gone_workers(&self) -> redis::RedisResult<usize> {
        let mut conn = self.commands.clone();
        let mut lists: Vec<String> = Vec::new();
        {
            let mut scan = conn
                .scan_match::<_, String>(self.keys.every_processing())
                .await?;
            while let Some(key) = scan.next().await {
                lists.push(key?);
            }
        }
        let mut swept = 0;
        for key in lists {
            let Some((worker, queue)) = self.keys.processing_owner(&key) else {
                continue;
            };
            if worker == self.worker_id {
                continue;
            }
            let alive: bool = conn.exists(self.keys.alive(worker)).await?;
            if alive {
                continue;
            }
            let moved: usize = redis::cmd("EVAL")
                .arg(SWEEP_SCRIPT)
                .arg(2)
                .arg(&key)
                .arg(self.keys.queue(queue))
                .query_async(&mut conn)
                .await?;
            tracing::info!(
                worker,
                queue = queue.key(),
                ids = moved,
                "swept the processing list of a worker that is gone"
            );
            swept += 1;
        }
        Ok(swept)
    }

    /// Pushes due `QUEUED` tasks the queue list does not show (lost pushes).
    async fn resync(&self, jobs: &Jobs) -> anyhow::Result<()> {
        let mut conn = self.commands.clone();
        let cutoff = Utc::now() - chrono::Duration::seconds(2);
        for queue in Queue::ALL {
            let waiting: i64 = conn.llen(self.keys.queue(queue)).await?;
            if waiting > 0 {
                continue;
            }
            let stale = task::Entity::find()
                .filter(task::Column::Queue.eq(task::Queue::from(queue)))
                .filter(task::Column::Status.eq(task::Status::Queued))
                .filter(task::Column::RunAt.lt(cutoff))
                .order_by_asc(task::Column::RunAt)
                .limit(512)
                .all(jobs.db())
                .await?;
            if !stale.is_empty() {
                self.announce(&stale).await;
            }
            if !stale.is_empty() {
                tracing::info!(
                    queue = queue.key(),
                    count = stale.len(),
                    "re-announced queued tasks missing from Redis"
                );
            }
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl Dispatcher for RedisDispatcher {
    async fn announce(&self, tasks: &[task::Model]) {
        let now = Utc::now();
        let mut pipe = redis::pipe();
        for queue in Queue::ALL {
            let due: Vec<String> = tasks
                .iter()
                .filter(|task| Queue::from(task.queue) == queue && task.run_at <= now)
                .map(|task| task.id.to_string())
                .collect();
            if !due.is_empty() {
                pipe.lpush(self.keys.queue(queue), due).ignore();
            }
        }
        for task in tasks.iter().filter(|task| task.run_at > now) {
            pipe.zadd(
                self.keys.delayed(),
                format!("{}|{}", Queue::from(task.queue).as_str(), task.id),
                task.run_at.timestamp_millis(),
            )
            .ignore();
        }
        let mut conn = self.commands.clone();
        if let Err(error) = pipe.query_async::<()>(&mut conn).await {
            // The resync finds them later; the database still has the truth.
            tracing::warn!(count = tasks.len(), error = %error, "announcing tasks to Redis failed");
        }
    }

    async fn next(&self, jobs: &Jobs, queue: Queue, max: usize) -> AppResult<Vec<task::Model>> {
        // Under load ids are waiting: take up to `max` without blocking.
        // Idle, wait for one, then take the rest. Each id moves to our
        // processing list atomically.
        let mut ids = self.take_ids(queue, max).await?;
        if ids.is_empty() {
            let source = self.keys.queue(queue);
            let processing = self.keys.processing(&self.worker_id, queue);
            let Some(first) = self.wait_for_one(queue, &source, &processing).await? else {
                return Ok(Vec::new());
            };
            ids.extend(self.parse_ids(queue, vec![first]));
            if max > 1 {
                ids.extend(self.take_ids(queue, max - 1).await?);
            }
        }
        let settings = jobs.settings();
        let claim = Claim::Ids(ids);
        let claimed = store::claim(jobs.db(), &claim, &settings.worker_id, settings.lease).await;
        self.settle(queue, claim, claimed.is_ok());
        claimed
    }

    async fn take(&self, queue: Queue, max: usize) -> AppResult<Claim> {
        Ok(Claim::Ids(self.take_ids(queue, max).await?))
    }

    /// Claimed, the tasks' leases guard them; the rest were duplicates
    /// (already taken, cancelled or finished): either way the ids have
    /// served their purpose, and one round trip, off the claim's path,
    /// clears them from our processing list. A failed claim gives the ids
    /// back to the front of their queue.
    fn settle(&self, queue: Queue, claim: Claim, claimed: bool) {
        let Claim::Ids(ids) = claim else { return };
        if ids.is_empty() {
            return;
        }
        let ids: Vec<String> = ids.iter().map(Uuid::to_string).collect();
        if claimed {
            return self.clear(queue, ids);
        }
        let mut give_back = redis::cmd("EVAL");
        give_back
            .arg(GIVE_BACK_SCRIPT)
            .arg(2)
            .arg(self.keys.queue(queue))
            .arg(self.keys.processing(&self.worker_id, queue))
            .arg(&ids);
        let mut conn = self.commands.clone();
        tokio::spawn(async move {
            if let Err(error) = give_back.query_async::<()>(&mut conn).await {
                // The resync announces them again from the database.
                tracing::warn!(count = ids.len(), error = %error, "giving unclaimed ids back to Redis failed");
            }
        });
    }

    fn maintenance(&self, jobs: Jobs, mut stop: watch::Receiver<bool>) -> Option<JoinHandle<()>> {
        let this = RedisDispatcher::new(
            self.client.clone(),
            self.commands.clone(),
            self.keys.clone(),
            self.worker_id.clone(),
        );
        Some(tokio::spawn(async move {
            let mut ticks: u32 = 0;
            loop {
                if let Err(error) = this.move_due().await {
                    tracing::warn!(error = %error, "moving delayed tasks failed");
                }
                if ticks.is_multiple_of(20) {
                    if let Err(error) = this.renew_alive().await {
                        tracing::warn!(error = %error, "renewing the worker's alive key failed");
                    }
                    if let Err(error) = this.resync(&jobs).await {
                        tracing::warn!(
                            error = format!("{error:#}"),
                            "resyncing queued tasks failed"
                        );
                    }
                    if let Err(error) = this.sweep_gone_workers().await {
                        tracing::warn!(error = %error, "sweeping gone workers' lists failed");
                    }
                }
                ticks = ticks.wrapping_add(1);
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(250)) => {}
                    _ = stop.wait_for(|stop| *stop) => break,
                }
            }
        }))
    }
}

/// How long a worker's `alive` key outlives its last renewal (renewed
/// every 5 s by the maintenance loop).
const ALIVE_FOR: Duration = Duration::from_secs(30);

/// Moves every id of a gone worker's processing list KEYS[1] to the tail
/// of its queue KEYS[2], where they are taken first, deletes the list and
/// returns how many moved.
const SWEEP_SCRIPT: &str = "local ids = redis.call('LRANGE', KEYS[1], 0, -1) \
    for _, id in ipairs(ids) do redis.call('RPUSH', KEYS[2], id) end \
    redis.call('DEL', KEYS[1]) return #ids";

/// Moves the ids ARGV from our processing list KEYS[2] back to the tail of
/// their queue KEYS[1], where they are taken first.
const GIVE_BACK_SCRIPT: &str = "for _, id in ipairs(ARGV) do \
    redis.call('LREM', KEYS[2], 1, id) redis.call('RPUSH', KEYS[1], id) end";

/// Moves up to ARGV[1] ids from the tail of KEYS[1] to our processing list
/// KEYS[2], atomically, and returns them.
const TAKE_SCRIPT: &str = "local ids = redis.call('RPOP', KEYS[1], ARGV[1]) \
    if not ids then return {} end \
    for _, id in ipairs(ids) do redis.call('LPUSH', KEYS[2], id) end \
    return ids";

/// Events per Redis message: a page of events travels as a few JSON
/// arrays, not one message each.
const EVENTS_PER_MESSAGE: usize = 256;

/// Publishes outbox events to Redis; one process at a time holds the
/// publisher lock, so events leave in outbox order. The publishing
/// process hands them to its own bus directly, and skips them when Redis
/// brings them back.
pub struct RedisSink {
    pub commands: redis::aio::ConnectionManager,
    pub keys: RedisKeys,
    pub owner: String,
    pub bus: EventBus,
}

/// Renews the lock if we hold it, takes it if free.
const LEAD_SCRIPT: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
    return redis.call('PEXPIRE', KEYS[1], ARGV[2]) \
    else return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) and 1 or 0 end";

#[async_trait::async_trait]
impl Sink for RedisSink {
    async fn lead(&self) -> bool {
        let mut conn = self.commands.clone();
        let result: redis::RedisResult<i64> = redis::cmd("EVAL")
            .arg(LEAD_SCRIPT)
            .arg(1)
            .arg(self.keys.publisher_lock())
            .arg(&self.owner)
            .arg(10_000)
            .query_async(&mut conn)
            .await;
        matches!(result, Ok(1))
    }

    async fn publish(&self, events: &[Arc<Event>]) -> anyhow::Result<()> {
        let mut pipe = redis::pipe();
        for chunk in events.chunks(EVENTS_PER_MESSAGE) {
            pipe.publish(self.keys.events(), message(&self.owner, chunk)?)
                .ignore();
        }
        let mut conn = self.commands.clone();
        pipe.query_async::<()>(&mut conn).await?;
        // After Redis took them: a failed page is published again, and
        // this process's subscribers should not see it twice for nothing.
        for event in events {
            self.bus.deliver(event.clone());
        }
        Ok(())
    }
}

/// What travels on the events channel: the publishing process's id, a
/// line break, and the events as a JSON array.
fn message(origin: &str, events: &[Arc<Event>]) -> serde_json::Result<Vec<u8>> {
    let events: Vec<&Event> = events.iter().map(Arc::as_ref).collect();
    let mut bytes = Vec::with_capacity(origin.len() + 1 + 512 * events.len());
    bytes.extend_from_slice(origin.as_bytes());
    bytes.push(b'\n');
    serde_json::to_writer(&mut bytes, &events)?;
    Ok(bytes)
}

/// A message's events, or `None` when `own` published it (this process
/// delivered them already). Processes of an earlier version publish a
/// bare event, without origin. (Not a `serde(untagged)` enum: it buffers
/// input, which raw payloads cannot be read from.)
fn parse_message(text: &str, own: &str) -> serde_json::Result<Option<Vec<Event>>> {
    if text.starts_with('{') {
        return serde_json::from_str(text).map(|event| Some(vec![event]));
    }
    match text.split_once('\n') {
        Some((origin, _)) if origin == own => Ok(None),
        Some((_, events)) => serde_json::from_str(events).map(Some),
        None => serde_json::from_str(text).map(Some),
    }
}

/// Feeds this process's bus from Redis with what other processes
/// (`own` is this one) published, reconnecting on failure.
pub fn forward_events(
    client: redis::Client,
    keys: RedisKeys,
    bus: EventBus,
    own: String,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            match client.get_async_pubsub().await {
                Ok(mut pubsub) => {
                    if let Err(error) = pubsub.subscribe(keys.events()).await {
                        tracing::warn!(error = %error, "subscribing to Redis events failed");
                    } else {
                        let mut messages = pubsub.on_message();
                        loop {
                            tokio::select! {
                                message = messages.next() => {
                                    let Some(message) = message else { break };
                                    match message.get_payload::<String>().map(|text| parse_message(&text, &own)) {
                                        Ok(Ok(Some(events))) => {
                                            for event in events {
                                                bus.deliver(Arc::new(event));
                                            }
                                        }
                                        Ok(Ok(None)) => {}
                                        _ => tracing::warn!("ignoring a malformed event message from Redis"),
                                    }
                                }
                                _ = stop.wait_for(|stop| *stop) => return,
                            }
                        }
                    }
                }
                Err(error) => {
                    tracing::warn!(error = %error, "connecting to Redis for events failed")
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                _ = stop.wait_for(|stop| *stop) => return,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(id: i64) -> Event {
        Event {
            id,
            topic: "task.updated".into(),
            aggregate_id: format!("a{id}"),
            owner_id: None,
            payload: serde_json::value::to_raw_value(&serde_json::json!({ "n": id })).unwrap(),
            created_at: Utc::now(),
        }
    }

    #[test]
    fn a_processing_list_names_its_worker_and_queue() {
        let keys = RedisKeys::new("trellis");
        let key = keys.processing("host:1234:abc", Queue::Short);
        assert_eq!(
            keys.processing_owner(&key),
            Some(("host:1234:abc", Queue::Short))
        );
        assert_eq!(keys.processing_owner("trellis:q:short"), None);
        assert_eq!(keys.processing_owner("other:processing:w:short"), None);
    }

    #[test]
    fn a_message_carries_its_publisher_and_its_events() {
        let many = String::from_utf8(
            message("worker-a", &[Arc::new(event(1)), Arc::new(event(2))]).unwrap(),
        )
        .unwrap();
        let parsed = parse_message(&many, "worker-b").unwrap().unwrap();
        assert_eq!(
            parsed
                .iter()
                .map(|e| (e.id, e.payload.get()))
                .collect::<Vec<_>>(),
            vec![(1, r#"{"n":1}"#), (2, r#"{"n":2}"#)]
        );
        assert!(
            parse_message(&many, "worker-a").unwrap().is_none(),
            "the publisher skips its own"
        );
        // As an earlier version publishes: one bare event.
        let one = serde_json::to_string(&event(3)).unwrap();
        assert_eq!(
            parse_message(&one, "worker-b").unwrap().unwrap()[0].aggregate_id,
            "a3"
        );
        assert!(parse_message("worker-a\n[{\"id\":", "worker-b").is_err());
    }
}
