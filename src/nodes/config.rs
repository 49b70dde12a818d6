//! The node configuration (`TRELLIS_NODE_CONFIG`, TOML; the default is
//! `config/nodes.toml`, built into the binary): the classes of the node
//! tree, validated at start-up. Pure: parsing, validation, the class tree
//! and the dependency units are computed here without I/O.
//!
//! ```toml
//! maxFixpointIterations = 10
//!
//! [[classes]]
//! name = "cluster"
//! parent = "region"
//! position = "{cluster}"
//! dependsOn = ["database"]
//! properties = { status = "max(attr.health)", dbStatus = "max(database.status)" }
//! patchAggregatedStatus = "min(aggregated, 3)"
//! ```

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    fmt,
};

use petgraph::{algo::tarjan_scc, graph::DiGraph};
use serde::Deserialize;

use super::rules::{self, PatchRule, PropertyRule, Source, Template};

/// The configuration shipped with the binary.
pub const DEFAULT_CONFIG: &str = include_str!("../../config/nodes.toml");

const DEFAULT_FIXPOINT_ITERATIONS: u32 = 10;
const MAX_FIXPOINT_ITERATIONS: u32 = 100;
/// Deepest class chain accepted (a node path holds one segment per level).
const MAX_DEPTH: usize = 32;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FileConfig {
    max_fixpoint_iterations: Option<u32>,
    /// What each status value means (`[[statusScale]]` tables); the
    /// default is [`default_status_scale`].
    status_scale: Option<Vec<StatusLevel>>,
    #[serde(default)]
    classes: Vec<FileClass>,
}

/// One value of the status scale and what it means to people.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatusLevel {
    pub value: i32,
    pub label: String,
}

/// The scale of the shipped configuration: a severity, higher is worse.
pub fn default_status_scale() -> Vec<StatusLevel> {
    [(0, "healthy"), (1, "degraded"), (2, "failing"), (3, "down")]
        .into_iter()
        .map(|(value, label)| StatusLevel {
            value,
            label: label.to_owned(),
        })
        .collect()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FileClass {
    name: String,
    parent: Option<String>,
    position: String,
    #[serde(default)]
    properties: BTreeMap<String, String>,
    #[serde(default)]
    depends_on: Vec<String>,
    patch_aggregated_status: Option<String>,
}

/// One class of nodes.
#[derive(Debug, Clone)]
pub struct Class {
    pub name: String,
    pub parent: Option<String>,
    /// 0 for a root class.
    pub depth: usize,
    pub position: Template,
    /// In name order.
    pub properties: Vec<(String, PropertyRule)>,
    pub depends_on: Vec<String>,
    pub patch_aggregated_status: Option<PatchRule>,
    /// Source text of the patch rule, as configured.
    pub patch_text: Option<String>,
    /// Index into [`NodeConfig::units`].
    pub unit: usize,
    /// Two or more classes have this one as parent: a resource may map to
    /// children of each, so children's statistics overlap and this class's
    /// nodes compute theirs from all their resources.
    pub branching: bool,
}

/// Classes computed together: one class, or a strongly connected set of
/// classes that depend on each other (computed to a bounded fixpoint).
#[derive(Debug, Clone)]
pub struct Unit {
    /// Indexes into [`NodeConfig::classes`].
    pub classes: Vec<usize>,
    pub cyclic: bool,
}

/// A validated configuration.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Parents before children.
    pub classes: Vec<Class>,
    by_name: HashMap<String, usize>,
    /// Dependencies before dependents.
    pub units: Vec<Unit>,
    /// For each class, the classes that depend on it.
    dependents: Vec<Vec<usize>>,
    pub max_fixpoint_iterations: u32,
    /// Status values in increasing severity, each with its label.
    pub status_scale: Vec<StatusLevel>,
    /// Attributes some position template reads: changing one may remap a
    /// resource.
    pub token_attributes: BTreeSet<String>,
    /// Attribute paths some property rule aggregates (kept as node
    /// statistics).
    pub attribute_paths: Vec<Vec<String>>,
}

/// A configuration problem, naming the class and the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub class: Option<String>,
    pub field: String,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.class {
            Some(class) => write!(f, "class `{class}`, `{}`: {}", self.field, self.message),
            None => write!(f, "`{}`: {}", self.field, self.message),
        }
    }
}

/// Every problem found in a configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub Vec<Problem>);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid node configuration:")?;
        for problem in &self.0 {
            write!(f, "\n  - {problem}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

impl NodeConfig {
    /// A digest of what the configuration means (classes, templates, rules,
    /// limits), not of how its file is laid out: the tree records the
    /// digest it was computed under, so a changed configuration is noticed
    /// at start-up.
    pub fn digest(&self) -> String {
        let mut parts = vec![format!(
            "maxFixpointIterations={}",
            self.max_fixpoint_iterations
        )];
        for class in &self.classes {
            parts.push(format!(
                "class={}|parent={:?}|position={}|dependsOn={:?}|patch={:?}",
                class.name, class.parent, class.position, class.depends_on, class.patch_text
            ));
            for (name, rule) in &class.properties {
                parts.push(format!("{}.{name}={rule}", class.name));
            }
        }
        crate::digest::sha256_hex(&parts.iter().map(String::as_str).collect::<Vec<_>>())
    }

    /// Parses and validates a TOML configuration.
    pub fn parse(text: &str) -> Result<NodeConfig, ConfigError> {
        let file: FileConfig = toml::from_str(text).map_err(|error| {
            ConfigError(vec![Problem {
                class: None,
                field: "file".into(),
                message: error.to_string().trim().to_owned(),
            }])
        })?;
        validate(file)
    }

    pub fn class(&self, name: &str) -> Option<&Class> {
        self.by_name.get(name).map(|&i| &self.classes[i])
    }

    pub fn class_index(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// The classes whose nodes must all be recomputed when nodes of
    /// `direct` change: every class that depends on one of them, directly or
    /// transitively (the seed's indirect impact).
    pub fn indirectly_impacted(&self, direct: &BTreeSet<usize>) -> BTreeSet<usize> {
        let mut reached = BTreeSet::new();
        let mut stack: Vec<usize> = direct.iter().copied().collect();
        while let Some(class) = stack.pop() {
            for &dependent in &self.dependents[class] {
                if reached.insert(dependent) {
                    stack.push(dependent);
                }
            }
        }
        reached
    }
}

fn validate(file: FileConfig) -> Result<NodeConfig, ConfigError> {
    let mut problems = Vec::new();
    let mut problem = |class: Option<&str>, field: &str, message: String| {
        problems.push(Problem {
            class: class.map(str::to_owned),
            field: field.to_owned(),
            message,
        })
    };
    if file.classes.is_empty() {
        problem(None, "classes", "at least one class is needed".into());
    }
    let max_fixpoint_iterations = file
        .max_fixpoint_iterations
        .unwrap_or(DEFAULT_FIXPOINT_ITERATIONS);
    if !(1..=MAX_FIXPOINT_ITERATIONS).contains(&max_fixpoint_iterations) {
        problem(
            None,
            "maxFixpointIterations",
            format!("must be between 1 and {MAX_FIXPOINT_ITERATIONS}"),
        );
    }

    let mut status_scale = file.status_scale.unwrap_or_else(default_status_scale);
    status_scale.sort_by_key(|level| level.value);
    if status_scale.is_empty() {
        problem(None, "statusScale", "list at least one status".into());
    }
    if status_scale
        .windows(2)
        .any(|pair| pair[0].value == pair[1].value)
    {
        problem(None, "statusScale", "each value may appear once".into());
    }
    if status_scale
        .iter()
        .any(|level| level.label.trim().is_empty() || level.label.chars().count() > 40)
    {
        problem(None, "statusScale", "labels must be 1–40 characters".into());
    }

    let mut by_name: HashMap<String, usize> = HashMap::new();
    for (i, class) in file.classes.iter().enumerate() {
        if !rules::is_identifier(&class.name) {
            problem(
                Some(&class.name),
                "name",
                "a class name is letters, digits and `_`, not starting with a digit".into(),
            );
        }
        if by_name.insert(class.name.clone(), i).is_some() {
            problem(Some(&class.name), "name", "declared twice".into());
        }
    }

    // The class tree: depth by following parents; a parent cycle is an error.
    let mut depths: Vec<Option<usize>> = vec![None; file.classes.len()];
    for (i, class) in file.classes.iter().enumerate() {
        let mut seen = vec![i];
        let mut current = class;
        let depth = loop {
            match &current.parent {
                None => break Some(seen.len() - 1),
                Some(parent) => match by_name.get(parent) {
                    None => {
                        if current.name == class.name {
                            problem(
                                Some(&class.name),
                                "parent",
                                format!("no class is named `{parent}`"),
                            );
                        }
                        break None;
                    }
                    Some(&p) if seen.contains(&p) => {
                        // Reported once per class on the loop, not by classes below it.
                        if p == i {
                            problem(
                                Some(&class.name),
                                "parent",
                                "the parent chain loops back to this class".into(),
                            );
                        }
                        break None;
                    }
                    Some(&p) => {
                        seen.push(p);
                        current = &file.classes[p];
                    }
                },
            }
        };
        if let Some(depth) = depth
            && depth >= MAX_DEPTH
        {
            problem(
                Some(&class.name),
                "parent",
                format!("the class tree is deeper than {MAX_DEPTH} levels"),
            );
        }
        depths[i] = depth;
    }

    let mut classes = Vec::with_capacity(file.classes.len());
    let mut token_attributes = BTreeSet::new();
    for (i, class) in file.classes.iter().enumerate() {
        let name = class.name.as_str();
        let position = match Template::parse(&class.position) {
            Ok(template) => {
                token_attributes.extend(template.attributes().map(str::to_owned));
                Some(template)
            }
            Err(message) => {
                problem(Some(name), "position", message);
                None
            }
        };
        for dependency in &class.depends_on {
            if !by_name.contains_key(dependency) {
                problem(
                    Some(name),
                    "dependsOn",
                    format!("no class is named `{dependency}`"),
                );
            }
        }
        let mut properties = Vec::new();
        for (property, text) in &class.properties {
            let field = format!("properties.{property}");
            if !rules::is_identifier(property) {
                problem(
                    Some(name),
                    &field,
                    "a property name is letters, digits and `_`".into(),
                );
                continue;
            }
            match rules::parse_property(text) {
                Ok(rule) => {
                    let undeclared: BTreeSet<&str> = rule
                        .values()
                        .into_iter()
                        .filter_map(|aggregation| match &aggregation.source {
                            Source::Dependency {
                                class: dependency, ..
                            } if !class.depends_on.contains(dependency) => {
                                Some(dependency.as_str())
                            }
                            _ => None,
                        })
                        .collect();
                    for dependency in undeclared {
                        problem(
                            Some(name),
                            &field,
                            format!("reads class `{dependency}`, which is not in `dependsOn`"),
                        );
                    }
                    properties.push((property.clone(), rule));
                }
                Err(message) => problem(Some(name), &field, message),
            }
        }
        let patch = match &class.patch_aggregated_status {
            None => None,
            Some(text) => match rules::parse_patch(text) {
                Ok(expr) => Some(expr),
                Err(message) => {
                    problem(Some(name), "patchAggregatedStatus", message);
                    None
                }
            },
        };
        if let (Some(position), Some(depth)) = (position, depths[i]) {
            classes.push(Class {
                name: class.name.clone(),
                parent: class.parent.clone(),
                depth,
                position,
                properties,
                depends_on: class.depends_on.clone(),
                patch_aggregated_status: patch,
                patch_text: class.patch_aggregated_status.clone(),
                unit: 0,
                branching: file
                    .classes
                    .iter()
                    .filter(|other| other.parent.as_deref() == Some(name))
                    .count()
                    > 1,
            });
        }
    }
    if !problems.is_empty() {
        return Err(ConfigError(problems));
    }

    // Parents before children (stable: file order within a depth).
    classes.sort_by_key(|class| class.depth);
    let by_name: HashMap<String, usize> = classes
        .iter()
        .enumerate()
        .map(|(i, class)| (class.name.clone(), i))
        .collect();

    // Dependency units: strongly connected classes, dependencies first.
    let mut graph = DiGraph::<usize, ()>::new();
    let nodes: Vec<_> = (0..classes.len()).map(|i| graph.add_node(i)).collect();
    let mut dependents = vec![Vec::new(); classes.len()];
    for (i, class) in classes.iter().enumerate() {
        for dependency in &class.depends_on {
            let d = by_name[dependency];
            graph.add_edge(nodes[d], nodes[i], ());
            if !dependents[d].contains(&i) {
                dependents[d].push(i);
            }
        }
    }
    // Tarjan yields components in reverse topological order.
    let mut units: Vec<Unit> = tarjan_scc(&graph)
        .into_iter()
        .rev()
        .map(|component| {
            let mut members: Vec<usize> = component.iter().map(|n| graph[*n]).collect();
            members.sort_unstable();
            let cyclic = members.len() > 1
                || classes[members[0]]
                    .depends_on
                    .contains(&classes[members[0]].name);
            Unit {
                classes: members,
                cyclic,
            }
        })
        .collect();
    units.shrink_to_fit();
    for (u, unit) in units.iter().enumerate() {
        for &c in &unit.classes {
            classes[c].unit = u;
        }
    }

    let attribute_paths: Vec<Vec<String>> = classes
        .iter()
        .flat_map(|class| &class.properties)
        .flat_map(|(_, rule)| rule.values())
        .filter_map(|aggregation| match &aggregation.source {
            Source::Attribute(path) => Some(path.clone()),
            _ => None,
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    Ok(NodeConfig {
        attribute_paths,
        classes,
        by_name,
        units,
        dependents,
        max_fixpoint_iterations,
        status_scale,
        token_attributes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(text: &str) -> Vec<String> {
        NodeConfig::parse(text)
            .unwrap_err()
            .0
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn the_shipped_configuration_is_valid() {
        let config = NodeConfig::parse(DEFAULT_CONFIG).unwrap();
        assert!(config.classes.len() >= 4);
        assert!(config.token_attributes.contains("region"));
        // Parents come before children.
        for (i, class) in config.classes.iter().enumerate() {
            if let Some(parent) = &class.parent {
                assert!(config.class_index(parent).unwrap() < i);
            }
        }
    }

    #[test]
    fn the_status_scale_is_read_sorted_or_defaults_to_the_severities() {
        let class = "[[classes]]\nname = \"region\"\nposition = \"{region}\"\n";
        let shipped = NodeConfig::parse(class).unwrap();
        let labels: Vec<_> = shipped
            .status_scale
            .iter()
            .map(|level| (level.value, level.label.as_str()))
            .collect();
        assert_eq!(
            labels,
            [(0, "healthy"), (1, "degraded"), (2, "failing"), (3, "down")]
        );
        let custom = NodeConfig::parse(&format!(
            "statusScale = [{{ value = 5, label = \"on fire\" }}, {{ value = 0, label = \"fine\" }}]\n{class}"
        ))
        .unwrap();
        assert_eq!(custom.status_scale[0].label, "fine");
        assert_eq!(custom.status_scale[1].value, 5);
        assert_eq!(
            problems(&format!(
                "statusScale = [{{ value = 1, label = \"a\" }}, {{ value = 1, label = \"b\" }}]\n{class}"
            )),
            ["`statusScale`: each value may appear once"]
        );
        assert_eq!(
            problems(&format!("statusScale = []\n{class}")),
            ["`statusScale`: list at least one status"]
        );
        assert_eq!(
            problems(&format!(
                "statusScale = [{{ value = 1, label = \" \" }}]\n{class}"
            )),
            ["`statusScale`: labels must be 1–40 characters"]
        );
    }

    #[test]
    fn the_digest_follows_meaning_not_layout() {
        let base = r#"
            [[classes]]
            name = "region"
            position = "{region}"
            properties = { status = "max(attr.health)" }
        "#;
        let digest = |text: &str| NodeConfig::parse(text).unwrap().digest();
        let relaid = "[[classes]]\nposition = \"{region}\"\nname = \"region\"\n\
            properties = { status = \"max( attr.health )\" }\n";
        assert_eq!(digest(base), digest(relaid));
        assert_ne!(digest(base), digest(&base.replace("max(", "min(")));
        assert_ne!(
            digest(base),
            digest(&base.replace("{region}", "r-{region}"))
        );
        assert_ne!(
            digest(base),
            digest(&format!(
                "{base}\npatchAggregatedStatus = \"min(aggregated, 2)\""
            ))
        );
    }

    #[test]
    fn tree_depths_and_units_follow_the_declarations() {
        let config = NodeConfig::parse(
            r#"
            [[classes]]
            name = "service"
            parent = "cluster"
            position = "{service}"
            dependsOn = ["database"]
            properties = { status = "max(database.status)" }

            [[classes]]
            name = "cluster"
            position = "{cluster}"

            [[classes]]
            name = "database"
            position = "{db}"
            properties = { status = "max(attr.health)" }
            "#,
        )
        .unwrap();
        let service = config.class("service").unwrap();
        assert_eq!(service.depth, 1);
        assert_eq!(config.class("cluster").unwrap().depth, 0);
        let database = config.class("database").unwrap();
        assert!(
            database.unit < service.unit,
            "dependencies are computed first"
        );
        assert!(config.units.iter().all(|unit| !unit.cyclic));
        let db = config.class_index("database").unwrap();
        let impacted = config.indirectly_impacted(&BTreeSet::from([db]));
        assert_eq!(
            impacted,
            BTreeSet::from([config.class_index("service").unwrap()])
        );
    }

    #[test]
    fn cyclic_dependencies_form_one_unit() {
        let config = NodeConfig::parse(
            r#"
            [[classes]]
            name = "a"
            position = "{a}"
            dependsOn = ["b"]
            properties = { status = "max(b.status)" }

            [[classes]]
            name = "b"
            position = "{b}"
            dependsOn = ["a", "c"]
            properties = { status = "max(a.status)" }

            [[classes]]
            name = "c"
            position = "{c}"

            [[classes]]
            name = "d"
            position = "{d}"
            dependsOn = ["d"]
            "#,
        )
        .unwrap();
        let a = config.class("a").unwrap();
        let b = config.class("b").unwrap();
        let c = config.class("c").unwrap();
        let d = config.class("d").unwrap();
        assert_eq!(a.unit, b.unit);
        assert!(config.units[a.unit].cyclic);
        assert!(c.unit < a.unit);
        assert!(config.units[d.unit].cyclic, "a self-dependency is a cycle");
        assert!(!config.units[c.unit].cyclic);
        // Impact on `c` reaches the whole cycle, and stops there.
        let impacted =
            config.indirectly_impacted(&BTreeSet::from([config.class_index("c").unwrap()]));
        let names: BTreeSet<&str> = impacted
            .iter()
            .map(|&i| config.classes[i].name.as_str())
            .collect();
        assert_eq!(names, BTreeSet::from(["a", "b"]));
    }

    #[test]
    fn errors_name_the_class_and_the_field() {
        let found = problems(
            r#"
            maxFixpointIterations = 0

            [[classes]]
            name = "region"
            position = "region"

            [[classes]]
            name = "cluster"
            parent = "regoin"
            position = "{cluster}"
            properties = { status = "maxx(attr.health)", "bad-name" = "count()" }
            dependsOn = ["nowhere"]
            patchAggregatedStatus = "min(aggregated"

            [[classes]]
            name = "service"
            parent = "region"
            position = "{service}"
            properties = { db = "max(database.status)" }

            [[classes]]
            name = "loop1"
            parent = "loop2"
            position = "{x}"

            [[classes]]
            name = "loop2"
            parent = "loop1"
            position = "{x}"

            [[classes]]
            name = "region"
            position = "{r}"
            "#,
        );
        let expected = [
            "`maxFixpointIterations`: must be between 1 and 100",
            "class `region`, `name`: declared twice",
            "class `cluster`, `parent`: no class is named `regoin`",
            "class `loop1`, `parent`: the parent chain loops back",
            "class `region`, `position`: a position template needs at least one",
            "class `cluster`, `dependsOn`: no class is named `nowhere`",
            "class `cluster`, `properties.status`: unknown aggregate `maxx`",
            "class `cluster`, `properties.bad-name`: a property name",
            "class `cluster`, `patchAggregatedStatus`: expected `)`",
            "class `service`, `properties.db`: reads class `database`, which is not in `dependsOn`",
        ];
        for needle in expected {
            assert!(
                found.iter().any(|problem| problem.contains(needle)),
                "missing {needle:?} in {found:#?}"
            );
        }
    }

    #[test]
    fn unknown_keys_and_bad_toml_are_refused() {
        let found = problems("[[classes]]\nname = \"a\"\nposition = \"{a}\"\nparnet = \"b\"\n");
        assert!(found[0].contains("parnet"), "{found:?}");
        assert!(problems("classes = [")[0].starts_with("`file`"));
        assert!(problems("")[0].contains("at least one class"));
    }
}
