//! The reconciliation phases against real SQLite and PostgreSQL, without
//! the server: statement counts (through sea-orm's per-statement hook) and
//! a property test that random operations, with reconciliations stopped
//! half-way (a superseded task) or rolled back (a crash), end in the tree a
//! from-scratch computation over the final resources gives.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, Mutex},
};

use migration::{Migrator, MigratorTrait};
use proptest::{prelude::*, test_runner::TestRunner};
use sea_orm::{ConnectionTrait, Database, DatabaseConnection, Statement, TransactionTrait, Value};
use serde_json::{Map, json};
use trellis::nodes::{
    config::{DEFAULT_CONFIG, NodeConfig},
    engine::{ClassContext, Engine, NodeInput, Partials, PatchInput, RuleEngine, status_of},
    reconcile,
};
use uuid::Uuid;

use crate::helpers::{Backend, TestDatabase};

/// A database with the schema, and a log of the statements run while
/// recording.
struct Lab {
    db: DatabaseConnection,
    config: NodeConfig,
    log: Arc<Mutex<Option<Vec<String>>>>,
    _database: TestDatabase,
    _dir: tempfile::TempDir,
}

const PHASES: usize = reconcile::Phase::ALL.len();

impl Lab {
    async fn new(backend: Backend, config: &str) -> Lab {
        let dir = tempfile::tempdir().unwrap();
        let database = TestDatabase::create(backend, dir.path()).await;
        let mut db = Database::connect(&database.url).await.unwrap();
        Migrator::up(&db, None).await.unwrap();
        let log: Arc<Mutex<Option<Vec<String>>>> = Arc::default();
        let sink = log.clone();
        db.set_metric_callback(move |info| {
            if let Some(log) = sink.lock().unwrap().as_mut() {
                log.push(info.statement.sql.clone());
            }
        });
        Lab {
            db,
            config: NodeConfig::parse(config).unwrap(),
            log,
            _database: database,
            _dir: dir,
        }
    }

    async fn exec(&self, sql: &str, values: Vec<Value>) {
        self.db
            .execute_raw(Statement::from_sql_and_values(
                self.db.get_database_backend(),
                sql,
                values,
            ))
            .await
            .unwrap();
    }

    /// What the mutation stage does for a create or a replacement.
    async fn put(&self, id: Uuid, attributes: &serde_json::Value) {
        self.exec(
            "INSERT INTO resources (id, attributes, version, deleting, needs_mapping, created_at, updated_at) \
             VALUES ($1, $2, 1, $3, $4, $5, $5) ON CONFLICT (id) DO UPDATE SET attributes = excluded.attributes, \
             needs_mapping = excluded.needs_mapping, version = resources.version + 1",
            vec![
                id.into(),
                attributes.clone().into(),
                false.into(),
                true.into(),
                chrono::Utc::now().into(),
            ],
        )
        .await;
    }

    /// What the mutation stage does for a delete.
    async fn remove(&self, id: Uuid) {
        self.exec(
            "UPDATE resources SET deleting = $1, needs_mapping = $1 WHERE id = $2",
            vec![true.into(), id.into()],
        )
        .await;
    }

    /// Runs one phase in its own transaction (rolled back when `crash`)
    /// and returns the statements it ran.
    async fn phase(&self, phase: usize, crash: bool) -> Vec<String> {
        let txn = self.db.begin().await.unwrap();
        *self.log.lock().unwrap() = Some(Vec::new());
        reconcile::Phase::ALL[phase]
            .run(&txn, &self.config, &RuleEngine)
            .await
            .unwrap();
        let statements = self.log.lock().unwrap().take().unwrap_or_default();
        if crash {
            txn.rollback().await.unwrap();
        } else {
            txn.commit().await.unwrap();
        }
        statements
    }

    /// Every phase, in order: a task that is not superseded.
    async fn reconcile(&self) -> Vec<Vec<String>> {
        let mut statements = Vec::new();
        for phase in 0..PHASES {
            statements.push(self.phase(phase, false).await);
        }
        statements
    }

    async fn count(&self, table: &str) -> i64 {
        let row = self
            .db
            .query_one_raw(Statement::from_string(
                self.db.get_database_backend(),
                format!("SELECT COUNT(*) AS n FROM {table}"),
            ))
            .await
            .unwrap()
            .unwrap();
        row.try_get("", "n").unwrap()
    }

    async fn clear(&self) {
        for table in [
            "resource_nodes",
            "node_dirty",
            "node_dirty_classes",
            "nodes",
            "resources",
        ] {
            self.exec(&format!("DELETE FROM {table}"), vec![]).await;
        }
    }

    /// The stored tree, keyed by the (class, token) chain from the root.
    async fn tree(&self) -> Tree {
        let backend = self.db.get_database_backend();
        let rows = self
            .db
            .query_all_raw(Statement::from_string(
                backend,
                "SELECT id, class, position_token, parent_id, properties, status, aggregated_status FROM nodes",
            ))
            .await
            .unwrap();
        let mut nodes: BTreeMap<i64, (Option<i64>, Key, Expected)> = BTreeMap::new();
        for row in rows {
            nodes.insert(
                row.try_get("", "id").unwrap(),
                (
                    row.try_get("", "parent_id").unwrap(),
                    (
                        row.try_get("", "class").unwrap(),
                        row.try_get("", "position_token").unwrap(),
                    ),
                    Expected {
                        resources: BTreeSet::new(),
                        properties: row.try_get("", "properties").unwrap(),
                        status: row.try_get("", "status").unwrap(),
                        aggregated: row.try_get("", "aggregated_status").unwrap(),
                    },
                ),
            );
        }
        let links = self
            .db
            .query_all_raw(Statement::from_string(
                backend,
                "SELECT resource_id, node_id FROM resource_nodes",
            ))
            .await
            .unwrap();
        for link in links {
            let node: i64 = link.try_get("", "node_id").unwrap();
            let resource: Uuid = link.try_get("", "resource_id").unwrap();
            nodes.get_mut(&node).unwrap().2.resources.insert(resource);
        }
        let mut tree = Tree::new();
        for (parent, key, node) in nodes.values() {
            let mut chain = vec![key.clone()];
            let mut up = *parent;
            while let Some(id) = up {
                chain.insert(0, nodes[&id].1.clone());
                up = nodes[&id].0;
            }
            tree.insert(chain, node.clone());
        }
        tree
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Expected {
    resources: BTreeSet<Uuid>,
    properties: serde_json::Value,
    status: i32,
    aggregated: i32,
}

/// A node's (class, position token).
type Key = (String, String);
type Tree = BTreeMap<Vec<Key>, Expected>;

/// The from-scratch computation: every resource's chain, every class's
/// properties in dependency order from all its nodes (cycles from nothing
/// to a fixpoint), then aggregated statuses from the deepest nodes up.
fn reference(config: &NodeConfig, resources: &BTreeMap<Uuid, serde_json::Value>) -> Tree {
    let mut members: BTreeMap<Vec<(String, String)>, BTreeSet<Uuid>> = BTreeMap::new();
    for (id, attributes) in resources {
        let mut chains: BTreeMap<&str, Vec<(String, String)>> = BTreeMap::new();
        for class in &config.classes {
            let parent_chain = match &class.parent {
                None => Some(Vec::new()),
                Some(parent) => chains.get(parent.as_str()).cloned(),
            };
            let (Some(mut chain), Some(token)) = (parent_chain, class.position.render(attributes))
            else {
                continue;
            };
            chain.push((class.name.clone(), token));
            members.entry(chain.clone()).or_default().insert(*id);
            chains.insert(&class.name, chain);
        }
    }
    let mut properties: BTreeMap<Vec<(String, String)>, Map<String, serde_json::Value>> =
        BTreeMap::new();
    let of_class = |class: &str| -> Vec<Vec<(String, String)>> {
        members
            .keys()
            .filter(|chain| chain.last().unwrap().0 == class)
            .cloned()
            .collect()
    };
    for unit in &config.units {
        let rounds = if unit.cyclic {
            config.max_fixpoint_iterations
        } else {
            1
        };
        let mut results: BTreeMap<usize, Vec<Map<String, serde_json::Value>>> = BTreeMap::new();
        for round in 0..rounds {
            let mut changed = false;
            for &c in &unit.classes {
                let class = &config.classes[c];
                let mut dependencies = std::collections::HashMap::new();
                for dependency in &class.depends_on {
                    let d = config.class_index(dependency).unwrap();
                    let values = if unit.classes.contains(&d) {
                        results.get(&d).cloned().unwrap_or_default()
                    } else {
                        of_class(dependency)
                            .iter()
                            .map(|chain| properties[chain].clone())
                            .collect()
                    };
                    dependencies.insert(dependency.clone(), values);
                }
                let chains = of_class(&class.name);
                let inputs: Vec<NodeInput> = chains
                    .iter()
                    .map(|chain| {
                        let attributes: Vec<serde_json::Value> = members[chain]
                            .iter()
                            .map(|id| resources[id].clone())
                            .collect();
                        NodeInput {
                            id: 0,
                            position_token: chain.last().unwrap().1.clone(),
                            // Straight from all the node's resources, not
                            // combined from children as the server does.
                            partials: Partials::of_resources(&config.attribute_paths, &attributes),
                            resources: attributes,
                        }
                    })
                    .collect();
                let out = RuleEngine.properties(
                    class,
                    &ClassContext {
                        nodes: &inputs,
                        dependencies: &dependencies,
                    },
                );
                changed |= results.get(&c) != Some(&out);
                results.insert(c, out);
            }
            if !changed && round > 0 {
                break;
            }
        }
        for (c, out) in results {
            for (chain, props) in of_class(&config.classes[c].name).into_iter().zip(out) {
                properties.insert(chain, props);
            }
        }
    }
    let mut tree = Tree::new();
    let mut chains: Vec<&Vec<(String, String)>> = members.keys().collect();
    chains.sort_by_key(|chain| std::cmp::Reverse(chain.len()));
    for chain in chains {
        let props = &properties[chain];
        let status = status_of(props);
        let children = tree
            .iter()
            .filter(|(child, _)| child.len() == chain.len() + 1 && child.starts_with(chain))
            .map(|(_, node)| node.aggregated)
            .max();
        let computed = children.map_or(status, |max| max.max(status));
        let value = serde_json::Value::Object(props.clone());
        let class = config.class(&chain.last().unwrap().0).unwrap();
        let aggregated = RuleEngine
            .patch_aggregated_status(
                class,
                &PatchInput {
                    status,
                    aggregated: computed,
                    properties: &value,
                },
            )
            .unwrap_or(computed);
        tree.insert(
            chain.clone(),
            Expected {
                resources: members[chain].clone(),
                properties: value,
                status,
                aggregated,
            },
        );
    }
    tree
}

/// A tree with dependencies, a cycle and a patch rule.
const LAB_CONFIG: &str = r#"
maxFixpointIterations = 6

[[classes]]
name = "region"
position = "{region}"
properties = { status = "max(attr.health)", n = "count()" }

[[classes]]
name = "cluster"
parent = "region"
position = "{cluster}"
properties = { status = "max(attr.health)", cpu = "sum(attr.cpu)" }

[[classes]]
name = "service"
parent = "cluster"
position = "svc-{service}"
dependsOn = ["database"]
properties = { status = "max(attr.health)", db = "max(database.status)" }

[[classes]]
name = "database"
position = "{database}"
properties = { status = "max(attr.health)" }
patchAggregatedStatus = "min(aggregated, 2)"

[[classes]]
name = "team"
position = "{team}"
dependsOn = ["owner"]
properties = { status = "max(attr.health)", ownerLoad = "max(owner.load)" }

[[classes]]
name = "owner"
parent = "team"
position = "{owner}"
dependsOn = ["team"]
properties = { status = "min(attr.health)", load = "sum(team.status)" }
"#;

#[derive(Debug, Clone)]
enum Op {
    Put(usize, serde_json::Value),
    Delete(usize),
}

fn attributes() -> impl Strategy<Value = serde_json::Value> {
    (
        prop::option::of(prop::sample::select(vec!["eu", "us"])),
        prop::sample::select(vec!["k1", "k2"]),
        prop::option::of(prop::sample::select(vec!["a", "b", "c"])),
        prop::option::of(prop::sample::select(vec!["pg", "redis"])),
        prop::option::of(prop::sample::select(vec!["t1", "t2"])),
        prop::option::of(prop::sample::select(vec!["o1", "o2"])),
        0i64..4,
        0i64..10,
    )
        .prop_map(
            |(region, cluster, service, database, team, owner, health, cpu)| {
                let mut attributes = json!({ "cluster": cluster, "health": health, "cpu": cpu });
                for (key, value) in [
                    ("region", region),
                    ("service", service),
                    ("database", database),
                    ("team", team),
                    ("owner", owner),
                ] {
                    if let Some(value) = value {
                        attributes[key] = json!(value);
                    }
                }
                attributes
            },
        )
}

fn operations() -> impl Strategy<Value = Vec<(Op, (usize, usize), bool)>> {
    let op = prop_oneof![
        3 => (0usize..6, attributes()).prop_map(|(i, a)| Op::Put(i, a)),
        1 => (0usize..6).prop_map(Op::Delete),
    ];
    // Each operation (a mutation stage), then the phases some pass ran
    // after it: a run of consecutive phases starting anywhere — the new
    // pass's first ones, or the rest of an older pass that had already
    // done its Mapping stage before this mutation landed — and whether the
    // last of those crashed.
    let phases = (0usize..=PHASES, 0usize..=PHASES)
        .prop_map(|(start, count)| (start, (start + count).min(PHASES)));
    prop::collection::vec((op, phases, any::<bool>()), 1..12)
}

async fn check(lab: &Lab, ops: Vec<(Op, (usize, usize), bool)>) -> Result<(), TestCaseError> {
    lab.clear().await;
    let mut ids: Vec<Uuid> = (0..6).map(|_| Uuid::now_v7()).collect();
    let mut resources: BTreeMap<Uuid, serde_json::Value> = BTreeMap::new();
    for (op, phases, crash) in ops {
        match op {
            Op::Put(i, attributes) => {
                lab.put(ids[i], &attributes).await;
                resources.insert(ids[i], attributes);
            }
            Op::Delete(i) => {
                if resources.remove(&ids[i]).is_some() {
                    lab.remove(ids[i]).await;
                }
                // A deleted id is never reused: the next put creates anew.
                ids[i] = Uuid::now_v7();
            }
        }
        let (start, end) = phases;
        for phase in start..end {
            lab.phase(phase, crash && phase + 1 == end).await;
        }
    }
    lab.reconcile().await;
    let expected = reference(&lab.config, &resources);
    let actual = lab.tree().await;
    prop_assert_eq!(&actual, &expected);
    // Nothing is left owing.
    prop_assert_eq!(lab.count("node_dirty").await, 0);
    prop_assert_eq!(lab.count("resources").await, resources.len() as i64);
    Ok(())
}

fn property(backend: Backend, cases: u32) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let lab = runtime.block_on(Lab::new(backend, LAB_CONFIG));
    let mut runner = TestRunner::new(ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(&operations(), |ops| runtime.block_on(check(&lab, ops)))
        .unwrap();
}

#[test]
fn random_operations_with_superseded_and_crashed_tasks_match_from_scratch_sqlite() {
    property(Backend::Sqlite, 200);
}

#[test]
fn random_operations_with_superseded_and_crashed_tasks_match_from_scratch_postgres() {
    property(Backend::Postgres, 64);
}

/// The default topology: `n` instances spread over services and clusters.
fn instance(i: usize, health: i64) -> serde_json::Value {
    json!({
        "region": "eu", "zone": "a", "cluster": format!("k{}", i % 4),
        "namespace": "shop", "service": format!("s{}", i % 16),
        "instance": format!("i{i}"), "health": health, "cpu": 1,
    })
}

async fn grown(backend: Backend, instances: usize) -> (Lab, Vec<Uuid>) {
    let lab = Lab::new(backend, DEFAULT_CONFIG).await;
    let ids: Vec<Uuid> = (0..instances).map(|_| Uuid::now_v7()).collect();
    for (i, id) in ids.iter().enumerate() {
        lab.put(*id, &instance(i, 0)).await;
    }
    lab.reconcile().await;
    (lab, ids)
}

crate::on_both_backends!(
    statements_per_phase_do_not_grow_with_the_tree,
    a_subtree_delete_is_one_statement,
    a_bulk_import_refreshes_postgres_planner_statistics,
);

async fn statements_per_phase_do_not_grow_with_the_tree(backend: Backend) {
    let mut counts = Vec::new();
    for size in [1, 400] {
        let (lab, ids) = grown(backend, size).await;
        assert_eq!(lab.count("resources").await, size as i64);
        // A leaf's status changes (an Update A).
        lab.put(ids[0], &instance(0, 2)).await;
        let statements = lab.reconcile().await;
        let tree = lab.tree().await;
        let root = tree
            .iter()
            .find(|(chain, _)| chain.len() == 1 && chain[0].0 == "region")
            .unwrap()
            .1;
        assert_eq!(root.aggregated, 2, "the change reached the root");
        counts.push(statements.iter().map(Vec::len).collect::<Vec<_>>());
    }
    assert_eq!(
        counts[0], counts[1],
        "statements per phase for 1 and 400 instances"
    );
    // Aggregated status: per level one aggregate and one write, plus a
    // constant few (load the marks, the area, the event, clear the marks).
    let depth = 6;
    assert!(counts[1][3] <= 2 * depth + 5, "{:?}", counts[1]);
    // Properties: per level three for the statistics (resources, children,
    // write), and a constant few per impacted class (6 on the chain, plus
    // `service`'s dependency on `database`).
    assert!(counts[1][2] <= 3 * depth + 3 * 7 + 6, "{:?}", counts[1]);
}

async fn a_subtree_delete_is_one_statement(backend: Backend) {
    let (lab, ids) = grown(backend, 200).await;
    let before = lab.count("nodes").await;
    // Every instance of cluster k1 goes: the k1 subtree is orphaned.
    for (i, id) in ids.iter().enumerate() {
        if i % 4 == 1 {
            lab.remove(*id).await;
        }
    }
    let statements = lab.phase(0, false).await;
    let deletes: Vec<&String> = statements
        .iter()
        .filter(|sql| sql.starts_with("DELETE FROM nodes"))
        .collect();
    assert_eq!(deletes.len(), 1, "{statements:#?}");
    // The cluster, its namespace, 4 services and 50 instances: 56 nodes.
    assert_eq!(before - lab.count("nodes").await, 56);
    lab.phase(1, false).await;
    lab.phase(2, false).await;
    lab.phase(3, false).await;
    assert_eq!(lab.count("resources").await, 150);
    assert_eq!(lab.count("node_dirty").await, 0);
    let tree = lab.tree().await;
    assert!(
        tree.keys()
            .all(|chain| chain.len() < 3 || chain[2].1 != "k1")
    );
    assert_eq!(tree.len() as i64, before - 56);
}

/// PostgreSQL plans by table statistics; a bulk import must not leave the
/// tree planned as if it were empty (autovacuum may be late, or off).
async fn a_bulk_import_refreshes_postgres_planner_statistics(backend: Backend) {
    let lab = Lab::new(backend, DEFAULT_CONFIG).await;
    let analyzes = |statements: &[Vec<String>]| {
        statements
            .iter()
            .flatten()
            .filter(|sql| sql.starts_with("ANALYZE"))
            .count()
    };
    let ids: Vec<Uuid> = (0..300).map(|_| Uuid::now_v7()).collect();
    for (i, id) in ids.iter().enumerate() {
        lab.put(*id, &instance(i, 0)).await;
    }
    let import = lab.reconcile().await;
    // One leaf's change is far below the threshold.
    lab.put(ids[0], &instance(0, 2)).await;
    let update = lab.reconcile().await;
    assert_eq!(analyzes(&update), 0, "a small change analyzes nothing");
    if backend == Backend::Sqlite {
        assert_eq!(
            analyzes(&import),
            0,
            "SQLite's queries name their join order"
        );
        return;
    }
    assert_eq!(
        analyzes(&import),
        1,
        "the import refreshes the statistics once"
    );
    let row = lab
        .db
        .query_one_raw(Statement::from_string(
            lab.db.get_database_backend(),
            "SELECT reltuples FROM pg_class WHERE oid = 'nodes'::regclass",
        ))
        .await
        .unwrap()
        .unwrap();
    let estimated: f32 = row.try_get("", "reltuples").unwrap();
    assert_eq!(estimated as i64, lab.count("nodes").await);
}
