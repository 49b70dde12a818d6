//! Aggregated status (phase 7): the status area recomputed level by
//! level, O(depth) statements, with a `nodeStatusChanged` event per change.

use super::*;

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
