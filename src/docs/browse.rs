//! Browsing the mirror as the manifest records it (pure: rows in, entries
//! out): the entries of one folder, and what a path the reader typed
//! names.
//!
//! Paths are the manifest's: relative to the mirror root, `/`-separated,
//! starting with the platform (`notion/Team/README.md`). A document with
//! children is its folder (`notion/Team`, body in `README.md`), a database
//! its folder (`_index.md`), a leaf its file; `_orphans/` has no row of its
//! own and is listed as a bare folder.

use std::collections::BTreeMap;

use entity::docs_document;

use super::engine::manifest::TRASHED;
use super::engine::tree::{DATABASE_INDEX, README};

/// One entry of a folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry<'a> {
    /// The entry's own path: the folder of a document with children or of
    /// a database, the file of a leaf.
    pub path: String,
    /// Whether it is a folder (it has entries of its own).
    pub folder: bool,
    /// Its manifest row; `None` for a folder with no document of its own
    /// (`_orphans`).
    pub row: Option<&'a docs_document::Model>,
}

/// A path from a reader, checked: relative, `/`-separated, no `.`/`..`
/// components, no empty ones (a trailing `/` is dropped). `None` when it
/// is not such a path.
pub fn normalize(path: &str) -> Option<String> {
    let trimmed = path.trim_matches('/');
    if trimmed.is_empty() {
        return Some(String::new());
    }
    let parts: Vec<&str> = trimmed.split('/').collect();
    if parts
        .iter()
        .any(|part| part.is_empty() || *part == "." || *part == ".." || part.contains('\\'))
    {
        return None;
    }
    Some(parts.join("/"))
}

/// The entry path of a row: its folder when its file is a `README.md` or
/// `_index.md` (or it is a bare folder), else its file.
fn entry_path(row: &docs_document::Model) -> (String, bool) {
    let path = row.local_path.as_str();
    match path.rsplit_once('/') {
        Some((dir, file)) if file == README || file == DATABASE_INDEX => (dir.to_owned(), true),
        _ if !path.ends_with(".md") => (path.to_owned(), true),
        _ => (path.to_owned(), false),
    }
}

fn parent_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(dir, _)| dir)
}

/// The live entries directly inside `folder` (a normalized path, e.g.
/// `notion` or `notion/Team`), folders first, then by path.
pub fn entries<'a>(rows: &'a [docs_document::Model], folder: &str) -> Vec<Entry<'a>> {
    let mut found: BTreeMap<(bool, String), Entry<'a>> = BTreeMap::new();
    for row in rows.iter().filter(|row| row.status != TRASHED) {
        let (path, folder_entry) = entry_path(row);
        if parent_of(&path) == folder {
            found.insert(
                (!folder_entry, path.clone()),
                Entry {
                    path,
                    folder: folder_entry,
                    row: Some(row),
                },
            );
            continue;
        }
        // A folder no row stands for (`_orphans`), between `folder` and
        // the row.
        if let Some(rest) = path.strip_prefix(folder).and_then(|rest| {
            if folder.is_empty() {
                Some(rest)
            } else {
                rest.strip_prefix('/')
            }
        }) && let Some((first, _)) = rest.split_once('/')
        {
            let dir = if folder.is_empty() {
                first.to_owned()
            } else {
                format!("{folder}/{first}")
            };
            found.entry((false, dir.clone())).or_insert(Entry {
                path: dir,
                folder: true,
                row: None,
            });
        }
    }
    // A folder some row stands for replaces the bare one.
    let with_rows: Vec<String> = found
        .values()
        .filter(|entry| entry.folder && entry.row.is_some())
        .map(|entry| entry.path.clone())
        .collect();
    found
        .into_values()
        .filter(|entry| entry.row.is_some() || !with_rows.contains(&entry.path))
        .collect()
}

/// The manifest paths a reader's path may name: the file itself, or the
/// folder's `README.md` / `_index.md`, or the bare folder.
pub fn candidates(path: &str) -> Vec<String> {
    if path.ends_with(".md") {
        vec![path.to_owned()]
    } else {
        vec![
            format!("{path}/{README}"),
            format!("{path}/{DATABASE_INDEX}"),
            path.to_owned(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;

    fn row(id: &str, path: &str, status: &str) -> docs_document::Model {
        docs_document::Model {
            platform: "notion".into(),
            remote_id: id.into(),
            alt_id: None,
            kind: "page".into(),
            parent_remote_id: None,
            title: id.into(),
            url: None,
            edited_at: None,
            content_hash: None,
            local_path: path.into(),
            status: status.into(),
            trashed_at: None,
            created_at: Utc::now(),
            updated_at: Utc::now(),
        }
    }

    fn listed(rows: &[docs_document::Model], folder: &str) -> Vec<(String, bool, Option<String>)> {
        entries(rows, folder)
            .into_iter()
            .map(|entry| {
                (
                    entry.path,
                    entry.folder,
                    entry.row.map(|row| row.remote_id.clone()),
                )
            })
            .collect()
    }

    #[test]
    fn a_folder_lists_its_own_entries_folders_first() {
        let rows = vec![
            row("team", "notion/Team/README.md", "active"),
            row("notes", "notion/Team/Notes.md", "active"),
            row("tasks", "notion/Team/Tasks/_index.md", "active"),
            row("ship", "notion/Team/Tasks/Ship.md", "active"),
            row("plain", "notion/Plain.md", "active"),
            row("lost", "notion/_orphans/Lost.md", "active"),
            row("gone", "notion/Gone.md", TRASHED),
            row("box", "notion/Box", "active"),
        ];
        assert_eq!(
            listed(&rows, "notion"),
            vec![
                ("notion/Box".into(), true, Some("box".into())),
                ("notion/Team".into(), true, Some("team".into())),
                ("notion/_orphans".into(), true, None),
                ("notion/Plain.md".into(), false, Some("plain".into())),
            ]
        );
        assert_eq!(
            listed(&rows, "notion/Team"),
            vec![
                ("notion/Team/Tasks".into(), true, Some("tasks".into())),
                ("notion/Team/Notes.md".into(), false, Some("notes".into())),
            ]
        );
        assert_eq!(listed(&rows, ""), vec![("notion".into(), true, None)]);
        assert!(listed(&rows, "notion/Plain.md").is_empty());
    }

    #[test]
    fn reader_paths_cannot_climb_out() {
        assert_eq!(normalize("/notion/Team/").as_deref(), Some("notion/Team"));
        assert_eq!(normalize("").as_deref(), Some(""));
        for bad in ["notion/../etc", "./x", "a//b", "a\\..\\b"] {
            assert_eq!(normalize(bad), None, "{bad}");
        }
        assert_eq!(
            candidates("notion/Team"),
            vec![
                "notion/Team/README.md".to_owned(),
                "notion/Team/_index.md".to_owned(),
                "notion/Team".to_owned(),
            ]
        );
        assert_eq!(candidates("notion/A.md"), vec!["notion/A.md".to_owned()]);
    }
}
