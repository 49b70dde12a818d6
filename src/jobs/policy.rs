//! Pure decisions of the job runner: payload hashing, retry backoff, what an
//! expired lease or a failure turns into, periodic-job periods. No I/O; the
//! clock and randomness are passed in.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

/// JSON with object keys sorted at every level, so equal payloads hash
/// equally whatever the client's key order.
pub fn canonical_json(value: &Value) -> String {
    fn write(value: &Value, out: &mut String) {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (i, key) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(key.clone()).to_string());
                    out.push(':');
                    write(&map[key], out);
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            scalar => out.push_str(&scalar.to_string()),
        }
    }
    let mut out = String::new();
    write(value, &mut out);
    out
}

/// The hash an idempotency key is bound to: the task kind and its canonical payload.
pub fn payload_hash(kind: &str, payload: &Value) -> String {
    crate::digest::sha256_hex(&[kind, &canonical_json(payload)])
}

/// Backoff before retry number `attempt` (1 = the first retry):
/// `base × 2^(attempt−1)`, capped at `max`, then scaled into
/// `[50 %, 100 %]` by `jitter ∈ [0, 1)` so failed tasks spread out.
pub fn retry_delay(attempt: u32, base: Duration, max: Duration, jitter: f64) -> Duration {
    let exponent = attempt.saturating_sub(1).min(30);
    let raw = base.saturating_mul(1u32 << exponent).min(max);
    raw.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
}

/// How a worker's hold on a task ends.
#[derive(Debug, Clone, PartialEq)]
pub enum Finish {
    Succeeded(Option<Value>),
    Failed(String),
    Superseded,
    Cancelled,
    /// Back to the queue, not before `run_at`, with the error that caused it.
    Retry {
        error: String,
        run_at: DateTime<Utc>,
    },
    /// Back to the queue, not before `run_at`, the attempt not counted
    /// (shutdown: at once; a deferred stage: when it asked).
    Release {
        run_at: DateTime<Utc>,
    },
}

/// Backoff knobs.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    pub base: Duration,
    pub max: Duration,
}

/// What a failed attempt (an error, or an expired lease) turns into: a
/// retry after backoff while attempts remain, else `FAILED` with the error.
pub fn after_failed_attempt(
    attempt_count: i32,
    max_attempts: i32,
    error: String,
    now: DateTime<Utc>,
    retry: RetryPolicy,
    jitter: f64,
) -> Finish {
    if attempt_count >= max_attempts {
        return Finish::Failed(error);
    }
    let delay = retry_delay(attempt_count.max(1) as u32, retry.base, retry.max, jitter);
    Finish::Retry {
        error,
        run_at: now + chrono::Duration::from_std(delay).unwrap_or_default(),
    }
}

/// The index of the period `now_secs` falls in; a periodic job fires once per index.
pub fn period_index(now_secs: i64, period: Duration) -> i64 {
    let period = period.as_secs().max(1) as i64;
    now_secs.div_euclid(period)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_does_not_change_the_hash() {
        let a = json!({ "b": 1, "a": { "y": [1, 2], "x": null } });
        let b = json!({ "a": { "x": null, "y": [1, 2] }, "b": 1 });
        assert_eq!(payload_hash("k", &a), payload_hash("k", &b));
        assert_ne!(payload_hash("k", &a), payload_hash("other", &a));
        assert_ne!(payload_hash("k", &a), payload_hash("k", &json!({ "b": 2 })));
        assert_eq!(canonical_json(&b), r#"{"a":{"x":null,"y":[1,2]},"b":1}"#);
    }

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        let base = Duration::from_secs(1);
        let max = Duration::from_secs(60);
        assert_eq!(retry_delay(1, base, max, 1.0), Duration::from_secs(1));
        assert_eq!(retry_delay(3, base, max, 1.0), Duration::from_secs(4));
        assert_eq!(retry_delay(3, base, max, 0.0), Duration::from_secs(2));
        assert_eq!(retry_delay(20, base, max, 1.0), max);
        assert_eq!(
            retry_delay(u32::MAX, base, max, 0.5),
            Duration::from_secs(45)
        );
    }

    #[test]
    fn failed_attempts_retry_with_backoff_until_max() {
        let now: DateTime<Utc> = "2026-11-30T10:00:00Z".parse().unwrap();
        let retry = RetryPolicy {
            base: Duration::from_secs(2),
            max: Duration::from_secs(60),
        };
        assert_eq!(
            after_failed_attempt(2, 3, "boom".into(), now, retry, 1.0),
            Finish::Retry {
                error: "boom".into(),
                run_at: now + chrono::Duration::seconds(4)
            }
        );
        assert_eq!(
            after_failed_attempt(3, 3, "boom".into(), now, retry, 1.0),
            Finish::Failed("boom".into())
        );
    }

    #[test]
    fn periods_are_aligned_to_the_epoch() {
        let hour = Duration::from_secs(3600);
        assert_eq!(period_index(3599, hour), 0);
        assert_eq!(period_index(3600, hour), 1);
        assert_eq!(period_index(7199, hour), 1);
    }
}
