//! Trying a request again: capped exponential backoff with jitter
//! (`backon`), where the server's own word wins — `Retry-After` (seconds
//! or an HTTP date), or a wait the caller reads from the answer (a
//! provider's rate-limit reset header or body code). Which answers are
//! worth another attempt is the caller's to say ([`Verdict`]); transport
//! failures (timeouts, refused connections) always are, and a refusal of
//! ours (the address policy, an oversized body) never is.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use chrono::{DateTime, NaiveDateTime, Utc};
use reqwest::{Method, header::HeaderMap};

use super::{FetchError, Fetched, HttpClient};

/// How many times, and how long between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub max_attempts: usize,
    pub min_delay: Duration,
    pub max_delay: Duration,
    /// The longest wait a server's `Retry-After` may ask for; beyond it the
    /// answer is returned as it is (the caller decides what a long
    /// refusal means).
    pub max_server_wait: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            min_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            max_server_wait: Duration::from_secs(120),
        }
    }
}

/// What the caller makes of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Final: return it.
    Done,
    /// Worth another attempt: after this long if the answer said
    /// (`None`: the backoff decides).
    Retry(Option<Duration>),
}

/// The usual verdict: 429 and 5xx are retried, after `Retry-After` when
/// the server gave one; anything else is final.
pub fn retry_overloaded(answer: &Fetched) -> Verdict {
    let status = answer.status.as_u16();
    if status == 429 || (500..600).contains(&status) {
        Verdict::Retry(retry_after(&answer.headers, Utc::now()))
    } else {
        Verdict::Done
    }
}

/// The `Retry-After` of `headers`, if readable.
pub fn retry_after(headers: &HeaderMap, now: DateTime<Utc>) -> Option<Duration> {
    headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| parse_retry_after(value, now))
}

/// The wait before the next attempt, or `None` to stop: the server's word
/// when it gave one (capped by `max_server_wait`: a longer one stops),
/// else the next step of the backoff.
pub fn next_wait(
    policy: &RetryPolicy,
    backoff: &mut impl Iterator<Item = Duration>,
    server: Option<Duration>,
) -> Option<Duration> {
    let step = backoff.next()?;
    match server {
        Some(wait) if wait > policy.max_server_wait => None,
        Some(wait) => Some(wait),
        None => Some(step),
    }
}

/// The waits between attempts under `policy`: capped exponential with
/// jitter, one fewer than the attempts.
fn backoff(policy: &RetryPolicy) -> impl Iterator<Item = Duration> + Send + use<> {
    ExponentialBuilder::default()
        .with_min_delay(policy.min_delay)
        .with_max_delay(policy.max_delay)
        .with_max_times(policy.max_attempts.saturating_sub(1))
        .with_jitter()
        .build()
}

/// The one retry loop: `attempt` again after a failure worth it (see the
/// module doc), up to `policy`, waiting through `sleep`; the last answer
/// or error when out of attempts. Callers that do something around each
/// attempt (the docs platforms wait for their rate slot, and count) drive
/// it with their own closures.
pub async fn retrying<A, AF, S, SF>(
    policy: &RetryPolicy,
    mut attempt: A,
    verdict: impl Fn(&Fetched) -> Verdict,
    mut sleep: S,
) -> Result<Fetched, FetchError>
where
    A: FnMut() -> AF,
    AF: Future<Output = Result<Fetched, FetchError>>,
    S: FnMut(Duration) -> SF,
    SF: Future<Output = ()>,
{
    let mut backoff = backoff(policy);
    loop {
        let answer = attempt().await;
        let server = match &answer {
            Ok(fetched) => match verdict(fetched) {
                Verdict::Done => return answer,
                Verdict::Retry(wait) => wait,
            },
            Err(FetchError::Timeout(_) | FetchError::Connect(_) | FetchError::Transport(_)) => None,
            Err(_) => return answer,
        };
        match next_wait(policy, &mut backoff, server) {
            Some(wait) => sleep(wait).await,
            None => return answer,
        }
    }
}

impl HttpClient {
    /// [`HttpClient::request`] again after a failure worth it (see the
    /// module doc), up to `policy`; the last answer or error when out of
    /// attempts. Each attempt waits for its turn under the client's limits.
    pub async fn request_retrying(
        &self,
        policy: &RetryPolicy,
        method: Method,
        url: &str,
        headers: HeaderMap,
        body: Option<Vec<u8>>,
        verdict: impl Fn(&Fetched) -> Verdict,
    ) -> Result<Fetched, FetchError> {
        let attempt = || self.request(method.clone(), url, headers.clone(), body.clone());
        retrying(policy, attempt, verdict, tokio::time::sleep).await
    }
}

/// `Retry-After` as delta-seconds or an HTTP date; a date in the past is 0.
pub fn parse_retry_after(value: &str, now: DateTime<Utc>) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = parse_http_date(value)?;
    Some((at - now).to_std().unwrap_or_default())
}

/// An HTTP date in any of the three forms RFC 9110 requires recipients to
/// accept: IMF-fixdate, RFC 850 and asctime.
pub fn parse_http_date(value: &str) -> Option<DateTime<Utc>> {
    let value = value.trim();
    if let Ok(at) = DateTime::parse_from_rfc2822(value) {
        return Some(at.with_timezone(&Utc));
    }
    ["%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"]
        .iter()
        .find_map(|format| NaiveDateTime::parse_from_str(value, format).ok())
        .map(|naive| naive.and_utc())
}

#[cfg(test)]
mod tests {
    use std::sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    };

    use axum::{Router, http::StatusCode, response::IntoResponse, routing::get};
    use url::Url;

    use super::*;
    use crate::httpc::{Destination, HttpSettings};

    fn now() -> DateTime<Utc> {
        "2026-11-30T12:00:00Z".parse().unwrap()
    }

    #[test]
    fn retry_after_accepts_seconds_and_all_http_date_forms() {
        assert_eq!(
            parse_retry_after("120", now()),
            Some(Duration::from_secs(120))
        );
        for date in [
            "Mon, 30 Nov 2026 12:05:00 GMT",
            "Monday, 30-Nov-26 12:05:00 GMT",
            "Mon Nov 30 12:05:00 2026",
        ] {
            assert_eq!(
                parse_retry_after(date, now()),
                Some(Duration::from_secs(300)),
                "{date}"
            );
        }
        assert_eq!(
            parse_retry_after("Mon, 30 Nov 2026 11:00:00 GMT", now()),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now()), None);
        assert_eq!(parse_retry_after("-5", now()), None);
    }

    #[test]
    fn the_servers_word_wins_over_the_backoff_within_its_cap() {
        let policy = RetryPolicy {
            max_attempts: 3,
            ..Default::default()
        };
        let mut steps = [Duration::from_millis(500), Duration::from_secs(1)].into_iter();
        assert_eq!(
            next_wait(&policy, &mut steps, Some(Duration::from_secs(7))),
            Some(Duration::from_secs(7)),
            "Retry-After beats the shorter backoff step"
        );
        assert_eq!(
            next_wait(&policy, &mut steps, None),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            next_wait(&policy, &mut steps, None),
            None,
            "out of attempts"
        );
        let mut steps = [Duration::from_millis(500)].into_iter();
        assert_eq!(
            next_wait(&policy, &mut steps, Some(Duration::from_secs(3600))),
            None,
            "an hour's wait is the caller's to handle"
        );
    }

    /// A loopback server that answers 429 (`Retry-After: 0`) twice, then 200.
    async fn flaky() -> (Url, Arc<AtomicUsize>) {
        let hits = Arc::new(AtomicUsize::new(0));
        let counter = hits.clone();
        let app = Router::new().route(
            "/",
            get(move || {
                let counter = counter.clone();
                async move {
                    if counter.fetch_add(1, Ordering::SeqCst) < 2 {
                        (
                            StatusCode::TOO_MANY_REQUESTS,
                            [("retry-after", "0")],
                            "slow down",
                        )
                            .into_response()
                    } else {
                        "ok".into_response()
                    }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (Url::parse(&format!("http://{addr}/")).unwrap(), hits)
    }

    /// GETs `url` with a client configured for `base`, retrying overloads.
    async fn get_retrying(
        base: &Url,
        url: &str,
        policy: &RetryPolicy,
    ) -> Result<Fetched, FetchError> {
        HttpClient::new(HttpSettings {
            destination: Destination::configured(base).unwrap(),
            ..Default::default()
        })
        .unwrap()
        .request_retrying(
            policy,
            Method::GET,
            url,
            HeaderMap::new(),
            None,
            retry_overloaded,
        )
        .await
    }

    #[tokio::test]
    async fn a_rate_limited_answer_is_tried_again_until_it_succeeds() {
        let (base, hits) = flaky().await;
        let answer = get_retrying(&base, base.as_str(), &RetryPolicy::default())
            .await
            .unwrap();
        assert_eq!(answer.status, StatusCode::OK);
        assert_eq!(hits.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn out_of_attempts_the_last_answer_is_returned() {
        let (base, hits) = flaky().await;
        let policy = RetryPolicy {
            max_attempts: 2,
            ..Default::default()
        };
        let answer = get_retrying(&base, base.as_str(), &policy).await.unwrap();
        assert_eq!(answer.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(hits.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_refusal_of_ours_is_never_tried_again() {
        let (base, hits) = flaky().await;
        let error = get_retrying(&base, "http://127.0.0.1:9/", &RetryPolicy::default())
            .await
            .unwrap_err();
        assert!(matches!(error, FetchError::Refused(_)), "{error}");
        assert_eq!(hits.load(Ordering::SeqCst), 0);
    }
}
