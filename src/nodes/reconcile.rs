//! The seed's reconciliation, one function per phase, each run inside the
//! stage transaction the runner opened (so it commits with the record that
//! the stage is done). The decisions are [`super::plan`]'s pure functions;
//! this module loads their inputs in bulk and writes their results.
//!
//! Work is found in the database, not handed from stage to stage in memory:
//! `resources.needs_mapping` marks resources whose nodes must be
//! recomputed, `node_dirty` nodes whose properties or aggregated status
//! must. Passes of several tasks overlap (their stages never do), so a
//! phase takes whatever is marked when it runs, whichever pass left it.
//! One order matters: which nodes are orphans depends on every marked
//! resource, and a change or delete may land between one pass's Mapping
//! and Topology Sync stages. So Topology Sync checks orphans again in its
//! own transaction before it syncs, over exactly the marked resources it
//! then syncs: no interleaving leaves an orphan behind.
//!
//! Predicates on these marks are written as literals (`WHERE
//! needs_mapping`), not parameters, so that PostgreSQL's cached generic
//! plans still use the partial index that serves them. Node marks are read
//! on their own ([`marked`]), and every statement after that goes by
//! primary key (`… IN (…)`), so no plan depends on what either planner
//! believes about the marks table: a few marks never turn into a scan of a
//! large class or of every mapping row.
//!
//! Statement budget (what the statement-count tests hold us to):
//! - [`delete_orphans`]: a constant number of loads, plus **one** `DELETE`
//!   per root orphan, whatever the subtree's size;
//! - [`sync_topology`]: a constant number per tree level for new nodes,
//!   plus one per 500 changed mapping rows;
//! - [`update_properties`]: three per tree level for the attribute
//!   statistics, and per impacted class a constant number of bulk loads
//!   (its nodes, each dependency class, resources only for an Engine that
//!   asks) and one write per 500 changed nodes;
//! - [`recompute_aggregated_status`]: per tree level one aggregate query
//!   and one write — O(depth), not O(nodes).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::Utc;
use entity::task;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseTransaction, DbBackend, EntityTrait, QueryFilter,
    QueryOrder, QueryResult, Statement, Value,
};
use serde::Serialize;
use serde_json::{Map, json};
use uuid::Uuid;

use super::{
    NODE_STATUS_CHANGED,
    config::NodeConfig,
    engine::{ClassContext, Engine, NodeInput, Partials, PatchInput, status_of},
    ops::{self, Operation},
    plan::{self, Candidate, NodeSpec},
};
use crate::{
    db::placeholders,
    error::{AppError, AppResult},
    jobs::{model::TaskStatus, outbox, store},
};

/// Rows per multi-row statement (well under either backend's parameter limit).
const CHUNK: usize = 500;

fn stmt(txn: &DatabaseTransaction, sql: impl Into<String>, values: Vec<Value>) -> Statement {
    Statement::from_sql_and_values(txn.get_database_backend(), sql, values)
}

/// `($s, $s+1), ($s+2, $s+3), …`: `rows` tuples of `width`, from `$start`.
fn tuples(start: usize, rows: usize, width: usize) -> String {
    (0..rows)
        .map(|row| format!("({})", placeholders(start + row * width, width)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Runs `sql` once per chunk of `ids`, its `{}` replaced by the chunk's
/// placeholders (numbered after `leading`, which every run binds first),
/// and returns every run's rows.
async fn select_in<T: Into<Value> + Clone>(
    txn: &DatabaseTransaction,
    sql: &str,
    leading: &[Value],
    ids: &[T],
) -> AppResult<Vec<QueryResult>> {
    let mut rows = Vec::new();
    for chunk in ids.chunks(CHUNK) {
        let mut values = leading.to_vec();
        values.extend(chunk.iter().cloned().map(Into::into));
        let sql = sql.replace("{}", &placeholders(leading.len() + 1, chunk.len()));
        rows.extend(txn.query_all_raw(stmt(txn, sql, values)).await?);
    }
    Ok(rows)
}

/// `UPDATE nodes SET {set} FROM (VALUES …) AS v WHERE nodes.id = v.column1`
/// for `rows` (each the node id, then the values `set` reads as
/// `v.column2`…), after `leading` parameters; one statement per chunk.
async fn update_nodes(
    txn: &DatabaseTransaction,
    set: &str,
    leading: &[Value],
    rows: Vec<Vec<Value>>,
) -> AppResult<()> {
    let Some(width) = rows.first().map(Vec::len) else {
        return Ok(());
    };
    for chunk in rows.chunks(CHUNK) {
        let mut values = leading.to_vec();
        values.extend(chunk.iter().flatten().cloned());
        let sql = format!(
            "UPDATE nodes SET {set} FROM (VALUES {}) AS v WHERE nodes.id = v.column1",
            tuples(leading.len() + 1, chunk.len(), width)
        );
        txn.execute_raw(stmt(txn, sql, values)).await?;
    }
    Ok(())
}

/// One kind of mark in `node_dirty`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    /// The node's attribute statistics and properties are owed.
    Props,
    /// The node's aggregated status is owed.
    Status,
}

impl Mark {
    fn column(self) -> &'static str {
        match self {
            Mark::Props => "props",
            Mark::Status => "status",
        }
    }

    fn other(self) -> Mark {
        match self {
            Mark::Props => Mark::Status,
            Mark::Status => Mark::Props,
        }
    }
}

/// The nodes carrying `mark`, in id order, read from the marks table
/// alone. The statements that follow go by primary key, so their plans do
/// not hang on what the planner believes about the marks table (whose
/// statistics a bulk import leaves far from the few rows it holds).
async fn marked(txn: &DatabaseTransaction, mark: Mark) -> AppResult<Vec<i64>> {
    let rows = txn
        .query_all_raw(stmt(
            txn,
            format!(
                "SELECT node_id FROM node_dirty WHERE {} = $1 ORDER BY node_id",
                mark.column()
            ),
            vec![true.into()],
        ))
        .await?;
    rows.iter()
        .map(|row| Ok(row.try_get::<i64>("", "node_id")?))
        .collect()
}

/// Clears `mark` from `nodes` (those the phase read), by primary key: rows
/// left with no mark go, the others keep their other mark.
async fn clear_marks(txn: &DatabaseTransaction, mark: Mark, nodes: &[i64]) -> AppResult<()> {
    select_in(
        txn,
        &format!(
            "DELETE FROM node_dirty WHERE {} = $1 AND node_id IN ({{}})",
            mark.other().column()
        ),
        &[false.into()],
        nodes,
    )
    .await?;
    select_in(
        txn,
        &format!(
            "UPDATE node_dirty SET {} = $1 WHERE node_id IN ({{}})",
            mark.column()
        ),
        &[false.into()],
        nodes,
    )
    .await?;
    Ok(())
}

/// The phases that reconcile the tree after the mutations, in order, as the
/// pipeline's stages run them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Phase 1: [`delete_orphans`] (stage `mapping`).
    Orphans,
    /// Phases 2–4: [`delete_orphans`] again, then [`sync_topology`] (stage
    /// `topology_sync`).
    Topology,
    /// Phases 5–6: [`update_properties`] (stage `properties`).
    Properties,
    /// Phase 7: [`recompute_aggregated_status`] (stage `aggregated_status`).
    AggregatedStatus,
}

impl Phase {
    pub const ALL: [Phase; 4] = [
        Phase::Orphans,
        Phase::Topology,
        Phase::Properties,
        Phase::AggregatedStatus,
    ];

    /// The pipeline stage that runs the phase.
    pub fn stage(self) -> &'static str {
        match self {
            Phase::Orphans => "mapping",
            Phase::Topology => "topology_sync",
            Phase::Properties => "properties",
            Phase::AggregatedStatus => "aggregated_status",
        }
    }

    /// The phase the pipeline stage `stage` runs, if it runs one.
    pub fn of_stage(stage: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|phase| phase.stage() == stage)
    }

    /// Runs the phase in `txn`; its report as JSON.
    pub async fn run(
        self,
        txn: &DatabaseTransaction,
        config: &NodeConfig,
        engine: &dyn Engine,
    ) -> AppResult<serde_json::Value> {
        fn report(report: impl Serialize) -> serde_json::Value {
            serde_json::to_value(report).unwrap_or(serde_json::Value::Null)
        }
        Ok(match self {
            Phase::Orphans => report(delete_orphans(txn, config).await?),
            Phase::Topology => {
                // Orphans again first, in this transaction: a change or a
                // delete since the Mapping stage can turn a node the other
                // marked resources still seemed to join into an orphan.
                let orphans = delete_orphans(txn, config).await?;
                let mut topology = report(sync_topology(txn, config).await?);
                if let serde_json::Value::Object(fields) = &mut topology {
                    fields.insert("orphans".into(), report(orphans));
                }
                topology
            }
            Phase::Properties => report(update_properties(txn, config, engine).await?),
            Phase::AggregatedStatus => {
                report(recompute_aggregated_status(txn, config, engine).await?)
            }
        })
    }
}

// ---------------------------------------------------------------- Mutation

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

/// Applies, in generation order, every accepted request of the scope that
/// is not applied yet, up to the newest accepted one: this task's own,
/// older ones whose tasks have not got here, and newer ones, so one pass
/// covers everything waiting (a work queue that merges pending keys).
/// A request applies entirely or not at all: one naming a resource that is
/// gone is recorded in `resource_rejections`, and its task fails. Failed
/// and cancelled requests are not applied. Runs under [`lock_tree`].
pub async fn apply_mutations(txn: &DatabaseTransaction) -> AppResult<MutationReport> {
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
    let mut report = MutationReport {
        generation: applied.max(newest),
        ..MutationReport::default()
    };
    if applied >= newest {
        return Ok(report);
    }
    let pending = task::Entity::find()
        .filter(task::Column::Scope.eq(ops::SCOPE))
        .filter(task::Column::Kind.is_in(ops::KINDS.map(|(kind, _)| kind)))
        .filter(task::Column::Generation.gt(applied))
        .filter(task::Column::Generation.lte(newest))
        .filter(
            task::Column::Status
                .is_not_in([TaskStatus::Failed.as_str(), TaskStatus::Cancelled.as_str()]),
        )
        .order_by_asc(task::Column::Generation)
        .all(txn)
        .await?;
    let now = Utc::now();
    for request in pending {
        let outcome = match serde_json::from_value::<Operation>(request.payload.clone()) {
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
        vec![newest.into()],
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

// ------------------------------------------------------- Mapping (phase 1)

/// A resource whose nodes must be recomputed, with where it maps now.
struct DirtyResource {
    id: Uuid,
    specs: Vec<NodeSpec>,
}

/// The marked resources.
async fn dirty_resources(
    txn: &DatabaseTransaction,
    config: &NodeConfig,
) -> AppResult<Vec<DirtyResource>> {
    let sql = "SELECT id, attributes, deleting FROM resources WHERE needs_mapping";
    let rows = txn.query_all_raw(stmt(txn, sql, vec![])).await?;
    rows.iter()
        .map(|row| {
            let deleting: bool = row.try_get("", "deleting")?;
            let attributes: serde_json::Value = row.try_get("", "attributes")?;
            Ok(DirtyResource {
                id: row.try_get("", "id")?,
                specs: if deleting {
                    vec![]
                } else {
                    plan::resolve(config, &attributes)
                },
            })
        })
        .collect()
}

/// The current mapping of the dirty resources: (resource, node id, key,
/// path, leaf).
struct Linked {
    resource: Uuid,
    node: i64,
    business_key: String,
    path: String,
    leaf: bool,
}

async fn current_mapping(txn: &DatabaseTransaction, resources: &[Uuid]) -> AppResult<Vec<Linked>> {
    let rows = select_in(
        txn,
        "SELECT rn.resource_id, rn.leaf, n.id, n.business_key, n.path FROM resource_nodes rn \
         JOIN nodes n ON n.id = rn.node_id WHERE rn.resource_id IN ({})",
        &[],
        resources,
    )
    .await?;
    rows.iter()
        .map(|row| {
            Ok(Linked {
                resource: row.try_get("", "resource_id")?,
                node: row.try_get("", "id")?,
                business_key: row.try_get("", "business_key")?,
                path: row.try_get("", "path")?,
                leaf: row.try_get("", "leaf")?,
            })
        })
        .collect()
}

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OrphanReport {
    pub orphans: usize,
    pub deleted_subtrees: usize,
}

/// Phase 1: nodes every resource leaves (and none joins) are orphans;
/// reduced to root orphans, each subtree is deleted with one statement.
/// Their parents join the status area. The mapping that remains is the
/// effective new mapping the next phases work on.
pub async fn delete_orphans(
    txn: &DatabaseTransaction,
    config: &NodeConfig,
) -> AppResult<OrphanReport> {
    let dirty = dirty_resources(txn, config).await?;
    if dirty.is_empty() {
        return Ok(OrphanReport::default());
    }
    let ids: Vec<Uuid> = dirty.iter().map(|resource| resource.id).collect();
    let new_keys: HashMap<Uuid, BTreeSet<&str>> = dirty
        .iter()
        .map(|resource| {
            (
                resource.id,
                resource
                    .specs
                    .iter()
                    .map(|spec| spec.business_key.as_str())
                    .collect(),
            )
        })
        .collect();
    let joining: BTreeSet<String> = new_keys
        .values()
        .flatten()
        .map(|key| (*key).to_owned())
        .collect();
    let mut leaving: BTreeMap<i64, (String, String, usize)> = BTreeMap::new();
    for link in current_mapping(txn, &ids).await? {
        let stays = new_keys
            .get(&link.resource)
            .is_some_and(|keys| keys.contains(link.business_key.as_str()));
        if !stays {
            leaving
                .entry(link.node)
                .or_insert_with(|| (link.business_key.clone(), link.path.clone(), 0))
                .2 += 1;
        }
    }
    if leaving.is_empty() {
        return Ok(OrphanReport::default());
    }
    let linked = linked_counts(txn, leaving.keys().copied().collect()).await?;
    let candidates: Vec<Candidate> = leaving
        .into_iter()
        .map(|(id, (business_key, path, leaving))| Candidate {
            id,
            path,
            business_key,
            linked: linked.get(&id).copied().unwrap_or(0),
            leaving,
        })
        .collect();
    let orphans: Vec<&Candidate> = plan::orphans(&candidates, &joining).collect();
    let roots = plan::root_orphans(orphans.iter().map(|orphan| orphan.path.as_str()));
    let mut lost_classes = BTreeSet::new();
    for root in &roots {
        lost_classes.extend(delete_subtree(txn, root).await?);
    }
    // Classes that depend on the deleted nodes' classes must be recomputed.
    let lost_classes: Vec<String> = lost_classes.into_iter().collect();
    if !lost_classes.is_empty() {
        txn.execute_raw(stmt(
            txn,
            format!(
                "INSERT INTO node_dirty_classes (class) VALUES {} ON CONFLICT DO NOTHING",
                tuples(1, lost_classes.len(), 1)
            ),
            lost_classes.into_iter().map(Value::from).collect(),
        ))
        .await?;
    }
    let parents: Vec<i64> = roots
        .iter()
        .filter_map(|root| plan::ancestors(root).last().copied())
        .collect();
    mark_dirty(txn, &parents, &[Mark::Status]).await?;
    Ok(OrphanReport {
        orphans: orphans.len(),
        deleted_subtrees: roots.len(),
    })
}

/// How many resources each node is linked to.
async fn linked_counts(
    txn: &DatabaseTransaction,
    nodes: Vec<i64>,
) -> AppResult<HashMap<i64, usize>> {
    let rows = select_in(
        txn,
        "SELECT node_id, COUNT(*) AS n FROM resource_nodes WHERE node_id IN ({}) GROUP BY node_id",
        &[],
        &nodes,
    )
    .await?;
    let mut counts = HashMap::new();
    for row in rows {
        let n: i64 = row.try_get("", "n")?;
        counts.insert(row.try_get::<i64>("", "node_id")?, n as usize);
    }
    Ok(counts)
}

/// Deletes the node at `path` and its whole subtree: one statement on the
/// path index (the mapping rows and marks go by cascade). Returns the
/// classes of the deleted nodes.
pub async fn delete_subtree(txn: &DatabaseTransaction, path: &str) -> AppResult<BTreeSet<String>> {
    let (lower, upper) = plan::subtree_range(path);
    let rows = txn
        .query_all_raw(stmt(
            txn,
            "DELETE FROM nodes WHERE path >= $1 AND path < $2 RETURNING class",
            vec![lower.into(), upper.into()],
        ))
        .await?;
    rows.iter()
        .map(|row| Ok(row.try_get::<String>("", "class")?))
        .collect()
}

/// Marks existing nodes as owing the recomputations `marks` name.
async fn mark_dirty(txn: &DatabaseTransaction, nodes: &[i64], marks: &[Mark]) -> AppResult<()> {
    let set = marks
        .iter()
        .map(|mark| format!("{0} = excluded.{0}", mark.column()))
        .collect::<Vec<_>>()
        .join(", ");
    select_in(
        txn,
        &format!(
            "INSERT INTO node_dirty (node_id, props, status) SELECT id, $1, $2 FROM nodes \
             WHERE id IN ({{}}) ON CONFLICT (node_id) DO UPDATE SET {set}"
        ),
        &[
            marks.contains(&Mark::Props).into(),
            marks.contains(&Mark::Status).into(),
        ],
        nodes,
    )
    .await?;
    Ok(())
}

// ----------------------------------------------- Topology sync (phases 2–4)

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TopologyReport {
    pub new_nodes: usize,
    pub links_removed: usize,
    pub links_added: usize,
    pub directly_impacted: usize,
    pub resources_deleted: usize,
    /// Planner statistics were refreshed after a large change.
    pub statistics_refreshed: bool,
}

/// Phases 2–4: inserts the nodes the dirty resources map to that do not
/// exist yet (parents before children, idempotent on the business key),
/// brings `resource_nodes` to the new mapping by delta, and marks the
/// direct impact: every node a changed resource left, joined or stays on
/// (its attributes changed), and every new node.
pub async fn sync_topology(
    txn: &DatabaseTransaction,
    config: &NodeConfig,
) -> AppResult<TopologyReport> {
    // The same marked resources whose orphans were just deleted in this
    // transaction (the Topology stage runs `delete_orphans` first).
    let dirty = dirty_resources(txn, config).await?;
    let mut report = TopologyReport::default();
    if dirty.is_empty() {
        return Ok(report);
    }
    // Phase 2: new nodes.
    let mut wanted: BTreeMap<&str, &NodeSpec> = BTreeMap::new();
    for resource in &dirty {
        for spec in &resource.specs {
            wanted.entry(spec.business_key.as_str()).or_insert(spec);
        }
    }
    let mut known = nodes_by_key(txn, wanted.keys().copied().collect()).await?;
    let mut missing: BTreeMap<usize, Vec<&NodeSpec>> = BTreeMap::new();
    for (key, spec) in &wanted {
        if !known.contains_key(*key) {
            missing.entry(spec.depth).or_default().push(spec);
        }
    }
    let mut new_nodes = Vec::new();
    for level in missing.values() {
        let inserted = insert_level(txn, config, level, &known).await?;
        for (key, node) in inserted {
            new_nodes.push(node.0);
            known.insert(key, node);
        }
    }
    report.new_nodes = new_nodes.len();

    // Phase 3: the mapping, by delta (and the leaf flag where it changed).
    // Exactly the resources this stage read: a mark set since then stays
    // for the next reconciliation.
    let processed: Vec<Uuid> = dirty.iter().map(|resource| resource.id).collect();
    let old: BTreeMap<(Uuid, i64), bool> = current_mapping(txn, &processed)
        .await?
        .into_iter()
        .map(|link| ((link.resource, link.node), link.leaf))
        .collect();
    let new: BTreeMap<(Uuid, i64), bool> = dirty
        .iter()
        .flat_map(|resource| {
            resource.specs.iter().filter_map(|spec| {
                known
                    .get(&spec.business_key)
                    .map(|node| ((resource.id, node.0), spec.leaf))
            })
        })
        .collect();
    let old_pairs: BTreeSet<(Uuid, i64)> = old.keys().copied().collect();
    let new_pairs: BTreeSet<(Uuid, i64)> = new.keys().copied().collect();
    let (removed, added) = plan::mapping_delta(&old_pairs, &new_pairs);
    write_pairs(
        txn,
        "DELETE FROM resource_nodes WHERE (resource_id, node_id) IN (VALUES {})",
        &removed,
        None,
    )
    .await?;
    for leaf in [true, false] {
        let inserted: Vec<(Uuid, i64)> = added
            .iter()
            .copied()
            .filter(|pair| new[pair] == leaf)
            .collect();
        write_pairs(
            txn,
            "INSERT INTO resource_nodes (resource_id, node_id, leaf) VALUES {} ON CONFLICT DO NOTHING",
            &inserted,
            Some(leaf),
        )
        .await?;
        let flipped: Vec<(Uuid, i64)> = new
            .iter()
            .filter(|(pair, now)| **now == leaf && old.get(pair).is_some_and(|was| was != *now))
            .map(|(pair, _)| *pair)
            .collect();
        if !flipped.is_empty() {
            write_pairs(
                txn,
                &format!(
                    "UPDATE resource_nodes SET leaf = {} WHERE (resource_id, node_id) IN (VALUES {{}})",
                    if leaf { "TRUE" } else { "FALSE" }
                ),
                &flipped,
                None,
            )
            .await?;
        }
    }
    report.links_removed = removed.len();
    report.links_added = added.len();

    // Phase 4: direct impact.
    let impacted: BTreeSet<i64> = old_pairs
        .iter()
        .chain(new_pairs.iter())
        .map(|(_, node)| *node)
        .collect();
    let impacted: Vec<i64> = impacted.into_iter().collect();
    mark_dirty(txn, &impacted, &[Mark::Props]).await?;
    mark_dirty(txn, &new_nodes, &[Mark::Props, Mark::Status]).await?;
    report.directly_impacted = impacted.len();

    let deleted = select_in(
        txn,
        "DELETE FROM resources WHERE deleting AND id IN ({}) RETURNING id",
        &[],
        &processed,
    )
    .await?;
    report.resources_deleted = deleted.len();
    select_in(
        txn,
        "UPDATE resources SET needs_mapping = FALSE WHERE id IN ({}) RETURNING id",
        &[],
        &processed,
    )
    .await?;
    let changed = report.new_nodes + report.links_added + report.links_removed + processed.len();
    report.statistics_refreshed = refresh_statistics(txn, changed).await?;
    Ok(report)
}

/// Refreshes PostgreSQL's planner statistics of the tree's tables after a
/// change large enough to leave them stale ([`plan::statistics_stale`]), so
/// that the leaf updates after a bulk import are planned for the tree as it
/// is (index lookups), not as it was (empty). `ANALYZE` runs in the stage's
/// transaction, sees its rows, and blocks no reader or writer. SQLite's
/// planner does not need it: the queries name their join order.
async fn refresh_statistics(txn: &DatabaseTransaction, changed: usize) -> AppResult<bool> {
    if txn.get_database_backend() != DbBackend::Postgres || changed < plan::STATISTICS_MIN_CHANGE {
        return Ok(false);
    }
    let estimated = txn
        .query_one_raw(stmt(
            txn,
            "SELECT reltuples FROM pg_class WHERE oid = 'nodes'::regclass",
            vec![],
        ))
        .await?
        .map(|row| row.try_get::<f32>("", "reltuples"))
        .transpose()?
        // PostgreSQL says -1 for a table never analyzed.
        .filter(|rows| *rows >= 0.0)
        .map(f64::from);
    if !plan::statistics_stale(changed, estimated) {
        return Ok(false);
    }
    txn.execute_raw(stmt(
        txn,
        "ANALYZE resources, nodes, resource_nodes",
        vec![],
    ))
    .await?;
    Ok(true)
}

/// Runs `sql` (its `{}` replaced by the tuples) over (resource, node)
/// pairs, with `extra` as a third value of each tuple when given; one
/// statement per chunk.
async fn write_pairs(
    txn: &DatabaseTransaction,
    sql: &str,
    pairs: &[(Uuid, i64)],
    extra: Option<bool>,
) -> AppResult<()> {
    let width = if extra.is_some() { 3 } else { 2 };
    for chunk in pairs.chunks(CHUNK) {
        let mut values = Vec::with_capacity(chunk.len() * width);
        for (resource, node) in chunk {
            values.push(Value::from(*resource));
            values.push(Value::from(*node));
            if let Some(extra) = extra {
                values.push(Value::from(extra));
            }
        }
        txn.execute_raw(stmt(
            txn,
            sql.replace("{}", &tuples(1, chunk.len(), width)),
            values,
        ))
        .await?;
    }
    Ok(())
}

/// Existing nodes by business key: (id, path).
async fn nodes_by_key(
    txn: &DatabaseTransaction,
    keys: Vec<&str>,
) -> AppResult<HashMap<String, (i64, String)>> {
    let rows = select_in(
        txn,
        "SELECT id, business_key, path FROM nodes WHERE business_key IN ({})",
        &[],
        &keys,
    )
    .await?;
    let mut found = HashMap::new();
    for row in rows {
        found.insert(
            row.try_get("", "business_key")?,
            (row.try_get("", "id")?, row.try_get("", "path")?),
        );
    }
    Ok(found)
}

/// Inserts one level of new nodes (their parents exist) and sets their
/// paths, which contain their own ids: an insert and a path update per
/// chunk.
async fn insert_level(
    txn: &DatabaseTransaction,
    config: &NodeConfig,
    level: &[&NodeSpec],
    known: &HashMap<String, (i64, String)>,
) -> AppResult<Vec<(String, (i64, String))>> {
    let now = Utc::now();
    let mut inserted = Vec::new();
    for chunk in level.chunks(CHUNK / 2) {
        const WIDTH: usize = 11;
        let mut values: Vec<Value> = Vec::with_capacity(chunk.len() * WIDTH);
        for spec in chunk {
            let parent = spec.parent_key.as_ref().and_then(|key| known.get(key));
            values.extend([
                Value::from(config.classes[spec.class].name.clone()),
                Value::from(spec.business_key.clone()),
                Value::from(parent.map(|(id, _)| *id)),
                Value::from(String::new()),
                Value::from(spec.depth as i32),
                Value::from(spec.position_token.clone()),
                Value::from(json!({})),
                Value::from(json!({})),
                Value::from(0),
                Value::from(now),
                Value::from(now),
            ]);
        }
        let by_key: HashMap<&str, &NodeSpec> = chunk
            .iter()
            .map(|spec| (spec.business_key.as_str(), *spec))
            .collect();
        let rows = txn
            .query_all_raw(stmt(
                txn,
                format!(
                    "INSERT INTO nodes (class, business_key, parent_id, path, depth, position_token, \
                     properties, partials, aggregated_status, created_at, updated_at) VALUES {} \
                     ON CONFLICT (business_key) DO NOTHING RETURNING id, business_key",
                    tuples(1, chunk.len(), WIDTH)
                ),
                values,
            ))
            .await?;
        let mut paths = Vec::with_capacity(rows.len());
        for row in rows {
            let id: i64 = row.try_get("", "id")?;
            let key: String = row.try_get("", "business_key")?;
            let parent_path = by_key
                .get(key.as_str())
                .and_then(|spec| spec.parent_key.as_ref())
                .and_then(|parent| known.get(parent))
                .map(|(_, path)| path.as_str());
            let path = plan::child_path(parent_path, id);
            paths.push((id, path.clone()));
            inserted.push((key, (id, path)));
        }
        update_nodes(
            txn,
            "path = v.column2",
            &[],
            paths
                .into_iter()
                .map(|(id, path)| vec![Value::from(id), Value::from(path)])
                .collect(),
        )
        .await?;
    }
    Ok(inserted)
}

// --------------------------------------------------- Properties (5 and 6)

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PropertiesReport {
    /// Nodes whose attribute statistics were recomputed.
    pub statistics_updated: usize,
    pub classes: Vec<String>,
    pub nodes_computed: usize,
    pub nodes_changed: usize,
    pub fixpoint_rounds: usize,
}

/// A node being computed, with what it had.
struct Computed {
    input: NodeInput,
    old: serde_json::Value,
}

/// Phases 5 and 6: the classes of the directly impacted nodes, plus every
/// class that depends on them transitively (all of whose nodes are
/// recomputed), in dependency order; each class's context is loaded in
/// bulk, the Engine computes, and changed nodes are written and join the
/// status area. Strongly connected classes are recomputed together until
/// nothing changes, at most `maxFixpointIterations` rounds.
pub async fn update_properties(
    txn: &DatabaseTransaction,
    config: &NodeConfig,
    engine: &dyn Engine,
) -> AppResult<PropertiesReport> {
    let marked = marked_nodes(txn).await?;
    let mut report = PropertiesReport {
        statistics_updated: update_partials(txn, config, &marked).await?,
        ..PropertiesReport::default()
    };
    let lost = txn
        .query_all_raw(stmt(txn, "SELECT class FROM node_dirty_classes", vec![]))
        .await?;
    let mut lost_classes = Vec::with_capacity(lost.len());
    for row in lost {
        lost_classes.push(row.try_get::<String>("", "class")?);
    }
    let mut direct = BTreeSet::new();
    for class in marked.iter().map(|node| &node.class).chain(&lost_classes) {
        // A class no longer configured keeps its stored properties.
        if let Some(index) = config.class_index(class) {
            direct.insert(index);
        }
    }
    let marked_ids: Vec<i64> = marked.iter().map(|node| node.id).collect();
    let mut whole = config.indirectly_impacted(&direct);
    for unit in &config.units {
        if unit.cyclic
            && unit
                .classes
                .iter()
                .any(|c| direct.contains(c) || whole.contains(c))
        {
            whole.extend(unit.classes.iter().copied());
        }
    }
    let mut props_changed = Vec::new();
    for unit in &config.units {
        let members: Vec<usize> = unit
            .classes
            .iter()
            .copied()
            .filter(|c| direct.contains(c) || whole.contains(c))
            .collect();
        if members.is_empty() {
            continue;
        }
        let mut computed: BTreeMap<usize, Vec<Computed>> = BTreeMap::new();
        for &class in &members {
            let with_resources = engine.needs_resources(&config.classes[class]);
            let name = &config.classes[class].name;
            let nodes = if whole.contains(&class) {
                ClassNodes::All(name)
            } else {
                ClassNodes::Marked(
                    marked
                        .iter()
                        .filter(|node| node.class == *name)
                        .map(|node| node.id)
                        .collect(),
                )
            };
            computed.insert(class, load_class(txn, &nodes, with_resources).await?);
            report.classes.push(config.classes[class].name.clone());
        }
        // Dependencies outside the unit are final already: load them once.
        let mut dependencies: HashMap<String, Vec<Map<String, serde_json::Value>>> = HashMap::new();
        for &class in &members {
            for dependency in &config.classes[class].depends_on {
                let inside = config
                    .class_index(dependency)
                    .is_some_and(|d| members.contains(&d));
                if !inside && !dependencies.contains_key(dependency) {
                    dependencies
                        .insert(dependency.clone(), class_properties(txn, dependency).await?);
                }
            }
        }
        let rounds = if unit.cyclic {
            config.max_fixpoint_iterations as usize
        } else {
            1
        };
        let mut results: BTreeMap<usize, Vec<Map<String, serde_json::Value>>> = BTreeMap::new();
        for round in 0..rounds {
            report.fixpoint_rounds += 1;
            let mut changed = false;
            for &class in &members {
                // Inside a cycle, members read each other's latest round.
                for &other in &members {
                    let name = &config.classes[other].name;
                    if config.classes[class].depends_on.contains(name) {
                        // The first round starts from nothing, not from
                        // stored values, so the fixpoint reached does not
                        // depend on history.
                        let values = results.get(&other).cloned().unwrap_or_default();
                        dependencies.insert(name.clone(), values);
                    }
                }
                let inputs: Vec<NodeInput> = computed[&class]
                    .iter()
                    .map(|node| node.input.clone())
                    .collect();
                let out = engine.properties(
                    &config.classes[class],
                    &ClassContext {
                        nodes: &inputs,
                        dependencies: &dependencies,
                    },
                );
                if results.get(&class) != Some(&out) {
                    changed = true;
                }
                results.insert(class, out);
            }
            if !changed && round > 0 {
                break;
            }
        }
        for (&class, nodes) in &computed {
            let out = &results[&class];
            report.nodes_computed += nodes.len();
            let mut writes = Vec::new();
            for (node, properties) in nodes.iter().zip(out) {
                let value = serde_json::Value::Object(properties.clone());
                if value != node.old {
                    // A patch rule may read any property, not only status.
                    props_changed.push(node.input.id);
                    writes.push((node.input.id, value, status_of(properties)));
                }
            }
            report.nodes_changed += writes.len();
            write_properties(txn, writes).await?;
        }
    }
    mark_dirty(txn, &props_changed, &[Mark::Status]).await?;
    txn.execute_raw(stmt(txn, "DELETE FROM node_dirty_classes", vec![]))
        .await?;
    clear_marks(txn, Mark::Props, &marked_ids).await?;
    Ok(report)
}

/// A node marked for properties.
struct MarkedNode {
    id: i64,
    depth: i32,
    class: String,
}

/// The nodes marked for properties: the marks, then the nodes by id.
async fn marked_nodes(txn: &DatabaseTransaction) -> AppResult<Vec<MarkedNode>> {
    let ids = marked(txn, Mark::Props).await?;
    let rows = select_in(
        txn,
        "SELECT id, depth, class FROM nodes WHERE id IN ({}) ORDER BY id",
        &[],
        &ids,
    )
    .await?;
    rows.iter()
        .map(|row| {
            Ok(MarkedNode {
                id: row.try_get("", "id")?,
                depth: row.try_get("", "depth")?,
                class: row.try_get("", "class")?,
            })
        })
        .collect()
}

/// Which nodes of a class to compute.
enum ClassNodes<'a> {
    /// Every node of the named class.
    All(&'a str),
    /// These (marked) nodes, in id order.
    Marked(Vec<i64>),
}

/// A class's nodes to compute with their statistics, and their resources'
/// attributes when the Engine needs them: a constant number of statements
/// (per 500 nodes when only marked ones are loaded, by id).
async fn load_class(
    txn: &DatabaseTransaction,
    nodes: &ClassNodes<'_>,
    with_resources: bool,
) -> AppResult<Vec<Computed>> {
    const NODE_COLUMNS: &str = "n.id, n.position_token, n.properties, n.partials";
    const RESOURCE_COLUMNS: &str = "rn.node_id, r.attributes FROM resource_nodes rn \
        JOIN resources r ON r.id = rn.resource_id";
    let rows = match nodes {
        ClassNodes::All(class) => {
            txn.query_all_raw(stmt(
                txn,
                format!("SELECT {NODE_COLUMNS} FROM nodes n WHERE n.class = $1 ORDER BY n.id"),
                vec![(*class).into()],
            ))
            .await?
        }
        ClassNodes::Marked(ids) => {
            select_in(
                txn,
                &format!("SELECT {NODE_COLUMNS} FROM nodes n WHERE n.id IN ({{}}) ORDER BY n.id"),
                &[],
                ids,
            )
            .await?
        }
    };
    let mut computed = Vec::with_capacity(rows.len());
    let mut index = HashMap::with_capacity(rows.len());
    for row in rows {
        let id: i64 = row.try_get("", "id")?;
        index.insert(id, computed.len());
        computed.push(Computed {
            input: NodeInput {
                id,
                position_token: row.try_get("", "position_token")?,
                partials: Partials::from_value(&row.try_get("", "partials")?),
                resources: Vec::new(),
            },
            old: row.try_get("", "properties")?,
        });
    }
    if !with_resources {
        return Ok(computed);
    }
    let rows =
        match nodes {
            ClassNodes::All(class) => {
                txn.query_all_raw(stmt(
                    txn,
                    format!(
                        "SELECT {RESOURCE_COLUMNS} JOIN nodes n ON n.id = rn.node_id \
                     WHERE n.class = $1 ORDER BY rn.node_id, r.id"
                    ),
                    vec![(*class).into()],
                ))
                .await?
            }
            ClassNodes::Marked(ids) => select_in(
                txn,
                &format!(
                    "SELECT {RESOURCE_COLUMNS} WHERE rn.node_id IN ({{}}) ORDER BY rn.node_id, r.id"
                ),
                &[],
                ids,
            )
            .await?,
        };
    for row in rows {
        let node: i64 = row.try_get("", "node_id")?;
        if let Some(&i) = index.get(&node) {
            computed[i]
                .input
                .resources
                .push(row.try_get("", "attributes")?);
        }
    }
    Ok(computed)
}

/// Recomputes the attribute statistics of the nodes marked for properties,
/// deepest level first, so each level reads its children's new ones: a
/// node's statistics are its leaf resources' combined with its children's
/// (for a class with several child classes, whose children overlap, all
/// its resources'). Per level: one load of resources, one of children's
/// statistics, one write. Returns how many nodes were updated.
async fn update_partials(
    txn: &DatabaseTransaction,
    config: &NodeConfig,
    marked: &[MarkedNode],
) -> AppResult<usize> {
    let mut levels: BTreeMap<i32, Vec<(i64, bool)>> = BTreeMap::new();
    for node in marked {
        let branching = config
            .class(&node.class)
            .is_none_or(|class| class.branching);
        levels
            .entry(node.depth)
            .or_default()
            .push((node.id, branching));
    }
    let mut updated = 0;
    for nodes in levels.values().rev() {
        let mut partials: HashMap<i64, Partials> = HashMap::with_capacity(nodes.len());
        for (branching, leaf_only) in [(false, true), (true, false)] {
            let ids: Vec<i64> = nodes
                .iter()
                .filter(|(_, b)| *b == branching)
                .map(|(id, _)| *id)
                .collect();
            // A chain class's own statistics come from its leaf resources
            // (its children bring the rest); a branching class's from all.
            let (filter, leading): (&str, &[Value]) = if leaf_only {
                ("rn.leaf = $1 AND", &[Value::Bool(Some(true))])
            } else {
                ("", &[])
            };
            let rows = select_in(
                txn,
                &format!(
                    "SELECT rn.node_id, r.attributes FROM resource_nodes rn \
                     JOIN resources r ON r.id = rn.resource_id WHERE {filter} rn.node_id IN ({{}})"
                ),
                leading,
                &ids,
            )
            .await?;
            let mut own: HashMap<i64, Vec<serde_json::Value>> = HashMap::new();
            for row in rows {
                own.entry(row.try_get("", "node_id")?)
                    .or_default()
                    .push(row.try_get("", "attributes")?);
            }
            for id in &ids {
                let attributes = own.remove(id).unwrap_or_default();
                partials.insert(
                    *id,
                    Partials::of_resources(&config.attribute_paths, &attributes),
                );
            }
            if branching {
                continue;
            }
            let rows = select_in(
                txn,
                "SELECT parent_id, partials FROM nodes WHERE parent_id IN ({})",
                &[],
                &ids,
            )
            .await?;
            for row in rows {
                let parent: i64 = row.try_get("", "parent_id")?;
                let child = Partials::from_value(&row.try_get("", "partials")?);
                if let Some(partial) = partials.get_mut(&parent) {
                    partial.combine(&child);
                }
            }
        }
        updated += partials.len();
        update_nodes(
            txn,
            "partials = v.column2",
            &[],
            partials
                .into_iter()
                .map(|(id, partial)| vec![Value::from(id), Value::from(partial.to_value())])
                .collect(),
        )
        .await?;
    }
    Ok(updated)
}

/// The properties of every node of a class: one statement.
async fn class_properties(
    txn: &DatabaseTransaction,
    class: &str,
) -> AppResult<Vec<Map<String, serde_json::Value>>> {
    let rows = txn
        .query_all_raw(stmt(
            txn,
            "SELECT properties FROM nodes WHERE class = $1 ORDER BY id",
            vec![class.into()],
        ))
        .await?;
    rows.iter()
        .map(|row| {
            let value: serde_json::Value = row.try_get("", "properties")?;
            Ok(value.as_object().cloned().unwrap_or_default())
        })
        .collect()
}

async fn write_properties(
    txn: &DatabaseTransaction,
    writes: Vec<(i64, serde_json::Value, i32)>,
) -> AppResult<()> {
    update_nodes(
        txn,
        "properties = v.column2, status = v.column3, updated_at = $1",
        &[Utc::now().into()],
        writes
            .into_iter()
            .map(|(id, properties, status)| {
                vec![
                    Value::from(id),
                    Value::from(properties),
                    Value::from(status),
                ]
            })
            .collect(),
    )
    .await
}

// ------------------------------------------------ Aggregated status (7)

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusReport {
    pub status_area: usize,
    pub levels: usize,
    pub changed: usize,
}

/// A node of the status area.
struct AreaNode {
    class: String,
    path: String,
    status: i32,
    aggregated: i32,
    properties: serde_json::Value,
}

/// Phase 7: the status area (marked nodes and all their ancestors) is
/// recomputed level by level from the deepest: one `GROUP BY parent_id`
/// aggregate over the level's children, then `patchAggregatedStatus`, then
/// one write of the level's changes, so the parent level reads them. Each
/// change is an outbox event (`node.status_changed`).
pub async fn recompute_aggregated_status(
    txn: &DatabaseTransaction,
    config: &NodeConfig,
    engine: &dyn Engine,
) -> AppResult<StatusReport> {
    let mut report = StatusReport::default();
    let marked = marked(txn, Mark::Status).await?;
    // The marked nodes first; their ancestors are known from their paths.
    let mut area = area_nodes(txn, &marked).await?;
    let levels = plan::status_area_levels(area.iter().map(|(id, node)| (*id, node.path.as_str())));
    let missing: Vec<i64> = levels
        .iter()
        .flat_map(|(_, ids)| ids.iter().copied())
        .filter(|id| !area.contains_key(id))
        .collect();
    area.extend(area_nodes(txn, &missing).await?);
    report.status_area = levels.iter().map(|(_, ids)| ids.len()).sum();
    report.levels = levels.len();
    let mut events = Vec::new();
    for (_, ids) in &levels {
        let ids: Vec<i64> = ids
            .iter()
            .copied()
            .filter(|id| area.contains_key(id))
            .collect();
        let mut children_max: HashMap<i64, i32> = HashMap::new();
        let rows = select_in(
            txn,
            "SELECT parent_id, MAX(aggregated_status) AS agg FROM nodes \
             WHERE parent_id IN ({}) GROUP BY parent_id",
            &[],
            &ids,
        )
        .await?;
        for row in rows {
            children_max.insert(row.try_get("", "parent_id")?, row.try_get("", "agg")?);
        }
        let mut writes: Vec<(i64, i32)> = Vec::new();
        for id in ids {
            let node = &area[&id];
            let computed = plan::aggregate(node.status, children_max.get(&id).copied());
            let aggregated = config
                .class(&node.class)
                .and_then(|class| {
                    engine.patch_aggregated_status(
                        class,
                        &PatchInput {
                            status: node.status,
                            aggregated: computed,
                            properties: &node.properties,
                        },
                    )
                })
                .unwrap_or(computed);
            if aggregated != node.aggregated {
                writes.push((id, aggregated));
                events.push(outbox::NewEvent {
                    topic: NODE_STATUS_CHANGED,
                    aggregate_id: id.to_string(),
                    owner_id: None,
                    payload: json!({
                        "id": id.to_string(),
                        "class": node.class,
                        "path": node.path,
                        "status": node.status,
                        "aggregatedStatus": aggregated,
                        "previousAggregatedStatus": node.aggregated,
                    }),
                });
            }
        }
        report.changed += writes.len();
        update_nodes(
            txn,
            "aggregated_status = v.column2, updated_at = $1",
            &[Utc::now().into()],
            writes
                .into_iter()
                .map(|(id, aggregated)| vec![Value::from(id), Value::from(aggregated)])
                .collect(),
        )
        .await?;
    }
    outbox::emit(txn, events).await?;
    clear_marks(txn, Mark::Status, &marked).await?;
    Ok(report)
}

/// Nodes of the status area by id: one statement per 500.
async fn area_nodes(txn: &DatabaseTransaction, ids: &[i64]) -> AppResult<HashMap<i64, AreaNode>> {
    let rows = select_in(
        txn,
        "SELECT id, class, path, status, aggregated_status, properties FROM nodes WHERE id IN ({})",
        &[],
        ids,
    )
    .await?;
    let mut area = HashMap::with_capacity(rows.len());
    for row in rows {
        area.insert(
            row.try_get("", "id")?,
            AreaNode {
                class: row.try_get("", "class")?,
                path: row.try_get("", "path")?,
                status: row.try_get("", "status")?,
                aggregated: row.try_get("", "aggregated_status")?,
                properties: row.try_get("", "properties")?,
            },
        );
    }
    Ok(area)
}
