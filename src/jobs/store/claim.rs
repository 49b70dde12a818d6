//! Claiming due tasks for a worker: one conditional statement per batch.

use super::*;

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
    Ok(Statement::from_sql_and_values(backend, sql, values))
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
