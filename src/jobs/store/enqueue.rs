//! Enqueueing: new task rows, idempotency keys (the stored outcome is
//! replayed for a retry) and scope generations.

use super::{write::with_task_events, *};

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

    let txn = crate::db::begin_write(db).await?;
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
        queue: Set(new.queue.into()),
        payload: Set(new.payload.clone()),
        payload_hash: Set(policy::payload_hash(new.kind, &new.payload)),
        owner_id: Set(new.owner_id),
        idempotency_key: Set(new.idempotency_key.clone()),
        status: Set(task::Status::Queued),
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
        let insert = Statement::from_sql_and_values(
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
    let row = txn
        .query_one_raw(crate::db::stmt(
            txn,
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
    locked_scope_column(txn, scope, "generation", "FOR SHARE").await
}

/// One generation column of the scope's row (zero for a scope never used),
/// the row locked on PostgreSQL with `lock` (`FOR SHARE`, `FOR UPDATE`)
/// until the transaction ends; SQLite's write transaction already holds
/// the database.
async fn locked_scope_column(
    txn: &impl ConnectionTrait,
    scope: &str,
    column: &str,
    lock: &str,
) -> AppResult<i64> {
    let lock = if txn.get_database_backend() == DbBackend::Postgres {
        format!(" {lock}")
    } else {
        String::new()
    };
    let row = txn
        .query_one_raw(crate::db::stmt(
            txn,
            format!("SELECT {column} FROM task_scopes WHERE scope = $1{lock}"),
            vec![scope.into()],
        ))
        .await?;
    Ok(match row {
        Some(row) => row.try_get::<i64>("", column)?,
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
        .query_one_raw(crate::db::stmt(
            db,
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
/// back), in the transaction that did the last of it. Returns the
/// generation that was reconciled before (the scope's row stays locked
/// until the transaction ends, so no other pass records in between).
pub async fn record_reconciled(
    txn: &impl ConnectionTrait,
    scope: &str,
    generation: i64,
) -> AppResult<i64> {
    let before = locked_scope_column(txn, scope, "reconciled_generation", "FOR UPDATE").await?;
    if before < generation {
        txn.execute_raw(crate::db::stmt(
            txn,
            "UPDATE task_scopes SET reconciled_generation = $2 WHERE scope = $1",
            vec![scope.into(), generation.into()],
        ))
        .await?;
    }
    Ok(before)
}
