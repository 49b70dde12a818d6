//! What the reader APIs (Fever, Google Reader) read from a request: the
//! query string and the urlencoded form body, and their Unix times.
//! Every decoded name and value — and the path's parameters, such as a
//! stream in `stream/contents/<stream>` — passes the input rules
//! (`crate::input`) first, so no NUL reaches the database: a request that
//! breaks them is answered `400 BAD_USER_INPUT`.

use axum::{
    RequestExt,
    body::Bytes,
    extract::{FromRequest, Path, Request},
    response::{IntoResponse, Response},
};
use chrono::{DateTime, Utc};

use crate::error::AppError;

/// A request's parameters. Repeated keys (`i`, `a`, `r`) keep every value;
/// a single value comes from the form body before the query string.
pub struct Params {
    query: Vec<(String, String)>,
    body: Vec<(String, String)>,
    raw_body: Vec<u8>,
}

fn first<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(name, _)| name == key)
        .map(|(_, value)| value.as_str())
}

impl Params {
    pub fn new(query: Option<&str>, body: &[u8]) -> Self {
        let parse = |bytes: &[u8]| url::form_urlencoded::parse(bytes).into_owned().collect();
        Params {
            query: parse(query.unwrap_or_default().as_bytes()),
            body: parse(body),
            raw_body: body.to_vec(),
        }
    }

    /// The body as sent, for endpoints that take a document (an OPML
    /// import) rather than a form.
    pub fn raw_body(&self) -> &[u8] {
        &self.raw_body
    }

    /// A value, the form body's over the query string's.
    pub fn one(&self, key: &str) -> Option<&str> {
        first(&self.body, key).or_else(|| first(&self.query, key))
    }

    /// A value from the form body only: secrets must not travel in URLs,
    /// which end up in access logs.
    pub fn from_body(&self, key: &str) -> Option<&str> {
        first(&self.body, key)
    }

    /// Every value of a repeated key, query string first.
    pub fn all(&self, key: &str) -> Vec<&str> {
        self.query
            .iter()
            .chain(&self.body)
            .filter(|(name, _)| name == key)
            .map(|(_, value)| value.as_str())
            .collect()
    }

    /// Whether the key is present at all (Fever's flags carry no value).
    pub fn has(&self, key: &str) -> bool {
        self.one(key).is_some()
    }

    pub fn number(&self, key: &str) -> Option<i64> {
        self.one(key).and_then(|value| value.trim().parse().ok())
    }

    /// A Unix time in whatever unit [`unix_time`] tells apart; older
    /// NetNewsWire sends `ot=1733222400.5`, whose fraction is dropped (an
    /// `ot`/`nt` bound a fraction of a unit early includes the boundary).
    pub fn time(&self, key: &str) -> Option<DateTime<Utc>> {
        let value = self.one(key)?.trim();
        let whole = match value.split_once('.') {
            Some((whole, fraction)) if fraction.bytes().all(|b| b.is_ascii_digit()) => whole,
            Some(_) => return None,
            None => value,
        };
        unix_time(whole.parse().ok()?)
    }
}

/// The query string and the form body of a request (within the server's
/// body limit).
impl<S: Send + Sync> FromRequest<S> for Params {
    type Rejection = Response;

    async fn from_request(mut request: Request, state: &S) -> Result<Self, Response> {
        let query = request.uri().query().map(str::to_owned);
        // Routes without parameters have none to check.
        let path = request
            .extract_parts::<Path<Vec<(String, String)>>>()
            .await
            .map(|Path(pairs)| pairs)
            .unwrap_or_default();
        let body = Bytes::from_request(request, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let params = Params::new(query.as_deref(), &body);
        let pairs = params.query.iter().chain(&params.body).chain(&path);
        crate::input::check_pairs(pairs.map(|(name, value)| (name.as_str(), value.as_str())))
            .map_err(|(name, problem)| {
                AppError::BadUserInput {
                    message: format!("parameter `{name}` {problem}"),
                    field: None,
                }
                .into_response()
            })?;
        Ok(params)
    }
}

/// A Unix time in seconds, milliseconds, microseconds or nanoseconds, told
/// apart by magnitude (as the peers tolerate: Google Reader's `ts` is in
/// microseconds, `ot`/`nt` and Fever's `before` in seconds, and apps mix
/// them up), clamped to 1970–9999: what both databases store.
pub fn unix_time(value: i64) -> Option<DateTime<Utc>> {
    const MAX_SECONDS: i64 = 253_402_300_799; // 9999-12-31T23:59:59Z
    // Each unit's values from year 5138 on read as the next finer unit:
    // 10^11 s is 5138, while 10^11 ms is only 1973.
    const LIMIT: i64 = 100_000_000_000;
    const MILLIS_LIMIT: i64 = LIMIT * 1_000;
    const MICROS_LIMIT: i64 = MILLIS_LIMIT * 1_000;
    let micros = match value {
        ..LIMIT => value.saturating_mul(1_000_000),
        LIMIT..MILLIS_LIMIT => value.saturating_mul(1_000),
        MILLIS_LIMIT..MICROS_LIMIT => value,
        MICROS_LIMIT.. => value / 1_000,
    };
    let seconds = micros.div_euclid(1_000_000).clamp(0, MAX_SECONDS);
    let nanos = if (1..MAX_SECONDS).contains(&seconds) {
        (micros.rem_euclid(1_000_000) * 1_000) as u32
    } else {
        0
    };
    DateTime::<Utc>::from_timestamp(seconds, nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_wins_and_repeated_keys_keep_every_value() {
        let params = Params::new(Some("api&s=query&i=1&n=5"), b"s=body&i=2&i=3&api_key=k");
        assert_eq!(params.one("s"), Some("body"));
        assert_eq!(params.all("i"), ["1", "2", "3"]);
        assert_eq!(params.number("n"), Some(5));
        let times = Params::new(Some("ot=1733222400.5&nt=1733222400&ts=1.2.3&x=.5"), b"");
        let at = |key| times.time(key).map(|at| at.to_rfc3339());
        assert_eq!(at("ot").as_deref(), Some("2024-12-03T10:40:00+00:00"));
        assert_eq!(at("nt"), at("ot"));
        assert_eq!(at("ts"), None);
        assert_eq!(at("x"), None);
        assert!(params.has("api"));
        assert_eq!(params.from_body("api_key"), Some("k"));
        assert_eq!(
            params.from_body("n"),
            None,
            "query values are not body values"
        );
    }

    #[test]
    fn unix_times_are_told_apart_by_magnitude_and_stay_in_range() {
        let at = |value| unix_time(value).unwrap().to_rfc3339();
        // 2025-11-30T12:00:00Z in seconds, milli-, micro- and nanoseconds.
        assert_eq!(at(1_764_504_000), "2025-11-30T12:00:00+00:00");
        assert_eq!(at(1_764_504_000_123), "2025-11-30T12:00:00.123+00:00");
        assert_eq!(
            at(1_764_504_000_123_456),
            "2025-11-30T12:00:00.123456+00:00"
        );
        assert_eq!(
            at(1_764_504_000_123_456_789),
            "2025-11-30T12:00:00.123456+00:00"
        );
        // Early dates in each unit stay in that unit's range.
        assert_eq!(at(86_400), "1970-01-02T00:00:00+00:00");
        assert_eq!(at(99_999_999_999), "5138-11-16T09:46:39+00:00");
        assert_eq!(at(-5), "1970-01-01T00:00:00+00:00");
        assert_eq!(at(i64::MIN), "1970-01-01T00:00:00+00:00");
        assert_eq!(at(i64::MAX), "2262-04-11T23:47:16.854775+00:00");
    }
}
