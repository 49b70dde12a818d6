//! Whether a platform's run is full (a reconciliation: the whole listing,
//! delete and move detection) or incremental (only what changed since the
//! checkpoint), as a pure function of the platform's recent runs, the
//! clock and the local time zone.
//!
//! A run is full when any of these hold, checked in this order (the first
//! that holds is the [`ModeReason`] recorded in the run's row):
//!
//! 1. the adapter cannot enumerate incrementally (Feishu: its listing is a
//!    full inventory every time, so every run reconciles);
//! 2. a full run was asked for (`--full`, `syncDocs(full: true)`);
//! 3. there is no usable checkpoint (no previous run, or its checkpoint is
//!    missing or later than now);
//! 4. it is the first run of the local day (the previous one started on an
//!    earlier local calendar day): a daily reconciliation at least;
//! 5. the cadence is due: this would be the `reconcile_every_runs`-th run
//!    since the last full one (1: every run is full; 0: only the daily one).
//!
//! Otherwise the run is incremental.

use chrono::{DateTime, TimeZone, Utc};
use serde::{Deserialize, Serialize};

/// `TRELLIS_DOCS_RECONCILE_EVERY_RUNS` when unset (the seed's
/// `notion_reconcile_every_runs`).
pub const DEFAULT_RECONCILE_EVERY_RUNS: u32 = 10;

/// How a run enumerates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncMode {
    /// The whole listing, with delete and move detection.
    Full,
    /// Only what changed since the checkpoint; nothing is deleted or moved.
    Incremental,
}

impl SyncMode {
    /// The stable name stored in a run's stats.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Full => "full",
            Self::Incremental => "incremental",
        }
    }
}

/// Why a run got its mode, recorded with the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModeReason {
    /// The platform cannot enumerate incrementally: always full.
    AlwaysFull,
    /// A full run was asked for.
    Requested,
    /// No previous run, or no checkpoint it left is usable.
    NoCheckpoint,
    /// The first run of the local day.
    FirstRunOfDay,
    /// `reconcile_every_runs` runs since the last full one.
    ReconcileDue,
    /// Nothing asked for a full run.
    Incremental,
}

impl ModeReason {
    /// The stable name stored in a run's stats.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AlwaysFull => "always_full",
            Self::Requested => "requested",
            Self::NoCheckpoint => "no_checkpoint",
            Self::FirstRunOfDay => "first_run_of_day",
            Self::ReconcileDue => "reconcile_due",
            Self::Incremental => "incremental",
        }
    }
}

/// What a previous run of the same platform left that the decision reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PastRun {
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// How it enumerated (a run whose stats carry no mode counts as full:
    /// that never lengthens the incremental streak).
    pub mode: SyncMode,
}

/// Everything the decision reads.
#[derive(Debug, Clone, Copy)]
pub struct ModeInputs<'a> {
    /// Whether the adapter has the incremental enumeration capability.
    pub incremental_capable: bool,
    /// Whether a full run was asked for.
    pub full_requested: bool,
    /// The checkpoint the last run left (its high-water mark of remote edit
    /// times), if any.
    pub checkpoint: Option<DateTime<Utc>>,
    /// The platform's previous runs, newest first. Only the streak of
    /// incremental runs since the last full one is read, so a caller may pass
    /// a bounded window (the daily full run keeps the streak short).
    pub recent_runs: &'a [PastRun],
    /// `reconcile_every_runs`: 0 turns the cadence off.
    pub reconcile_every_runs: u32,
}

/// The mode of a run and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModeDecision {
    /// How the run enumerates.
    pub mode: SyncMode,
    /// Why.
    pub reason: ModeReason,
}

impl ModeDecision {
    fn full(reason: ModeReason) -> Self {
        Self {
            mode: SyncMode::Full,
            reason,
        }
    }
}

/// Decides the mode of a run starting at `now`, "day" meaning a calendar
/// day in `zone` (the server's local zone in production, `chrono::Local`).
pub fn decide<Tz: TimeZone>(
    inputs: &ModeInputs<'_>,
    now: DateTime<Utc>,
    zone: &Tz,
) -> ModeDecision {
    if !inputs.incremental_capable {
        return ModeDecision::full(ModeReason::AlwaysFull);
    }
    if inputs.full_requested {
        return ModeDecision::full(ModeReason::Requested);
    }
    let Some(last) = inputs.recent_runs.first() else {
        return ModeDecision::full(ModeReason::NoCheckpoint);
    };
    // A checkpoint from the future (clock skew) would stop the incremental
    // listing before anything: not usable.
    let usable = matches!(inputs.checkpoint, Some(checkpoint) if checkpoint <= now);
    if !usable {
        return ModeDecision::full(ModeReason::NoCheckpoint);
    }
    let day = |at: DateTime<Utc>| at.with_timezone(zone).date_naive();
    if day(last.started_at) != day(now) {
        return ModeDecision::full(ModeReason::FirstRunOfDay);
    }
    if inputs.reconcile_every_runs > 0 {
        let streak = inputs
            .recent_runs
            .iter()
            .take_while(|run| run.mode == SyncMode::Incremental)
            .count();
        // This run would be the (streak + 1)-th since the last full one.
        if streak + 1 >= inputs.reconcile_every_runs as usize {
            return ModeDecision::full(ModeReason::ReconcileDue);
        }
    }
    ModeDecision {
        mode: SyncMode::Incremental,
        reason: ModeReason::Incremental,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::FixedOffset;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("a test instant")
            .with_timezone(&Utc)
    }

    fn runs(started: &[(&str, SyncMode)]) -> Vec<PastRun> {
        started
            .iter()
            .map(|(text, mode)| PastRun {
                started_at: at(text),
                mode: *mode,
            })
            .collect()
    }

    use super::SyncMode::{Full, Incremental};

    #[test]
    fn the_mode_and_its_reason() {
        let utc = FixedOffset::east_opt(0).expect("UTC");
        let now = at("2026-12-02T15:00:00Z");
        let checkpoint = Some(at("2026-12-02T14:00:00Z"));
        let today_full = runs(&[("2026-12-02T14:00:00Z", Full)]);
        let yesterday = runs(&[("2026-12-01T23:59:59Z", Full)]);
        let streak = |n: usize| {
            let mut past = vec![
                PastRun {
                    started_at: at("2026-12-02T14:00:00Z"),
                    mode: Incremental,
                };
                n
            ];
            past.push(PastRun {
                started_at: at("2026-12-02T01:00:00Z"),
                mode: Full,
            });
            past
        };
        let streak_8 = streak(8);
        let streak_9 = streak(9);
        let streak_2 = streak(2);
        let base = ModeInputs {
            incremental_capable: true,
            full_requested: false,
            checkpoint,
            recent_runs: &today_full,
            reconcile_every_runs: DEFAULT_RECONCILE_EVERY_RUNS,
        };
        let cases: Vec<(&str, ModeInputs<'_>, SyncMode, ModeReason)> = vec![
            (
                "nothing asks for full",
                base,
                Incremental,
                ModeReason::Incremental,
            ),
            (
                "feishu cannot enumerate incrementally",
                ModeInputs {
                    incremental_capable: false,
                    ..base
                },
                Full,
                ModeReason::AlwaysFull,
            ),
            (
                "feishu even when full is asked for",
                ModeInputs {
                    incremental_capable: false,
                    full_requested: true,
                    ..base
                },
                Full,
                ModeReason::AlwaysFull,
            ),
            (
                "--full",
                ModeInputs {
                    full_requested: true,
                    ..base
                },
                Full,
                ModeReason::Requested,
            ),
            (
                "no previous run",
                ModeInputs {
                    recent_runs: &[],
                    ..base
                },
                Full,
                ModeReason::NoCheckpoint,
            ),
            (
                "a previous run but no checkpoint",
                ModeInputs {
                    checkpoint: None,
                    ..base
                },
                Full,
                ModeReason::NoCheckpoint,
            ),
            (
                "a checkpoint from the future",
                ModeInputs {
                    checkpoint: Some(at("2026-12-02T15:00:01Z")),
                    ..base
                },
                Full,
                ModeReason::NoCheckpoint,
            ),
            (
                "a checkpoint of exactly now is usable",
                ModeInputs {
                    checkpoint: Some(now),
                    ..base
                },
                Incremental,
                ModeReason::Incremental,
            ),
            (
                "the last run was yesterday",
                ModeInputs {
                    recent_runs: &yesterday,
                    ..base
                },
                Full,
                ModeReason::FirstRunOfDay,
            ),
            (
                "8 incremental runs since the full one: the 9th is incremental",
                ModeInputs {
                    recent_runs: &streak_8,
                    ..base
                },
                Incremental,
                ModeReason::Incremental,
            ),
            (
                "9 incremental runs since the full one: the 10th reconciles",
                ModeInputs {
                    recent_runs: &streak_9,
                    ..base
                },
                Full,
                ModeReason::ReconcileDue,
            ),
            (
                "cadence 0 is off",
                ModeInputs {
                    recent_runs: &streak_9,
                    reconcile_every_runs: 0,
                    ..base
                },
                Incremental,
                ModeReason::Incremental,
            ),
            (
                "cadence 1: every run is full",
                ModeInputs {
                    reconcile_every_runs: 1,
                    ..base
                },
                Full,
                ModeReason::ReconcileDue,
            ),
            (
                "cadence 2 after one full run: incremental",
                ModeInputs {
                    reconcile_every_runs: 2,
                    ..base
                },
                Incremental,
                ModeReason::Incremental,
            ),
            (
                "cadence 3 after two incremental runs: full",
                ModeInputs {
                    recent_runs: &streak_2,
                    reconcile_every_runs: 3,
                    ..base
                },
                Full,
                ModeReason::ReconcileDue,
            ),
        ];
        for (why, inputs, mode, reason) in cases {
            let decision = decide(&inputs, now, &utc);
            assert_eq!(decision, ModeDecision { mode, reason }, "{why}");
        }
    }

    #[test]
    fn the_day_is_the_local_one() {
        // 23:30 UTC on the 1st is 07:30 on the 2nd in UTC+8, and 18:30 on
        // the 1st in UTC−5.
        let last = runs(&[("2026-12-01T23:30:00Z", Full)]);
        let now = at("2026-12-02T01:00:00Z");
        let inputs = ModeInputs {
            incremental_capable: true,
            full_requested: false,
            checkpoint: Some(at("2026-12-01T23:00:00Z")),
            recent_runs: &last,
            reconcile_every_runs: DEFAULT_RECONCILE_EVERY_RUNS,
        };
        let utc = FixedOffset::east_opt(0).expect("UTC");
        let shanghai = FixedOffset::east_opt(8 * 3600).expect("UTC+8");
        let new_york = FixedOffset::west_opt(5 * 3600).expect("UTC-5");
        // In UTC the last run was on the 1st and now is the 2nd.
        assert_eq!(decide(&inputs, now, &utc).reason, ModeReason::FirstRunOfDay);
        // In UTC+8 both are on the 2nd (07:30 and 09:00).
        assert_eq!(
            decide(&inputs, now, &shanghai).reason,
            ModeReason::Incremental
        );
        // In UTC−5 both are on the 1st (18:30 and 20:00).
        assert_eq!(
            decide(&inputs, now, &new_york).reason,
            ModeReason::Incremental
        );
        // UTC+8 at 00:10 on the 3rd is a new day there.
        let later = at("2026-12-02T16:10:00Z");
        assert_eq!(
            decide(&inputs, later, &shanghai).reason,
            ModeReason::FirstRunOfDay
        );
    }

    #[test]
    fn a_full_run_resets_the_streak() {
        let utc = FixedOffset::east_opt(0).expect("UTC");
        // Newest first: 2 incremental, a full one, then 9 old incremental.
        let mut past = runs(&[
            ("2026-12-02T14:00:00Z", Incremental),
            ("2026-12-02T13:00:00Z", Incremental),
            ("2026-12-02T12:00:00Z", Full),
        ]);
        past.extend(runs(&[("2026-12-02T11:00:00Z", Incremental); 9]));
        let inputs = ModeInputs {
            incremental_capable: true,
            full_requested: false,
            checkpoint: Some(at("2026-12-02T14:00:00Z")),
            recent_runs: &past,
            reconcile_every_runs: 4,
        };
        let now = at("2026-12-02T15:00:00Z");
        assert_eq!(decide(&inputs, now, &utc).mode, Incremental);
        let inputs = ModeInputs {
            reconcile_every_runs: 3,
            ..inputs
        };
        assert_eq!(decide(&inputs, now, &utc).reason, ModeReason::ReconcileDue);
    }

    #[test]
    fn stable_names_for_the_run_row() {
        assert_eq!(SyncMode::Full.as_str(), "full");
        assert_eq!(SyncMode::Incremental.as_str(), "incremental");
        let reasons = [
            ModeReason::AlwaysFull,
            ModeReason::Requested,
            ModeReason::NoCheckpoint,
            ModeReason::FirstRunOfDay,
            ModeReason::ReconcileDue,
            ModeReason::Incremental,
        ];
        for reason in reasons {
            let json = serde_json::to_string(&reason).expect("serializable");
            assert_eq!(json, format!("\"{}\"", reason.as_str()));
            let back: ModeReason = serde_json::from_str(&json).expect("readable");
            assert_eq!(back, reason);
        }
        let decision = ModeDecision {
            mode: SyncMode::Incremental,
            reason: ModeReason::Incremental,
        };
        assert_eq!(
            serde_json::to_string(&decision).expect("serializable"),
            r#"{"mode":"incremental","reason":"incremental"}"#
        );
    }
}
