//! How hard one caller's client may press: at most `in_flight` requests
//! at once in all, at most `per_host` at once to one host, and — when set —
//! at most `per_host_rate` requests to one host (a token bucket
//! per host: `governor`'s keyed limiter).
//!
//! A request either waits for its turn ([`Limits::turn`]) or asks for it
//! without waiting ([`Limits::try_turn`]). The second is for work that runs
//! in a job runner's worker slot: rather than hold the slot while a busy
//! host finishes, the task goes back to its queue for [`Busy::retry_in`]
//! (the feed pulls do this, so a slow host never starves resource tasks of
//! `q:short` workers). So that the tasks turned away do not all come back
//! at once, the n-th one turned away from a busy host is told to come back
//! n spacings later, a spacing being the client's typical request time
//! over the room the limit has: its place is claimed before it goes.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use governor::{
    DefaultKeyedRateLimiter, Quota, RateLimiter,
    clock::{Clock, DefaultClock},
};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A caller's limits (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitSettings {
    /// Requests at once in all.
    pub in_flight: usize,
    /// Requests at once to one host.
    pub per_host: usize,
    /// Requests to one host per period (`Quota::per_second(n)`: burst n;
    /// `Quota::per_minute(n)`: evenly spaced, burst n), if limited.
    pub per_host_rate: Option<Quota>,
}

impl Default for LimitSettings {
    /// Unlimited in all, two at once per host (what a polite crawler does).
    fn default() -> Self {
        LimitSettings {
            in_flight: usize::MAX >> 4,
            per_host: 2,
            per_host_rate: None,
        }
    }
}

/// No room right now: come back after `retry_in`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Busy {
    pub retry_in: Duration,
}

/// The right to send one request; the room it holds is given back on drop.
pub struct Turn {
    _overall: Option<OwnedSemaphorePermit>,
    host: HostPermit,
    started: Instant,
    limits: Arc<Limits>,
}

impl std::fmt::Debug for Turn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Turn")
            .field("host", &self.host.host)
            .finish()
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.limits.observe(self.started.elapsed());
    }
}

/// A typical request takes this long until the client has seen some.
const FIRST_GUESS: Duration = Duration::from_millis(500);
/// The shortest spacing between tasks sent back from one busy key.
const MIN_SPACING: Duration = Duration::from_millis(20);
/// Forget the places of busy keys once this many are kept.
const MAX_KEPT: usize = 10_000;

pub struct Limits {
    settings: LimitSettings,
    overall: Arc<Semaphore>,
    hosts: Arc<Mutex<HashMap<String, Arc<Semaphore>>>>,
    rate: Option<DefaultKeyedRateLimiter<String>>,
    /// Exponentially weighted mean request time, in microseconds.
    typical_micros: AtomicU64,
    /// Per busy key (a host, or "" for the overall limit): when the last
    /// task sent back from it was told to return.
    returns: Mutex<HashMap<String, Instant>>,
}

impl Limits {
    pub fn new(settings: LimitSettings) -> Arc<Self> {
        Arc::new(Limits {
            overall: Arc::new(Semaphore::new(
                settings.in_flight.clamp(1, Semaphore::MAX_PERMITS),
            )),
            hosts: Arc::default(),
            rate: settings.per_host_rate.map(RateLimiter::keyed),
            typical_micros: AtomicU64::new(FIRST_GUESS.as_micros() as u64),
            returns: Mutex::default(),
            settings: LimitSettings {
                per_host: settings.per_host.max(1),
                ..settings
            },
        })
    }

    /// Waits for room in all, then for the host, then for its rate.
    pub async fn turn(self: &Arc<Self>, host: &str) -> Turn {
        // (The semaphores are never closed, so acquiring cannot fail.)
        let overall = self.overall.clone().acquire_owned().await.ok();
        let host_permit = HostPermit::new(self.host_semaphore(host), host, &self.hosts);
        let host_permit = host_permit.acquire().await;
        if let Some(rate) = &self.rate {
            rate.until_key_ready(&host.to_owned()).await;
        }
        Turn {
            _overall: overall,
            host: host_permit,
            started: Instant::now(),
            limits: self.clone(),
        }
    }

    /// The turn if there is room now, else how long to stay away.
    pub fn try_turn(self: &Arc<Self>, host: &str) -> Result<Turn, Busy> {
        let Ok(overall) = self.overall.clone().try_acquire_owned() else {
            return Err(self.sent_back("", self.settings.in_flight));
        };
        let Some(host_permit) =
            HostPermit::new(self.host_semaphore(host), host, &self.hosts).try_acquire()
        else {
            return Err(self.sent_back(host, self.settings.per_host));
        };
        if let Some(rate) = &self.rate {
            if let Err(not_until) = rate.check_key(&host.to_owned()) {
                let wait = not_until.wait_time_from(DefaultClock::default().now());
                return Err(Busy {
                    retry_in: wait.max(MIN_SPACING),
                });
            }
            if rate.len() > MAX_KEPT {
                rate.retain_recent();
            }
        }
        Ok(Turn {
            _overall: Some(overall),
            host: host_permit,
            started: Instant::now(),
            limits: self.clone(),
        })
    }

    fn host_semaphore(&self, host: &str) -> Arc<Semaphore> {
        let mut hosts = self
            .hosts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        hosts
            .entry(host.to_owned())
            .or_insert_with(|| Arc::new(Semaphore::new(self.settings.per_host)))
            .clone()
    }

    /// Claims the next return place of a busy `key` with `room` requests
    /// at once: one spacing after the last one handed out (or from now).
    fn sent_back(&self, key: &str, room: usize) -> Busy {
        let typical = Duration::from_micros(self.typical_micros.load(Ordering::Relaxed));
        let spacing = (typical / room.clamp(1, u32::MAX as usize) as u32).max(MIN_SPACING);
        let now = Instant::now();
        let mut returns = self
            .returns
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if returns.len() > MAX_KEPT {
            returns.retain(|_, at| *at > now);
        }
        let last = returns
            .get(key)
            .copied()
            .filter(|at| *at > now)
            .unwrap_or(now);
        let at = last + spacing;
        returns.insert(key.to_owned(), at);
        Busy { retry_in: at - now }
    }

    /// Folds one request's time into the typical one (weight 1/8).
    fn observe(&self, took: Duration) {
        let took = took.as_micros().min(u128::from(u64::MAX >> 4)) as u64;
        let _ = self
            .typical_micros
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |mean| {
                Some(mean - mean / 8 + took / 8)
            });
    }

    #[cfg(test)]
    fn tracked_hosts(&self) -> usize {
        self.hosts.lock().map(|hosts| hosts.len()).unwrap_or(0)
    }
}

/// One host's permit; the host is forgotten once nobody holds or waits
/// for it, so the map holds only busy hosts.
struct HostPermit {
    semaphore: Arc<Semaphore>,
    permit: Option<OwnedSemaphorePermit>,
    host: String,
    hosts: Arc<Mutex<HashMap<String, Arc<Semaphore>>>>,
}

impl HostPermit {
    fn new(
        semaphore: Arc<Semaphore>,
        host: &str,
        hosts: &Arc<Mutex<HashMap<String, Arc<Semaphore>>>>,
    ) -> Self {
        HostPermit {
            semaphore,
            permit: None,
            host: host.to_owned(),
            hosts: hosts.clone(),
        }
    }

    async fn acquire(mut self) -> Self {
        self.permit = self.semaphore.clone().acquire_owned().await.ok();
        self
    }

    fn try_acquire(mut self) -> Option<Self> {
        self.permit = Some(self.semaphore.clone().try_acquire_owned().ok()?);
        Some(self)
    }
}

impl Drop for HostPermit {
    fn drop(&mut self) {
        drop(self.permit.take());
        let mut hosts = self
            .hosts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // Two references: the map's and ours. Nobody else waits or holds.
        if hosts
            .get(&self.host)
            .is_some_and(|semaphore| Arc::strong_count(semaphore) == 2)
        {
            hosts.remove(&self.host);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU32;

    use super::*;

    fn limits(in_flight: usize, per_host: usize, rate: Option<u32>) -> Arc<Limits> {
        Limits::new(LimitSettings {
            in_flight,
            per_host,
            per_host_rate: rate.and_then(NonZeroU32::new).map(Quota::per_second),
        })
    }

    #[tokio::test]
    async fn a_busy_host_sends_callers_back_without_holding_anything() {
        let limits = limits(10, 2, None);
        let first = limits.try_turn("a.example").unwrap();
        let _second = limits.try_turn("a.example").unwrap();
        let busy = limits.try_turn("a.example").unwrap_err();
        // Another host is not held up, and the overall room was given back.
        let _other = limits.try_turn("b.example").unwrap();
        assert_eq!(limits.overall.available_permits(), 7);
        // The ones sent back come back one spacing apart, in order.
        let later = limits.try_turn("a.example").unwrap_err();
        assert!(later.retry_in > busy.retry_in, "{later:?} after {busy:?}");
        drop(first);
        let _third = limits.try_turn("a.example").unwrap();
    }

    #[tokio::test]
    async fn the_overall_limit_holds_across_hosts() {
        let limits = limits(2, 2, None);
        let _a = limits.try_turn("a.example").unwrap();
        let _b = limits.try_turn("b.example").unwrap();
        assert!(limits.try_turn("c.example").is_err());
    }

    #[tokio::test]
    async fn idle_hosts_are_forgotten() {
        let limits = limits(10, 1, None);
        let turn = limits.try_turn("a.example").unwrap();
        assert!(limits.try_turn("a.example").is_err());
        assert_eq!(limits.tracked_hosts(), 1);
        drop(turn);
        assert_eq!(limits.tracked_hosts(), 0);
    }

    #[tokio::test]
    async fn a_waiting_caller_gets_the_turn_given_back() {
        let limits = limits(10, 1, None);
        let turn = limits.turn("a.example").await;
        let waiting = {
            let limits = limits.clone();
            tokio::spawn(async move {
                limits.turn("a.example").await;
            })
        };
        // The waiter has run up to its wait and cannot have the turn yet.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!waiting.is_finished());
        assert!(limits.try_turn("a.example").is_err());
        drop(turn);
        waiting.await.unwrap();
    }

    #[tokio::test]
    async fn the_rate_per_host_sends_callers_back_until_a_token_is_due() {
        let limits = limits(10, 10, Some(1));
        let _first = limits.try_turn("a.example").unwrap();
        let busy = limits.try_turn("a.example").unwrap_err();
        assert!(
            busy.retry_in > Duration::from_millis(500) && busy.retry_in <= Duration::from_secs(1),
            "one per second: {busy:?}"
        );
        // Another host has its own bucket.
        let _other = limits.try_turn("b.example").unwrap();
    }

    #[test]
    fn the_typical_time_follows_what_requests_take() {
        let limits = limits(10, 2, None);
        for _ in 0..64 {
            limits.observe(Duration::from_millis(100));
        }
        let typical = limits.typical_micros.load(Ordering::Relaxed);
        assert!((100_000..110_000).contains(&typical), "{typical}");
    }
}
