//! Topology sync (phases 2–4): new nodes level by level, the resources'
//! links, and the planner's statistics when much changed.

use super::{
    mapping::{current_mapping, dirty_resources},
    *,
};

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
            sql.replace("{}", &db::placeholder_rows(1, chunk.len(), width)),
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
                    db::placeholder_rows(1, chunk.len(), WIDTH)
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
