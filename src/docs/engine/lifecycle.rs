//! What a full run deletes and what the trash keeps, as pure decisions
//! (the I/O is `fsio`'s).
//!
//! Delete detection only runs on full runs: on an incremental one, "not
//! listed" does not mean "deleted". A document active in the manifest but
//! not listed goes to `.internal/trash/<YYYY-MM-DD>/<original path>`, its
//! manifest row kept as `trashed`. The permission-flap guard: when the
//! listing holds fewer than 80 % of the active documents, nothing is
//! deleted (a token that lost access to a space would otherwise trash half
//! the mirror), the run warns loudly and flags it in its stats. Trash days
//! older than `trash_keep_days` are purged.

use std::collections::HashSet;

use chrono::{Duration, NaiveDate};

/// Where trashed files go, under the mirror root.
pub const TRASH_DIR: &str = ".internal/trash";

/// `TRELLIS_DOCS_TRASH_KEEP_DAYS` when unset.
pub const DEFAULT_TRASH_KEEP_DAYS: u32 = 30;

/// The share of the active documents a listing must reach for deletes to
/// go ahead, in percent.
pub const DELETE_GUARD_PERCENT: usize = 80;

/// What delete detection decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeletePlan {
    /// The ids to trash (empty when the guard tripped).
    pub trash: Vec<String>,
    /// Whether the permission-flap guard stopped every delete.
    pub guard_tripped: bool,
}

/// Decides the deletes of a full run: `active` the manifest's active ids
/// (in a stable order), `listed` this run's listing.
pub fn plan_deletes(active: &[String], listed: &HashSet<&str>) -> DeletePlan {
    let missing: Vec<String> = active
        .iter()
        .filter(|id| !listed.contains(id.as_str()))
        .cloned()
        .collect();
    // listed < 80 % of active, in integers: listed * 100 < active * 80.
    let guard_tripped =
        !missing.is_empty() && listed.len() * 100 < active.len() * DELETE_GUARD_PERCENT;
    DeletePlan {
        trash: if guard_tripped { Vec::new() } else { missing },
        guard_tripped,
    }
}

/// The day folder of the trash a file trashed on `day` goes into.
pub fn trash_day_dir(day: NaiveDate) -> String {
    format!("{TRASH_DIR}/{}", day.format("%Y-%m-%d"))
}

/// The trash path of a file at `original` (from the mirror root).
pub fn trash_path(day: NaiveDate, original: &str) -> String {
    format!("{}/{original}", trash_day_dir(day))
}

/// Which of the trash's day folders (`YYYY-MM-DD`) to purge on `today`:
/// those more than `keep_days` days old. Names that are not a date are
/// left alone: not ours.
pub fn days_to_purge<'a>(
    names: impl IntoIterator<Item = &'a str>,
    today: NaiveDate,
    keep_days: u32,
) -> Vec<&'a str> {
    let oldest_kept = today - Duration::days(i64::from(keep_days));
    let mut purge: Vec<&str> = names
        .into_iter()
        .filter(|name| {
            NaiveDate::parse_from_str(name, "%Y-%m-%d").is_ok_and(|day| day < oldest_kept)
        })
        .collect();
    purge.sort_unstable();
    purge
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    #[test]
    fn missing_documents_are_trashed_above_the_guard() {
        let active = ids(&["a", "b", "c", "d", "e"]);
        let listed: HashSet<&str> = ["a", "b", "c", "d", "new"].into();
        let plan = plan_deletes(&active, &listed);
        assert_eq!(plan.trash, ids(&["e"]));
        assert!(!plan.guard_tripped);
    }

    #[test]
    fn the_guard_stops_every_delete_below_80_percent() {
        let active = ids(&["a", "b", "c", "d", "e"]);
        // 4 of 5 is exactly 80 %: deletes go ahead.
        let four: HashSet<&str> = ["a", "b", "c", "d"].into();
        assert_eq!(plan_deletes(&active, &four).trash, ids(&["e"]));
        // 3 of 5 is 60 %: nothing is deleted.
        let three: HashSet<&str> = ["a", "b", "c"].into();
        let plan = plan_deletes(&active, &three);
        assert!(plan.guard_tripped);
        assert!(plan.trash.is_empty());
        // An empty listing over an empty mirror trips nothing.
        let none: HashSet<&str> = HashSet::new();
        assert!(!plan_deletes(&[], &none).guard_tripped);
    }

    #[test]
    fn trash_days_older_than_the_retention_are_purged() {
        let today = NaiveDate::from_ymd_opt(2026, 12, 31).expect("a date");
        let names = [
            "2026-11-30",
            "2026-12-01",
            "2026-11-01",
            "notes",
            "2026-12-30",
        ];
        assert_eq!(
            days_to_purge(names, today, 30),
            ["2026-11-01", "2026-11-30"]
        );
        assert_eq!(
            trash_path(today, "notion/A/x.md"),
            ".internal/trash/2026-12-31/notion/A/x.md"
        );
    }
}
