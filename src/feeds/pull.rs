//! The pull worker (seed 000 §8): fetch one feed with a conditional GET,
//! then record what happened — items and success state, or the failure —
//! in one transaction. When to pull is [`super::pullpolicy`]'s decision and
//! [`super::scheduler`]'s loop; this module does one pull.
//!
//! Politeness: at most `TRELLIS_PULL_CONCURRENCY` fetches in flight in this
//! process, and at most [`PER_HOST`] to any one host — the limits of the
//! feeds' outbound client (`crate::httpc::limits`). A pull run as a task
//! does not wait for them: it asks with [`Patience::Never`] and, when there
//! is no room, comes back as [`Pulled::Busy`], so the task can go back to
//! its queue instead of holding a worker slot.

use std::{panic::AssertUnwindSafe, time::Duration};

use chrono::{DateTime, Utc};
use entity::{feed, feed_fetch_state};
use futures_util::FutureExt;
use reqwest::{
    StatusCode,
    header::{self, HeaderMap, HeaderValue},
};
use sea_orm::DatabaseConnection;
use serde::{Deserialize, Serialize};
use url::Url;

use super::{
    icons,
    mapping::{MappedItem, map_entry},
    parse, pullpolicy, retention, store,
};
use crate::{
    error::AppResult,
    httpc::{
        FetchError, Fetched, HttpClient, Patience,
        limits::{Busy, LimitSettings},
    },
};

/// Concurrent requests to one host.
pub const PER_HOST: usize = 2;

#[derive(Debug, Clone)]
pub struct PullSettings {
    /// `TRELLIS_PULL_INTERVAL`: the interval of feeds without an override.
    pub interval: Duration,
    /// `TRELLIS_PULL_MAX_BACKOFF`: the cap on any delay.
    pub max_backoff: Duration,
    /// `TRELLIS_PULL_CONCURRENCY`.
    pub concurrency: usize,
}

/// Why the pull happens: a periodic pull honours the skip policy's
/// `suspended` switch; a manual refresh bypasses it (seed §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PullMode {
    Scheduled,
    Manual,
}

/// What one pull did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PullReport {
    pub feed_id: i64,
    pub outcome: PullOutcome,
    pub new_items: u64,
    /// Why it failed, as recorded in `fetchState.lastError`.
    pub error: Option<String>,
}

impl PullReport {
    fn new(feed_id: i64, outcome: PullOutcome, new_items: u64, error: Option<String>) -> Self {
        PullReport {
            feed_id,
            outcome,
            new_items,
            error,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PullOutcome {
    /// 200: parsed and stored.
    Updated,
    /// 304: nothing new.
    NotModified,
    Failed,
    /// Suspended (periodic pulls only).
    Skipped,
    /// The feed was deleted meanwhile.
    Gone,
}

/// What the fetch saw, reduced to what the state update needs.
pub(super) enum Observation {
    Success {
        status: StatusCode,
        headers: HeaderMap,
        parsed: Option<Box<parse::ParsedFeed>>,
        /// Its entries, mapped (and sanitized) before any transaction.
        items: Vec<MappedItem>,
    },
    Failure {
        status: Option<StatusCode>,
        retry_after: Option<Duration>,
        error: String,
    },
}

/// What a pull came to.
#[derive(Debug)]
pub enum Pulled {
    Done(PullReport),
    /// No room under the limits now (only with [`Patience::Never`]):
    /// nothing was fetched or recorded.
    Busy(Busy),
}

/// The feeds' outbound limits for `TRELLIS_PULL_CONCURRENCY`.
pub fn limits(concurrency: usize) -> LimitSettings {
    LimitSettings {
        in_flight: concurrency.max(1),
        per_host: PER_HOST,
        per_host_rate: None,
    }
}

pub struct Puller {
    db: DatabaseConnection,
    http: HttpClient,
    settings: PullSettings,
}

impl Puller {
    pub fn new(db: DatabaseConnection, http: HttpClient, settings: PullSettings) -> Self {
        Puller { db, http, settings }
    }

    pub fn settings(&self) -> &PullSettings {
        &self.settings
    }

    /// Pulls one feed and records the outcome; with [`Patience::Never`],
    /// only if the limits have room for its fetch now.
    pub async fn pull(
        &self,
        feed_id: i64,
        mode: PullMode,
        patience: Patience,
    ) -> AppResult<Pulled> {
        let report =
            |outcome, new_items, error| PullReport::new(feed_id, outcome, new_items, error);
        let Some((feed, state)) = store::feed_with_state(&self.db, feed_id).await? else {
            return Ok(Pulled::Done(report(PullOutcome::Gone, 0, None)));
        };
        if mode == PullMode::Scheduled && feed.suspended {
            return Ok(Pulled::Done(report(PullOutcome::Skipped, 0, None)));
        }
        let interval = pullpolicy::effective_interval(
            feed.refresh_interval_seconds.map(|s| s.max(1) as u32),
            self.settings.interval,
        );
        // Whatever goes wrong in fetching, parsing, mapping or storing, the
        // feed's state says so and the feed backs off: a panic included.
        let attempt = AssertUnwindSafe(self.fetch_and_record(&feed, &state, interval, patience))
            .catch_unwind()
            .await;
        let error = match attempt {
            Ok(Ok(pulled)) => return Ok(pulled),
            Ok(Err(error)) => {
                // What the feed sent could not be stored (the database refused
                // it): record that as the feed's failure, so it backs off and
                // says why, instead of retrying at once forever.
                tracing::warn!(feed_id, error = %crate::error::chain(&error), "storing a pulled feed failed");
                "the feed's items could not be stored (see the server log)"
            }
            Err(_) => {
                tracing::error!(feed_id, "pulling a feed panicked");
                "the feed could not be pulled (see the server log)"
            }
        };
        let failure = Observation::Failure {
            status: None,
            retry_after: None,
            error: error.into(),
        };
        self.record(&feed, &state, failure, interval, Utc::now())
            .await
            .map(Pulled::Done)
    }

    async fn fetch_and_record(
        &self,
        feed: &feed::Model,
        state: &feed_fetch_state::Model,
        interval: Duration,
        patience: Patience,
    ) -> AppResult<Pulled> {
        let (observation, at) = match self.fetch(feed, state, patience).await {
            Ok(observed) => observed,
            Err(busy) => return Ok(Pulled::Busy(busy)),
        };
        let report = self.record(feed, state, observation, interval, at).await?;
        // The items are stored: now, and only after a good pull, the icon
        // (whose failure is no failure of the feed).
        if matches!(
            report.outcome,
            PullOutcome::Updated | PullOutcome::NotModified
        ) {
            icons::refresh_if_due(&self.db, &self.http, feed.id, at).await;
        }
        Ok(Pulled::Done(report))
    }

    /// Records one pull's outcome in one write transaction.
    async fn record(
        &self,
        feed: &feed::Model,
        state: &feed_fetch_state::Model,
        observation: Observation,
        interval: Duration,
        now: DateTime<Utc>,
    ) -> AppResult<PullReport> {
        let feed_id = feed.id;
        let report =
            |outcome, new_items, error| PullReport::new(feed_id, outcome, new_items, error);
        let txn = crate::db::begin_write(&self.db).await?;
        let result = match observation {
            Observation::Success {
                status,
                headers,
                parsed,
                items,
            } => {
                // Entries older than the user's retention would only be
                // deleted again (and come back unread after that).
                let horizon = retention::horizon(&txn, feed.user_id, now).await?;
                let items: Vec<MappedItem> = items
                    .into_iter()
                    .filter(|item| horizon.is_none_or(|horizon| item.pub_date >= horizon))
                    .collect();
                let new_items = store::upsert_items(&txn, feed, &items, now).await?;
                let update = success_update(state, status, &headers, interval, &self.settings, now);
                store::record_success(&txn, feed, update, parsed.as_deref(), new_items).await?;
                let outcome = if parsed.is_some() {
                    PullOutcome::Updated
                } else {
                    PullOutcome::NotModified
                };
                report(outcome, new_items, None)
            }
            Observation::Failure {
                status,
                retry_after,
                error,
            } => {
                store::record_failure(
                    &txn,
                    feed,
                    store::Failure {
                        status: status.map(|s| s.as_u16() as i32),
                        retry_after,
                        error: error.clone(),
                        interval,
                        max_backoff: self.settings.max_backoff,
                        now,
                    },
                )
                .await?;
                report(PullOutcome::Failed, 0, Some(error))
            }
        };
        txn.commit().await?;
        Ok(result)
    }

    async fn fetch(
        &self,
        feed: &feed::Model,
        state: &feed_fetch_state::Model,
        patience: Patience,
    ) -> Result<(Observation, DateTime<Utc>), Busy> {
        let fetched = self
            .http
            .get_with(patience, &feed.link, conditional_headers(state))
            .await;
        // When the feed was checked: what the record says, and the arrival
        // time of its new (and undated) items.
        let at = Utc::now();
        let fetched = match fetched {
            Ok(fetched) => fetched,
            Err(FetchError::Busy(busy)) => return Err(busy),
            Err(error) => {
                let failure = Observation::Failure {
                    status: None,
                    retry_after: None,
                    error: error.to_string(),
                };
                return Ok((failure, at));
            }
        };
        let Fetched {
            status,
            headers,
            url,
            body,
        } = fetched;
        let observation = match status {
            StatusCode::NOT_MODIFIED => Observation::Success {
                status,
                headers,
                parsed: None,
                items: Vec::new(),
            },
            status if status.is_success() => match parse::parse_blocking(
                body,
                header_str(&headers, header::CONTENT_TYPE).map(str::to_owned),
                url.clone(),
            )
            .await
            {
                Ok(parsed) => {
                    // Relative links resolve against the feed's own URL
                    // (where the last redirect led), as the parser's
                    // xml:base does.
                    match map_blocking(parsed, url, at).await {
                        Some((parsed, items)) => Observation::Success {
                            status,
                            headers,
                            parsed: Some(Box::new(parsed)),
                            items,
                        },
                        None => Observation::Failure {
                            status: Some(status),
                            retry_after: None,
                            error: "the feed's entries could not be read (see the server log)"
                                .into(),
                        },
                    }
                }
                Err(error) => Observation::Failure {
                    status: Some(status),
                    retry_after: None,
                    error: error.to_string(),
                },
            },
            status => Observation::Failure {
                status: Some(status),
                retry_after: pullpolicy::retry_after_hold(
                    header_str(&headers, header::RETRY_AFTER),
                    at,
                    self.settings.max_backoff,
                ),
                error: match status.canonical_reason() {
                    Some(reason) => format!("HTTP {} {reason}", status.as_u16()),
                    None => format!("HTTP {}", status.as_u16()),
                },
            },
        };
        Ok((observation, at))
    }
}

/// Maps a parsed feed's entries on the blocking pool: sanitizing a large
/// feed is CPU work that must not stall an async thread.
async fn map_blocking(
    parsed: parse::ParsedFeed,
    base: Url,
    now: DateTime<Utc>,
) -> Option<(parse::ParsedFeed, Vec<MappedItem>)> {
    let span = tracing::Span::current();
    let mapped = tokio::task::spawn_blocking(move || {
        let items = span.in_scope(|| {
            parsed
                .entries
                .iter()
                .map(|entry| map_entry(entry, Some(&base), now))
                .collect()
        });
        (parsed, items)
    })
    .await;
    // A panic in mapping, or the runtime shutting down.
    mapped.ok()
}

/// `If-None-Match` / `If-Modified-Since` from the stored validators.
fn conditional_headers(state: &feed_fetch_state::Model) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::ACCEPT,
        HeaderValue::from_static(
            "application/rss+xml, application/atom+xml, application/feed+json, application/xml;q=0.9, text/xml;q=0.9, */*;q=0.8",
        ),
    );
    for (name, value) in [
        (header::IF_NONE_MATCH, &state.etag),
        (header::IF_MODIFIED_SINCE, &state.last_modified),
    ] {
        if let Some(value) = value.as_deref().and_then(|v| HeaderValue::from_str(v).ok()) {
            headers.insert(name, value);
        }
    }
    headers
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

/// The fetch state after a 200 or 304. A 304 that omits a validator or a
/// cache header keeps the stored one; a 200 replaces them all.
pub(super) fn success_update(
    state: &feed_fetch_state::Model,
    status: StatusCode,
    headers: &HeaderMap,
    interval: Duration,
    settings: &PullSettings,
    now: DateTime<Utc>,
) -> store::SuccessState {
    let keep = status == StatusCode::NOT_MODIFIED;
    let pick = |name: header::HeaderName, stored: &Option<String>| {
        header_str(headers, name)
            .map(str::to_owned)
            .or_else(|| if keep { stored.clone() } else { None })
    };
    let etag = pick(header::ETAG, &state.etag);
    let last_modified = pick(header::LAST_MODIFIED, &state.last_modified);
    let cache_control = pick(header::CACHE_CONTROL, &state.cache_control);
    let expires_at = match header_str(headers, header::EXPIRES) {
        Some(value) => crate::httpc::retry::parse_http_date(value),
        None if keep => state.expires_at,
        None => None,
    };
    let expires_header = expires_at.map(|at| at.to_rfc2822());
    let freshness = pullpolicy::freshness(cache_control.as_deref(), expires_header.as_deref(), now);
    let retry_after = pullpolicy::retry_after_hold(
        header_str(headers, header::RETRY_AFTER),
        now,
        settings.max_backoff,
    );
    store::SuccessState {
        etag,
        last_modified,
        cache_control,
        expires_at,
        status: status.as_u16() as i32,
        retry_after_until: retry_after
            .map(|d| now + chrono::Duration::from_std(d).unwrap_or_default()),
        next_check_at: pullpolicy::next_check_after_success(
            now,
            interval,
            retry_after,
            freshness,
            settings.max_backoff,
        ),
        now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> feed_fetch_state::Model {
        let at = "2026-11-30T10:00:00Z".parse().unwrap();
        feed_fetch_state::Model {
            feed_id: 1,
            etag: Some("\"v1\"".into()),
            last_modified: Some("Mon, 30 Nov 2026 09:00:00 GMT".into()),
            cache_control: Some("max-age=7200".into()),
            expires_at: None,
            last_checked_at: Some(at),
            next_check_at: Some(at),
            last_http_status: Some(200),
            retry_after_until: None,
            last_success_at: Some(at),
            last_error_at: None,
            last_error: None,
            consecutive_failures: 0,
            updated_at: at,
        }
    }

    fn settings() -> PullSettings {
        PullSettings {
            interval: Duration::from_secs(1800),
            max_backoff: Duration::from_secs(172_800),
            concurrency: 10,
        }
    }

    #[test]
    fn not_modified_keeps_validators_it_does_not_resend() {
        let now = "2026-11-30T12:00:00Z".parse().unwrap();
        let update = success_update(
            &state(),
            StatusCode::NOT_MODIFIED,
            &HeaderMap::new(),
            Duration::from_secs(1800),
            &settings(),
            now,
        );
        assert_eq!(update.etag.as_deref(), Some("\"v1\""));
        assert_eq!(
            update.last_modified.as_deref(),
            Some("Mon, 30 Nov 2026 09:00:00 GMT")
        );
        // The kept max-age (2 h) beats the 30 min interval.
        assert_eq!(update.next_check_at, now + chrono::Duration::hours(2));

        let mut headers = HeaderMap::new();
        headers.insert(header::ETAG, HeaderValue::from_static("\"v2\""));
        let update = success_update(
            &state(),
            StatusCode::OK,
            &headers,
            Duration::from_secs(1800),
            &settings(),
            now,
        );
        assert_eq!(update.etag.as_deref(), Some("\"v2\""));
        assert_eq!(update.last_modified, None, "a 200 replaces every validator");
        assert_eq!(update.next_check_at, now + chrono::Duration::minutes(30));
    }
}
