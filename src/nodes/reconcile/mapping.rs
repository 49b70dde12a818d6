//! Mapping (phase 1): the marked resources' new mapping, and the orphans
//! it leaves, deleted a root orphan's subtree at a time.

use super::*;

/// A resource whose nodes must be recomputed, with where it maps now.
pub(super) struct DirtyResource {
    pub(super) id: Uuid,
    pub(super) specs: Vec<NodeSpec>,
}

/// The marked resources.
pub(super) async fn dirty_resources(
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
pub(super) struct Linked {
    pub(super) resource: Uuid,
    pub(super) node: i64,
    pub(super) business_key: String,
    pub(super) path: String,
    pub(super) leaf: bool,
}

pub(super) async fn current_mapping(
    txn: &DatabaseTransaction,
    resources: &[Uuid],
) -> AppResult<Vec<Linked>> {
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
                db::placeholder_rows(1, lost_classes.len(), 1)
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
