//! `trellis backup` under load and `trellis restore`, which refuses
//! damaged archives and existing databases; PostgreSQL points to pg_dump.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::Output,
    sync::{
        Mutex,
        atomic::{AtomicBool, Ordering},
    },
};

use sea_orm::Database;
use serde_json::json;

use super::{
    BAD_ARCHIVE, IN_USE, NOT_SQLITE, TARGET_EXISTS, assert_refused, integrity, migrate, run,
    sqlite_url, stderr, strings,
};
use crate::helpers::{Backend, TestDatabase, spawn_app};

/// The data directory restored into: `<root>/data`, which does not exist yet.
fn restore_target(root: &Path) -> (PathBuf, String) {
    let data = root.join("data");
    let url = sqlite_url(&data.join("trellis.db"));
    (data, url)
}

async fn restore(root: &Path, archive: &Path, force: bool) -> Output {
    let (data, url) = restore_target(root);
    let mut args = vec!["restore", archive.to_str().unwrap()];
    if force {
        args.push("--force");
    }
    run(root, &url, &args, &[("TRELLIS_DATA_DIR", &data)]).await
}

/// The issue's "done when": a backup taken while rows are being written,
/// restored into a fresh data directory, holds every row committed before
/// the backup started, passes SQLite's integrity check, and brings the
/// state files back.
#[tokio::test]
async fn a_backup_taken_under_writes_restores_every_row_committed_before_it() {
    let app = spawn_app(Backend::Sqlite).await;
    let admin = app.admin().await;
    std::fs::write(app.data_dir().join("state.json"), br#"{"cursor":42}"#).unwrap();
    std::fs::create_dir_all(app.data_dir().join("mirror/notion")).unwrap();
    std::fs::write(
        app.data_dir().join("mirror/notion/page.md"),
        "# not backed up",
    )
    .unwrap();

    let committed = Mutex::new(Vec::new());
    let stop = AtomicBool::new(false);
    let (progress, mut watched) = tokio::sync::watch::channel(0usize);
    let out = tempfile::tempdir().unwrap();
    let archive = out.path().join("trellis-backup.tar");

    let writer = async {
        // Bounded: the backup ends long before, and stops it.
        for n in 0..20_000 {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            let name = format!("group-{n}");
            let response = app
                .gql(
                    "mutation($n: String!) { createGroup(name: $n) { id } }",
                    json!({ "n": name }),
                )
                .bearer(&admin.access)
                .send()
                .await;
            response.data();
            // The answer came after the commit: this row is committed.
            committed.lock().unwrap().push(name);
            progress.send_replace(n + 1);
        }
    };
    let backup = async {
        watched.wait_for(|written| *written >= 25).await.unwrap();
        let before: Vec<String> = committed.lock().unwrap().clone();
        let output = run(
            out.path(),
            &sqlite_url(&app.data_dir().join("trellis.db")),
            &["backup", archive.to_str().unwrap()],
            &[("TRELLIS_DATA_DIR", app.data_dir())],
        )
        .await;
        let during = committed.lock().unwrap().len() - before.len();
        stop.store(true, Ordering::SeqCst);
        (before, output, during)
    };
    let ((), (before, output, during)) = tokio::join!(writer, backup);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("state.json"));
    eprintln!(
        "{} rows committed before the backup, {during} while it ran",
        before.len()
    );

    let root = tempfile::tempdir().unwrap();
    let restored = restore(root.path(), &archive, false).await;
    assert!(restored.status.success(), "{}", stderr(&restored));
    let (data, url) = restore_target(root.path());
    assert_eq!(integrity(&data.join("trellis.db")).await, ["ok"]);
    let conn = Database::connect(url.as_str()).await.unwrap();
    let names: BTreeSet<String> = strings(&conn, "SELECT name FROM feed_groups")
        .await
        .into_iter()
        .collect();
    conn.close().await.unwrap();
    let missing: Vec<&String> = before
        .iter()
        .filter(|name| !names.contains(*name))
        .collect();
    assert!(missing.is_empty(), "rows lost: {missing:?}");
    assert_eq!(
        std::fs::read(data.join("state.json")).unwrap(),
        br#"{"cursor":42}"#
    );
    assert!(!data.join("mirror").exists(), "the mirror is not backed up");

    // The restored database is current: nothing to migrate, and a server
    // starts on it.
    let dry = run(
        root.path(),
        &url,
        &["migrate", "--dry-run"],
        &[("TRELLIS_DATA_DIR", &data)],
    )
    .await;
    assert!(dry.status.success(), "{}", stderr(&dry));
    assert_eq!(String::from_utf8_lossy(&dry.stdout), "");

    // A second restore over it is refused without --force, allowed with it.
    let again = restore(root.path(), &archive, false).await;
    assert_refused(&again, TARGET_EXISTS, &["--force"]);
    let forced = restore(root.path(), &archive, true).await;
    assert!(forced.status.success(), "{}", stderr(&forced));
    assert_eq!(integrity(&data.join("trellis.db")).await, ["ok"]);
}

/// Replacing the database under a running server would lose what it
/// writes next (to the replaced file): `restore` refuses, even with
/// `--force`, until the server is stopped.
#[tokio::test]
async fn a_restore_under_a_running_server_is_refused() {
    let mut app = spawn_app(Backend::Sqlite).await;
    let out = tempfile::tempdir().unwrap();
    let archive = out.path().join("trellis-backup.tar");
    let db_file = app.data_dir().join("trellis.db");
    let url = sqlite_url(&db_file);
    let data_dir = app.data_dir().to_owned();
    let env = [("TRELLIS_DATA_DIR", data_dir.as_path())];
    let archive_arg = archive.to_str().unwrap();
    let backup = run(out.path(), &url, &["backup", archive_arg], &env).await;
    assert!(backup.status.success(), "{}", stderr(&backup));

    let inode = || std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&db_file).unwrap());
    let before = inode();
    let refused = run(out.path(), &url, &["restore", archive_arg, "--force"], &env).await;
    assert_refused(&refused, IN_USE, &["server is running", "stop it"]);
    assert_eq!(inode(), before, "the database was not replaced");
    // The server goes on as before.
    let admin = app.admin().await;
    assert!(!admin.access.is_empty());

    app.kill().await;
    let restored = run(out.path(), &url, &["restore", archive_arg, "--force"], &env).await;
    assert!(restored.status.success(), "{}", stderr(&restored));
    assert_ne!(inode(), before, "replaced once the server stopped");
    assert_eq!(integrity(&db_file).await, ["ok"]);
}

/// A backup of a freshly migrated database with a state file, for the
/// refusal tests.
async fn small_backup(dir: &Path) -> PathBuf {
    let url = sqlite_url(&dir.join("trellis.db"));
    migrate(dir, &url).await;
    std::fs::write(dir.join("instance.key"), "k".repeat(44)).unwrap();
    let archive = dir.join("backup.tar");
    let output = run(dir, &url, &["backup", archive.to_str().unwrap()], &[]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    archive
}

/// Where the database's bytes start in the archive, and how many there are.
fn database_entry(archive: &[u8]) -> (usize, usize) {
    let mut tar = tar::Archive::new(archive);
    for entry in tar.entries().unwrap() {
        let entry = entry.unwrap();
        if entry.path().unwrap().to_str() == Some("trellis.db") {
            return (
                usize::try_from(entry.raw_file_position()).unwrap(),
                usize::try_from(entry.size()).unwrap(),
            );
        }
    }
    panic!("no database in the archive");
}

#[tokio::test]
async fn a_damaged_archive_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let archive = small_backup(dir.path()).await;
    let bytes = std::fs::read(&archive).unwrap();
    let (start, size) = database_entry(&bytes);

    let mut flipped = bytes.clone();
    flipped[start + size / 2] ^= 0x01;
    let mut manifest_edited = bytes.clone();
    let at = bytes.windows(6).position(|w| w == b"sha256").unwrap();
    let hex = at + b"sha256\": \"".len();
    manifest_edited[hex] = if bytes[hex] == b'0' { b'1' } else { b'0' };
    let damaged = [
        ("truncated", bytes[..bytes.len() / 2].to_vec()),
        ("cut after the manifest", bytes[..start - 512].to_vec()),
        ("one bit flipped in the database", flipped),
        ("its manifest edited", manifest_edited),
        ("not a backup at all", b"hello".repeat(300)),
        ("empty", Vec::new()),
    ];
    for (what, contents) in damaged {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("damaged.tar");
        std::fs::write(&path, contents).unwrap();
        let output = restore(root.path(), &path, false).await;
        eprintln!("{what}");
        assert_refused(&output, BAD_ARCHIVE, &["nothing was restored"]);
        let (data, _) = restore_target(root.path());
        assert!(!data.exists(), "{what}: the data directory was written");
        let left: Vec<_> = std::fs::read_dir(root.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(left, ["damaged.tar"], "{what}");
    }

    // Over an existing data directory (with --force) the refusal leaves
    // every file as it was.
    let root = tempfile::tempdir().unwrap();
    assert!(restore(root.path(), &archive, false).await.status.success());
    let (data, _) = restore_target(root.path());
    let listing = |dir: &Path| -> Vec<(String, Vec<u8>)> {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| {
                let entry = entry.unwrap();
                (
                    entry.file_name().into_string().unwrap(),
                    std::fs::read(entry.path()).unwrap(),
                )
            })
            .collect();
        files.sort();
        files
    };
    let before = listing(&data);
    let path = root.path().join("damaged.tar");
    std::fs::write(&path, &bytes[..bytes.len() - 2000]).unwrap();
    let output = restore(root.path(), &path, true).await;
    assert_refused(&output, BAD_ARCHIVE, &["nothing was restored"]);
    assert_eq!(listing(&data), before);
}

#[tokio::test]
async fn backup_and_restore_on_postgresql_point_to_pg_dump() {
    let dir = tempfile::tempdir().unwrap();
    let db = TestDatabase::create(Backend::Postgres, dir.path()).await;
    migrate(dir.path(), &db.url).await;
    let archive = dir.path().join("backup.tar");
    for args in [
        &["backup", archive.to_str().unwrap()][..],
        &["restore", archive.to_str().unwrap()],
    ] {
        let output = run(dir.path(), &db.url, args, &[]).await;
        assert_refused(&output, NOT_SQLITE, &["pg_dump", "docs/operations.md"]);
    }
    assert!(!archive.exists());
}
