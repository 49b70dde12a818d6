//! Leases: heartbeats, the lease conditions every worker update carries,
//! and opening a stage's transaction while the lease is held.

use super::*;

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
    let renew = task::Entity::update_many()
        .col_expr(task::Column::LeaseExpiresAt, Expr::value(expires))
        .col_expr(task::Column::HeartbeatAt, Expr::value(now))
        .filter(held_by(id, worker))
        .build(db.get_database_backend());
    let updated = crate::db::execute_write(db, renew).await?;
    if updated.rows_affected() == 0 {
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
        .add(task::Column::Status.eq(task::Status::Running))
}

/// How opening a stage's transaction went.
pub enum StageTxn {
    Open(crate::db::WriteTxn),
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
    let txn = crate::db::begin_write(db).await?;
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
