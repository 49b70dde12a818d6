//! Ending a hold on a task (its outcome), reaping expired leases,
//! cancelling, ending covered tasks and sweeping old idempotency keys.

use super::*;

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
            .col_expr(
                task::Column::Status,
                Expr::value(task::Status::from(status)),
            )
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
            .col_expr(task::Column::Status, Expr::value(task::Status::Queued))
            .col_expr(task::Column::Error, Expr::value(error.clone()))
            .col_expr(task::Column::RunAt, Expr::value(*run_at)),
        Finish::Release { run_at } => release
            .col_expr(task::Column::Status, Expr::value(task::Status::Queued))
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
    let txn = crate::db::begin_write(db).await?;
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
        .filter(task::Column::Status.eq(task::Status::Running))
        .filter(task::Column::LeaseExpiresAt.lt(now))
        .all(db)
        .await?;
    let mut reaped = Vec::new();
    for task in expired {
        let stale_owner = task.lease_owner.clone().unwrap_or_default();
        let error = format!("lease held by {stale_owner} expired (worker died or stalled)");
        // Conditional on the expiry we saw: a renewal in between wins.
        let still_expired = sea_orm::Condition::all()
            .add(task::Column::Status.eq(task::Status::Running))
            .add(task::Column::LeaseExpiresAt.lt(now));
        if let Some(model) =
            apply_outcome(db, task.id, still_expired, &decide(&task, error)).await?
        {
            metrics::counter!("trellis_task_lease_expirations_total", "queue" => Queue::from(model.queue).as_str())
                .increment(1);
            tracing::warn!(task_id = %model.id, stale_owner, status = TaskStatus::from(model.status).as_str(), "reclaimed an expired lease");
            reaped.push(model);
        }
    }
    Ok(reaped)
}

/// Cancels a task: at once when queued, at the next stage boundary when
/// running. Terminal tasks are a conflict.
pub async fn cancel(db: &DatabaseConnection, id: Uuid) -> AppResult<task::Model> {
    let now = Utc::now();
    let txn = crate::db::begin_write(db).await?;
    let queued = task::Entity::update_many()
        .col_expr(task::Column::Status, Expr::value(task::Status::Cancelled))
        .col_expr(task::Column::FinishedAt, Expr::value(now))
        .col_expr(task::Column::UpdatedAt, Expr::value(now))
        .col_expr(task::Column::CancelRequested, Expr::value(true))
        .filter(task::Column::Id.eq(id))
        .filter(task::Column::Status.eq(task::Status::Queued))
        .exec(&txn)
        .await?;
    if queued.rows_affected == 0 {
        task::Entity::update_many()
            .col_expr(task::Column::CancelRequested, Expr::value(true))
            .col_expr(task::Column::UpdatedAt, Expr::value(now))
            .filter(task::Column::Id.eq(id))
            .filter(task::Column::Status.eq(task::Status::Running))
            .exec(&txn)
            .await?;
    }
    let model = task::Entity::find_by_id(id)
        .one(&txn)
        .await?
        .ok_or(AppError::NotFound("task"))?;
    let status = TaskStatus::from(model.status);
    if status.is_terminal() && queued.rows_affected == 0 {
        txn.rollback().await?;
        return Err(AppError::Conflict(format!(
            "task already finished ({})",
            status.as_str()
        )));
    }
    emit_task_updated(&txn, &model).await?;
    txn.commit().await?;
    Ok(model)
}

/// Ends the queued tasks of `scope` whose work another task has just done
/// (it covered them): those with a generation in `covered`, the
/// generations its pass reconciled (from the one reconciled before it, as
/// [`super::record_reconciled`] returns, to its own). `SUPERSEDED`, or
/// `FAILED` with the reason for those in `failed`. Queued only: a running
/// task, or one queued again since an earlier pass covered it (a retry),
/// finds out itself at its next stage. Each gets its `task.updated` event,
/// in the covering task's transaction. Returns how many ended.
///
/// Only the pass's own range is read: "every queued task up to the
/// generation" walked the scope's whole `(scope, generation)` index to
/// find a handful, 40–50 ms on a tasks table 100,000 rows long, with the
/// tree locked.
pub async fn end_covered(
    txn: &impl ConnectionTrait,
    scope: &str,
    covered: std::ops::RangeInclusive<i64>,
    failed: &HashMap<Uuid, String>,
) -> AppResult<usize> {
    if covered.is_empty() {
        return Ok(0);
    }
    let now = Utc::now();
    let mut ended = task::Entity::update_many()
        .col_expr(task::Column::Status, Expr::value(task::Status::Superseded))
        .col_expr(task::Column::FinishedAt, Expr::value(now))
        .col_expr(task::Column::UpdatedAt, Expr::value(now))
        .filter(task::Column::Scope.eq(scope))
        .filter(task::Column::Generation.gte(*covered.start()))
        .filter(task::Column::Generation.lte(*covered.end()))
        .filter(task::Column::Status.eq(task::Status::Queued))
        .exec_with_returning(txn)
        .await?;
    for model in ended
        .iter_mut()
        .filter(|model| failed.contains_key(&model.id))
    {
        let reason = failed[&model.id].clone();
        if let Some(updated) = task::Entity::update_many()
            .col_expr(task::Column::Status, Expr::value(task::Status::Failed))
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
