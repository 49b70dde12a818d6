//! Login throttling: at most `max_attempts` failed logins per key within
//! `window`, after which the key is blocked for `block` (Fusion's defaults:
//! 10 / 60 s / 300 s). Keys are the client IP and the username, checked
//! independently, so neither a botnet on one account nor one host spraying
//! many accounts gets far.
//!
//! An attempt is counted when it starts, before any password work
//! ([`LoginLimiter::reserve`]), so parallel guesses cannot all slip in
//! before the first is counted; one that succeeds gives its count back.
//!
//! The policy ([`Entry`]) is pure and takes the clock as an argument; the
//! [`LoginLimiter`] only adds a lock and a bound on memory: keys live in a
//! TTL cache of at most [`MAX_TRACKED_KEYS`], so a spray from many
//! addresses cannot grow it without limit.
//!
//! State is per process. With several API processes behind a balancer each
//! one counts on its own, so the effective limit is multiplied by the number
//! of processes; see `docs/operations.md`.

use std::{
    net::IpAddr,
    sync::Mutex,
    time::{Duration, Instant},
};

use moka::sync::Cache;

#[derive(Debug, Clone, Copy)]
pub struct LoginPolicy {
    pub max_attempts: u32,
    pub window: Duration,
    pub block: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LimitKey {
    Ip(IpAddr),
    Username(String),
}

/// Failure count of one key within its current window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    window_start: Instant,
    failures: u32,
    blocked_until: Option<Instant>,
}

impl Entry {
    fn new(now: Instant) -> Self {
        Entry {
            window_start: now,
            failures: 0,
            blocked_until: None,
        }
    }

    /// How long the key must still wait, if it is blocked at `now`.
    pub fn retry_after(&self, now: Instant) -> Option<Duration> {
        self.blocked_until
            .filter(|until| *until > now)
            .map(|until| until - now)
    }

    /// Counts a failed attempt; the `max_attempts`-th failure within one
    /// window starts a block.
    pub fn record_failure(&mut self, now: Instant, policy: &LoginPolicy) {
        if self.blocked_until.is_some_and(|until| until <= now)
            || now.duration_since(self.window_start) >= policy.window
        {
            *self = Entry::new(now);
        }
        self.failures += 1;
        if self.failures >= policy.max_attempts {
            self.blocked_until = Some(now + policy.block);
        }
    }

    /// Gives back an attempt counted by [`Entry::record_failure`] that
    /// turned out not to be a failure, if it was counted in the current
    /// window (`counted_in`); a block that only that attempt started ends.
    pub fn refund(&mut self, counted_in: Instant, policy: &LoginPolicy) {
        if self.window_start != counted_in || self.failures == 0 {
            return;
        }
        self.failures -= 1;
        if self.failures < policy.max_attempts {
            self.blocked_until = None;
        }
    }
}

/// Most keys tracked at once; past it the cache evicts the least useful.
pub const MAX_TRACKED_KEYS: u64 = 100_000;

/// An attempt counted in advance; settle it with [`LoginLimiter::succeeded`]
/// or [`LoginLimiter::refund`], or drop it to leave it counted as a failure.
#[derive(Debug)]
#[must_use = "an unsettled reservation counts as a failed attempt"]
pub struct Reservation {
    /// Each key with the start of the window it was counted in.
    counted: Vec<(LimitKey, Instant)>,
}

#[derive(Debug)]
pub struct LoginLimiter {
    policy: LoginPolicy,
    /// Serialises read-modify-write of several keys at once (an attempt is
    /// allowed only if none of its keys is blocked).
    decide: Mutex<()>,
    entries: Cache<LimitKey, Entry>,
}

impl LoginLimiter {
    pub fn new(policy: LoginPolicy) -> Self {
        LoginLimiter {
            policy,
            decide: Mutex::new(()),
            // Every update re-inserts an entry, and none matters longer than
            // a window or a block after its last update.
            entries: Cache::builder()
                .max_capacity(MAX_TRACKED_KEYS)
                .time_to_live(policy.window.max(policy.block))
                .build(),
        }
    }

    /// Counts an attempt against every key before it is checked, or tells
    /// how long the longest block among `keys` still lasts.
    pub fn reserve(&self, keys: &[LimitKey], now: Instant) -> Result<Reservation, Duration> {
        let _decide = self.lock();
        if let Some(wait) = keys
            .iter()
            .filter_map(|key| self.entries.get(key)?.retry_after(now))
            .max()
        {
            return Err(wait);
        }
        let counted = keys
            .iter()
            .map(|key| {
                let mut entry = self.entries.get(key).unwrap_or_else(|| Entry::new(now));
                entry.record_failure(now, &self.policy);
                self.entries.insert(key.clone(), entry);
                (key.clone(), entry.window_start)
            })
            .collect();
        Ok(Reservation { counted })
    }

    /// The attempt was not a guess after all (the check failed for another
    /// reason): its count is given back.
    pub fn refund(&self, reservation: Reservation) {
        let _decide = self.lock();
        for (key, counted_in) in reservation.counted {
            if let Some(mut entry) = self.entries.get(&key) {
                entry.refund(counted_in, &self.policy);
                self.entries.insert(key, entry);
            }
        }
    }

    /// A successful login clears the username's count (not the IP's, so a
    /// valid account cannot be used to reset an address that sprays
    /// others) and gives back the attempt's count on the address.
    pub fn succeeded(&self, reservation: Reservation) {
        let _decide = self.lock();
        for (key, counted_in) in reservation.counted {
            match key {
                LimitKey::Username(_) => self.entries.invalidate(&key),
                LimitKey::Ip(_) => {
                    if let Some(mut entry) = self.entries.get(&key) {
                        entry.refund(counted_in, &self.policy);
                        self.entries.insert(key, entry);
                    }
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ()> {
        // The lock guards no data of its own; a panic elsewhere leaves the
        // counts usable.
        self.decide
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: LoginPolicy = LoginPolicy {
        max_attempts: 3,
        window: Duration::from_secs(60),
        block: Duration::from_secs(300),
    };

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn blocks_on_the_max_th_failure_within_the_window() {
        let t0 = Instant::now();
        let mut entry = Entry::new(t0);
        entry.record_failure(t0, &POLICY);
        entry.record_failure(t0 + secs(1), &POLICY);
        assert_eq!(entry.retry_after(t0 + secs(1)), None);
        entry.record_failure(t0 + secs(2), &POLICY);
        assert_eq!(entry.retry_after(t0 + secs(2)), Some(secs(300)));
        assert_eq!(entry.retry_after(t0 + secs(102)), Some(secs(200)));
    }

    #[test]
    fn failures_spread_over_more_than_a_window_never_block() {
        let t0 = Instant::now();
        let mut entry = Entry::new(t0);
        for i in 0..10 {
            entry.record_failure(t0 + secs(i * 31), &POLICY);
            assert_eq!(entry.retry_after(t0 + secs(i * 31)), None, "attempt {i}");
        }
    }

    #[test]
    fn block_ends_and_counting_starts_afresh() {
        let t0 = Instant::now();
        let mut entry = Entry::new(t0);
        for _ in 0..3 {
            entry.record_failure(t0, &POLICY);
        }
        let after_block = t0 + secs(300);
        assert_eq!(entry.retry_after(after_block), None);
        entry.record_failure(after_block, &POLICY);
        assert_eq!(entry.retry_after(after_block), None);
        assert_eq!(entry.failures, 1);
    }

    fn ip(last: u8) -> LimitKey {
        LimitKey::Ip(std::net::Ipv4Addr::new(192, 0, 2, last).into())
    }

    fn user(name: &str) -> LimitKey {
        LimitKey::Username(name.into())
    }

    #[test]
    fn ip_and_username_are_limited_independently() {
        let limiter = LoginLimiter::new(POLICY);
        let t0 = Instant::now();
        for name in ["a", "b", "c"] {
            drop(limiter.reserve(&[ip(1), user(name)], t0).unwrap());
        }
        // The address sprayed three accounts: it is blocked, they are not.
        assert!(limiter.reserve(&[ip(1)], t0).is_err());
        assert!(limiter.reserve(&[ip(2), user("a")], t0).is_ok());
    }

    #[test]
    fn parallel_attempts_past_the_limit_are_refused_before_any_check() {
        let limiter = LoginLimiter::new(POLICY);
        let t0 = Instant::now();
        // Three attempts in flight at once, none settled yet: the fourth waits.
        let in_flight: Vec<_> = (0..3)
            .map(|_| limiter.reserve(&[ip(1), user("a")], t0).unwrap())
            .collect();
        assert_eq!(
            limiter.reserve(&[ip(1), user("a")], t0).unwrap_err(),
            secs(300)
        );
        // One of them was the right password: the block it completed ends.
        let mut in_flight = in_flight.into_iter();
        limiter.succeeded(in_flight.next().unwrap());
        assert!(limiter.reserve(&[ip(1), user("a")], t0).is_ok());
    }

    #[test]
    fn success_clears_the_username_and_gives_the_address_its_attempt_back() {
        let limiter = LoginLimiter::new(POLICY);
        let t0 = Instant::now();
        for _ in 0..2 {
            drop(limiter.reserve(&[ip(1), user("alice")], t0).unwrap());
        }
        let right = limiter.reserve(&[ip(1), user("alice")], t0).unwrap();
        limiter.succeeded(right);
        // The address keeps its two failures: one more blocks it.
        drop(limiter.reserve(&[ip(1), user("bob")], t0).unwrap());
        assert!(limiter.reserve(&[ip(1)], t0).is_err());
        assert!(limiter.reserve(&[ip(2), user("alice")], t0).is_ok());
    }

    #[test]
    fn a_refund_from_an_earlier_window_changes_nothing() {
        let t0 = Instant::now();
        let mut entry = Entry::new(t0);
        entry.record_failure(t0, &POLICY);
        let later = t0 + secs(61);
        entry.record_failure(later, &POLICY);
        entry.refund(t0, &POLICY);
        assert_eq!(entry.failures, 1);
        entry.refund(later, &POLICY);
        assert_eq!(entry.failures, 0);
    }

    #[test]
    fn a_spray_from_many_addresses_keeps_the_map_bounded() {
        let limiter = LoginLimiter::new(POLICY);
        let t0 = Instant::now();
        for n in 0..(MAX_TRACKED_KEYS + 5_000) {
            let address = std::net::Ipv6Addr::from(u128::from(n));
            drop(
                limiter
                    .reserve(&[LimitKey::Ip(address.into())], t0)
                    .unwrap(),
            );
        }
        limiter.entries.run_pending_tasks();
        assert!(limiter.entries.entry_count() <= MAX_TRACKED_KEYS);
    }
}
