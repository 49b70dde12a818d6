//! Properties (phases 5 and 6): the impacted nodes' properties, class by
//! class from the leaves up, through the Engine.

use super::*;

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
