//! The operations' decisions, as functions over data (no I/O, the clock
//! passed in): which migrations are pending or unknown, what a pre-migration
//! backup is called and which old ones go, which files of the data directory
//! a backup holds, and whether an archive's contents match its manifest.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The database's migrations against the binary's.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MigrationPlan {
    /// Applied in the database.
    pub applied: Vec<String>,
    /// Known to this binary, not applied yet, in the order they will run.
    pub pending: Vec<String>,
    /// Applied in the database, unknown to this binary: a newer version
    /// migrated it.
    pub unknown: Vec<String>,
}

impl MigrationPlan {
    /// `known` in the binary's order; `applied` as the database lists them.
    pub fn new(known: &[String], applied: &[String]) -> Self {
        MigrationPlan {
            applied: applied.to_vec(),
            pending: known
                .iter()
                .filter(|name| !applied.contains(name))
                .cloned()
                .collect(),
            unknown: applied
                .iter()
                .filter(|name| !known.contains(name))
                .cloned()
                .collect(),
        }
    }

    /// Whether migrating changes a database that already holds data: the
    /// moment for a copy (an empty database has nothing to lose).
    pub fn changes_existing_database(&self) -> bool {
        !self.applied.is_empty() && !self.pending.is_empty()
    }
}

/// Pre-migration backups kept in `<data dir>/backups`; older ones are
/// deleted after each new one.
pub const KEEP_PRE_MIGRATE_BACKUPS: usize = 5;

const PRE_MIGRATE_PREFIX: &str = "pre-migrate-";
const PRE_MIGRATE_SUFFIX: &str = ".db";

/// `pre-migrate-20261203T221500.123Z.db`: UTC, so names sort by time.
pub fn pre_migrate_backup_name(now: DateTime<Utc>) -> String {
    format!(
        "{PRE_MIGRATE_PREFIX}{}{PRE_MIGRATE_SUFFIX}",
        now.format("%Y%m%dT%H%M%S%.3fZ")
    )
}

/// Of the file names in the backups folder, the pre-migration backups to
/// delete so that the newest `keep` remain. Other files are never named.
pub fn backups_to_prune(names: &[String], keep: usize) -> Vec<String> {
    let mut ours: Vec<&String> = names
        .iter()
        .filter(|name| {
            name.strip_prefix(PRE_MIGRATE_PREFIX)
                .and_then(|rest| rest.strip_suffix(PRE_MIGRATE_SUFFIX))
                .is_some_and(|stamp| {
                    stamp.len() == "20261203T221500.123Z".len()
                        && stamp
                            .chars()
                            .all(|c| c.is_ascii_digit() || matches!(c, 'T' | 'Z' | '.'))
                })
        })
        .collect();
    ours.sort();
    let excess = ours.len().saturating_sub(keep);
    ours.into_iter().take(excess).cloned().collect()
}

/// The archive's first entry: what it holds and how to check it.
pub const MANIFEST_ENTRY: &str = "trellis-backup.json";
/// The database's entry in an archive.
pub const DATABASE_ENTRY: &str = "trellis.db";
/// The instance key file (`auth::keys::KEY_FILE`), a secret a backup keeps.
const INSTANCE_KEY: &str = "instance.key";
const FORMAT: &str = "trellis-backup";
const VERSION: u32 = 1;

/// Whether a file at the top of the data directory goes into a backup: the
/// instance key and the `*.json` state files. Folders (the docs `mirror/`,
/// `backups/`), the database and its `-wal`/`-shm` (the database is copied
/// through SQLite), and hidden files (our temporary files) do not.
pub fn is_state_file(name: &str) -> bool {
    !name.starts_with('.')
        && !name.contains(['/', '\\'])
        && name != MANIFEST_ENTRY
        && (name == INSTANCE_KEY || name.ends_with(".json"))
}

/// One file of an archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestFile {
    pub name: String,
    pub size: u64,
    /// Lower-case hex SHA-256 of the contents.
    pub sha256: String,
}

/// `trellis-backup.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    pub version: u32,
    pub created_at: DateTime<Utc>,
    /// The `trellis` version that wrote it.
    pub trellis_version: String,
    /// The database first, then the state files by name.
    pub files: Vec<ManifestFile>,
}

impl Manifest {
    pub fn new(created_at: DateTime<Utc>, files: Vec<ManifestFile>) -> Self {
        Manifest {
            format: FORMAT.to_owned(),
            version: VERSION,
            created_at,
            trellis_version: env!("CARGO_PKG_VERSION").to_owned(),
            files,
        }
    }

    /// Checks what the manifest itself promises: our format, one database,
    /// only names a backup may hold, each once.
    pub fn check(&self) -> Result<(), String> {
        if self.format != FORMAT || self.version != VERSION {
            return Err(format!(
                "unknown format {} version {} (expected {FORMAT} {VERSION})",
                self.format, self.version
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for file in &self.files {
            if file.name != DATABASE_ENTRY && !is_state_file(&file.name) {
                return Err(format!(
                    "it names a file a backup never holds: {:?}",
                    file.name
                ));
            }
            if !seen.insert(&file.name) {
                return Err(format!("it names {:?} twice", file.name));
            }
            if file.sha256.len() != 64 || !file.sha256.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(format!("{}: not a SHA-256", file.name));
            }
        }
        if !seen.contains(&DATABASE_ENTRY.to_owned()) {
            return Err("it holds no database".to_owned());
        }
        Ok(())
    }

    /// Compares what the archive held after the manifest (name → size and
    /// SHA-256, in the order read) with what the manifest lists.
    pub fn verify(&self, found: &[(String, u64, String)]) -> Result<(), String> {
        let expected: BTreeMap<&str, &ManifestFile> = self
            .files
            .iter()
            .map(|file| (file.name.as_str(), file))
            .collect();
        let mut seen = std::collections::BTreeSet::new();
        for (name, size, sha256) in found {
            let Some(file) = expected.get(name.as_str()) else {
                return Err(format!("{name:?} is not in its manifest"));
            };
            if !seen.insert(name.as_str()) {
                return Err(format!("{name:?} appears twice"));
            }
            if *size != file.size {
                return Err(format!(
                    "{name} has {size} bytes, its manifest says {}",
                    file.size
                ));
            }
            if !sha256.eq_ignore_ascii_case(&file.sha256) {
                return Err(format!("{name} does not match its checksum"));
            }
        }
        match expected.keys().find(|name| !seen.contains(*name)) {
            Some(missing) => Err(format!("{missing} is missing (truncated?)")),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|name| (*name).to_owned()).collect()
    }

    #[test]
    fn pending_keeps_the_binarys_order_and_unknown_lists_what_a_newer_version_applied() {
        let known = names(&["m1", "m2", "m3"]);
        let plan = MigrationPlan::new(&known, &names(&["m1"]));
        assert_eq!(plan.pending, names(&["m2", "m3"]));
        assert!(plan.unknown.is_empty());
        assert!(plan.changes_existing_database());

        let newer = MigrationPlan::new(&known, &names(&["m1", "m2", "m3", "m4"]));
        assert!(newer.pending.is_empty());
        assert_eq!(newer.unknown, names(&["m4"]));
        assert!(!newer.changes_existing_database());

        let fresh = MigrationPlan::new(&known, &[]);
        assert_eq!(fresh.pending, known);
        assert!(!fresh.changes_existing_database(), "nothing to lose");

        let current = MigrationPlan::new(&known, &known);
        assert!(current.pending.is_empty() && current.unknown.is_empty());
        assert!(!current.changes_existing_database());
    }

    #[test]
    fn pre_migrate_names_sort_by_time_and_pruning_keeps_the_newest() {
        let at = |h, ms| {
            Utc.with_ymd_and_hms(2026, 12, 3, h, 0, 0).unwrap() + chrono::Duration::milliseconds(ms)
        };
        let name = pre_migrate_backup_name(at(9, 5));
        assert_eq!(name, "pre-migrate-20261203T090000.005Z.db");
        let mut all: Vec<String> = (0..8).map(|h| pre_migrate_backup_name(at(h, 0))).collect();
        all.push("notes.txt".into());
        all.push("pre-migrate-by-hand.db".into());
        all.reverse();
        let pruned = backups_to_prune(&all, 5);
        let oldest: Vec<String> = (0..3).map(|h| pre_migrate_backup_name(at(h, 0))).collect();
        assert_eq!(pruned, oldest);
        assert!(backups_to_prune(&all[..4], 5).is_empty());
        assert_eq!(backups_to_prune(&all, 0).len(), 8, "never other files");
    }

    #[test]
    fn state_files_are_the_key_and_top_level_json_only() {
        for name in ["instance.key", "docs-state.json", "x.json"] {
            assert!(is_state_file(name), "{name}");
        }
        for name in [
            "trellis.db",
            "trellis.db-wal",
            "mirror",
            ".trellis-restore-abc.json",
            "a/b.json",
            MANIFEST_ENTRY,
            "notes.txt",
        ] {
            assert!(!is_state_file(name), "{name}");
        }
    }

    fn manifest() -> Manifest {
        let at = Utc.with_ymd_and_hms(2026, 12, 3, 22, 0, 0).unwrap();
        Manifest::new(
            at,
            vec![
                ManifestFile {
                    name: DATABASE_ENTRY.into(),
                    size: 4096,
                    sha256: "a".repeat(64),
                },
                ManifestFile {
                    name: "instance.key".into(),
                    size: 44,
                    sha256: "b".repeat(64),
                },
            ],
        )
    }

    #[test]
    fn a_manifest_names_one_database_and_only_backup_files() {
        assert_eq!(manifest().check(), Ok(()));
        let mut escaping = manifest();
        escaping.files[1].name = "../etc/passwd".into();
        assert!(escaping.check().is_err());
        let mut twice = manifest();
        twice.files[1].name = DATABASE_ENTRY.into();
        assert!(twice.check().is_err());
        let mut no_db = manifest();
        no_db.files.remove(0);
        assert!(no_db.check().unwrap_err().contains("no database"));
        let mut other = manifest();
        other.version = 2;
        assert!(other.check().is_err());
        let json = serde_json::to_string(&manifest()).unwrap();
        assert_eq!(serde_json::from_str::<Manifest>(&json).unwrap(), manifest());
    }

    #[test]
    fn contents_must_match_the_manifest_exactly() {
        let m = manifest();
        let db = (DATABASE_ENTRY.to_owned(), 4096, "a".repeat(64));
        let key = ("instance.key".to_owned(), 44, "B".repeat(64));
        assert_eq!(m.verify(&[db.clone(), key.clone()]), Ok(()));
        assert!(
            m.verify(std::slice::from_ref(&db))
                .unwrap_err()
                .contains("missing")
        );
        let short = (DATABASE_ENTRY.to_owned(), 4000, "a".repeat(64));
        assert!(m.verify(&[short, key.clone()]).is_err());
        let changed = (DATABASE_ENTRY.to_owned(), 4096, "c".repeat(64));
        assert!(
            m.verify(&[changed, key.clone()])
                .unwrap_err()
                .contains("checksum")
        );
        let extra = ("x.json".to_owned(), 1, "d".repeat(64));
        assert!(m.verify(&[db.clone(), key.clone(), extra]).is_err());
        assert!(m.verify(&[db.clone(), key.clone(), db]).is_err());
    }
}
