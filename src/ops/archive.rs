//! `trellis backup` and `trellis restore`: the SQLite database (a
//! `VACUUM INTO` copy, consistent while the server writes) and the data
//! directory's secrets and state files (`instance.key`, top-level `*.json`)
//! in one tar file, `trellis-backup.json` first with each file's size and
//! SHA-256.
//!
//! Both write atomically: each file is written to a temporary file beside
//! its destination, synced, then renamed over it. A restore reads and
//! checks the whole archive (manifest, checksums, `PRAGMA integrity_check`)
//! before it renames anything, and puts the database in place last.

use std::{
    fs::File,
    io::{BufWriter, Read, Write},
    path::{Path, PathBuf},
};

use anyhow::Context;
use chrono::Utc;
use sha2::{Digest, Sha256};
use tempfile::NamedTempFile;

use super::{
    Refusal,
    plan::{DATABASE_ENTRY, MANIFEST_ENTRY, Manifest, ManifestFile, is_state_file},
    sqlite,
};
use crate::config::{Backend, Config};

/// The manifest is small; a larger first entry is not ours.
const MANIFEST_MAX_BYTES: u64 = 1 << 20;

/// What a backup or a restore wrote.
#[derive(Debug)]
pub struct Summary {
    pub files: Vec<ManifestFile>,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self
            .files
            .iter()
            .map(|file| format!("{} ({} bytes)", file.name, file.size))
            .collect();
        write!(f, "{}", names.join(", "))
    }
}

/// The SQLite database file, or the refusal for PostgreSQL.
fn sqlite_file(config: &Config, command: &'static str) -> anyhow::Result<PathBuf> {
    if config.backend()? == Backend::Postgres {
        return Err(Refusal::NotSqlite(command).into());
    }
    config
        .sqlite_path()
        .context("the database is in memory: there is nothing to back up or restore")
}

/// `trellis backup <file>`.
pub async fn backup(config: &Config, out: &Path) -> anyhow::Result<Summary> {
    let db_path = sqlite_file(config, "backup")?;
    anyhow::ensure!(
        db_path.exists(),
        "there is no database at {} to back up",
        db_path.display()
    );
    let out_dir = parent_dir(out);
    // The copy is staged beside the archive, not in the data directory:
    // a full disk there must not stop the server.
    let snapshot = tempfile::Builder::new()
        .prefix(".trellis-backup-")
        .suffix(".db")
        .tempfile_in(&out_dir)
        .with_context(|| format!("creating a temporary file in {}", out_dir.display()))?;
    let conn = sqlite::open_existing(&db_path).await?;
    let copied = sqlite::vacuum_into(&conn, snapshot.path()).await;
    conn.close().await?;
    copied?;

    // State files are small (a key, JSON): read once, so what is hashed is
    // what is written even if one changes meanwhile.
    let states = state_files(&config.data_dir)?;
    let (size, sha256) = digest(&mut open(snapshot.path())?, std::io::sink())?;
    let mut files = vec![ManifestFile {
        name: DATABASE_ENTRY.to_owned(),
        size,
        sha256,
    }];
    for (name, bytes) in &states {
        let (size, sha256) = digest(&mut &bytes[..], std::io::sink())?;
        files.push(ManifestFile {
            name: name.clone(),
            size,
            sha256,
        });
    }
    let manifest = Manifest::new(Utc::now(), files);

    let staged = tempfile::Builder::new()
        .prefix(".trellis-backup-")
        .tempfile_in(&out_dir)
        .with_context(|| format!("creating a temporary file in {}", out_dir.display()))?;
    {
        let mut tar = tar::Builder::new(BufWriter::new(staged.as_file()));
        let manifest_json = serde_json::to_vec_pretty(&manifest)?;
        append(
            &mut tar,
            MANIFEST_ENTRY,
            &manifest_json[..],
            manifest_json.len() as u64,
        )?;
        // The snapshot is ours alone: it holds the size just hashed.
        append(&mut tar, DATABASE_ENTRY, open(snapshot.path())?, size)?;
        for (name, bytes) in &states {
            append(&mut tar, name, &bytes[..], bytes.len() as u64)?;
        }
        tar.into_inner()?.flush()?;
    }
    persist(staged, out)?;
    Ok(Summary {
        files: manifest.files,
    })
}

/// `trellis restore <file> [--force]`.
pub async fn restore(config: &Config, archive: &Path, force: bool) -> anyhow::Result<Summary> {
    let db_path = sqlite_file(config, "restore")?;
    // A server on the directory would go on writing to the replaced file.
    let _alone = match crate::datadir::hold(&config.data_dir, crate::datadir::Hold::Exclusive)? {
        crate::datadir::Lock::Busy => return Err(Refusal::InUse(config.data_dir.clone()).into()),
        lock => lock,
    };
    if !force {
        let existing: Vec<PathBuf> = [
            db_path.clone(),
            crate::db::sqlite_side_file(&db_path, "-wal"),
        ]
        .into_iter()
        .filter(|path| path.exists())
        .collect();
        if !existing.is_empty() {
            return Err(Refusal::TargetExists(existing).into());
        }
    }
    let mut input =
        File::open(archive).with_context(|| format!("opening the backup {}", archive.display()))?;
    let data_dir = &config.data_dir;
    let created_data_dir = !data_dir.exists();
    crate::datadir::create_dir(data_dir)?;
    let db_dir = parent_dir(&db_path);
    crate::datadir::create_dir(&db_dir)?;

    let staged = stage(&mut input, archive, data_dir, &db_path).await;
    let (manifest, staged) = match staged {
        Ok(staged) => staged,
        Err(error) => {
            if created_data_dir {
                // Nothing was written: leave no empty data directory either.
                let _ = std::fs::remove_dir(data_dir);
            }
            return Err(error);
        }
    };
    if !force {
        let existing: Vec<PathBuf> = staged
            .iter()
            .map(|(_, dest)| dest.clone())
            .filter(|dest| dest.exists())
            .collect();
        if !existing.is_empty() {
            return Err(Refusal::TargetExists(existing).into());
        }
    }
    // The old database's WAL would be replayed into the new file: remove
    // it (and the shared memory) before the database is replaced.
    for suffix in ["-wal", "-shm"] {
        let side = crate::db::sqlite_side_file(&db_path, suffix);
        match std::fs::remove_file(&side) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                return Err(error).with_context(|| format!("removing {}", side.display()));
            }
        }
    }
    // `stage` put the database last: the state files go first, so the
    // database appears only once everything else is in place.
    for (file, dest) in staged {
        persist(file, &dest)?;
    }
    Ok(Summary {
        files: manifest.files,
    })
}

/// Reads the whole archive into temporary files beside their destinations
/// and checks it; the database comes last in the list. On any error the
/// temporary files are gone and nothing else was written.
async fn stage(
    input: &mut File,
    archive: &Path,
    data_dir: &Path,
    db_path: &Path,
) -> anyhow::Result<(Manifest, Vec<(NamedTempFile, PathBuf)>)> {
    let bad = |reason: String| -> anyhow::Error {
        Refusal::BadArchive {
            path: archive.to_owned(),
            reason,
        }
        .into()
    };
    let mut tar = tar::Archive::new(input);
    let mut entries = tar
        .entries()
        .map_err(|error| bad(format!("it is not a tar file ({error})")))?;
    let manifest: Manifest = {
        let mut first = match entries.next() {
            Some(Ok(entry)) => entry,
            Some(Err(error)) => return Err(bad(format!("it is not a tar file ({error})"))),
            None => return Err(bad("it is empty".to_owned())),
        };
        let name = entry_name(&first);
        if name.as_deref() != Some(MANIFEST_ENTRY) || first.size() > MANIFEST_MAX_BYTES {
            return Err(bad(format!("its first entry is not {MANIFEST_ENTRY}")));
        }
        let mut json = Vec::new();
        first
            .read_to_end(&mut json)
            .map_err(|error| bad(format!("its manifest cannot be read ({error})")))?;
        serde_json::from_slice(&json)
            .map_err(|error| bad(format!("its manifest is not valid ({error})")))?
    };
    manifest.check().map_err(bad)?;

    let mut found = Vec::new();
    let mut staged = Vec::new();
    let mut database = None;
    for entry in entries {
        let mut entry = entry.map_err(|error| bad(format!("it cannot be read ({error})")))?;
        let Some(name) = entry_name(&entry) else {
            return Err(bad(
                "it holds an entry that is not a plain file name".to_owned()
            ));
        };
        if !manifest.files.iter().any(|file| file.name == name)
            || entry.header().entry_type() != tar::EntryType::Regular
        {
            return Err(bad(format!("{name:?} is not in its manifest")));
        }
        let dest = if name == DATABASE_ENTRY {
            db_path.to_owned()
        } else {
            data_dir.join(&name)
        };
        let dir = parent_dir(&dest);
        let mut file = tempfile::Builder::new()
            .prefix(".trellis-restore-")
            .tempfile_in(&dir)
            .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
        let (size, sha256) = digest(&mut entry, BufWriter::new(file.as_file_mut()))
            .map_err(|error| bad(format!("{name} cannot be read ({error:#})")))?;
        file.as_file()
            .sync_all()
            .with_context(|| format!("syncing {}", file.path().display()))?;
        found.push((name.clone(), size, sha256));
        if name == DATABASE_ENTRY {
            database = Some((file, dest));
        } else {
            staged.push((file, dest));
        }
    }
    manifest.verify(&found).map_err(bad)?;
    let Some(database) = database else {
        return Err(bad("it holds no database".to_owned()));
    };
    sqlite::integrity_check(database.0.path())
        .await
        .map_err(bad)?;
    staged.push(database);
    Ok((manifest, staged))
}

/// An entry's path when it is one plain file name (no folders, no `..`).
fn entry_name<R: Read>(entry: &tar::Entry<'_, R>) -> Option<String> {
    let path = entry.path().ok()?;
    let mut parts = path.components();
    match (parts.next(), parts.next()) {
        (Some(std::path::Component::Normal(name)), None) => name.to_str().map(str::to_owned),
        _ => None,
    }
}

/// The data directory's state files and their contents, by name.
fn state_files(data_dir: &Path) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let mut files = Vec::new();
    for entry in
        std::fs::read_dir(data_dir).with_context(|| format!("listing {}", data_dir.display()))?
    {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        // `file_type` does not follow links: a link is not a state file.
        if is_state_file(&name) && entry.file_type()?.is_file() {
            let path = entry.path();
            files.push((
                name,
                std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?,
            ));
        }
    }
    files.sort();
    Ok(files)
}

fn append<W: Write>(
    tar: &mut tar::Builder<W>,
    name: &str,
    data: impl Read,
    size: u64,
) -> anyhow::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_size(size);
    header.set_mode(0o600);
    header.set_mtime(u64::try_from(Utc::now().timestamp()).unwrap_or(0));
    tar.append_data(&mut header, name, data)
        .with_context(|| format!("writing {name} into the backup"))
}

/// Copies `reader` into `writer`, returning the byte count and SHA-256.
fn digest(reader: &mut impl Read, mut writer: impl Write) -> anyhow::Result<(u64, String)> {
    let mut hasher = Sha256::new();
    let mut buffer = vec![0; 64 * 1024];
    let mut size = 0u64;
    loop {
        let read = reader.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
        writer.write_all(&buffer[..read])?;
        size += read as u64;
    }
    writer.flush()?;
    Ok((size, format!("{:x}", hasher.finalize())))
}

fn open(path: &Path) -> anyhow::Result<File> {
    File::open(path).with_context(|| format!("reading {}", path.display()))
}

/// Syncs a staged file and renames it over `dest`, then syncs the folder
/// so the rename survives a crash.
fn persist(file: NamedTempFile, dest: &Path) -> anyhow::Result<()> {
    file.as_file()
        .sync_all()
        .with_context(|| format!("syncing {}", file.path().display()))?;
    file.persist(dest)
        .with_context(|| format!("writing {}", dest.display()))?;
    #[cfg(unix)]
    File::open(parent_dir(dest))
        .and_then(|dir| dir.sync_all())
        .with_context(|| format!("syncing the folder of {}", dest.display()))?;
    Ok(())
}

/// The folder a path is in (`.` for a bare file name).
fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
        _ => PathBuf::from("."),
    }
}
