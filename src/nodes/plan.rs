//! The reconciliation plan, as pure functions over data (no database): which
//! nodes a resource maps to, which nodes are orphans and which of them are
//! root orphans, the delta of the `resource_nodes` mapping, path ranges and
//! ancestors, and the aggregated status of one node. The pipeline
//! ([`super::pipeline`]) loads the data, calls these, and writes the result.

use std::collections::{BTreeMap, BTreeSet};

use super::config::NodeConfig;
use crate::digest::sha256_hex;

/// A node a resource maps to, identified by its business key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// Index into [`NodeConfig::classes`].
    pub class: usize,
    pub position_token: String,
    pub business_key: String,
    pub parent_key: Option<String>,
    pub depth: usize,
    /// No other node of the resource hangs below this one: the resource
    /// counts in this node's own statistics.
    pub leaf: bool,
}

/// `hash(class || parent_bk || position_token)`: the same node whoever
/// computes it, so inserts are idempotent upserts.
pub fn business_key(class: &str, parent_key: Option<&str>, token: &str) -> String {
    sha256_hex(&[class, parent_key.unwrap_or(""), token])
}

/// The nodes a resource with `attributes` maps to, parents before children:
/// every class whose position token resolves and whose parent class's node
/// resolved too.
pub fn resolve(config: &NodeConfig, attributes: &serde_json::Value) -> Vec<NodeSpec> {
    // Classes are ordered parents first, so a parent's spec exists by the
    // time its children look for it. Each class maps a resource to at most
    // one node.
    let mut by_class: Vec<Option<usize>> = vec![None; config.classes.len()];
    let mut specs: Vec<NodeSpec> = Vec::new();
    for (i, class) in config.classes.iter().enumerate() {
        let parent_key = match &class.parent {
            None => None,
            Some(parent) => {
                let Some(p) = config.class_index(parent).and_then(|p| by_class[p]) else {
                    continue;
                };
                Some(specs[p].business_key.clone())
            }
        };
        let Some(token) = class.position.render(attributes) else {
            continue;
        };
        by_class[i] = Some(specs.len());
        specs.push(NodeSpec {
            class: i,
            business_key: business_key(&class.name, parent_key.as_deref(), &token),
            position_token: token,
            parent_key,
            depth: class.depth,
            leaf: true,
        });
    }
    let parents: BTreeSet<String> = specs
        .iter()
        .filter_map(|spec| spec.parent_key.clone())
        .collect();
    for spec in &mut specs {
        spec.leaf = !parents.contains(&spec.business_key);
    }
    specs
}

/// A node that loses at least one resource in this round.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub id: i64,
    pub path: String,
    pub business_key: String,
    /// Resources linked to it now.
    pub linked: usize,
    /// Of those, how many leave it in this round.
    pub leaving: usize,
}

/// Nodes left with no resource: every linked resource leaves and none joins
/// (`joining` holds the business keys the round's resources map to).
pub fn orphans<'c>(
    candidates: &'c [Candidate],
    joining: &BTreeSet<String>,
) -> impl Iterator<Item = &'c Candidate> {
    candidates.iter().filter(move |candidate| {
        candidate.leaving >= candidate.linked && !joining.contains(&candidate.business_key)
    })
}

/// Reduces orphan paths to the roots: those not inside another orphan's
/// subtree. Deleting each root's subtree deletes every orphan once.
pub fn root_orphans<'p>(paths: impl IntoIterator<Item = &'p str>) -> Vec<&'p str> {
    let mut sorted: Vec<&str> = paths.into_iter().collect();
    // A path sorts before every path it prefixes, and a subtree's paths are
    // contiguous, so comparing with the last root kept is enough.
    sorted.sort_unstable();
    sorted.dedup();
    let mut roots: Vec<&str> = Vec::new();
    for path in sorted {
        if roots.last().is_none_or(|root| !path.starts_with(root)) {
            roots.push(path);
        }
    }
    roots
}

/// A node's materialized path: its ancestors' ids and its own, each
/// followed by `/` (`/1/42/`).
pub fn child_path(parent_path: Option<&str>, id: i64) -> String {
    format!("{}{id}/", parent_path.unwrap_or("/"))
}

/// `[lower, upper)`: every path in the subtree at `path` (itself included)
/// and nothing else, as a byte-wise range an ordinary index serves.
pub fn subtree_range(path: &str) -> (String, String) {
    // Paths end in `/`; the byte after `/` is `0`, so `/1/4/` .. `/1/40`
    // covers `/1/4/…` but not `/1/40/`, whose prefix is `/1/40`.
    let stem = path.strip_suffix('/').unwrap_or(path);
    (path.to_owned(), format!("{stem}0"))
}

/// The ids of a node's ancestors, root first, read from its path.
pub fn ancestors(path: &str) -> Vec<i64> {
    let ids: Vec<i64> = path
        .split('/')
        .filter(|segment| !segment.is_empty())
        .filter_map(|segment| segment.parse().ok())
        .collect();
    ids[..ids.len().saturating_sub(1)].to_vec()
}

/// Whether `path` is `root` or inside its subtree.
pub fn in_subtree(path: &str, root: &str) -> bool {
    path.starts_with(root)
}

/// The mapping delta: pairs to delete (old minus new) and to insert (new
/// minus old). The table is never rebuilt.
pub fn mapping_delta<T: Ord + Clone>(old: &BTreeSet<T>, new: &BTreeSet<T>) -> (Vec<T>, Vec<T>) {
    (
        old.difference(new).cloned().collect(),
        new.difference(old).cloned().collect(),
    )
}

/// `max(properties.status, max(child.aggregated_status))`.
pub fn aggregate(status: i32, children_max: Option<i32>) -> i32 {
    children_max.map_or(status, |children| status.max(children))
}

/// The status area by level, deepest first: the given nodes and all their
/// ancestors (read from their paths).
pub fn status_area_levels<'p>(
    nodes: impl IntoIterator<Item = (i64, &'p str)>,
) -> Vec<(usize, BTreeSet<i64>)> {
    let mut levels: BTreeMap<usize, BTreeSet<i64>> = BTreeMap::new();
    for (id, path) in nodes {
        let chain = ancestors(path);
        for (depth, ancestor) in chain.iter().enumerate() {
            levels.entry(depth).or_default().insert(*ancestor);
        }
        levels.entry(chain.len()).or_default().insert(id);
    }
    levels.into_iter().rev().collect()
}

/// Below this many changed rows a reconciliation never refreshes planner
/// statistics (nor asks whether to).
pub const STATISTICS_MIN_CHANGE: usize = 500;

/// Whether a reconciliation that changed `changed` rows of the tree should
/// refresh PostgreSQL's planner statistics, given the row count they hold
/// now (`None`: never gathered). The rule is autovacuum's analyze rule
/// (50 rows plus 10% of the table), so a bulk import or a large delete is
/// not left planned as if the tables were their old size until autovacuum
/// comes round, or forever where it is off.
pub fn statistics_stale(changed: usize, estimated_rows: Option<f64>) -> bool {
    if changed < STATISTICS_MIN_CHANGE {
        return false;
    }
    match estimated_rows {
        None => true,
        Some(rows) => changed as f64 > 50.0 + 0.1 * rows.max(0.0),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn config() -> NodeConfig {
        NodeConfig::parse(
            r#"
            [[classes]]
            name = "region"
            position = "{region}"
            [[classes]]
            name = "cluster"
            parent = "region"
            position = "{cluster}"
            [[classes]]
            name = "service"
            parent = "cluster"
            position = "svc-{service}"
            [[classes]]
            name = "database"
            position = "{db}"
            "#,
        )
        .unwrap()
    }

    #[test]
    fn a_resource_maps_to_the_chain_its_tokens_resolve() {
        let config = config();
        let chain = resolve(
            &config,
            &json!({"region": "eu", "cluster": "k1", "service": "cart"}),
        );
        let names: Vec<(&str, &str)> = chain
            .iter()
            .map(|spec| {
                (
                    config.classes[spec.class].name.as_str(),
                    spec.position_token.as_str(),
                )
            })
            .collect();
        assert_eq!(
            names,
            [("region", "eu"), ("cluster", "k1"), ("service", "svc-cart")]
        );
        assert_eq!(chain[0].parent_key, None);
        assert_eq!(
            chain[1].parent_key.as_deref(),
            Some(chain[0].business_key.as_str())
        );
        assert_eq!(chain[2].depth, 2);
        assert_eq!(
            chain.iter().map(|spec| spec.leaf).collect::<Vec<_>>(),
            [false, false, true]
        );
        assert_eq!(
            chain[2].business_key,
            business_key("service", Some(&chain[1].business_key), "svc-cart")
        );

        // A missing level stops the chain; other roots still resolve.
        let partial = resolve(
            &config,
            &json!({"region": "eu", "service": "cart", "db": "pg"}),
        );
        let names: Vec<&str> = partial
            .iter()
            .map(|spec| config.classes[spec.class].name.as_str())
            .collect();
        assert_eq!(names, ["region", "database"]);
        assert!(resolve(&config, &json!({})).is_empty());
    }

    #[test]
    fn the_same_token_under_different_parents_is_a_different_node() {
        let config = config();
        let a = resolve(&config, &json!({"region": "eu", "cluster": "k1"}));
        let b = resolve(&config, &json!({"region": "us", "cluster": "k1"}));
        assert_ne!(a[1].business_key, b[1].business_key);
        let again = resolve(
            &config,
            &json!({"cluster": "k1", "region": "eu", "other": 1}),
        );
        assert_eq!(a, again);
    }

    #[test]
    fn orphans_are_nodes_every_resource_leaves() {
        let candidate = |id, linked, leaving| Candidate {
            id,
            path: format!("/{id}/"),
            business_key: format!("bk{id}"),
            linked,
            leaving,
        };
        let candidates = [candidate(1, 2, 2), candidate(2, 3, 1), candidate(3, 1, 1)];
        let joining = BTreeSet::from(["bk3".to_owned()]);
        let ids: Vec<i64> = orphans(&candidates, &joining).map(|c| c.id).collect();
        assert_eq!(ids, [1]);
    }

    #[test]
    fn root_orphans_drop_nodes_inside_another_orphan() {
        let roots = root_orphans([
            "/1/4/", "/1/", "/1/4/9/", "/10/", "/2/3/", "/2/3/", "/2/30/",
        ]);
        assert_eq!(roots, ["/1/", "/10/", "/2/3/", "/2/30/"]);
    }

    #[test]
    fn subtree_ranges_and_ancestors() {
        let (lower, upper) = subtree_range("/1/4/");
        for inside in ["/1/4/", "/1/4/7/", "/1/4/99/3/"] {
            assert!(
                lower.as_str() <= inside && inside < upper.as_str(),
                "{inside}"
            );
        }
        for outside in ["/1/40/", "/1/5/", "/1/", "/1/3/9/", "/2/"] {
            assert!(
                !(lower.as_str() <= outside && outside < upper.as_str()),
                "{outside}"
            );
        }
        assert_eq!(ancestors("/1/4/7/"), [1, 4]);
        assert!(ancestors("/1/").is_empty());
        assert_eq!(child_path(None, 5), "/5/");
        assert_eq!(child_path(Some("/5/"), 8), "/5/8/");
        assert!(in_subtree("/5/8/", "/5/") && !in_subtree("/50/", "/5/"));
    }

    #[test]
    fn delta_and_levels() {
        let old = BTreeSet::from([(1, 1), (1, 2), (2, 2)]);
        let new = BTreeSet::from([(1, 1), (1, 3), (2, 2)]);
        assert_eq!(mapping_delta(&old, &new), (vec![(1, 2)], vec![(1, 3)]));
        assert_eq!(aggregate(1, Some(3)), 3);
        assert_eq!(aggregate(2, None), 2);
        let levels = status_area_levels([(7, "/1/4/7/"), (5, "/1/5/")]);
        assert_eq!(
            levels,
            [
                (2, BTreeSet::from([7])),
                (1, BTreeSet::from([4, 5])),
                (0, BTreeSet::from([1]))
            ]
        );
    }

    #[test]
    fn statistics_are_refreshed_after_a_large_change_only() {
        // Small changes never ask.
        assert!(!statistics_stale(STATISTICS_MIN_CHANGE - 1, None));
        // Never gathered: a bulk import refreshes them.
        assert!(statistics_stale(99_132, None));
        // 10% of the table, plus 50.
        assert!(!statistics_stale(10_000, Some(99_500.0)));
        assert!(statistics_stale(10_001, Some(99_500.0)));
        // Gathered when the tables were empty.
        assert!(statistics_stale(600, Some(0.0)));
    }

    proptest! {
        /// Every orphan is inside exactly one root, and no root is inside another.
        #[test]
        fn root_orphans_cover_every_orphan_once(
            raw in prop::collection::vec(prop::collection::vec(1i64..6, 1..5), 0..30)
        ) {
            let paths: Vec<String> = raw
                .iter()
                .map(|ids| ids.iter().fold(String::from("/"), |path, id| format!("{path}{id}/")))
                .collect();
            let roots = root_orphans(paths.iter().map(String::as_str));
            for path in &paths {
                let covering = roots.iter().filter(|root| in_subtree(path, root)).count();
                prop_assert_eq!(covering, 1, "{} covered {} times", path, covering);
            }
            for root in &roots {
                prop_assert!(paths.contains(&root.to_string()));
                let (lower, upper) = subtree_range(root);
                for other in &roots {
                    let inside = lower.as_str() <= *other && *other < upper.as_str();
                    prop_assert_eq!(inside, other == root);
                }
            }
        }
    }
}
