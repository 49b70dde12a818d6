//! The Engine: the oracle that computes a class's node properties from a
//! bulk-loaded context, and patches aggregated statuses. [`RuleEngine`]
//! evaluates the configuration's rules; tests plug in their own engine.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{
    config::Class,
    ops::decimal_number,
    rules::{self, Aggregate, Aggregation, NodeValue, Source},
};

/// A node to compute: its statistics and, for engines that ask for them,
/// the attributes of every resource mapped to it.
#[derive(Debug, Clone)]
pub struct NodeInput {
    pub id: i64,
    pub position_token: String,
    /// Statistics of the configured attribute paths over the node's resources.
    pub partials: Partials,
    /// Empty unless [`Engine::needs_resources`] says so for the class.
    pub resources: Vec<Value>,
}

/// Statistics of one attribute over a set of resources. Two sets' combine
/// into their union's, so a node's come from its children's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Resources where the attribute is present (not null).
    pub present: u64,
    /// Of those, where it is a number.
    pub n: u64,
    pub sum: f64,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

/// A node's statistics: how many resources, and [`Stats`] per configured
/// attribute path (dotted).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Partials {
    pub resources: u64,
    pub attributes: BTreeMap<String, Stats>,
}

impl Partials {
    /// The statistics of `resources` for `paths`.
    pub fn of_resources<'v>(
        paths: &[Vec<String>],
        resources: impl IntoIterator<Item = &'v Value>,
    ) -> Partials {
        let mut partials = Partials::default();
        for attributes in resources {
            partials.resources += 1;
            for path in paths {
                let stats = partials.attributes.entry(path.join(".")).or_default();
                let Some(value) = rules::lookup(attributes, path).filter(|v| !v.is_null()) else {
                    continue;
                };
                stats.present += 1;
                if let Some(number) = value.as_f64() {
                    stats.n += 1;
                    stats.sum += number;
                    stats.min = Some(stats.min.map_or(number, |min| min.min(number)));
                    stats.max = Some(stats.max.map_or(number, |max| max.max(number)));
                }
            }
        }
        partials
    }

    /// Adds another (disjoint) set's statistics.
    pub fn combine(&mut self, other: &Partials) {
        self.resources += other.resources;
        for (path, theirs) in &other.attributes {
            let ours = self.attributes.entry(path.clone()).or_default();
            ours.present += theirs.present;
            ours.n += theirs.n;
            ours.sum += theirs.sum;
            ours.min = match (ours.min, theirs.min) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            ours.max = match (ours.max, theirs.max) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
        }
    }

    /// Read from a stored column (`{}` when never computed).
    pub fn from_value(value: &Value) -> Partials {
        serde_json::from_value(value.clone()).unwrap_or_default()
    }

    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// Everything a class's computation may read, loaded in bulk beforehand.
#[derive(Debug)]
pub struct ClassContext<'a> {
    pub nodes: &'a [NodeInput],
    /// The properties of every node of each class the class depends on.
    pub dependencies: &'a HashMap<String, Vec<Map<String, Value>>>,
}

/// A node whose aggregated status was just computed.
#[derive(Debug)]
pub struct PatchInput<'a> {
    pub status: i32,
    pub aggregated: i32,
    pub properties: &'a Value,
}

pub trait Engine: Send + Sync + 'static {
    /// Whether [`NodeInput::resources`] must be loaded for `class` (one
    /// bulk query, but every resource below each node). The built-in
    /// engine reads statistics only.
    fn needs_resources(&self, _class: &Class) -> bool {
        true
    }

    /// The properties of each node of `context.nodes`, in that order. A
    /// `status` property (a number) is the node's own status.
    fn properties(&self, class: &Class, context: &ClassContext<'_>) -> Vec<Map<String, Value>>;

    /// The aggregated status to store instead of the computed one, if the
    /// class overrides it.
    fn patch_aggregated_status(&self, class: &Class, node: &PatchInput<'_>) -> Option<i32>;
}

/// The built-in engine: evaluates the class's configured rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct RuleEngine;

impl Engine for RuleEngine {
    fn needs_resources(&self, _class: &Class) -> bool {
        false
    }

    fn properties(&self, class: &Class, context: &ClassContext<'_>) -> Vec<Map<String, Value>> {
        // A dependency aggregate reads every node of the other class: the
        // same for every node of this one, so it is folded once.
        let mut shared: HashMap<&Aggregation, Option<f64>> = HashMap::new();
        for (_, rule) in &class.properties {
            for aggregation in rule.values() {
                if let Source::Dependency { class, property } = &aggregation.source {
                    shared.entry(aggregation).or_insert_with(|| {
                        let values = context
                            .dependencies
                            .get(class)
                            .into_iter()
                            .flatten()
                            .filter_map(|properties| {
                                properties.get(property).and_then(Value::as_f64)
                            });
                        fold(aggregation.aggregate, values)
                    });
                }
            }
        }
        let no_stats = Stats::default();
        context
            .nodes
            .iter()
            .map(|node| {
                let mut read = |aggregation: &Aggregation| match &aggregation.source {
                    Source::Dependency { .. } => shared.get(aggregation).copied().flatten(),
                    Source::Resources => Some(node.partials.resources as f64),
                    Source::Attribute(path) => from_stats(
                        aggregation.aggregate,
                        node.partials
                            .attributes
                            .get(&path.join("."))
                            .unwrap_or(&no_stats),
                    ),
                };
                class
                    .properties
                    .iter()
                    .map(|(name, rule)| {
                        let value = rule.evaluate(&mut read).map_or(Value::Null, number);
                        (name.clone(), value)
                    })
                    .collect()
            })
            .collect()
    }

    fn patch_aggregated_status(&self, class: &Class, node: &PatchInput<'_>) -> Option<i32> {
        let rule = class.patch_aggregated_status.as_ref()?;
        rule.evaluate(&mut |value| match value {
            NodeValue::Aggregated => Some(f64::from(node.aggregated)),
            NodeValue::Status => Some(f64::from(node.status)),
            NodeValue::Property(name) => node.properties.get(name)?.as_f64(),
        })
        .map(to_status)
    }
}

/// An aggregate read from statistics (the same values [`fold`] gives).
fn from_stats(aggregate: Aggregate, stats: &Stats) -> Option<f64> {
    match aggregate {
        Aggregate::Count => Some(stats.present as f64),
        Aggregate::Sum => Some(stats.sum),
        Aggregate::Max => stats.max,
        Aggregate::Min => stats.min,
        Aggregate::Avg if stats.n == 0 => None,
        Aggregate::Avg => Some(stats.sum / stats.n as f64),
    }
}

/// Folds numbers; no numbers gives no value (`0` for a sum or a count).
fn fold(aggregate: Aggregate, values: impl Iterator<Item = f64>) -> Option<f64> {
    let mut n = 0u64;
    let mut acc: Option<f64> = None;
    for value in values {
        n += 1;
        acc = Some(match (aggregate, acc) {
            (_, None) => value,
            (Aggregate::Max, Some(a)) => a.max(value),
            (Aggregate::Min, Some(a)) => a.min(value),
            (Aggregate::Sum | Aggregate::Avg, Some(a)) => a + value,
            (Aggregate::Count, Some(_)) => 0.0,
        });
    }
    match (aggregate, acc) {
        (Aggregate::Count, _) => Some(n as f64),
        (Aggregate::Sum, None) => Some(0.0),
        (Aggregate::Avg, Some(sum)) => Some(sum / n as f64),
        (_, acc) => acc,
    }
}

/// Integral values as integers (so `2.0` and `2` compare equal as JSON),
/// others in the canonical decimal form of `ops::canonical`.
pub fn number(value: f64) -> Value {
    if value.fract() == 0.0 && value.abs() < 9.0e15 {
        Value::from(value as i64)
    } else {
        decimal_number(value).map_or(Value::Null, Value::Number)
    }
}

fn to_status(value: f64) -> i32 {
    value
        .round()
        .clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32
}

/// A node's own status: its `status` property, rounded; 0 when absent.
pub fn status_of(properties: &Map<String, Value>) -> i32 {
    properties
        .get("status")
        .and_then(Value::as_f64)
        .map_or(0, to_status)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::nodes::config::NodeConfig;

    fn config() -> NodeConfig {
        NodeConfig::parse(
            r#"
            [[classes]]
            name = "db"
            position = "{db}"
            properties = { status = "max(attr.health)" }

            [[classes]]
            name = "svc"
            position = "{svc}"
            dependsOn = ["db"]
            properties = { status = "max(attr.health)", low = "min(attr.cpu)", cpu = "sum(attr.cpu)", mean = "avg(attr.cpu)", n = "count()", owners = "count(attr.owner)", db = "max(db.status)", p99 = "max(attr.latency.p99)" }
            patchAggregatedStatus = "min(aggregated, max(status, properties.n), 2)"
            "#,
        )
        .unwrap()
    }

    #[test]
    fn rules_aggregate_resources_and_dependencies() {
        let config = config();
        let svc = config.class("svc").unwrap();
        let first = [
            json!({"health": 1, "cpu": 0.5, "owner": "x", "latency": {"p99": 30}}),
            json!({"health": 2, "cpu": 1.5, "latency": {"p99": 10}}),
            json!({"health": "bad", "cpu": 1}),
        ];
        // Statistics combine: two halves give the whole's.
        let mut combined = Partials::of_resources(&config.attribute_paths, &first[..1]);
        combined.combine(&Partials::of_resources(
            &config.attribute_paths,
            &first[1..],
        ));
        assert_eq!(
            combined,
            Partials::of_resources(&config.attribute_paths, &first)
        );
        let nodes = [
            NodeInput {
                id: 1,
                position_token: "a".into(),
                partials: combined,
                resources: vec![],
            },
            NodeInput {
                id: 2,
                position_token: "b".into(),
                partials: Partials::of_resources(&config.attribute_paths, std::iter::empty()),
                resources: vec![],
            },
        ];
        let dependencies = HashMap::from([(
            "db".to_owned(),
            vec![
                Map::from_iter([("status".to_owned(), json!(3))]),
                Map::from_iter([("status".to_owned(), json!(null))]),
            ],
        )]);
        let out = RuleEngine.properties(
            svc,
            &ClassContext {
                nodes: &nodes,
                dependencies: &dependencies,
            },
        );
        assert_eq!(
            Value::Object(out[0].clone()),
            json!({"status": 2, "low": 0.5, "cpu": 3, "mean": 1, "n": 3, "owners": 1, "db": 3, "p99": 30})
        );
        assert_eq!(
            Value::Object(out[1].clone()),
            json!({"status": null, "low": null, "cpu": 0, "mean": null, "n": 0, "owners": 0, "db": 3, "p99": null})
        );
        assert_eq!(status_of(&out[0]), 2);
        assert_eq!(status_of(&out[1]), 0);
    }

    #[test]
    fn patch_rules_override_the_aggregate() {
        let config = config();
        let svc = config.class("svc").unwrap();
        let props = json!({"n": 1});
        let patch = |status, aggregated| {
            RuleEngine.patch_aggregated_status(
                svc,
                &PatchInput {
                    status,
                    aggregated,
                    properties: &props,
                },
            )
        };
        assert_eq!(patch(0, 3), Some(1));
        assert_eq!(patch(3, 3), Some(2));
        assert_eq!(patch(0, 0), Some(0));
        let db = config.class("db").unwrap();
        assert_eq!(
            RuleEngine.patch_aggregated_status(
                db,
                &PatchInput {
                    status: 1,
                    aggregated: 3,
                    properties: &props
                }
            ),
            None
        );
    }
}
