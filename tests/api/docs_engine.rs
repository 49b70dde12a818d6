//! The docs mirror's engine against an in-memory adapter, on real SQLite
//! and PostgreSQL and a real temporary mirror folder: the tree on disk and
//! the manifest after a full run, a run that changes nothing writing
//! nothing, moves, renames, the leaf→directory conversion, trash, the 80 %
//! guard, purge, a failed asset retried, link rewriting, orphans and
//! names.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use chrono::{DateTime, Duration, TimeZone, Utc};
use entity::{docs_asset, docs_document, docs_sync_run};
use migration::{Migrator, MigratorTrait};
use sea_orm::{ColumnTrait, Database, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder};
use trellis::docs::adapter::{
    Adapter, AdapterError, AssetRef, DatabaseExpander, DocLink, DownloadedAsset, FetchedDoc,
    IncrementalEnumerator, IncrementalListing, NodeKind, Platform, RemoteNode, RowProperties,
};
use trellis::docs::engine::{Clock, Engine, EngineConfig, RunReport};

use crate::helpers::{Backend, TestDatabase};

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR-one";

fn at(hour: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 3, 0, 0, 0).single().unwrap() + Duration::hours(hour)
}

/// A workspace held in memory, edited by the tests between runs.
#[derive(Default)]
struct Workspace {
    nodes: Vec<RemoteNode>,
    bodies: HashMap<String, FetchedDoc>,
    rows: HashMap<String, HashMap<String, RowProperties>>,
    /// Asset download URL → bytes; a URL missing here fails.
    assets: HashMap<String, Vec<u8>>,
    /// Document ids whose fetch fails.
    broken: Vec<String>,
    /// The incremental listing (when set, the adapter is incremental-capable).
    changed: Option<Vec<String>>,
    fetches: Vec<String>,
}

struct Fake {
    platform: Platform,
    incremental: bool,
    workspace: Mutex<Workspace>,
}

impl Fake {
    fn new(platform: Platform, incremental: bool) -> Self {
        Fake {
            platform,
            incremental,
            workspace: Mutex::default(),
        }
    }

    fn edit(&self, change: impl FnOnce(&mut Workspace)) {
        change(&mut self.workspace.lock().unwrap());
    }

    fn page(&self, id: &str, kind: NodeKind, parent: Option<&str>, title: &str, body: &str) {
        self.edit(|ws| {
            ws.nodes.push(RemoteNode {
                id: id.into(),
                alt_id: None,
                kind,
                parent_id: parent.map(str::to_owned),
                title: title.into(),
                edited_at: Some(at(0)),
                url: Some(format!("https://example.test/{id}")),
            });
            ws.bodies.insert(
                id.into(),
                FetchedDoc {
                    markdown: body.into(),
                    ..FetchedDoc::default()
                },
            );
        });
    }

    fn node_mut<R>(&self, id: &str, change: impl FnOnce(&mut RemoteNode) -> R) -> R {
        let mut ws = self.workspace.lock().unwrap();
        let node = ws.nodes.iter_mut().find(|node| node.id == id).unwrap();
        change(node)
    }

    fn fetches(&self) -> Vec<String> {
        std::mem::take(&mut self.workspace.lock().unwrap().fetches)
    }
}

#[async_trait::async_trait]
impl Adapter for Fake {
    fn platform(&self) -> Platform {
        self.platform
    }

    async fn enumerate(&self) -> Result<Vec<RemoteNode>, AdapterError> {
        Ok(self.workspace.lock().unwrap().nodes.clone())
    }

    async fn fetch_markdown(&self, node: &RemoteNode) -> Result<FetchedDoc, AdapterError> {
        let mut ws = self.workspace.lock().unwrap();
        ws.fetches.push(node.id.clone());
        if ws.broken.contains(&node.id) {
            return Err(AdapterError::Server { status: 502 });
        }
        ws.bodies
            .get(&node.id)
            .cloned()
            .ok_or(AdapterError::NotFound {
                id: node.id.clone(),
            })
    }

    async fn download_asset(
        &self,
        asset: &AssetRef,
        dest: &Path,
    ) -> Result<DownloadedAsset, AdapterError> {
        let bytes = self
            .workspace
            .lock()
            .unwrap()
            .assets
            .get(&asset.download_url)
            .cloned()
            .ok_or(AdapterError::Server { status: 403 })?;
        std::fs::write(dest, &bytes).map_err(|error| AdapterError::Io(error.to_string()))?;
        Ok(DownloadedAsset {
            content_type: None,
            bytes: bytes.len() as u64,
        })
    }

    fn database_expander(&self) -> Option<&dyn DatabaseExpander> {
        Some(self)
    }

    fn incremental_enumerator(&self) -> Option<&dyn IncrementalEnumerator> {
        self.incremental
            .then_some(self as &dyn IncrementalEnumerator)
    }
}

#[async_trait::async_trait]
impl DatabaseExpander for Fake {
    async fn query_rows(
        &self,
        database: &RemoteNode,
        _titles: &HashMap<String, String>,
    ) -> Result<HashMap<String, RowProperties>, AdapterError> {
        Ok(self
            .workspace
            .lock()
            .unwrap()
            .rows
            .get(&database.id)
            .cloned()
            .unwrap_or_default())
    }
}

#[async_trait::async_trait]
impl IncrementalEnumerator for Fake {
    async fn enumerate_since(
        &self,
        checkpoint: DateTime<Utc>,
    ) -> Result<IncrementalListing, AdapterError> {
        let ws = self.workspace.lock().unwrap();
        let changed = ws.changed.clone().unwrap_or_default();
        Ok(IncrementalListing {
            nodes: ws
                .nodes
                .iter()
                .filter(|node| changed.contains(&node.id))
                .cloned()
                .collect(),
            checkpoint,
        })
    }
}

struct TestClock(Mutex<DateTime<Utc>>);

impl Clock for TestClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap()
    }
}

struct Lab {
    db: DatabaseConnection,
    config: EngineConfig,
    clock: TestClock,
    _database: TestDatabase,
    _dir: tempfile::TempDir,
}

impl Lab {
    async fn new(backend: Backend) -> Lab {
        let dir = tempfile::tempdir().unwrap();
        let database = TestDatabase::create(backend, dir.path()).await;
        let db = Database::connect(&database.url).await.unwrap();
        Migrator::up(&db, None).await.unwrap();
        Lab {
            db,
            config: EngineConfig::new(dir.path().join("mirror")),
            clock: TestClock(Mutex::new(at(9))),
            _database: database,
            _dir: dir,
        }
    }

    fn set_time(&self, now: DateTime<Utc>) {
        *self.clock.0.lock().unwrap() = now;
    }

    async fn sync(&self, adapter: &Fake) -> RunReport {
        let engine = Engine::new(&self.db, &self.config, &self.clock);
        let report = engine.sync_platform(adapter, false).await.unwrap();
        engine.finalize_mirror().await.unwrap();
        report
    }

    fn root(&self) -> &Path {
        &self.config.mirror_root
    }

    fn read(&self, path: &str) -> String {
        std::fs::read_to_string(self.root().join(path))
            .unwrap_or_else(|error| panic!("{path}: {error}"))
    }

    fn exists(&self, path: &str) -> bool {
        self.root().join(path).exists()
    }

    /// Every file under the mirror (relative path → bytes and mtime).
    fn snapshot(&self) -> BTreeMap<String, (Vec<u8>, SystemTime)> {
        fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<String, (Vec<u8>, SystemTime)>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path: PathBuf = entry.unwrap().path();
                if path.is_dir() {
                    walk(&path, root, out);
                } else {
                    let relative = path
                        .strip_prefix(root)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned();
                    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
                    out.insert(relative, (std::fs::read(&path).unwrap(), mtime));
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(self.root(), self.root(), &mut out);
        out
    }

    async fn documents(&self) -> BTreeMap<String, docs_document::Model> {
        docs_document::Entity::find()
            .all(&self.db)
            .await
            .unwrap()
            .into_iter()
            .map(|row| (row.remote_id.clone(), row))
            .collect()
    }

    async fn paths(&self) -> BTreeMap<String, (String, String)> {
        self.documents()
            .await
            .into_iter()
            .map(|(id, row)| (id, (row.local_path, row.status)))
            .collect()
    }
}

fn active(path: &str) -> (String, String) {
    (path.to_owned(), "active".to_owned())
}

/// A small Notion workspace: a page with children, a database with rows,
/// an orphan, a CJK title, a reserved title, a link and an image.
fn workspace() -> Fake {
    let fake = Fake::new(Platform::Notion, false);
    fake.page("team", NodeKind::Page, None, "Team", "Team home\n");
    fake.page(
        "notes",
        NodeKind::Page,
        Some("team"),
        "Notes",
        "Notes body\n",
    );
    fake.page("tasks", NodeKind::Database, Some("team"), "Tasks", "");
    fake.page(
        "row-a",
        NodeKind::Row,
        Some("tasks"),
        "Write spec",
        "Row A\n",
    );
    fake.page("row-b", NodeKind::Row, Some("tasks"), "Ship", "Row B\n");
    fake.page(
        "lost",
        NodeKind::Page,
        Some("not-shared"),
        "Lost",
        "Orphan\n",
    );
    fake.page("cjk", NodeKind::Page, None, "设计 文档", "中文\n");
    fake.page(
        "readme-page",
        NodeKind::Page,
        None,
        "README",
        "Not the layout's\n",
    );
    fake.page(
        "plain",
        NodeKind::Page,
        None,
        "Plain",
        "See [notes](https://www.notion.so/notesundashed) and ![pic](https://files.test/a.png?sig=1)\n",
    );
    fake.edit(|ws| {
        let plain = ws.bodies.get_mut("plain").unwrap();
        plain.links.push(DocLink {
            target_id: "notesundashed".into(),
            raw_url: "https://www.notion.so/notesundashed".into(),
        });
        plain.assets.push(AssetRef {
            remote_key: "files.test/a.png".into(),
            download_url: "https://files.test/a.png?sig=1".into(),
            body_url: Some("https://files.test/a.png?sig=1".into()),
            file_name: None,
        });
        ws.assets
            .insert("https://files.test/a.png?sig=1".into(), PNG.to_vec());
        ws.nodes
            .iter_mut()
            .find(|node| node.id == "notes")
            .unwrap()
            .alt_id = Some("notesundashed".into());
        let mut a = RowProperties::default();
        a.values.insert("Status".into(), "Done".into());
        let mut b = RowProperties::default();
        b.values.insert("Status".into(), "yes".into());
        ws.rows.insert(
            "tasks".into(),
            HashMap::from([("row-a".into(), a), ("row-b".into(), b)]),
        );
    });
    fake
}

async fn full_sync_builds_the_tree_and_a_second_run_writes_nothing(backend: Backend) {
    let lab = Lab::new(backend).await;
    let fake = workspace();
    let report = lab.sync(&fake).await;
    assert_eq!(report.stats.mode, "full");
    assert_eq!(report.stats.errors, 0, "{:?}", report.stats.failures);
    assert_eq!(report.stats.enumerated, 9);
    assert_eq!(report.stats.assets_downloaded, 1);
    let paths = lab.paths().await;
    let expected: BTreeMap<String, (String, String)> = [
        ("team", "notion/Team/README.md"),
        ("notes", "notion/Team/Notes.md"),
        ("tasks", "notion/Team/Tasks/_index.md"),
        ("row-a", "notion/Team/Tasks/Write spec.md"),
        ("row-b", "notion/Team/Tasks/Ship.md"),
        ("lost", "notion/_orphans/Lost.md"),
        ("cjk", "notion/设计 文档.md"),
        ("readme-page", "notion/README-readme-p.md"),
        ("plain", "notion/Plain.md"),
    ]
    .into_iter()
    .map(|(id, path)| (id.to_owned(), active(path)))
    .collect();
    assert_eq!(paths, expected);
    for (path, _) in expected.values() {
        assert!(lab.exists(path), "{path} on disk");
    }
    // A row: its properties in the frontmatter, sorted, `yes` quoted.
    assert_eq!(
        lab.read("notion/Team/Tasks/Ship.md"),
        "---\nid: row-b\nplatform: notion\ntype: row\ntitle: Ship\n\
         url: https://example.test/row-b\nedited_at: \"2026-12-03T00:00:00Z\"\n\
         parent: tasks\nproperties:\n  Status: \"yes\"\n---\nRow B\n"
    );
    // The database: a table of its rows.
    let index = lab.read("notion/Team/Tasks/_index.md");
    assert!(index.contains("| Title | Status |\n|---|---|\n| [Write spec](<Write spec.md>) | Done |\n| [Ship](Ship.md) | yes |\n"), "{index}");
    // The link (named by its alias) rewritten, the image in the pool, the
    // frontmatter url untouched.
    let pool = format!(
        "assets/{}/{}.png",
        &trellis::digest::sha256_hex_bytes(PNG)[..2],
        trellis::digest::sha256_hex_bytes(PNG)
    );
    assert!(lab.exists(&pool));
    let plain = lab.read("notion/Plain.md");
    assert!(
        plain.contains("url: https://example.test/plain\n"),
        "{plain}"
    );
    assert!(
        plain.ends_with(&format!(
            "See [notes](Team/Notes.md) and ![pic](../{pool})\n"
        )),
        "{plain}"
    );
    let mirror_index = lab.read("INDEX.md");
    assert!(
        mirror_index.contains("- [Notes](notion/Team/Notes.md)\n"),
        "{mirror_index}"
    );
    let run = docs_sync_run::Entity::find()
        .one(&lab.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(run.status, "succeeded");
    assert_eq!(run.stats["documents_written"], 9, "{}", run.stats);
    assert_eq!(run.changes["added"].as_array().unwrap().len(), 9);

    // Nothing changed remotely: nothing fetched, nothing written, every
    // file byte- and mtime-identical.
    fake.fetches();
    let before = lab.snapshot();
    lab.set_time(at(10));
    let second = lab.sync(&fake).await;
    assert_eq!(fake.fetches(), Vec::<String>::new());
    assert_eq!(second.stats.documents_written, 0);
    assert_eq!(second.stats.documents_skipped_unedited, 8);
    assert_eq!(second.stats.links_rewritten, 0);
    assert_eq!(second.changes, Default::default());
    assert_eq!(lab.snapshot(), before);

    // An edit whose content is the same is fetched but not written.
    fake.node_mut("notes", |node| node.edited_at = Some(at(5)));
    let third = lab.sync(&fake).await;
    assert_eq!(fake.fetches(), ["notes"]);
    assert_eq!(third.stats.documents_skipped_unchanged, 1);
    assert_eq!(third.stats.documents_written, 0);
    assert_eq!(lab.snapshot(), before);
}

async fn moves_renames_and_links_follow(backend: Backend) {
    let lab = Lab::new(backend).await;
    let fake = workspace();
    lab.sync(&fake).await;
    // Notes moves to the root; Team is renamed (its folder, with Tasks and
    // its rows, follows); Plain is not edited, so its rewritten link must
    // be fixed up, not re-fetched.
    fake.node_mut("notes", |node| {
        node.parent_id = None;
        node.edited_at = Some(at(1));
    });
    fake.node_mut("team", |node| {
        node.title = "Team 2".into();
        node.edited_at = Some(at(1));
    });
    lab.set_time(at(10));
    fake.fetches();
    let report = lab.sync(&fake).await;
    assert_eq!(report.stats.errors, 0, "{:?}", report.stats.failures);
    let paths = lab.paths().await;
    assert_eq!(paths["notes"], active("notion/Notes.md"));
    assert_eq!(paths["team"], active("notion/Team 2/README.md"));
    assert_eq!(paths["tasks"], active("notion/Team 2/Tasks/_index.md"));
    assert_eq!(paths["row-a"], active("notion/Team 2/Tasks/Write spec.md"));
    assert!(!lab.exists("notion/Team"));
    assert!(lab.exists("notion/Team 2/Tasks/Ship.md"));
    let mut moved = report.changes.moved.clone();
    moved.sort();
    assert_eq!(moved, ["notes", "row-a", "row-b", "tasks", "team"]);
    assert!(!fake.fetches().contains(&"plain".to_owned()));
    let plain = lab.read("notion/Plain.md");
    assert!(plain.contains("See [notes](Notes.md) and"), "{plain}");
    // The moved document's own frontmatter follows its new parent.
    assert!(lab.read("notion/Notes.md").contains("parent: null\n"));
}

async fn a_leaf_gaining_a_child_becomes_a_folder(backend: Backend) {
    let lab = Lab::new(backend).await;
    let fake = Fake::new(Platform::Notion, true);
    fake.page(
        "x",
        NodeKind::Page,
        None,
        "X",
        "x body ![i](https://f.test/i.png)\n",
    );
    fake.edit(|ws| {
        ws.bodies.get_mut("x").unwrap().assets.push(AssetRef {
            remote_key: "i".into(),
            download_url: "https://f.test/i.png".into(),
            body_url: Some("https://f.test/i.png".into()),
            file_name: None,
        });
        ws.assets
            .insert("https://f.test/i.png".into(), PNG.to_vec());
    });
    let first = lab.sync(&fake).await;
    assert_eq!(first.stats.mode, "full");
    assert!(lab.read("notion/X.md").contains("![i](../assets/"));
    // Incremental: only the new child is listed.
    fake.page("kid", NodeKind::Page, Some("x"), "Kid", "kid\n");
    fake.edit(|ws| ws.changed = Some(vec!["kid".into()]));
    lab.set_time(at(10));
    fake.fetches();
    let second = lab.sync(&fake).await;
    assert_eq!(second.stats.mode, "incremental");
    assert_eq!(fake.fetches(), ["kid"]);
    let paths = lab.paths().await;
    assert_eq!(paths["x"], active("notion/X/README.md"));
    assert_eq!(paths["kid"], active("notion/X/Kid.md"));
    assert!(!lab.exists("notion/X.md"));
    // The converted body reaches the pool from one folder deeper.
    assert!(
        lab.read("notion/X/README.md")
            .contains("![i](../../assets/")
    );
    assert_eq!(second.changes.moved, ["x"]);
}

async fn deletes_go_to_the_trash_behind_the_guard_and_are_purged(backend: Backend) {
    let lab = Lab::new(backend).await;
    let fake = Fake::new(Platform::Feishu, false);
    for n in 0..10 {
        fake.page(
            &format!("d{n}"),
            NodeKind::Docx,
            None,
            &format!("Doc {n}"),
            "body\n",
        );
    }
    lab.sync(&fake).await;
    fake.edit(|ws| ws.nodes.retain(|node| node.id != "d0"));
    lab.set_time(at(10));
    let report = lab.sync(&fake).await;
    assert_eq!(report.changes.trashed, ["d0"]);
    assert!(!report.stats.delete_guard_tripped);
    assert!(!lab.exists("feishu/Doc 0.md"));
    assert!(
        lab.read(".internal/trash/2026-12-03/feishu/Doc 0.md")
            .contains("id: d0\n")
    );
    let rows = lab.documents().await;
    assert_eq!(rows["d0"].status, "trashed");
    assert_eq!(rows["d0"].trashed_at, Some(at(10)));
    assert!(!lab.read("INDEX.md").contains("Doc 0"));

    // 4 of 9 listed: looks like lost permissions; nothing is deleted.
    fake.edit(|ws| ws.nodes.truncate(4));
    let guarded = lab.sync(&fake).await;
    assert!(guarded.stats.delete_guard_tripped);
    assert!(guarded.changes.trashed.is_empty());
    assert!(lab.exists("feishu/Doc 9.md"));
    let flagged = docs_sync_run::Entity::find()
        .order_by_desc(docs_sync_run::Column::Id)
        .one(&lab.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(flagged.stats["delete_guard_tripped"], true);

    // 30 days later the day is kept; 31 days later it is purged.
    let engine_at = |now| {
        lab.set_time(now);
        Engine::new(&lab.db, &lab.config, &lab.clock)
    };
    let kept = engine_at(at(10) + Duration::days(30))
        .finalize_mirror()
        .await
        .unwrap();
    assert!(kept.purged_days.is_empty());
    let purged = engine_at(at(10) + Duration::days(31))
        .finalize_mirror()
        .await
        .unwrap();
    assert_eq!(purged.purged_days, ["2026-12-03"]);
    assert!(!lab.exists(".internal/trash/2026-12-03"));
}

async fn a_failed_asset_keeps_the_body_and_is_retried(backend: Backend) {
    let lab = Lab::new(backend).await;
    let fake = workspace();
    fake.edit(|ws| {
        ws.assets.clear();
        ws.broken.push("lost".into());
    });
    let first = lab.sync(&fake).await;
    // One document failing does not stop the run.
    assert_eq!(first.stats.errors, 1);
    assert_eq!(first.stats.failures[0].id, "lost");
    assert!(lab.exists("notion/Team/Notes.md"));
    assert_eq!(first.stats.assets_pending, 1);
    let plain = lab.read("notion/Plain.md");
    assert!(
        plain.ends_with("![pic](https://files.test/a.png?sig=1)<!-- opendoc:asset-pending -->\n"),
        "{plain}"
    );
    assert_eq!(lab.documents().await["plain"].status, "pending_assets");
    let asset = docs_asset::Entity::find()
        .filter(docs_asset::Column::RemoteKey.eq("files.test/a.png"))
        .one(&lab.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(asset.status, "pending");
    assert_eq!(asset.original_url, "https://files.test/a.png?sig=1");

    // Next run, unchanged remotely: the pending document is fetched again,
    // the asset now downloads, the marker goes.
    fake.edit(|ws| {
        ws.assets
            .insert("https://files.test/a.png?sig=1".into(), PNG.to_vec());
        ws.broken.clear();
    });
    fake.fetches();
    lab.set_time(at(10));
    let second = lab.sync(&fake).await;
    assert_eq!(second.stats.errors, 0);
    let mut fetched = fake.fetches();
    fetched.sort();
    assert_eq!(fetched, ["lost", "plain"]);
    let plain = lab.read("notion/Plain.md");
    assert!(!plain.contains("opendoc:asset-pending"), "{plain}");
    assert!(plain.contains("![pic](../assets/"), "{plain}");
    assert_eq!(lab.documents().await["plain"].status, "active");
    assert!(lab.exists("notion/_orphans/Lost.md"));
}

crate::on_both_backends!(
    full_sync_builds_the_tree_and_a_second_run_writes_nothing,
    moves_renames_and_links_follow,
    a_leaf_gaining_a_child_becomes_a_folder,
    deletes_go_to_the_trash_behind_the_guard_and_are_purged,
    a_failed_asset_keeps_the_body_and_is_retried,
    the_same_bytes_under_two_urls_are_stored_once,
);

/// Two assets (other keys, other URLs, one of them on another page) with
/// the same bytes: one file in the content-addressed pool, counted once
/// as downloaded and once as deduplicated; both documents point at it.
async fn the_same_bytes_under_two_urls_are_stored_once(backend: Backend) {
    let lab = Lab::new(backend).await;
    let fake = workspace();
    fake.page(
        "copy",
        NodeKind::Page,
        None,
        "Copy",
        "Again ![same](https://cdn.test/b/pic.png?sig=2)\n",
    );
    fake.edit(|ws| {
        ws.bodies.get_mut("copy").unwrap().assets.push(AssetRef {
            remote_key: "cdn.test/b/pic.png".into(),
            download_url: "https://cdn.test/b/pic.png?sig=2".into(),
            body_url: Some("https://cdn.test/b/pic.png?sig=2".into()),
            file_name: None,
        });
        ws.assets
            .insert("https://cdn.test/b/pic.png?sig=2".into(), PNG.to_vec());
    });
    let report = lab.sync(&fake).await;
    assert_eq!(report.stats.errors, 0, "{:?}", report.stats.failures);
    assert_eq!(
        (
            report.stats.assets_downloaded,
            report.stats.assets_deduplicated
        ),
        (1, 1)
    );
    let sha = trellis::digest::sha256_hex_bytes(PNG);
    let pool = format!("assets/{}/{sha}.png", &sha[..2]);
    assert!(lab.exists(&pool));
    let pooled: Vec<_> = std::fs::read_dir(lab.root().join("assets").join(&sha[..2]))
        .unwrap()
        .collect();
    assert_eq!(pooled.len(), 1, "one file for both");
    assert!(
        lab.read("notion/Plain.md")
            .contains(&format!("![pic](../{pool})"))
    );
    assert!(
        lab.read("notion/Copy.md")
            .contains(&format!("![same](../{pool})"))
    );
    let rows = docs_asset::Entity::find().all(&lab.db).await.unwrap();
    assert_eq!(rows.len(), 2, "each remote asset is remembered");
    assert!(
        rows.iter()
            .all(|row| row.sha256.as_deref() == Some(sha.as_str()))
    );
}
