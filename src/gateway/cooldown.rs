//! Provider cooldowns (seed 003, "Account-safety addition"): a host that
//! answered 429 or 503 — or said it has no requests left — gets a
//! wall-clock deadline before which no request reaches it. Deadlines are
//! kept in the `cooldowns` table (host and time only), survive restarts,
//! new waits are capped at one hour, and an existing later deadline is
//! kept.
//!
//! [`deadline_from`] is the pure rule; [`Cooldowns`] is its storage.

use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use entity::cooldown;
use reqwest::{StatusCode, header::HeaderMap};
use sea_orm::{ActiveValue::Set, DatabaseConnection, EntityTrait};

use crate::{db, httpc::retry::parse_retry_after};

/// The longest new wait a provider can impose.
pub const MAX_WAIT: Duration = Duration::from_secs(3600);
/// A 429/503 without a usable wait, or `X-RateLimit-Remaining: 0` without a
/// reset time: AniList's window is a minute.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(60);

/// When a host may be called again after answering `status` with
/// `headers` at `now`, or `None` when the answer imposes no wait.
///
/// A 429 or 503 waits for `Retry-After` (seconds or an HTTP date), else
/// `X-RateLimit-Reset` (Unix seconds), else [`DEFAULT_WAIT`]. Any other
/// answer with `X-RateLimit-Remaining: 0` waits for the reset the same way
/// (AniList's proactive limit: no request is spent on a sure 429). Every
/// wait is capped at [`MAX_WAIT`].
pub fn deadline_from(
    status: StatusCode,
    headers: &HeaderMap,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let limited =
        status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::SERVICE_UNAVAILABLE;
    let exhausted = header(headers, "x-ratelimit-remaining")
        .and_then(|value| value.parse::<i64>().ok())
        .is_some_and(|remaining| remaining <= 0);
    if !limited && !exhausted {
        return None;
    }
    let retry_after = limited
        .then(|| header(headers, "retry-after"))
        .flatten()
        .and_then(|value| parse_retry_after(value, now));
    let reset = || {
        let at = header(headers, "x-ratelimit-reset")?.parse::<i64>().ok()?;
        let at = Utc.timestamp_opt(at, 0).single()?;
        Some((at - now).to_std().unwrap_or_default())
    };
    let wait = retry_after.or_else(reset).unwrap_or(DEFAULT_WAIT);
    Some(now + wait.min(MAX_WAIT))
}

/// The deadline to keep when `new` arrives over `existing`: the later one.
pub fn merge(existing: Option<DateTime<Utc>>, new: DateTime<Utc>) -> DateTime<Utc> {
    existing.map_or(new, |existing| existing.max(new))
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name)?.to_str().ok().map(str::trim)
}

/// The stored deadlines.
#[derive(Clone)]
pub struct Cooldowns {
    db: DatabaseConnection,
}

impl Cooldowns {
    pub fn new(db: DatabaseConnection) -> Self {
        Cooldowns { db }
    }

    /// The host's deadline if it is still ahead of `now`.
    pub async fn active(
        &self,
        host: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<DateTime<Utc>>, sea_orm::DbErr> {
        let row = cooldown::Entity::find_by_id(host.to_owned())
            .one(&self.db)
            .await?;
        Ok(row.map(|row| row.until).filter(|until| *until > now))
    }

    /// Records `until` for `host`, keeping a later deadline already there.
    pub async fn extend(
        &self,
        host: &str,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<DateTime<Utc>, sea_orm::DbErr> {
        let txn = db::begin_write(&self.db).await?;
        let existing = cooldown::Entity::find_by_id(host.to_owned())
            .one(&*txn)
            .await?;
        let kept = merge(existing.as_ref().map(|row| row.until), until);
        let row = cooldown::ActiveModel {
            host: Set(host.to_owned()),
            until: Set(kept),
            updated_at: Set(now),
        };
        if existing.is_some() {
            cooldown::Entity::update(row).exec(&*txn).await?;
        } else {
            cooldown::Entity::insert(row).exec(&*txn).await?;
        }
        txn.commit().await?;
        Ok(kept)
    }

    /// Every deadline still ahead of `now`, by host (for the manifest).
    pub async fn all_active(
        &self,
        now: DateTime<Utc>,
    ) -> Result<Vec<(String, DateTime<Utc>)>, sea_orm::DbErr> {
        let rows = cooldown::Entity::find().all(&self.db).await?;
        Ok(rows
            .into_iter()
            .filter(|row| row.until > now)
            .map(|row| (row.host, row.until))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000 + secs, 0).unwrap()
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn a_429_waits_for_retry_after_in_seconds_or_as_a_date() {
        let now = at(0);
        let seconds = headers(&[("Retry-After", "30")]);
        assert_eq!(
            deadline_from(StatusCode::TOO_MANY_REQUESTS, &seconds, now),
            Some(at(30))
        );
        let date = headers(&[("Retry-After", "Fri, 15 Jan 2027 08:02:00 GMT")]);
        let now = Utc.with_ymd_and_hms(2027, 1, 15, 8, 0, 0).unwrap();
        assert_eq!(
            deadline_from(StatusCode::SERVICE_UNAVAILABLE, &date, now),
            Some(now + Duration::from_secs(120))
        );
    }

    #[test]
    fn x_ratelimit_reset_is_used_without_retry_after() {
        let now = at(0);
        let reset = (1_800_000_000 + 45).to_string();
        let answer = headers(&[
            ("X-RateLimit-Reset", &reset),
            ("X-RateLimit-Remaining", "0"),
        ]);
        assert_eq!(
            deadline_from(StatusCode::TOO_MANY_REQUESTS, &answer, now),
            Some(at(45))
        );
        // Retry-After wins when both are there.
        let both = headers(&[("Retry-After", "5"), ("X-RateLimit-Reset", &reset)]);
        assert_eq!(
            deadline_from(StatusCode::TOO_MANY_REQUESTS, &both, now),
            Some(at(5))
        );
    }

    #[test]
    fn new_waits_are_capped_at_one_hour() {
        let now = at(0);
        let long = headers(&[("Retry-After", "86400")]);
        assert_eq!(
            deadline_from(StatusCode::TOO_MANY_REQUESTS, &long, now),
            Some(at(3600))
        );
        let far_reset = headers(&[("X-RateLimit-Reset", "99999999999")]);
        assert_eq!(
            deadline_from(StatusCode::SERVICE_UNAVAILABLE, &far_reset, now),
            Some(at(3600))
        );
    }

    #[test]
    fn an_exhausted_budget_waits_before_the_429() {
        let now = at(0);
        let exhausted = headers(&[("X-RateLimit-Limit", "90"), ("X-RateLimit-Remaining", "0")]);
        assert_eq!(deadline_from(StatusCode::OK, &exhausted, now), Some(at(60)));
        let left = headers(&[("X-RateLimit-Limit", "90"), ("X-RateLimit-Remaining", "3")]);
        assert_eq!(deadline_from(StatusCode::OK, &left, now), None);
        // Retry-After means nothing on a success.
        let odd = headers(&[("Retry-After", "100")]);
        assert_eq!(deadline_from(StatusCode::OK, &odd, now), None);
    }

    #[test]
    fn a_limit_answer_without_a_usable_wait_gets_the_default() {
        let now = at(0);
        let garbage = headers(&[("Retry-After", "soon")]);
        assert_eq!(
            deadline_from(StatusCode::TOO_MANY_REQUESTS, &garbage, now),
            Some(at(60))
        );
        assert_eq!(
            deadline_from(StatusCode::TOO_MANY_REQUESTS, &HeaderMap::new(), now),
            Some(at(60))
        );
        assert_eq!(
            deadline_from(StatusCode::BAD_GATEWAY, &HeaderMap::new(), now),
            None
        );
    }

    #[test]
    fn the_later_deadline_is_kept() {
        assert_eq!(merge(None, at(10)), at(10));
        assert_eq!(merge(Some(at(100)), at(10)), at(100));
        assert_eq!(merge(Some(at(5)), at(10)), at(10));
    }
}
