//! Every read and write of the `tasks`, `idempotency_keys` and `task_scopes`
//! tables. Each state change of a task commits together with its
//! `task.updated` outbox event.
//!
//! Lease safety: every update a worker makes is conditional on
//! `lease_owner = <worker> AND status = 'RUNNING'`, so a worker whose lease
//! was reclaimed can no longer change the task (its stage transaction rolls
//! back with its effects).

use std::{collections::HashMap, time::Duration};

use chrono::{DateTime, Utc};
use entity::{idempotency_key, task};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, DatabaseTransaction,
    DbBackend, EntityTrait, QueryFilter, QueryTrait, Set, SqlErr, Statement, TransactionTrait,
    Value,
    sea_query::{Expr, ExprTrait},
};
use uuid::Uuid;

pub use super::policy::Finish;
use super::{
    model::{NewTask, Queue, TASK_UPDATED, TaskRecord, TaskStatus, task_event_sql},
    outbox, policy,
};
use crate::error::{AppError, AppResult};

/// Owner key of server-initiated work in `idempotency_keys`.
const SYSTEM_OWNER: &str = "system";

/// The most tasks one statement writes (an insert of many, a claim): its
/// events make one outbox entry, which holds fewer than
/// [`outbox::MAX_EVENTS_PER_ENTRY`].
pub const MAX_TASKS_PER_WRITE: usize = 1000;

/// Emits the tasks' current states as `task.updated` events.
pub async fn emit_tasks_updated(
    txn: &impl ConnectionTrait,
    models: &[task::Model],
) -> AppResult<()> {
    let mut events = Vec::with_capacity(models.len());
    for model in models {
        events.push(outbox::NewEvent {
            topic: TASK_UPDATED,
            aggregate_id: model.id.to_string(),
            owner_id: model.owner_id,
            payload: serde_json::to_value(TaskRecord::from(model)).map_err(AppError::internal)?,
        });
    }
    outbox::emit(txn, events).await
}

/// Emits one task's current state as a `task.updated` event.
pub async fn emit_task_updated(txn: &impl ConnectionTrait, model: &task::Model) -> AppResult<()> {
    emit_tasks_updated(txn, std::slice::from_ref(model)).await
}

/// Runs a statement that writes `tasks` rows and returns them (`…
/// RETURNING *`), and records each written row's `task.updated` event, in
/// the caller's transaction.
///
/// On PostgreSQL the same statement stores the events as one outbox entry
/// ([`with_task_events`]). Elsewhere each event is rendered here and
/// emitted after the statement.
pub async fn write_tasks_in(
    conn: &impl ConnectionTrait,
    statement: Statement,
) -> AppResult<Vec<task::Model>> {
    if conn.get_database_backend() != DbBackend::Postgres {
        let models = task::Entity::find()
            .from_raw_sql(statement)
            .all(conn)
            .await?;
        emit_tasks_updated(conn, &models).await?;
        return Ok(models);
    }
    Ok(task::Entity::find()
        .from_raw_sql(with_task_events(vec![statement], |_| {
            "SELECT * FROM t".into()
        }))
        .all(conn)
        .await?)
}

/// PostgreSQL: `parts` — statements that write `tasks` rows and return
/// them, no two writing the same row — as one statement that also stores
/// their `task.updated` events as one outbox entry: a typed snapshot of
/// each written row ([`task_event_sql`]), nothing rendered in SQL, one row
/// however many tasks. In it the parts are named `w0`, `w1`…, and `t` is
/// every written row; `select(names)` is what the statement answers. One
/// statement, one round trip, no transaction around it; the publisher
/// renders the events.
fn with_task_events(parts: Vec<Statement>, select: impl FnOnce(&[String]) -> String) -> Statement {
    let mut ctes = Vec::with_capacity(parts.len());
    let mut names = Vec::with_capacity(parts.len());
    let mut values = Vec::new();
    for (index, part) in parts.into_iter().enumerate() {
        let name = format!("w{index}");
        ctes.push(format!(
            "{name} AS ({})",
            crate::db::shift_placeholders(&part.sql, values.len())
        ));
        values.extend(part.values.map(|values| values.0).unwrap_or_default());
        names.push(name);
    }
    let every: Vec<String> = names
        .iter()
        .map(|name| format!("SELECT * FROM {name}"))
        .collect();
    // Without a `GROUP BY` the aggregate yields one row even for no
    // tasks; `HAVING` keeps a write that matched nothing from storing an
    // empty entry.
    let sql = format!(
        "WITH {}, t AS ({}), e AS (INSERT INTO outbox_events (topic, tasks, created_at) \
         SELECT '{TASK_UPDATED}', array_agg({} ORDER BY t.id), now() FROM t \
         HAVING count(*) > 0) \
         {}",
        ctes.join(", "),
        every.join(" UNION ALL "),
        task_event_sql(),
        select(&names)
    );
    Statement::from_sql_and_values(DbBackend::Postgres, sql, values)
}

/// [`write_tasks_in`] for several statements that commit together (on
/// PostgreSQL a single statement needs no transaction around it).
pub async fn write_tasks(
    db: &DatabaseConnection,
    mut statements: Vec<Statement>,
) -> AppResult<Vec<task::Model>> {
    if statements.len() == 1 && db.get_database_backend() == DbBackend::Postgres {
        return write_tasks_in(db, statements.remove(0)).await;
    }
    let txn = db.begin().await?;
    let mut models = Vec::new();
    for statement in statements {
        models.extend(write_tasks_in(&txn, statement).await?);
    }
    txn.commit().await?;
    Ok(models)
}

/// Commits `ends` (statements that end tasks) and `claims` (from
/// [`claim_statement`]) together, and returns the ids the ends wrote and
/// the rows the claims took: a group commit that hands freed slots their
/// next tasks. No two may write the same row (an end writes running tasks,
/// a claim queued ones). On PostgreSQL it is one statement, and the ended
/// rows do not travel back.
pub async fn end_and_claim(
    db: &DatabaseConnection,
    ends: Vec<Statement>,
    claims: Vec<Statement>,
) -> AppResult<(Vec<Uuid>, Vec<task::Model>)> {
    if db.get_database_backend() != DbBackend::Postgres {
        // Immediate on SQLite: the commit waits its turn for the write
        // lock behind other writers rather than fail to upgrade to it.
        let txn = crate::db::begin_write(db).await?;
        let mut ended = Vec::new();
        for end in ends {
            ended.extend(
                write_tasks_in(&txn, end)
                    .await?
                    .into_iter()
                    .map(|model| model.id),
            );
        }
        let mut claimed = Vec::new();
        for claim in claims {
            claimed.extend(write_tasks_in(&txn, claim).await?);
        }
        txn.commit().await?;
        return Ok((ended, claimed));
    }
    let end_count = ends.len();
    let parts: Vec<Statement> = ends.into_iter().chain(claims).collect();
    // One row at least (the ended ids), then one per claimed task.
    let statement = with_task_events(parts, |names| {
        let (ends, claims) = names.split_at(end_count);
        let ended: Vec<String> = ends
            .iter()
            .map(|name| format!("SELECT id FROM {name}"))
            .collect();
        let claimed: Vec<String> = claims
            .iter()
            .map(|name| format!("SELECT * FROM {name}"))
            .collect();
        let ended = if ended.is_empty() {
            "SELECT NULL::uuid AS id WHERE false".to_owned()
        } else {
            ended.join(" UNION ALL ")
        };
        let claimed = if claimed.is_empty() {
            "SELECT * FROM tasks WHERE false".to_owned()
        } else {
            claimed.join(" UNION ALL ")
        };
        format!(
            "SELECT x.ended_ids, c.* FROM (SELECT array_agg(id) AS ended_ids FROM ({ended}) i) x \
             LEFT JOIN ({claimed}) c ON true"
        )
    });
    let rows = db.query_all_raw(statement).await?;
    let mut ended = Vec::new();
    let mut claimed = Vec::with_capacity(rows.len());
    for (index, row) in rows.iter().enumerate() {
        if index == 0 {
            ended = row
                .try_get::<Option<Vec<Uuid>>>("", "ended_ids")?
                .unwrap_or_default();
        }
        if row.try_get::<Option<Uuid>>("", "id")?.is_some() {
            claimed.push(<task::Model as sea_orm::FromQueryResult>::from_query_result(row, "")?);
        }
    }
    Ok((ended, claimed))
}

/// A builder's `UPDATE` or `INSERT` that returns the rows it wrote.
pub fn returning_all(backend: DbBackend, query: &impl QueryTrait) -> Statement {
    let mut statement = query.build(backend);
    statement.sql.push_str(" RETURNING *");
    statement
}

fn stmt(backend: DbBackend, sql: &str, values: Vec<Value>) -> Statement {
    Statement::from_sql_and_values(backend, sql, values)
}

/// Outcome of an enqueue.
pub struct Enqueued {
    pub task: task::Model,
    /// False when an earlier request with the same idempotency key created it.
    pub created: bool,
}

/// Inserts a task (and its idempotency key, and its scope's next
/// generation) in one transaction.
pub async fn enqueue(
    db: &DatabaseConnection,
    new: &NewTask,
    default_max_attempts: i32,
    idempotency_ttl: Duration,
) -> AppResult<Enqueued> {
    let now = Utc::now();
    let hash = policy::payload_hash(new.kind, &new.payload);
    let owner_key = new
        .owner_id
        .map(|id| id.to_string())
        .unwrap_or_else(|| SYSTEM_OWNER.to_owned());
    let id = Uuid::now_v7();

    let txn = db.begin().await?;
    if let Some(key) = &new.idempotency_key {
        // An expired key is forgotten, not reused against its old task.
        idempotency_key::Entity::delete_many()
            .filter(idempotency_key::Column::OwnerKey.eq(owner_key.clone()))
            .filter(idempotency_key::Column::Key.eq(key.clone()))
            .filter(idempotency_key::Column::ExpiresAt.lt(now))
            .exec(&txn)
            .await?;
        let claimed = idempotency_key::ActiveModel {
            owner_key: Set(owner_key.clone()),
            key: Set(key.clone()),
            payload_hash: Set(hash.clone()),
            task_id: Set(id),
            created_at: Set(now),
            expires_at: Set(
                now + chrono::Duration::from_std(idempotency_ttl).map_err(AppError::internal)?
            ),
        }
        .insert(&txn)
        .await;
        match claimed {
            Ok(_) => {}
            Err(error) if matches!(error.sql_err(), Some(SqlErr::UniqueConstraintViolation(_))) => {
                txn.rollback().await?;
                return existing_for_key(db, &owner_key, key, &hash).await;
            }
            Err(error) => return Err(error.into()),
        }
    }

    let model = insert_task(&txn, new, id, default_max_attempts).await?;
    txn.commit().await?;
    metrics::counter!("trellis_tasks_enqueued_total", "queue" => new.queue.as_str(), "kind" => new.kind)
        .increment(1);
    Ok(Enqueued {
        task: model,
        created: true,
    })
}

/// The row of a new `QUEUED` task.
fn new_task_row(
    new: &NewTask,
    id: Uuid,
    generation: Option<i64>,
    default_max_attempts: i32,
    now: DateTime<Utc>,
) -> task::ActiveModel {
    task::ActiveModel {
        id: Set(id),
        kind: Set(new.kind.to_owned()),
        queue: Set(new.queue.as_str().to_owned()),
        payload: Set(new.payload.clone()),
        payload_hash: Set(policy::payload_hash(new.kind, &new.payload)),
        owner_id: Set(new.owner_id),
        idempotency_key: Set(new.idempotency_key.clone()),
        status: Set(TaskStatus::Queued.as_str().to_owned()),
        stage: Set(new.first_stage.map(str::to_owned)),
        stages_done: Set(0),
        progress: Set(None),
        result: Set(None),
        error: Set(None),
        scope: Set(new.scope.clone()),
        generation: Set(generation),
        lease_owner: Set(None),
        lease_expires_at: Set(None),
        heartbeat_at: Set(None),
        attempt_count: Set(0),
        max_attempts: Set(Ord::max(
            new.max_attempts.unwrap_or(default_max_attempts),
            1,
        )),
        cancel_requested: Set(false),
        run_at: Set(now),
        created_at: Set(now),
        updated_at: Set(now),
        started_at: Set(None),
        finished_at: Set(None),
    }
}

/// Inserts new tasks (advancing their scopes' generations) and their first
/// events, in the caller's transaction, with one statement per
/// [`MAX_TASKS_PER_WRITE`] rows, and returns them as inserted. Ids are
/// UUIDv7 minted for the new task (`Uuid::now_v7`): task lists are ordered
/// by id as their creation order.
pub async fn insert_tasks(
    txn: &impl ConnectionTrait,
    tasks: &[(Uuid, &NewTask)],
    default_max_attempts: i32,
) -> AppResult<Vec<task::Model>> {
    // At the databases' precision, so the models returned are the rows stored.
    let now = chrono::SubsecRound::trunc_subsecs(Utc::now(), 6);
    let mut models = Vec::with_capacity(tasks.len());
    for (id, new) in tasks {
        debug_assert_eq!(id.get_version_num(), 7, "task ids are UUIDv7");
        let generation = match &new.scope {
            Some(scope) => Some(advance_generation(txn, scope, now).await?),
            None => None,
        };
        let row = new_task_row(new, *id, generation, default_max_attempts, now);
        models.push(sea_orm::TryIntoModel::try_into_model(row)?);
    }
    let backend = txn.get_database_backend();
    for chunk in models.chunks(MAX_TASKS_PER_WRITE) {
        if backend != DbBackend::Postgres {
            let rows = chunk
                .iter()
                .map(|model| task::ActiveModel::from(model.clone()).reset_all());
            task::Entity::insert_many(rows)
                .exec_without_returning(txn)
                .await?;
            emit_tasks_updated(txn, chunk).await?;
            continue;
        }
        // The rows as one JSON array, one statement text for any count (a
        // `VALUES` list of 26 parameters a row was a new text per batch
        // size). Every column comes from here, so the rows are what
        // `models` says and need not travel back.
        let rows = serde_json::to_string(chunk).map_err(AppError::internal)?;
        let insert = stmt(
            backend,
            "INSERT INTO tasks SELECT * FROM json_populate_recordset(NULL::tasks, $1::json) \
             RETURNING *",
            vec![rows.into()],
        );
        let inserted = txn
            .query_one_raw(with_task_events(vec![insert], |_| {
                "SELECT count(*) AS n FROM t".into()
            }))
            .await?
            .map(|row| row.try_get::<i64>("", "n"))
            .transpose()?;
        if inserted != Some(chunk.len() as i64) {
            return Err(AppError::internal(anyhow::anyhow!(
                "inserted {inserted:?} of {} tasks",
                chunk.len()
            )));
        }
    }
    Ok(models)
}

/// Inserts one new task; see [`insert_tasks`].
pub async fn insert_task(
    txn: &impl ConnectionTrait,
    new: &NewTask,
    id: Uuid,
    default_max_attempts: i32,
) -> AppResult<task::Model> {
    insert_tasks(txn, &[(id, new)], default_max_attempts)
        .await?
        .pop()
        .ok_or_else(|| AppError::internal(anyhow::anyhow!("task insert returned no row")))
}

/// The task an earlier request with this key created, if the payload matches.
async fn existing_for_key(
    db: &DatabaseConnection,
    owner_key: &str,
    key: &str,
    hash: &str,
) -> AppResult<Enqueued> {
    let row = idempotency_key::Entity::find_by_id((owner_key.to_owned(), key.to_owned()))
        .one(db)
        .await?
        .ok_or_else(|| {
            AppError::internal(anyhow::anyhow!("idempotency key vanished during a race"))
        })?;
    task_for_key(db, row, hash).await
}

/// The task an earlier request with `new`'s idempotency key created, while
/// the key is live: a retry gets it whatever has happened since (Stripe's
/// semantics), before the request is checked again. `None` without a key
/// or when it is unknown or expired.
pub async fn replay(db: &DatabaseConnection, new: &NewTask) -> AppResult<Option<Enqueued>> {
    let Some(key) = &new.idempotency_key else {
        return Ok(None);
    };
    let owner_key = new
        .owner_id
        .map(|id| id.to_string())
        .unwrap_or_else(|| SYSTEM_OWNER.to_owned());
    let row = idempotency_key::Entity::find_by_id((owner_key, key.clone()))
        .filter(idempotency_key::Column::ExpiresAt.gte(Utc::now()))
        .one(db)
        .await?;
    match row {
        Some(row) => {
            let hash = policy::payload_hash(new.kind, &new.payload);
            task_for_key(db, row, &hash).await.map(Some)
        }
        None => Ok(None),
    }
}

async fn task_for_key(
    db: &DatabaseConnection,
    row: idempotency_key::Model,
    hash: &str,
) -> AppResult<Enqueued> {
    if row.payload_hash != hash {
        return Err(AppError::IdempotencyKeyReused);
    }
    let task = task::Entity::find_by_id(row.task_id)
        .one(db)
        .await?
        .ok_or(AppError::NotFound("task"))?;
    Ok(Enqueued {
        task,
        created: false,
    })
}

/// Moves a scope to its next generation and returns it.
pub async fn advance_generation(
    txn: &impl ConnectionTrait,
    scope: &str,
    now: DateTime<Utc>,
) -> AppResult<i64> {
    let backend = txn.get_database_backend();
    let row = txn
        .query_one_raw(stmt(
            backend,
            "INSERT INTO task_scopes (scope, generation, updated_at) VALUES ($1, 1, $2) \
             ON CONFLICT (scope) DO UPDATE SET generation = task_scopes.generation + 1, \
             updated_at = excluded.updated_at RETURNING generation",
            vec![scope.into(), now.into()],
        ))
        .await?
        .ok_or_else(|| AppError::internal(anyhow::anyhow!("scope upsert returned no row")))?;
    Ok(row.try_get::<i64>("", "generation")?)
}

/// The scope's latest generation. On PostgreSQL the row is share-locked, so
/// no newer generation can commit before this transaction does.
pub async fn current_generation(txn: &impl ConnectionTrait, scope: &str) -> AppResult<i64> {
    let backend = txn.get_database_backend();
    let lock = if backend == DbBackend::Postgres {
        " FOR SHARE"
    } else {
        ""
    };
    let row = txn
        .query_one_raw(stmt(
            backend,
            &format!("SELECT generation FROM task_scopes WHERE scope = $1{lock}"),
            vec![scope.into()],
        ))
        .await?;
    Ok(match row {
        Some(row) => row.try_get::<i64>("", "generation")?,
        None => 0,
    })
}

/// A scope's generations, read without a lock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Generations {
    /// The newest generation accepted (committed).
    pub latest: i64,
    /// The scope's work is done up to this one: for `resources`, every
    /// request up to it is applied and reconciled into the tree.
    pub reconciled: i64,
}

/// The scope's generations (zero for a scope never used).
pub async fn generations(db: &impl ConnectionTrait, scope: &str) -> AppResult<Generations> {
    let row = db
        .query_one_raw(stmt(
            db.get_database_backend(),
            "SELECT generation, reconciled_generation FROM task_scopes WHERE scope = $1",
            vec![scope.into()],
        ))
        .await?;
    Ok(match row {
        Some(row) => Generations {
            latest: row.try_get("", "generation")?,
            reconciled: row.try_get("", "reconciled_generation")?,
        },
        None => Generations::default(),
    })
}

/// Records that the scope's work is done up to `generation` (never moving
/// back), in the transaction that did the last of it.
pub async fn record_reconciled(
    txn: &impl ConnectionTrait,
    scope: &str,
    generation: i64,
) -> AppResult<()> {
    txn.execute_raw(stmt(
        txn.get_database_backend(),
        "UPDATE task_scopes SET reconciled_generation = $2 \
         WHERE scope = $1 AND reconciled_generation < $2",
        vec![scope.into(), generation.into()],
    ))
    .await?;
    Ok(())
}

const CLAIM_SET: &str = "SET status = 'RUNNING', lease_owner = $1, lease_expires_at = $2, \
     heartbeat_at = $3, attempt_count = attempt_count + 1, \
     started_at = COALESCE(started_at, $3), updated_at = $3";

/// Which due tasks a claim takes for a worker: status `RUNNING`, a fresh
/// lease, one more attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// These, those of them still due (the Redis dispatcher names them).
    Ids(Vec<Uuid>),
    /// Up to `limit` due tasks of `queue`, oldest first (the embedded
    /// dispatcher). Concurrent claimers never get the same task (`FOR
    /// UPDATE SKIP LOCKED` on PostgreSQL; SQLite serialises writers).
    Next { queue: Queue, limit: usize },
}

impl Claim {
    /// Whether it cannot take anything.
    pub fn is_empty(&self) -> bool {
        match self {
            Claim::Ids(ids) => ids.is_empty(),
            Claim::Next { limit, .. } => *limit == 0,
        }
    }
}

/// The claim as a statement that returns the rows it takes (for
/// [`write_tasks`] or [`end_and_claim`]).
pub fn claim_statement(
    backend: DbBackend,
    claim: &Claim,
    worker: &str,
    lease: Duration,
) -> AppResult<Statement> {
    let now = Utc::now();
    let expires = now + chrono::Duration::from_std(lease).map_err(AppError::internal)?;
    let mut values: Vec<Value> = vec![worker.into(), expires.into(), now.into()];
    let sql = match claim {
        Claim::Ids(ids) => {
            debug_assert!(
                ids.len() <= MAX_TASKS_PER_WRITE,
                "a claim names at most MAX_TASKS_PER_WRITE"
            );
            let (named, ids) = crate::db::uuid_in(backend, "id", 4, ids);
            values.extend(ids);
            format!(
                "UPDATE tasks {CLAIM_SET} WHERE {named} AND {QUEUED_AND_DUE_BY_ID_ONLY} RETURNING *"
            )
        }
        Claim::Next { queue, limit } => {
            let limit = (*limit).clamp(1, MAX_TASKS_PER_WRITE);
            values.push(queue.as_str().into());
            if backend == DbBackend::Postgres {
                // A CTE runs the locking subquery exactly once; `IN (SELECT
                // … LIMIT … SKIP LOCKED)` may be re-evaluated and exceed the
                // limit.
                format!(
                    "WITH picked AS (SELECT id FROM tasks WHERE queue = $4 AND status = 'QUEUED' \
                     AND run_at <= $3 ORDER BY run_at, id LIMIT {limit} FOR UPDATE SKIP LOCKED) \
                     UPDATE tasks {CLAIM_SET} FROM picked WHERE tasks.id = picked.id \
                     RETURNING tasks.*"
                )
            } else {
                format!(
                    "UPDATE tasks {CLAIM_SET} WHERE status = 'QUEUED' AND id IN (SELECT id FROM tasks \
                     WHERE queue = $4 AND status = 'QUEUED' AND run_at <= $3 \
                     ORDER BY run_at, id LIMIT {limit}) RETURNING *"
                )
            }
        }
    };
    Ok(stmt(backend, &sql, values))
}

/// Claims tasks for `worker`; see [`Claim`].
pub async fn claim(
    db: &DatabaseConnection,
    claim: &Claim,
    worker: &str,
    lease: Duration,
) -> AppResult<Vec<task::Model>> {
    if claim.is_empty() {
        return Ok(Vec::new());
    }
    let statement = claim_statement(db.get_database_backend(), claim, worker, lease)?;
    write_tasks(db, vec![statement]).await
}

/// A condition on rows a statement names by id, in a form no index can
/// serve: `CASE WHEN <condition> THEN true ELSE false END`.
///
/// The partial task indexes hold "every `QUEUED` task" and "every
/// `RUNNING` task". Offered `id IN (…) AND status = 'QUEUED'`, PostgreSQL
/// compared the id list against a partial index whose size it guessed from
/// statistics a queue table outruns (a dozen rows, found at 18,000 in a
/// burst) and scanned the whole index: 10–18 ms for a 30-task claim. Hidden
/// in a `CASE`, the condition is only checked on the rows the primary key
/// finds. It is still checked on the row version the update would replace,
/// so concurrent claims stay exclusive.
pub fn by_id_only(condition: sea_orm::Condition) -> sea_orm::sea_query::SimpleExpr {
    sea_orm::sea_query::Expr::case(condition, true)
        .finally(false)
        .into()
}

/// [`by_id_only`] in raw SQL.
const QUEUED_AND_DUE_BY_ID_ONLY: &str =
    "CASE WHEN status = 'QUEUED' AND run_at <= $3 THEN true ELSE false END";

/// What a heartbeat found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heartbeat {
    Held { cancel_requested: bool },
    Lost,
}

/// Extends the lease while the worker still holds it.
pub async fn renew_lease(
    db: &DatabaseConnection,
    id: Uuid,
    worker: &str,
    lease: Duration,
) -> AppResult<Heartbeat> {
    let now = Utc::now();
    let expires = now + chrono::Duration::from_std(lease).map_err(AppError::internal)?;
    let updated = task::Entity::update_many()
        .col_expr(task::Column::LeaseExpiresAt, Expr::value(expires))
        .col_expr(task::Column::HeartbeatAt, Expr::value(now))
        .filter(held_by(id, worker))
        .exec(db)
        .await?;
    if updated.rows_affected == 0 {
        return Ok(Heartbeat::Lost);
    }
    let cancel_requested = task::Entity::find_by_id(id)
        .one(db)
        .await?
        .is_some_and(|task| task.cancel_requested);
    Ok(Heartbeat::Held { cancel_requested })
}

pub fn held_by(id: Uuid, worker: &str) -> sea_orm::Condition {
    sea_orm::Condition::all()
        .add(task::Column::Id.eq(id))
        .add(held(worker))
}

/// The task is running under `worker`'s lease.
pub fn held(worker: &str) -> sea_orm::Condition {
    sea_orm::Condition::all()
        .add(task::Column::LeaseOwner.eq(worker))
        .add(task::Column::Status.eq(TaskStatus::Running.as_str()))
}

/// How opening a stage's transaction went.
pub enum StageTxn {
    Open(DatabaseTransaction),
    /// Someone asked to cancel the task; nothing was written.
    CancelRequested,
    /// The lease is no longer ours; nothing was written.
    LeaseLost,
}

/// Opens a stage's transaction by recording the stage as committed —
/// first, so that on SQLite the transaction holds the write lock from its
/// first statement — unless the lease was lost or a cancellation requested.
pub async fn begin_stage(
    db: &DatabaseConnection,
    id: Uuid,
    worker: &str,
    stages_done: i32,
    next_stage: Option<&str>,
) -> AppResult<StageTxn> {
    let txn = db.begin().await?;
    let now = Utc::now();
    let updated = task::Entity::update_many()
        .col_expr(task::Column::StagesDone, Expr::value(stages_done))
        .col_expr(
            task::Column::Stage,
            Expr::value(next_stage.map(str::to_owned)),
        )
        .col_expr(task::Column::HeartbeatAt, Expr::value(now))
        .col_expr(task::Column::UpdatedAt, Expr::value(now))
        .filter(held_by(id, worker))
        .filter(task::Column::CancelRequested.eq(false))
        .exec(&txn)
        .await?;
    if updated.rows_affected == 1 {
        return Ok(StageTxn::Open(txn));
    }
    let still_ours = task::Entity::find()
        .filter(held_by(id, worker))
        .one(&txn)
        .await?
        .is_some();
    txn.rollback().await?;
    Ok(if still_ours {
        StageTxn::CancelRequested
    } else {
        StageTxn::LeaseLost
    })
}

/// The update that ends a hold on a task: lease cleared, then the columns
/// the outcome sets.
pub fn outcome_update(outcome: &Finish, now: DateTime<Utc>) -> sea_orm::UpdateMany<task::Entity> {
    let release = task::Entity::update_many()
        .col_expr(
            task::Column::LeaseOwner,
            Expr::value(Option::<String>::None),
        )
        .col_expr(
            task::Column::LeaseExpiresAt,
            Expr::value(Option::<DateTime<Utc>>::None),
        )
        .col_expr(task::Column::UpdatedAt, Expr::value(now));
    let terminal = |update: sea_orm::UpdateMany<task::Entity>, status: TaskStatus| {
        update
            .col_expr(task::Column::Status, Expr::value(status.as_str()))
            .col_expr(task::Column::FinishedAt, Expr::value(now))
    };
    match outcome {
        Finish::Succeeded(result) => terminal(release, TaskStatus::Succeeded)
            .col_expr(task::Column::Result, Expr::value(result.clone()))
            .col_expr(task::Column::Error, Expr::value(Option::<String>::None))
            .col_expr(task::Column::Stage, Expr::value(Option::<String>::None)),
        Finish::Failed(error) => terminal(release, TaskStatus::Failed)
            .col_expr(task::Column::Error, Expr::value(error.clone())),
        Finish::Superseded => terminal(release, TaskStatus::Superseded),
        Finish::Cancelled => terminal(release, TaskStatus::Cancelled),
        Finish::Retry { error, run_at } => release
            .col_expr(
                task::Column::Status,
                Expr::value(TaskStatus::Queued.as_str()),
            )
            .col_expr(task::Column::Error, Expr::value(error.clone()))
            .col_expr(task::Column::RunAt, Expr::value(*run_at)),
        Finish::Release { run_at } => release
            .col_expr(
                task::Column::Status,
                Expr::value(TaskStatus::Queued.as_str()),
            )
            .col_expr(
                task::Column::AttemptCount,
                Expr::col(task::Column::AttemptCount).sub(1),
            )
            .col_expr(task::Column::RunAt, Expr::value(*run_at)),
    }
}

/// Applies `outcome` to the task if `condition` still holds, with its
/// event, in one transaction. `None` when the condition no longer held.
async fn apply_outcome(
    db: &DatabaseConnection,
    id: Uuid,
    condition: sea_orm::Condition,
    outcome: &Finish,
) -> AppResult<Option<task::Model>> {
    let txn = db.begin().await?;
    let model = apply_outcome_in(&txn, id, condition, outcome, None).await?;
    if model.is_some() {
        txn.commit().await?;
    } else {
        txn.rollback().await?;
    }
    Ok(model)
}

/// [`apply_outcome`] inside the caller's transaction (the last stage's, so
/// its effects, the stage record and the end commit together), optionally
/// recording `stages_done`.
pub async fn apply_outcome_in(
    txn: &DatabaseTransaction,
    id: Uuid,
    condition: sea_orm::Condition,
    outcome: &Finish,
    stages_done: Option<i32>,
) -> AppResult<Option<task::Model>> {
    let statement = outcome_statement(
        txn.get_database_backend(),
        id,
        condition,
        outcome,
        stages_done,
        Utc::now(),
    );
    Ok(write_tasks_in(txn, statement).await?.pop())
}

/// The outcome's row update, for [`write_tasks_in`].
pub fn outcome_statement(
    backend: DbBackend,
    id: Uuid,
    condition: sea_orm::Condition,
    outcome: &Finish,
    stages_done: Option<i32>,
    now: DateTime<Utc>,
) -> Statement {
    let mut update = outcome_update(outcome, now);
    if let Some(done) = stages_done {
        update = update.col_expr(task::Column::StagesDone, Expr::value(done));
    }
    returning_all(
        backend,
        &update.filter(task::Column::Id.eq(id)).filter(condition),
    )
}

/// Ends the worker's hold on a task. Returns the new state, or `None` when
/// the lease had already been lost.
pub async fn finish(
    db: &DatabaseConnection,
    id: Uuid,
    worker: &str,
    outcome: Finish,
) -> AppResult<Option<task::Model>> {
    apply_outcome(db, id, held_by(id, worker), &outcome).await
}

/// Returns tasks whose lease expired (their worker died or hung) to the
/// queue, or fails them when their attempts are used up; `decide` says which.
pub async fn reap_expired_leases(
    db: &DatabaseConnection,
    decide: impl Fn(&task::Model, String) -> Finish,
) -> AppResult<Vec<task::Model>> {
    let now = Utc::now();
    let expired = task::Entity::find()
        .filter(task::Column::Status.eq(TaskStatus::Running.as_str()))
        .filter(task::Column::LeaseExpiresAt.lt(now))
        .all(db)
        .await?;
    let mut reaped = Vec::new();
    for task in expired {
        let stale_owner = task.lease_owner.clone().unwrap_or_default();
        let error = format!("lease held by {stale_owner} expired (worker died or stalled)");
        // Conditional on the expiry we saw: a renewal in between wins.
        let still_expired = sea_orm::Condition::all()
            .add(task::Column::Status.eq(TaskStatus::Running.as_str()))
            .add(task::Column::LeaseExpiresAt.lt(now));
        if let Some(model) =
            apply_outcome(db, task.id, still_expired, &decide(&task, error)).await?
        {
            metrics::counter!("trellis_task_lease_expirations_total", "queue" => model.queue.clone())
                .increment(1);
            tracing::warn!(task_id = %model.id, stale_owner, status = %model.status, "reclaimed an expired lease");
            reaped.push(model);
        }
    }
    Ok(reaped)
}

/// Cancels a task: at once when queued, at the next stage boundary when
/// running. Terminal tasks are a conflict.
pub async fn cancel(db: &DatabaseConnection, id: Uuid) -> AppResult<task::Model> {
    let now = Utc::now();
    let txn = db.begin().await?;
    let queued = task::Entity::update_many()
        .col_expr(
            task::Column::Status,
            Expr::value(TaskStatus::Cancelled.as_str()),
        )
        .col_expr(task::Column::FinishedAt, Expr::value(now))
        .col_expr(task::Column::UpdatedAt, Expr::value(now))
        .col_expr(task::Column::CancelRequested, Expr::value(true))
        .filter(task::Column::Id.eq(id))
        .filter(task::Column::Status.eq(TaskStatus::Queued.as_str()))
        .exec(&txn)
        .await?;
    if queued.rows_affected == 0 {
        task::Entity::update_many()
            .col_expr(task::Column::CancelRequested, Expr::value(true))
            .col_expr(task::Column::UpdatedAt, Expr::value(now))
            .filter(task::Column::Id.eq(id))
            .filter(task::Column::Status.eq(TaskStatus::Running.as_str()))
            .exec(&txn)
            .await?;
    }
    let model = task::Entity::find_by_id(id)
        .one(&txn)
        .await?
        .ok_or(AppError::NotFound("task"))?;
    let status = TaskStatus::parse(&model.status).unwrap_or(TaskStatus::Failed);
    if status.is_terminal() && queued.rows_affected == 0 {
        txn.rollback().await?;
        return Err(AppError::Conflict(format!(
            "task already finished ({})",
            model.status
        )));
    }
    emit_task_updated(&txn, &model).await?;
    txn.commit().await?;
    Ok(model)
}

/// Ends the queued tasks of `scope` up to `generation` whose work another
/// task has just done (it covered them): `SUPERSEDED`, or `FAILED` with the
/// reason for those in `failed`. Queued only: a running task finds out
/// itself at its next stage. Each gets its `task.updated` event, in the
/// covering task's transaction. Returns how many ended.
pub async fn end_covered(
    txn: &impl ConnectionTrait,
    scope: &str,
    generation: i64,
    failed: &HashMap<Uuid, String>,
) -> AppResult<usize> {
    let now = Utc::now();
    let mut ended = task::Entity::update_many()
        .col_expr(
            task::Column::Status,
            Expr::value(TaskStatus::Superseded.as_str()),
        )
        .col_expr(task::Column::FinishedAt, Expr::value(now))
        .col_expr(task::Column::UpdatedAt, Expr::value(now))
        .filter(task::Column::Scope.eq(scope))
        .filter(task::Column::Generation.lte(generation))
        .filter(task::Column::Status.eq(TaskStatus::Queued.as_str()))
        .exec_with_returning(txn)
        .await?;
    for model in ended
        .iter_mut()
        .filter(|model| failed.contains_key(&model.id))
    {
        let reason = failed[&model.id].clone();
        if let Some(updated) = task::Entity::update_many()
            .col_expr(
                task::Column::Status,
                Expr::value(TaskStatus::Failed.as_str()),
            )
            .col_expr(task::Column::Error, Expr::value(reason))
            .filter(task::Column::Id.eq(model.id))
            .exec_with_returning(txn)
            .await?
            .pop()
        {
            *model = updated;
        }
    }
    emit_tasks_updated(txn, &ended).await?;
    Ok(ended.len())
}

/// Deletes idempotency keys past their expiry.
pub async fn sweep_idempotency_keys(db: &DatabaseConnection) -> AppResult<u64> {
    Ok(idempotency_key::Entity::delete_many()
        .filter(idempotency_key::Column::ExpiresAt.lt(Utc::now()))
        .exec(db)
        .await?
        .rows_affected)
}
