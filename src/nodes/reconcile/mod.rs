//! The seed's reconciliation, one file per phase, each run inside the
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
    db::{self, placeholders, stmt},
    error::{AppError, AppResult},
    jobs::{outbox, store},
};

mod mapping;
mod mutation;
mod properties;
mod status;
mod topology;

pub use self::{mapping::*, mutation::*, properties::*, status::*, topology::*};

/// Rows per multi-row statement (well under either backend's parameter limit).
const CHUNK: usize = 500;

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
            db::placeholder_rows(leading.len() + 1, chunk.len(), width)
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
