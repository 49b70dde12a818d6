//! Where the nodes of an incremental listing land. Their ancestors may not
//! be listed, so positions are resolved against the manifest, not against
//! this run's tree: a known node keeps its path (moves and renames wait
//! for the next full run), a new one is named in its parent's folder
//! beside what is on disk there. The one shape change made here is the
//! seed's leaf→directory conversion: a leaf that gains a child becomes
//! `<x>/README.md`. What this defers to the next full run: other shape
//! changes, `_index.md` tables, a parent moving while its child was not
//! edited.

use std::collections::{HashMap, HashSet};

use crate::docs::adapter::{Platform, RemoteNode};
use crate::docs::naming::Siblings;

use super::tree::{ORPHANS_DIR, Placement, Shape, node_path, own_dir, parse_path};

/// A manifest document not in the listing that must become a folder: a
/// listed child was added under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversion {
    /// Its primary id.
    pub id: String,
    /// `<x>.md`.
    pub from: String,
    /// `<x>/README.md`.
    pub to: String,
}

/// The placements of an incremental listing (parents before children) and
/// the conversions of unlisted parents. `manifest` maps a live (not
/// trashed) document's id to its path; `taken` lists the entry names of a
/// folder on disk (the caller's I/O).
pub fn place_incremental(
    platform: Platform,
    nodes: &[RemoteNode],
    manifest: &HashMap<String, String>,
    mut taken: impl FnMut(&str) -> Vec<String>,
) -> (Vec<Placement>, Vec<Conversion>) {
    let listed: HashSet<&str> = nodes.iter().map(|node| node.id.as_str()).collect();
    let parents: HashSet<&str> = nodes
        .iter()
        .filter_map(|node| node.parent_id.as_deref())
        .collect();
    let root = platform.as_str().to_owned();
    let mut placed: HashMap<String, Placement> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut conversions: Vec<Conversion> = Vec::new();
    let mut converted: HashMap<String, String> = HashMap::new();
    let mut folders: HashMap<String, Siblings> = HashMap::new();
    let mut pending: Vec<&RemoteNode> = nodes.iter().collect();
    while !pending.is_empty() {
        let ready: Vec<&RemoteNode> = pending
            .iter()
            .copied()
            .filter(|node| match node.parent_id.as_deref() {
                Some(parent) if listed.contains(parent) && parent != node.id => {
                    placed.contains_key(parent)
                }
                _ => true,
            })
            .collect();
        // A parent cycle among listed nodes: place one as if its parent
        // were not listed, which unblocks the rest.
        let ready = if ready.is_empty() {
            vec![pending[0]]
        } else {
            ready
        };
        let ready_ids: HashSet<&str> = ready.iter().map(|node| node.id.as_str()).collect();
        pending.retain(|node| !ready_ids.contains(node.id.as_str()));
        for node in ready {
            let gains_children = parents.contains(node.id.as_str());
            let placement = if let Some(path) = manifest.get(&node.id) {
                let (shape, dir, name) = parse_path(path);
                let shape = if shape == Shape::Leaf && gains_children {
                    Shape::Readme
                } else {
                    shape
                };
                Placement {
                    id: node.id.clone(),
                    shape,
                    path: node_path(dir, name, shape),
                    orphan: dir.starts_with(&format!("{root}/{ORPHANS_DIR}")),
                }
            } else {
                let parent_dir = node.parent_id.as_deref().and_then(|parent| {
                    if let Some(parent) = placed.get(parent) {
                        return own_dir(&parent.path, parent.shape);
                    }
                    if let Some(dir) = converted.get(parent) {
                        return Some(dir.clone());
                    }
                    let path = manifest.get(parent)?;
                    let (shape, dir, name) = parse_path(path);
                    if shape == Shape::Leaf {
                        let to = node_path(dir, name, Shape::Readme);
                        let own = format!("{dir}/{name}");
                        conversions.push(Conversion {
                            id: parent.to_owned(),
                            from: path.clone(),
                            to,
                        });
                        converted.insert(parent.to_owned(), own.clone());
                        Some(own)
                    } else {
                        own_dir(path, shape)
                    }
                });
                let orphan = node.parent_id.is_some() && parent_dir.is_none();
                let dir = parent_dir.unwrap_or_else(|| {
                    if orphan {
                        format!("{root}/{ORPHANS_DIR}")
                    } else {
                        root.clone()
                    }
                });
                let folder = folders.entry(dir.clone()).or_insert_with(|| {
                    let names = taken(&dir);
                    Siblings::with_taken(
                        names
                            .iter()
                            .map(|name| name.strip_suffix(".md").unwrap_or(name)),
                    )
                });
                let name = folder.claim(&node.title, &node.id);
                let shape = Shape::of(node.kind, gains_children);
                Placement {
                    id: node.id.clone(),
                    shape,
                    path: node_path(&dir, &name, shape),
                    orphan,
                }
            };
            order.push(node.id.clone());
            placed.insert(node.id.clone(), placement);
        }
    }
    let placements = order
        .into_iter()
        .filter_map(|id| placed.remove(&id))
        .collect();
    (placements, conversions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docs::adapter::NodeKind;

    fn node(id: &str, parent: Option<&str>, title: &str) -> RemoteNode {
        RemoteNode {
            id: id.into(),
            alt_id: None,
            kind: NodeKind::Page,
            parent_id: parent.map(str::to_owned),
            title: title.into(),
            edited_at: None,
            url: None,
        }
    }

    #[test]
    fn known_nodes_keep_their_path_new_ones_are_named_beside_the_disk() {
        let manifest = HashMap::from([
            ("a".to_owned(), "notion/Renamed remotely.md".to_owned()),
            ("p".to_owned(), "notion/P/README.md".to_owned()),
        ]);
        let nodes = vec![
            node("kid", Some("new"), "Kid"),
            node("a", None, "New title"),
            node("new", Some("p"), "Taken"),
        ];
        let (placed, conversions) = place_incremental(Platform::Notion, &nodes, &manifest, |dir| {
            if dir == "notion/P" {
                vec!["taken.md".to_owned()]
            } else {
                Vec::new()
            }
        });
        let paths: Vec<(&str, &str)> = placed
            .iter()
            .map(|p| (p.id.as_str(), p.path.as_str()))
            .collect();
        assert_eq!(
            paths,
            [
                ("a", "notion/Renamed remotely.md"),
                ("new", "notion/P/Taken-new/README.md"),
                ("kid", "notion/P/Taken-new/Kid.md"),
            ]
        );
        assert!(conversions.is_empty());
    }

    #[test]
    fn a_leaf_gaining_a_child_becomes_a_folder() {
        let manifest = HashMap::from([
            ("x".to_owned(), "notion/X.md".to_owned()),
            ("y".to_owned(), "notion/Y.md".to_owned()),
        ]);
        let nodes = vec![
            node("x", None, "X"),
            node("xkid", Some("x"), "Child"),
            node("ykid", Some("y"), "Other"),
            node("lost", Some("nowhere"), "Lost"),
        ];
        let (placed, conversions) =
            place_incremental(Platform::Notion, &nodes, &manifest, |_| Vec::new());
        let paths: Vec<(&str, &str)> = placed
            .iter()
            .map(|p| (p.id.as_str(), p.path.as_str()))
            .collect();
        assert_eq!(
            paths,
            [
                ("x", "notion/X/README.md"),
                ("ykid", "notion/Y/Other.md"),
                ("lost", "notion/_orphans/Lost.md"),
                ("xkid", "notion/X/Child.md"),
            ]
        );
        assert_eq!(
            conversions,
            [Conversion {
                id: "y".into(),
                from: "notion/Y.md".into(),
                to: "notion/Y/README.md".into(),
            }]
        );
        assert!(placed[2].orphan);
    }
}
