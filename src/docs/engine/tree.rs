//! Where each enumerated node lands on a full run, as a pure function of
//! the listing and the manifest's current paths (the seed's `buildTree`).
//!
//! - A node whose parent is not listed (or whose parent chain loops) goes
//!   under `_orphans/` at the platform root, with its own descendants.
//! - README/leaf duality: a node with children is a folder, its body in
//!   `<name>/README.md`; a leaf is `<name>.md`. A database is a folder with
//!   `_index.md`, its rows inside; a folder node is a bare folder.
//! - Each folder's children are named through [`naming::name_siblings`], in
//!   listing order, with the name they have now: names are stable across
//!   runs, the first one there keeps the clean name.
//!
//! Paths are relative to the mirror root, `/`-separated:
//! `notion/Team/README.md`.

use std::collections::{HashMap, HashSet, VecDeque};

use crate::docs::adapter::{NodeKind, Platform, RemoteNode};
use crate::docs::naming::{self, Sibling, Siblings};

/// The folder of nodes whose parent is not listed, at the platform root.
pub const ORPHANS_DIR: &str = "_orphans";
/// The body of a node that has children.
pub const README: &str = "README.md";
/// A database's table of its rows.
pub const DATABASE_INDEX: &str = "_index.md";

/// What a node is on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// `<name>.md`.
    Leaf,
    /// `<name>/README.md`: a document with children.
    Readme,
    /// `<name>/_index.md`: a database.
    Database,
    /// `<name>/`: a container without a body.
    Folder,
}

impl Shape {
    /// The shape a node of `kind` takes, with or without children.
    pub fn of(kind: NodeKind, has_children: bool) -> Self {
        match kind {
            NodeKind::Database => Self::Database,
            NodeKind::Folder => Self::Folder,
            _ if has_children => Self::Readme,
            _ => Self::Leaf,
        }
    }

    /// Whether the node is a folder of its own.
    pub fn is_dir(self) -> bool {
        !matches!(self, Self::Leaf)
    }
}

/// Where one node lands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The node's primary id.
    pub id: String,
    /// Its shape.
    pub shape: Shape,
    /// The path the manifest records: the file (`x.md`, `x/README.md`,
    /// `x/_index.md`) or, for a bare folder, the folder.
    pub path: String,
    /// Whether it sits under `_orphans/`.
    pub orphan: bool,
}

/// The path of a node named `name` of `shape` inside the folder `dir`.
pub fn node_path(dir: &str, name: &str, shape: Shape) -> String {
    match shape {
        Shape::Leaf => format!("{dir}/{name}.md"),
        Shape::Readme => format!("{dir}/{name}/{README}"),
        Shape::Database => format!("{dir}/{name}/{DATABASE_INDEX}"),
        Shape::Folder => format!("{dir}/{name}"),
    }
}

/// The folder a node of `shape` at `path` gives its children.
pub fn own_dir(path: &str, shape: Shape) -> Option<String> {
    match shape {
        Shape::Leaf => None,
        Shape::Readme | Shape::Database => path.rsplit_once('/').map(|(dir, _)| dir.to_owned()),
        Shape::Folder => Some(path.to_owned()),
    }
}

/// The shape and folder of a path the manifest recorded (the shape is read
/// from the file name; a path without `.md` is a bare folder).
pub fn parse_path(path: &str) -> (Shape, &str, &str) {
    let (dir, file) = path.rsplit_once('/').unwrap_or(("", path));
    if file == README || file == DATABASE_INDEX {
        let shape = if file == README {
            Shape::Readme
        } else {
            Shape::Database
        };
        let (parent, name) = dir.rsplit_once('/').unwrap_or(("", dir));
        (shape, parent, name)
    } else if let Some(name) = file.strip_suffix(".md") {
        (Shape::Leaf, dir, name)
    } else {
        (Shape::Folder, dir, file)
    }
}

/// Places every listed node (a full run). `current` maps an id to the path
/// the manifest has for it now. The result lists parents before their
/// children (the processing order), each folder's children in listing
/// order.
pub fn build(
    platform: Platform,
    nodes: &[RemoteNode],
    current: &HashMap<String, String>,
) -> Vec<Placement> {
    let index: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(at, node)| (node.id.as_str(), at))
        .collect();
    let mut children: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut roots = Vec::new();
    let mut orphans = Vec::new();
    for (at, node) in nodes.iter().enumerate() {
        match node.parent_id.as_deref().map(|parent| index.get(parent)) {
            None => roots.push(at),
            Some(Some(&parent)) if parent != at => children.entry(parent).or_default().push(at),
            Some(_) => orphans.push(at),
        }
    }
    let root_dir = platform.as_str().to_owned();
    let orphan_dir = format!("{root_dir}/{ORPHANS_DIR}");
    let mut placed: Vec<Placement> = Vec::with_capacity(nodes.len());
    let mut seen: HashSet<usize> = HashSet::new();
    // Breadth first from the roots, then from the orphans; whatever is left
    // sits on a parent cycle and is filed as an orphan too.
    let mut queue: VecDeque<(String, Vec<usize>, bool)> = VecDeque::new();
    queue.push_back((root_dir.clone(), roots, false));
    let mut orphan_groups = vec![orphans];
    loop {
        while let Some((dir, group, orphan)) = queue.pop_front() {
            let group: Vec<usize> = group.into_iter().filter(|at| seen.insert(*at)).collect();
            let siblings: Vec<Sibling<'_>> = group
                .iter()
                .map(|&at| {
                    let node = &nodes[at];
                    let name = current.get(&node.id).and_then(|path| {
                        let (_, parent, name) = parse_path(path);
                        (parent == dir).then_some(name)
                    });
                    Sibling {
                        id: &node.id,
                        title: &node.title,
                        current: name,
                    }
                })
                .collect();
            let names = naming::name_siblings(&Siblings::default(), &siblings);
            for (&at, name) in group.iter().zip(names) {
                let node = &nodes[at];
                let kids = children.remove(&at).unwrap_or_default();
                let kids: Vec<usize> = kids.into_iter().filter(|kid| !seen.contains(kid)).collect();
                let shape = Shape::of(node.kind, !kids.is_empty());
                let path = node_path(&dir, &name, shape);
                if let Some(own) = own_dir(&path, shape)
                    && !kids.is_empty()
                {
                    queue.push_back((own, kids, orphan));
                }
                placed.push(Placement {
                    id: node.id.clone(),
                    shape,
                    path,
                    orphan,
                });
            }
        }
        if let Some(group) = orphan_groups.pop() {
            if !group.is_empty() {
                queue.push_back((orphan_dir.clone(), group, true));
            }
            continue;
        }
        let left: Vec<usize> = (0..nodes.len()).filter(|at| !seen.contains(at)).collect();
        match left.first() {
            // One node of a cycle becomes an orphan root; its cycle mates
            // follow it as its descendants.
            Some(&first) => orphan_groups.push(vec![first]),
            None => break,
        }
    }
    placed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, kind: NodeKind, parent: Option<&str>, title: &str) -> RemoteNode {
        RemoteNode {
            id: id.into(),
            alt_id: None,
            kind,
            parent_id: parent.map(str::to_owned),
            title: title.into(),
            edited_at: None,
            url: None,
        }
    }

    fn paths(placed: &[Placement]) -> Vec<(&str, &str)> {
        placed
            .iter()
            .map(|p| (p.id.as_str(), p.path.as_str()))
            .collect()
    }

    #[test]
    fn readme_leaf_duality_databases_and_orphans() {
        let nodes = vec![
            node("row1", NodeKind::Row, Some("db"), "Task"),
            node("team", NodeKind::Page, None, "Team"),
            node("db", NodeKind::Database, Some("team"), "Tasks"),
            node("note", NodeKind::Page, Some("team"), "Notes"),
            node("lost", NodeKind::Page, Some("gone"), "Lost"),
            node("lostkid", NodeKind::Page, Some("lost"), "Kid"),
            node("f", NodeKind::Folder, None, "Drive"),
        ];
        let placed = build(Platform::Notion, &nodes, &HashMap::new());
        assert_eq!(
            paths(&placed),
            [
                ("team", "notion/Team/README.md"),
                ("f", "notion/Drive"),
                ("db", "notion/Team/Tasks/_index.md"),
                ("note", "notion/Team/Notes.md"),
                ("row1", "notion/Team/Tasks/Task.md"),
                ("lost", "notion/_orphans/Lost/README.md"),
                ("lostkid", "notion/_orphans/Lost/Kid.md"),
            ]
        );
        assert!(placed[5].orphan && placed[6].orphan && !placed[0].orphan);
    }

    #[test]
    fn a_parent_cycle_is_filed_as_orphans_not_lost() {
        let nodes = vec![
            node("a", NodeKind::Page, Some("b"), "A"),
            node("b", NodeKind::Page, Some("a"), "B"),
            node("s", NodeKind::Page, Some("s"), "Self"),
        ];
        let placed = build(Platform::Feishu, &nodes, &HashMap::new());
        let mut got = paths(&placed);
        got.sort();
        assert_eq!(
            got,
            [
                ("a", "feishu/_orphans/A/README.md"),
                ("b", "feishu/_orphans/A/B.md"),
                ("s", "feishu/_orphans/Self.md"),
            ]
        );
    }

    #[test]
    fn names_are_stable_the_first_one_there_keeps_the_clean_name() {
        let nodes = vec![
            node("22222222", NodeKind::Page, None, "Plan"),
            node("11111111", NodeKind::Page, None, "plan"),
        ];
        let current = HashMap::from([("11111111".to_owned(), "notion/plan.md".to_owned())]);
        let placed = build(Platform::Notion, &nodes, &current);
        assert_eq!(
            paths(&placed),
            [
                ("22222222", "notion/Plan-22222222.md"),
                ("11111111", "notion/plan.md"),
            ]
        );
    }

    #[test]
    fn cjk_and_reserved_titles() {
        let nodes = vec![
            node("abcdef1234", NodeKind::Docx, None, "设计 文档"),
            node("0123456789", NodeKind::Docx, None, "README"),
            node("9876543210", NodeKind::Docx, None, "a/b:c"),
        ];
        let placed = build(Platform::Feishu, &nodes, &HashMap::new());
        assert_eq!(
            paths(&placed),
            [
                ("abcdef1234", "feishu/设计 文档.md"),
                ("0123456789", "feishu/README-01234567.md"),
                ("9876543210", "feishu/abc.md"),
            ]
        );
    }

    #[test]
    fn paths_parse_back_to_shape_folder_and_name() {
        for (shape, path) in [
            (Shape::Leaf, "notion/A/x.md"),
            (Shape::Readme, "notion/A/x/README.md"),
            (Shape::Database, "notion/A/x/_index.md"),
            (Shape::Folder, "notion/A/x"),
        ] {
            assert_eq!(parse_path(path), (shape, "notion/A", "x"), "{path}");
            assert_eq!(node_path("notion/A", "x", shape), path);
        }
        assert_eq!(
            own_dir("notion/A/x/README.md", Shape::Readme).as_deref(),
            Some("notion/A/x")
        );
        assert_eq!(own_dir("notion/A/x.md", Shape::Leaf), None);
    }
}
