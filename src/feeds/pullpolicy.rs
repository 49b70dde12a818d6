//! When to pull a feed next — the seed's section 8, as pure functions: no
//! I/O, the clock passed in. The pull worker records what a fetch saw
//! (status, `Retry-After`, `Cache-Control`, `Expires`) and asks these
//! functions for `next_check_at`.
//!
//! - When a feed is due ([`due_at`]): never while suspended, else at the
//!   later of `next_check_at` and `retry_after_until` (unset: now). The
//!   scheduler's claim runs this rule in SQL (`store::due`, tested through
//!   the store); a manual refresh bypasses it.
//! - Success (200/304): `max(interval, retry_after, freshness)`.
//! - Failure: `max(interval, retry_after, interval × 1.8^failures)`, where
//!   `failures` already counts this failure.
//! - Both: capped at `PULL_MAX_BACKOFF`; `next_check_at = now + delay`.
//! - "Interval" is the feed's override when set, else the global interval.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::httpc::retry::{parse_http_date, parse_retry_after};

/// Backoff growth per consecutive failure.
pub const BACKOFF_FACTOR: f64 = 1.8;

/// The per-feed state the policy reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Schedule {
    pub suspended: bool,
    pub next_check_at: Option<DateTime<Utc>>,
    pub retry_after_until: Option<DateTime<Utc>>,
}

/// When the feed becomes due: the later of `next_check_at` and
/// `retry_after_until` (`None`: due now). The scheduler sleeps until the
/// earliest of these across feeds; suspended feeds are never due.
pub fn due_at(schedule: &Schedule) -> Option<DateTime<Utc>> {
    if schedule.suspended {
        return None;
    }
    match (schedule.next_check_at, schedule.retry_after_until) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// The feed's effective interval: its override when set, else the global one.
pub fn effective_interval(override_secs: Option<u32>, global: Duration) -> Duration {
    override_secs
        .map(|secs| Duration::from_secs(u64::from(secs)))
        .unwrap_or(global)
}

/// How long the response may be considered fresh: `Cache-Control: max-age`
/// (which takes precedence, as in HTTP caching), else `Expires − now`.
/// `no-cache`/`no-store` give no freshness.
pub fn freshness(
    cache_control: Option<&str>,
    expires: Option<&str>,
    now: DateTime<Utc>,
) -> Option<Duration> {
    if let Some(header) = cache_control {
        let directives: Vec<String> = header
            .split(',')
            .map(|d| d.trim().to_ascii_lowercase())
            .collect();
        if directives
            .iter()
            .any(|d| d == "no-cache" || d == "no-store")
        {
            return None;
        }
        if let Some(max_age) = directives.iter().find_map(|d| {
            d.strip_prefix("max-age=")
                .and_then(|v| v.trim_matches('"').parse::<u64>().ok())
        }) {
            return Some(Duration::from_secs(max_age));
        }
    }
    let expires = parse_http_date(expires?)?;
    (expires - now).to_std().ok()
}

/// `interval × 1.8^failures`, capped at `max_backoff`.
pub fn backoff_delay(interval: Duration, failures: u32, max_backoff: Duration) -> Duration {
    let factor = BACKOFF_FACTOR.powi(failures.min(64) as i32);
    let secs = interval.as_secs_f64() * factor;
    if !secs.is_finite() || secs >= max_backoff.as_secs_f64() {
        max_backoff
    } else {
        Duration::from_secs_f64(secs)
    }
}

/// `next_check_at` after a successful check (200 or 304).
pub fn next_check_after_success(
    now: DateTime<Utc>,
    interval: Duration,
    retry_after: Option<Duration>,
    freshness: Option<Duration>,
    max_backoff: Duration,
) -> DateTime<Utc> {
    let delay = interval
        .max(retry_after.unwrap_or_default())
        .max(freshness.unwrap_or_default());
    at(now, delay.min(max_backoff))
}

/// `next_check_at` after a failure; `failures` already counts this one.
pub fn next_check_after_failure(
    now: DateTime<Utc>,
    interval: Duration,
    retry_after: Option<Duration>,
    failures: u32,
    max_backoff: Duration,
) -> DateTime<Utc> {
    let delay = interval
        .max(retry_after.unwrap_or_default())
        .max(backoff_delay(interval, failures, max_backoff));
    at(now, delay.min(max_backoff))
}

fn at(now: DateTime<Utc>, delay: Duration) -> DateTime<Utc> {
    after(now, delay)
}

/// `now + delay`, saturating instead of overflowing (a publisher controls
/// `Retry-After`).
pub fn after(now: DateTime<Utc>, delay: Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(delay)
        .ok()
        .and_then(|delay| now.checked_add_signed(delay))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// The `Retry-After` hold a response asks for, capped at `max_backoff` like
/// every other delay, so no publisher can park a feed beyond the cap.
pub fn retry_after_hold(
    value: Option<&str>,
    now: DateTime<Utc>,
    max_backoff: Duration,
) -> Option<Duration> {
    value
        .and_then(|value| parse_retry_after(value, now))
        .map(|delay| delay.min(max_backoff))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hostile_retry_after_is_capped_and_never_overflows() {
        let now: DateTime<Utc> = "2026-11-30T12:00:00Z".parse().unwrap();
        let max = Duration::from_secs(172_800);
        assert_eq!(
            retry_after_hold(Some("100000000000000"), now, max),
            Some(max)
        );
        assert_eq!(
            retry_after_hold(Some("Fri, 31 Dec 9999 23:59:59 GMT"), now, max),
            Some(max)
        );
        assert_eq!(
            retry_after_hold(Some("120"), now, max),
            Some(Duration::from_secs(120))
        );
        assert_eq!(retry_after_hold(Some("soon"), now, max), None);
        assert_eq!(
            after(now, Duration::from_secs(u64::MAX)),
            DateTime::<Utc>::MAX_UTC
        );
    }

    const HOUR: Duration = Duration::from_secs(3600);
    const MAX: Duration = Duration::from_secs(172_800);

    fn now() -> DateTime<Utc> {
        "2026-11-30T12:00:00Z".parse().unwrap()
    }

    fn secs(n: i64) -> chrono::Duration {
        chrono::Duration::seconds(n)
    }

    #[test]
    fn suspended_feeds_are_never_due() {
        let schedule = Schedule {
            suspended: true,
            ..Default::default()
        };
        assert_eq!(due_at(&schedule), None);
    }

    #[test]
    fn due_at_is_the_later_of_next_check_and_retry_after() {
        let schedule = Schedule {
            suspended: false,
            next_check_at: Some(now() + secs(60)),
            retry_after_until: Some(now() + secs(600)),
        };
        assert_eq!(due_at(&schedule), Some(now() + secs(600)));
        assert_eq!(
            due_at(&Schedule {
                retry_after_until: None,
                ..schedule
            }),
            Some(now() + secs(60))
        );
        assert_eq!(due_at(&Schedule::default()), None);
        assert_eq!(
            due_at(&Schedule {
                next_check_at: None,
                ..schedule
            }),
            Some(now() + secs(600)),
            "a hold before the first check is due when it ends"
        );
    }

    #[test]
    fn override_wins_over_the_global_interval() {
        assert_eq!(
            effective_interval(Some(900), HOUR),
            Duration::from_secs(900)
        );
        assert_eq!(effective_interval(None, HOUR), HOUR);
    }

    #[test]
    fn freshness_prefers_max_age_then_expires() {
        let expires = Some("Mon, 30 Nov 2026 14:00:00 GMT");
        assert_eq!(
            freshness(Some("public, max-age=7200"), expires, now()),
            Some(Duration::from_secs(7200))
        );
        assert_eq!(
            freshness(None, expires, now()),
            Some(Duration::from_secs(7200))
        );
        assert_eq!(
            freshness(Some("public"), Some("Mon, 30 Nov 2026 13:00:00 GMT"), now()),
            Some(HOUR)
        );
        assert_eq!(
            freshness(Some("no-cache, max-age=600"), expires, now()),
            None
        );
        assert_eq!(
            freshness(None, Some("Mon, 30 Nov 2026 11:00:00 GMT"), now()),
            None,
            "already expired"
        );
        assert_eq!(freshness(None, Some("garbage"), now()), None);
    }

    #[test]
    fn success_waits_for_the_longest_of_interval_retry_after_and_freshness() {
        assert_eq!(
            next_check_after_success(now(), HOUR, None, None, MAX),
            now() + secs(3600)
        );
        assert_eq!(
            next_check_after_success(
                now(),
                HOUR,
                Some(Duration::from_secs(7200)),
                Some(Duration::from_secs(5400)),
                MAX
            ),
            now() + secs(7200)
        );
        assert_eq!(
            next_check_after_success(now(), HOUR, None, Some(Duration::from_secs(10_800)), MAX),
            now() + secs(10_800)
        );
    }

    #[test]
    fn failure_backs_off_by_1_8_per_failure() {
        assert_eq!(backoff_delay(HOUR, 0, MAX), HOUR);
        assert_eq!(
            backoff_delay(HOUR, 1, MAX),
            Duration::from_secs_f64(3600.0 * 1.8)
        );
        assert_eq!(
            backoff_delay(HOUR, 3, MAX),
            Duration::from_secs_f64(3600.0 * 1.8 * 1.8 * 1.8)
        );
        assert_eq!(
            next_check_after_failure(now(), HOUR, None, 2, MAX),
            now()
                + chrono::Duration::from_std(Duration::from_secs_f64(3600.0 * 1.8 * 1.8)).unwrap()
        );
        // A longer Retry-After wins over a short backoff.
        assert_eq!(
            next_check_after_failure(now(), HOUR, Some(Duration::from_secs(20_000)), 1, MAX),
            now() + secs(20_000)
        );
    }

    #[test]
    fn every_delay_is_capped_at_max_backoff() {
        assert_eq!(backoff_delay(HOUR, 40, MAX), MAX);
        assert_eq!(backoff_delay(HOUR, u32::MAX, MAX), MAX);
        assert_eq!(
            next_check_after_failure(now(), HOUR, None, 30, MAX),
            now() + secs(172_800)
        );
        assert_eq!(
            next_check_after_failure(now(), HOUR, Some(Duration::from_secs(10_000_000)), 1, MAX),
            now() + secs(172_800)
        );
        assert_eq!(
            next_check_after_success(
                now(),
                HOUR,
                None,
                Some(Duration::from_secs(10_000_000)),
                MAX
            ),
            now() + secs(172_800)
        );
    }
}
