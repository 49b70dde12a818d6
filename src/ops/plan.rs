//! The operations' decisions, as functions over data (no I/O, the clock
//! passed in): which migrations are pending or unknown, what a pre-migration
//! backup is called and which old ones go.

use chrono::{DateTime, Utc};

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
}
