//! How hard the docs adapters press on a platform: a steady rate per
//! platform endpoint (the API, the asset downloads), and another attempt
//! after an answer that says "later".
//!
//! - [`RateGate`]: a token bucket with burst 1 (`governor`'s GCRA), so
//!   requests are spaced `1/qps` apart and never bunch after a quiet spell.
//!   Governor has no way to reserve a future slot: a waiter that sleeps and
//!   checks again races every other waiter for the same slot. So callers
//!   first take their place in a fair (FIFO) queue, and the one at its head
//!   sleeps until governor says its slot is due: each caller's slot is
//!   claimed before it sleeps, `n` concurrent callers get `n` distinct
//!   slots, and each sleeps at most once.
//! - [`Pacer`]: one request with its retries — each attempt waits for its
//!   slot; a retryable answer waits for the server's word (`Retry-After`,
//!   or a wait a provider gives in its own header), else the next step of
//!   the one capped exponential backoff. The retry loop is `httpc::retry`'s;
//!   this only adds the slot and the counting. Which answers are retryable
//!   is the platform's predicate: [`notion_verdict`] (429, 529 and other
//!   5xx), [`feishu_verdict`] (429 and body code 99991400). Transport
//!   failures are always retried.

use std::{
    num::NonZeroU32,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use chrono::Utc;
use governor::{
    Quota, RateLimiter,
    clock::{Clock, DefaultClock},
    middleware::NoOpMiddleware,
    state::{InMemoryState, NotKeyed},
};
use reqwest::{Method, header::HeaderMap};

use crate::httpc::{
    FetchError, Fetched, HttpClient,
    retry::{self, RetryPolicy, Verdict},
};

/// The default rate of each Notion endpoint (API, assets): Notion's
/// documented average of three requests per second per integration.
pub const NOTION_QPS: NonZeroU32 = NonZeroU32::new(3).expect("3 is not zero");
/// The default rate of each Feishu endpoint (API, assets).
pub const FEISHU_QPS: NonZeroU32 = NonZeroU32::new(5).expect("5 is not zero");
/// Retries of one request after the first attempt (opendoc's per-item 3).
pub const RETRIES_PER_ITEM: usize = 3;
/// Feishu's body code for "too many requests", answered with HTTP 400 or
/// 200 by some document APIs rather than 429.
pub const FEISHU_RATE_LIMITED: i64 = 99991400;

/// Something that waits. The gate and the pacer wait through it, so tests
/// can record the waits (and move a fake clock) instead of sleeping.
#[async_trait::async_trait]
pub trait Sleeper: Send + Sync {
    /// Returns after `duration`.
    async fn sleep(&self, duration: Duration);
}

/// Real time.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioSleeper;

#[async_trait::async_trait]
impl Sleeper for TokioSleeper {
    async fn sleep(&self, duration: Duration) {
        tokio::time::sleep(duration).await;
    }
}

type Limiter<C> = RateLimiter<NotKeyed, InMemoryState, C, NoOpMiddleware<<C as Clock>::Instant>>;

/// A steady rate with burst 1, slots handed out in arrival order (see the
/// module doc).
pub struct RateGate<C: Clock = DefaultClock> {
    limiter: Limiter<C>,
    clock: C,
    /// The place in line; held while its holder sleeps for its slot.
    queue: tokio::sync::Mutex<()>,
    sleeper: Arc<dyn Sleeper>,
}

impl RateGate {
    /// `qps` requests per second in real time.
    pub fn per_second(qps: NonZeroU32) -> Self {
        Self::with_clock(qps, DefaultClock::default(), Arc::new(TokioSleeper))
    }
}

impl<C: Clock + Clone> RateGate<C> {
    /// `qps` requests per second on `clock`, waiting through `sleeper`.
    pub fn with_clock(qps: NonZeroU32, clock: C, sleeper: Arc<dyn Sleeper>) -> Self {
        let quota = Quota::per_second(qps).allow_burst(NonZeroU32::MIN);
        RateGate {
            limiter: RateLimiter::direct_with_clock(quota, clock.clone()),
            clock,
            queue: tokio::sync::Mutex::new(()),
            sleeper,
        }
    }

    /// Waits for this caller's slot. Cancelling the wait gives the place up.
    pub async fn until_ready(&self) {
        // tokio's mutex is fair: places are granted in the order asked.
        let _place = self.queue.lock().await;
        while let Err(not_until) = self.limiter.check() {
            self.sleeper
                .sleep(not_until.wait_time_from(self.clock.now()))
                .await;
        }
    }
}

/// What the pacer has done, for a run's progress (requests, waits).
#[derive(Debug, Default)]
pub struct PacerStats {
    requests: AtomicU64,
    retries: AtomicU64,
}

impl PacerStats {
    /// Requests sent, retries included.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Attempts made again after a retryable answer or failure.
    pub fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }
}

/// One platform endpoint's requests: paced by a [`RateGate`], retried
/// under a [`RetryPolicy`] (see the module doc).
pub struct Pacer {
    gate: RateGate,
    policy: RetryPolicy,
    sleeper: Arc<dyn Sleeper>,
    stats: PacerStats,
}

/// The docs platforms' retry policy: [`RETRIES_PER_ITEM`] retries, from
/// one second up to a minute, and a server may ask for up to five minutes.
pub fn docs_retry_policy() -> RetryPolicy {
    RetryPolicy {
        max_attempts: RETRIES_PER_ITEM + 1,
        min_delay: Duration::from_secs(1),
        max_delay: Duration::from_secs(60),
        max_server_wait: Duration::from_secs(300),
    }
}

impl Pacer {
    /// `qps` requests per second, retried under `policy`, the retry waits
    /// taken through `sleeper`.
    pub fn new(qps: NonZeroU32, policy: RetryPolicy, sleeper: Arc<dyn Sleeper>) -> Self {
        Pacer {
            gate: RateGate::per_second(qps),
            policy,
            sleeper,
            stats: PacerStats::default(),
        }
    }

    /// What it has sent so far.
    pub fn stats(&self) -> &PacerStats {
        &self.stats
    }

    /// Sends one request, each attempt in its slot, again while `verdict`
    /// (or a transport failure) says so and attempts remain; the last
    /// answer or error otherwise.
    pub async fn send(
        &self,
        client: &HttpClient,
        method: Method,
        url: &str,
        headers: HeaderMap,
        body: Option<Vec<u8>>,
        verdict: impl Fn(&Fetched) -> Verdict,
    ) -> Result<Fetched, FetchError> {
        let attempt = || async {
            self.gate.until_ready().await;
            self.stats.requests.fetch_add(1, Ordering::Relaxed);
            client
                .request(method.clone(), url, headers.clone(), body.clone())
                .await
        };
        let sleep = |wait| {
            self.stats.retries.fetch_add(1, Ordering::Relaxed);
            self.sleeper.sleep(wait)
        };
        retry::retrying(&self.policy, attempt, verdict, sleep).await
    }
}

/// Notion: 429 (`rate_limited`), 529 (overloaded) and the other 5xx are
/// retried, after `Retry-After` when given.
pub fn notion_verdict(answer: &Fetched) -> Verdict {
    retry::retry_overloaded(answer)
}

/// Feishu: HTTP 429, or body code 99991400 whatever the status (some
/// document APIs answer it with 400), after `x-ogw-ratelimit-reset`
/// (seconds) or `Retry-After` when given; 5xx retried too.
pub fn feishu_verdict(answer: &Fetched) -> Verdict {
    let status = answer.status.as_u16();
    let code = serde_json::from_slice::<serde_json::Value>(&answer.body)
        .ok()
        .and_then(|body| body.get("code").and_then(serde_json::Value::as_i64));
    if status == 429 || code == Some(FEISHU_RATE_LIMITED) {
        let reset = answer
            .headers
            .get("x-ogw-ratelimit-reset")
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        Verdict::Retry(reset.or_else(|| retry::retry_after(&answer.headers, Utc::now())))
    } else {
        // Any other answer as everyone's: 5xx retried, the rest final.
        retry::retry_overloaded(answer)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use governor::clock::FakeRelativeClock;
    use reqwest::{StatusCode, header::HeaderValue};
    use url::Url;

    use super::*;

    /// Moves the fake clock instead of sleeping, and records each wait.
    struct FakeSleeper {
        clock: FakeRelativeClock,
        waits: Mutex<Vec<Duration>>,
    }

    #[async_trait::async_trait]
    impl Sleeper for FakeSleeper {
        async fn sleep(&self, duration: Duration) {
            self.waits.lock().unwrap().push(duration);
            self.clock.advance(duration);
            // Lets the other callers run, as a real sleep would.
            tokio::task::yield_now().await;
        }
    }

    fn since_start(clock: &FakeRelativeClock) -> Duration {
        Duration::from(clock.now())
    }

    #[tokio::test]
    async fn concurrent_callers_get_distinct_slots_spaced_one_over_qps() {
        let clock = FakeRelativeClock::default();
        let sleeper = Arc::new(FakeSleeper {
            clock: clock.clone(),
            waits: Mutex::default(),
        });
        let gate =
            RateGate::with_clock(NonZeroU32::new(4).unwrap(), clock.clone(), sleeper.clone());
        let granted = Mutex::new(Vec::new());
        let callers = (0..5).map(|caller| {
            let (gate, granted, clock) = (&gate, &granted, &clock);
            async move {
                gate.until_ready().await;
                granted.lock().unwrap().push((caller, since_start(clock)));
            }
        });
        futures_util::future::join_all(callers).await;
        let granted = granted.into_inner().unwrap();
        let quarter = Duration::from_millis(250);
        // In arrival order, one slot each, 1/qps apart from the first.
        assert_eq!(
            granted,
            (0..5).map(|n| (n, quarter * n as u32)).collect::<Vec<_>>()
        );
        // Claimed before sleeping: every waiter slept once, for exactly the
        // gap to its own slot; nobody woke to find its slot taken.
        assert_eq!(*sleeper.waits.lock().unwrap(), vec![quarter; 4]);
    }

    #[tokio::test]
    async fn a_quiet_spell_does_not_bank_a_burst() {
        let clock = FakeRelativeClock::default();
        let sleeper = Arc::new(FakeSleeper {
            clock: clock.clone(),
            waits: Mutex::default(),
        });
        let gate =
            RateGate::with_clock(NonZeroU32::new(2).unwrap(), clock.clone(), sleeper.clone());
        gate.until_ready().await;
        clock.advance(Duration::from_secs(10));
        gate.until_ready().await;
        gate.until_ready().await;
        // Burst 1: after ten idle seconds one request goes at once, the next
        // still waits a full half second.
        assert_eq!(
            *sleeper.waits.lock().unwrap(),
            vec![Duration::from_millis(500)]
        );
    }

    fn answer(status: u16, headers: &[(&'static str, &str)], body: &str) -> Fetched {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        Fetched {
            status: StatusCode::from_u16(status).unwrap(),
            headers: map,
            url: Url::parse("https://api.example/").unwrap(),
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn notion_retries_rate_limits_and_overload_where_retry_after_wins() {
        let cases = [
            (
                answer(429, &[("retry-after", "7")], ""),
                Verdict::Retry(Some(Duration::from_secs(7))),
            ),
            (answer(429, &[], ""), Verdict::Retry(None)),
            (
                answer(529, &[("retry-after", "2")], ""),
                Verdict::Retry(Some(Duration::from_secs(2))),
            ),
            (answer(502, &[], ""), Verdict::Retry(None)),
            (answer(200, &[], "{}"), Verdict::Done),
            (
                answer(400, &[], r#"{"code":"validation_error"}"#),
                Verdict::Done,
            ),
            (answer(401, &[], ""), Verdict::Done),
            (answer(404, &[], ""), Verdict::Done),
        ];
        for (answer, expected) in cases {
            assert_eq!(notion_verdict(&answer), expected, "{}", answer.status);
        }
    }

    #[test]
    fn feishu_retries_its_body_code_whatever_the_status() {
        let limited = r#"{"code":99991400,"msg":"request trigger frequency limit"}"#;
        let cases = [
            (
                answer(400, &[("x-ogw-ratelimit-reset", "3")], limited),
                Verdict::Retry(Some(Duration::from_secs(3))),
            ),
            (answer(200, &[], limited), Verdict::Retry(None)),
            (
                answer(429, &[("retry-after", "4")], ""),
                Verdict::Retry(Some(Duration::from_secs(4))),
            ),
            (answer(503, &[], ""), Verdict::Retry(None)),
            (
                answer(400, &[], r#"{"code":99991663,"msg":"token expired"}"#),
                Verdict::Done,
            ),
            (answer(200, &[], r#"{"code":0,"data":{}}"#), Verdict::Done),
        ];
        for (answer, expected) in cases {
            assert_eq!(feishu_verdict(&answer), expected, "{}", answer.status);
        }
    }
}
