//! Mutation: the stage that applies every waiting request (Update A, B,
//! C and deletes) to `resources`, all or nothing per request, under the
//! tree's lock; the requests it could not apply are recorded as rejections.

use super::*;

/// Takes the tree's lock for the rest of the stage transaction: passes of
/// different tasks may overlap, their stages never do. On SQLite the
/// stage transaction already holds the database's write lock.
pub async fn lock_tree(txn: &DatabaseTransaction) -> AppResult<()> {
    if txn.get_database_backend() == DbBackend::Postgres {
        txn.execute_raw(stmt(
            txn,
            "SELECT id FROM node_tree WHERE id = 1 FOR UPDATE",
            vec![],
        ))
        .await?;
    }
    Ok(())
}

/// What the mutation stage applied.
#[derive(Debug, Default, Serialize, serde::Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MutationReport {
    /// Requests this pass applied (this task's and any other not applied
    /// yet, older or newer).
    pub applied: usize,
    /// Requests this pass could not apply: a resource they name was gone.
    /// Their tasks end `FAILED` (`NOT_FOUND`).
    pub skipped: usize,
    /// Every request of the scope up to this generation is applied; the
    /// pass's reconciliation makes them visible.
    pub generation: i64,
}

/// How many waiting requests one pass applies beyond its own: enough that a
/// burst is merged into few passes, few enough that one stage transaction
/// (and the mapping, topology and status work after it) stays bounded
/// while tens of thousands of requests wait — the next pass takes the next
/// slice.
pub const MAX_REQUESTS_PER_PASS: i64 = 1_000;

/// The newest generation a pass applies up to: every waiting request up to
/// the newest accepted one, but never more than [`MAX_REQUESTS_PER_PASS`]
/// past what is applied — except that a task's own request (`own`) is
/// always included, so its pass makes it visible.
pub fn pass_upper_bound(applied: i64, newest: i64, own: Option<i64>) -> i64 {
    let bounded = applied.saturating_add(MAX_REQUESTS_PER_PASS);
    newest.min(own.map_or(bounded, |own| bounded.max(own)))
}

/// Applies, in generation order, every accepted request of the scope that
/// is not applied yet, up to the newest accepted one (at most
/// [`pass_upper_bound`]): this task's own (`own`, its generation), older
/// ones whose tasks have not got here, and newer ones, so one pass covers
/// everything waiting (a work queue that merges pending keys).
/// A request applies entirely or not at all: one naming a resource that is
/// gone is recorded in `resource_rejections`, and its task fails. Failed
/// and cancelled requests are not applied. Runs under [`lock_tree`].
pub async fn apply_mutations(
    txn: &DatabaseTransaction,
    own: Option<i64>,
) -> AppResult<MutationReport> {
    let applied_row = txn
        .query_one_raw(stmt(
            txn,
            "SELECT applied_generation FROM node_tree WHERE id = 1",
            vec![],
        ))
        .await?
        .ok_or_else(|| AppError::internal(anyhow::anyhow!("node_tree row missing")))?;
    let applied: i64 = applied_row.try_get("", "applied_generation")?;
    // Generations commit in order (the scope's row is locked from the
    // generation's allocation to its commit), so every request up to the
    // newest committed generation is visible here.
    let newest = store::generations(txn, ops::SCOPE).await?.latest;
    let upper = pass_upper_bound(applied, newest, own);
    let mut report = MutationReport {
        generation: applied.max(upper),
        ..MutationReport::default()
    };
    if applied >= upper {
        return Ok(report);
    }
    let pending = task::Entity::find()
        .filter(task::Column::Scope.eq(ops::SCOPE))
        .filter(task::Column::Kind.is_in(ops::KINDS.map(|(kind, _)| kind)))
        .filter(task::Column::Generation.gt(applied))
        .filter(task::Column::Generation.lte(upper))
        .filter(task::Column::Status.is_not_in([task::Status::Failed, task::Status::Cancelled]))
        .order_by_asc(task::Column::Generation)
        .all(txn)
        .await?;
    let now = Utc::now();
    for request in pending {
        let outcome = match Operation::from_payload(request.payload.clone()) {
            Ok(operation) => apply_one(txn, request.id, &operation).await?,
            Err(error) => Err(format!("the request is unreadable: {error}")),
        };
        match outcome {
            Ok(()) => report.applied += 1,
            Err(reason) => {
                report.skipped += 1;
                txn.execute_raw(stmt(
                    txn,
                    "INSERT INTO resource_rejections (task_id, reason, created_at) \
                     VALUES ($1, $2, $3) ON CONFLICT (task_id) DO NOTHING",
                    vec![request.id.into(), reason.into(), now.into()],
                ))
                .await?;
            }
        }
    }
    txn.execute_raw(stmt(
        txn,
        "UPDATE node_tree SET applied_generation = $1 WHERE id = 1",
        vec![upper.into()],
    ))
    .await?;
    Ok(report)
}

/// Why the request of task `task_id` could not be applied, if a pass
/// found it so.
pub async fn rejection(db: &impl ConnectionTrait, task_id: Uuid) -> AppResult<Option<String>> {
    let row = db
        .query_one_raw(Statement::from_sql_and_values(
            db.get_database_backend(),
            "SELECT reason FROM resource_rejections WHERE task_id = $1",
            vec![task_id.into()],
        ))
        .await?;
    Ok(match row {
        Some(row) => Some(row.try_get::<String>("", "reason")?),
        None => None,
    })
}

/// The rejections of tasks still queued, by task.
pub async fn queued_rejections(txn: &DatabaseTransaction) -> AppResult<HashMap<Uuid, String>> {
    txn.query_all_raw(stmt(
        txn,
        "SELECT r.task_id, r.reason FROM resource_rejections r \
         JOIN tasks t ON t.id = r.task_id WHERE t.status = 'QUEUED'",
        vec![],
    ))
    .await?
    .iter()
    .map(|row| Ok((row.try_get("", "task_id")?, row.try_get("", "reason")?)))
    .collect()
}

/// Forgets the rejections of tasks that have ended: only a task still
/// running reads its own.
pub async fn forget_rejections(txn: &DatabaseTransaction) -> AppResult<u64> {
    let result = txn
        .execute_raw(stmt(
            txn,
            "DELETE FROM resource_rejections WHERE task_id NOT IN \
             (SELECT id FROM tasks WHERE status IN ('QUEUED', 'RUNNING'))",
            vec![],
        ))
        .await?;
    Ok(result.rows_affected())
}

/// The reason a resource named by a request is gone.
fn gone(id: &Uuid) -> String {
    format!("NOT_FOUND: resource {id} was deleted before this request applied")
}

/// Applies one request whole, or says why it cannot be.
async fn apply_one(
    txn: &DatabaseTransaction,
    task_id: Uuid,
    operation: &Operation,
) -> AppResult<Result<(), String>> {
    let now = Utc::now();
    match operation {
        Operation::Create { attributes } => {
            txn.execute_raw(stmt(
                txn,
                "INSERT INTO resources (id, attributes, version, deleting, needs_mapping, created_at, updated_at) \
                 VALUES ($1, $2, 1, $3, $4, $5, $5) ON CONFLICT (id) DO NOTHING",
                vec![
                    task_id.into(),
                    serde_json::Value::Object(attributes.clone()).into(),
                    false.into(),
                    true.into(),
                    now.into(),
                ],
            ))
            .await?;
            Ok(Ok(()))
        }
        Operation::UpdateA { resource_id, patch } | Operation::UpdateB { resource_id, patch } => {
            let Some(row) = txn
                .query_one_raw(stmt(
                    txn,
                    "SELECT attributes FROM resources WHERE id = $1 AND deleting = $2",
                    vec![(*resource_id).into(), false.into()],
                ))
                .await?
            else {
                return Ok(Err(gone(resource_id)));
            };
            let mut attributes = match row.try_get::<serde_json::Value>("", "attributes")? {
                serde_json::Value::Object(map) => map,
                _ => Map::new(),
            };
            ops::merge_patch(&mut attributes, patch);
            replace_attributes(txn, *resource_id, attributes).await?;
            Ok(Ok(()))
        }
        Operation::UpdateC { resources } => {
            let ids: Vec<Uuid> = resources.iter().map(|replacement| replacement.id).collect();
            let live: BTreeSet<Uuid> = select_in(
                txn,
                "SELECT id FROM resources WHERE deleting = $1 AND id IN ({})",
                &[false.into()],
                &ids,
            )
            .await?
            .iter()
            .map(|row| row.try_get::<Uuid>("", "id"))
            .collect::<Result<_, _>>()?;
            if let Some(missing) = ids.iter().find(|id| !live.contains(id)) {
                return Ok(Err(gone(missing)));
            }
            for replacement in resources {
                replace_attributes(txn, replacement.id, replacement.attributes.clone()).await?;
            }
            Ok(Ok(()))
        }
        Operation::Delete { resource_id } => {
            let result = txn
                .execute_raw(stmt(
                    txn,
                    "UPDATE resources SET deleting = $1, needs_mapping = $1, \
                     version = version + 1, updated_at = $2 WHERE id = $3 AND deleting = $4",
                    vec![true.into(), now.into(), (*resource_id).into(), false.into()],
                ))
                .await?;
            Ok(if result.rows_affected() == 1 {
                Ok(())
            } else {
                Err(gone(resource_id))
            })
        }
    }
}

async fn replace_attributes(
    txn: &DatabaseTransaction,
    id: Uuid,
    attributes: Map<String, serde_json::Value>,
) -> AppResult<()> {
    txn.execute_raw(stmt(
        txn,
        "UPDATE resources SET attributes = $1, needs_mapping = $2, \
             version = version + 1, updated_at = $3 WHERE id = $4 AND deleting = $5",
        vec![
            serde_json::Value::Object(attributes).into(),
            true.into(),
            Utc::now().into(),
            id.into(),
            false.into(),
        ],
    ))
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_takes_a_bounded_slice_that_always_holds_its_own_request() {
        let limit = MAX_REQUESTS_PER_PASS;
        // Little waiting: everything up to the newest.
        assert_eq!(pass_upper_bound(10, 15, Some(12)), 15);
        assert_eq!(pass_upper_bound(10, 15, None), 15);
        // A long queue: one slice past what is applied.
        assert_eq!(pass_upper_bound(0, 50_000, Some(1)), limit);
        assert_eq!(pass_upper_bound(0, 50_000, None), limit);
        // The task's own request is always in its pass, never past the newest.
        assert_eq!(pass_upper_bound(0, 50_000, Some(40_000)), 40_000);
        assert_eq!(pass_upper_bound(0, 50_000, Some(60_000)), 50_000);
        // Already applied by another pass: it helps with the next slice.
        assert_eq!(pass_upper_bound(5_000, 50_000, Some(10)), 5_000 + limit);
        // Nothing waiting.
        assert_eq!(pass_upper_bound(7, 7, Some(7)), 7);
    }
}
