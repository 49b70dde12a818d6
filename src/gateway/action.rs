//! Personal actions as values, and the pure decisions about them: what an
//! action's fingerprint is, whether a provider's entry already shows it,
//! whether a removal may go ahead, how long a waiting delivery backs off,
//! and how a receipt is kept. No I/O here; the delivery task
//! (`super::delivery`) applies these decisions.

use std::time::Duration;

use async_graphql::Enum;
use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::provider::ProviderKind;
use crate::digest;

/// What a personal event does at the provider.
#[derive(Enum, Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ActionKind {
    /// Chapters read.
    Progress,
    /// A rating from 0 to 5 stars.
    Rating,
    /// Put the title on the want-to-read (AniList: Planning) list.
    WantToRead,
    /// Take the title off the user's list, keeping every other remote field.
    Removal,
}

impl ActionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ActionKind::Progress => "PROGRESS",
            ActionKind::Rating => "RATING",
            ActionKind::WantToRead => "WANT_TO_READ",
            ActionKind::Removal => "REMOVAL",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [
            ActionKind::Progress,
            ActionKind::Rating,
            ActionKind::WantToRead,
            ActionKind::Removal,
        ]
        .into_iter()
        .find(|kind| kind.as_str() == text)
    }
}

/// One action with its value. (Read back with [`Action::from_stored`], not
/// serde: an internally tagged enum buffers its fields, and a buffered
/// float arrives as `serde_json`'s number map, see `graphql::json`.)
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Action {
    Progress { chapters: u32 },
    Rating { stars: f64 },
    WantToRead,
    Removal,
}

/// The most chapters a progress event may name (AniList's own cap is far
/// lower; this only keeps nonsense out).
pub const MAX_CHAPTERS: u32 = 100_000;

impl Action {
    pub fn kind(&self) -> ActionKind {
        match self {
            Action::Progress { .. } => ActionKind::Progress,
            Action::Rating { .. } => ActionKind::Rating,
            Action::WantToRead => ActionKind::WantToRead,
            Action::Removal => ActionKind::Removal,
        }
    }

    /// The value as stored (`{"chapters":12}`, `{"stars":4.5}`, `{}`).
    pub fn value(&self) -> Value {
        match self {
            Action::Progress { chapters } => json!({ "chapters": chapters }),
            Action::Rating { stars } => json!({ "stars": stars }),
            Action::WantToRead | Action::Removal => json!({}),
        }
    }

    /// Reads a stored action back.
    pub fn from_stored(kind: ActionKind, value: &Value) -> Option<Self> {
        match kind {
            ActionKind::Progress => Some(Action::Progress {
                chapters: u32::try_from(value.get("chapters")?.as_u64()?).ok()?,
            }),
            ActionKind::Rating => Some(Action::Rating {
                stars: value.get("stars")?.as_f64()?,
            }),
            ActionKind::WantToRead => Some(Action::WantToRead),
            ActionKind::Removal => Some(Action::Removal),
        }
    }

    /// Why the value cannot be sent, if it cannot.
    pub fn invalid(&self) -> Option<(&'static str, String)> {
        match self {
            Action::Progress { chapters } if *chapters > MAX_CHAPTERS => Some((
                "progress",
                format!("progress must be 0 to {MAX_CHAPTERS} chapters"),
            )),
            Action::Rating { stars } if !(0.0..=5.0).contains(stars) || stars.is_nan() => {
                Some(("rating", "a rating is 0 to 5 stars".into()))
            }
            _ => None,
        }
    }

    /// How a receipt of this action is kept. Setting a state the provider
    /// can be asked about again (progress, rating, a list) is reconcilable:
    /// its receipt may expire, because a read-back answers the question
    /// again. A removal is not: repeating it after the user added the
    /// title back would delete their entry, so its receipt is protected.
    pub fn retention(&self) -> Retention {
        match self {
            Action::Removal => Retention::Protected,
            _ => Retention::Reconciled,
        }
    }
}

/// The fingerprint of one action (seed: provider, account, title, event
/// payload and timestamp): the same action submitted twice is one event,
/// and its confirmed receipt stops a second write.
pub fn fingerprint(
    provider: ProviderKind,
    account: &str,
    title: &str,
    action: &Action,
    occurred_at: DateTime<Utc>,
) -> String {
    digest::sha256_hex(&[
        "gateway-event/1",
        provider.as_str(),
        account,
        title,
        action.kind().as_str(),
        &action.value().to_string(),
        &occurred_at.timestamp_micros().to_string(),
    ])
}

/// A user's entry for one title at a provider, as a read-back found it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RemoteEntry {
    /// Whether the user has an entry for the title at all (on AniList a
    /// list entry; on Kavita the series on Want to Read).
    pub listed: bool,
    pub progress: Option<u32>,
    /// In stars, 0 to 5 (0: no rating).
    pub stars: Option<f64>,
    /// The provider's id of the entry (AniList's list entry id), for a
    /// removal.
    pub entry_id: Option<String>,
    /// Every field the read-back returned, for the removal precondition
    /// and the receipt.
    pub fields: Map<String, Value>,
}

/// Whether `entry` already shows `action` done.
pub fn shows(action: &Action, entry: &RemoteEntry) -> bool {
    match action {
        Action::Progress { chapters } => entry.progress == Some(*chapters),
        Action::Rating { stars } => entry
            .stars
            .is_some_and(|remote| (remote - stars).abs() < 0.05),
        // Any list status counts: a title being read is never demoted to
        // Planning.
        Action::WantToRead => entry.listed,
        Action::Removal => !entry.listed,
    }
}

/// Backoff for a delivery that must wait (the provider unreachable, an
/// answer that did not confirm): 5 s doubling to 15 minutes. Never a
/// permanent failure: the event stays pending.
pub fn backoff(attempts: i32) -> Duration {
    let step = u32::try_from(attempts.clamp(0, 16)).unwrap_or(16);
    Duration::from_secs(5u64.saturating_mul(1 << step).min(15 * 60))
}

/// How a receipt is kept (seed: `receipt_retention`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retention {
    /// Kept until an operator removes it.
    Protected,
    /// Expires after [`RECONCILED_TTL`]; evicted first under pressure.
    Reconciled,
}

/// How long a reconciled receipt is kept.
pub const RECONCILED_TTL: TimeDelta = TimeDelta::days(7);

impl Retention {
    pub fn as_str(self) -> &'static str {
        match self {
            Retention::Protected => "PROTECTED",
            Retention::Reconciled => "RECONCILED",
        }
    }

    /// When a receipt made at `now` expires.
    pub fn expires_at(self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Retention::Protected => None,
            Retention::Reconciled => Some(now + RECONCILED_TTL),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(seconds, 0).unwrap()
    }

    #[test]
    fn the_same_action_has_the_same_fingerprint_and_any_change_another() {
        let base = fingerprint(
            ProviderKind::Anilist,
            "7",
            "30013",
            &Action::Progress { chapters: 12 },
            at(1_800_000_000),
        );
        assert_eq!(
            base,
            fingerprint(
                ProviderKind::Anilist,
                "7",
                "30013",
                &Action::Progress { chapters: 12 },
                at(1_800_000_000),
            )
        );
        for other in [
            fingerprint(
                ProviderKind::Kavita,
                "7",
                "30013",
                &Action::Progress { chapters: 12 },
                at(1_800_000_000),
            ),
            fingerprint(
                ProviderKind::Anilist,
                "8",
                "30013",
                &Action::Progress { chapters: 12 },
                at(1_800_000_000),
            ),
            fingerprint(
                ProviderKind::Anilist,
                "7",
                "30014",
                &Action::Progress { chapters: 12 },
                at(1_800_000_000),
            ),
            fingerprint(
                ProviderKind::Anilist,
                "7",
                "30013",
                &Action::Progress { chapters: 13 },
                at(1_800_000_000),
            ),
            fingerprint(
                ProviderKind::Anilist,
                "7",
                "30013",
                &Action::Progress { chapters: 12 },
                at(1_800_000_001),
            ),
        ] {
            assert_ne!(base, other);
        }
    }

    #[test]
    fn stored_actions_read_back_as_they_were() {
        for action in [
            Action::Progress { chapters: 40 },
            Action::Rating { stars: 3.5 },
            Action::WantToRead,
            Action::Removal,
        ] {
            assert_eq!(
                Action::from_stored(action.kind(), &action.value()),
                Some(action.clone())
            );
        }
        assert_eq!(
            Action::from_stored(ActionKind::Progress, &json!({ "chapters": -1 })),
            None
        );
    }

    #[test]
    fn out_of_range_values_are_refused() {
        assert!(Action::Rating { stars: 5.5 }.invalid().is_some());
        assert!(Action::Rating { stars: f64::NAN }.invalid().is_some());
        assert!(Action::Rating { stars: -0.5 }.invalid().is_some());
        assert!(Action::Rating { stars: 0.0 }.invalid().is_none());
        assert!(
            Action::Progress {
                chapters: MAX_CHAPTERS + 1
            }
            .invalid()
            .is_some()
        );
    }

    #[test]
    fn an_entry_shows_an_action_only_with_its_value() {
        let entry = RemoteEntry {
            listed: true,
            progress: Some(12),
            stars: Some(4.0),
            ..RemoteEntry::default()
        };
        assert!(shows(&Action::Progress { chapters: 12 }, &entry));
        assert!(!shows(&Action::Progress { chapters: 13 }, &entry));
        assert!(shows(&Action::Rating { stars: 4.0 }, &entry));
        assert!(!shows(&Action::Rating { stars: 4.5 }, &entry));
        assert!(shows(&Action::WantToRead, &entry));
        assert!(!shows(&Action::Removal, &entry));
        let absent = RemoteEntry::default();
        assert!(shows(&Action::Removal, &absent));
        assert!(!shows(&Action::WantToRead, &absent));
        assert!(!shows(&Action::Progress { chapters: 0 }, &absent));
    }

    #[test]
    fn backoff_doubles_and_stops_at_fifteen_minutes() {
        assert_eq!(backoff(0), Duration::from_secs(5));
        assert_eq!(backoff(1), Duration::from_secs(10));
        assert_eq!(backoff(3), Duration::from_secs(40));
        assert_eq!(backoff(40), Duration::from_secs(900));
        assert_eq!(backoff(-3), Duration::from_secs(5));
    }

    #[test]
    fn only_removals_are_protected() {
        assert_eq!(Action::Removal.retention(), Retention::Protected);
        assert_eq!(
            Action::Progress { chapters: 1 }.retention(),
            Retention::Reconciled
        );
        assert_eq!(Retention::Protected.expires_at(at(0)), None);
        assert_eq!(
            Retention::Reconciled.expires_at(at(0)),
            Some(at(7 * 86_400))
        );
    }
}
