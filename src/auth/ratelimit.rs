//! Login throttling: at most `max_attempts` failed logins per key within
//! `window`, after which the key is blocked for `block` (Fusion's defaults:
//! 10 / 60 s / 300 s). Keys are the client IP and the username, checked
//! independently, so neither a botnet on one account nor one host spraying
//! many accounts gets far.
//!
//! The policy ([`Entry`]) is pure and takes the clock as an argument; the
//! [`LoginLimiter`] only adds a mutex and a bound on memory.
//!
//! State is per process. With several API processes behind a balancer each
//! one counts on its own, so the effective limit is multiplied by the number
//! of processes; see `docs/operations.md`.

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::Mutex,
    time::{Duration, Instant},
};

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

    /// An entry that no longer affects any decision can be forgotten.
    fn is_stale(&self, now: Instant, policy: &LoginPolicy) -> bool {
        self.retry_after(now).is_none() && now.duration_since(self.window_start) >= policy.window
    }
}

/// Entries kept before stale ones are swept.
const SWEEP_ABOVE: usize = 10_000;

#[derive(Debug)]
pub struct LoginLimiter {
    policy: LoginPolicy,
    entries: Mutex<HashMap<LimitKey, Entry>>,
}

impl LoginLimiter {
    pub fn new(policy: LoginPolicy) -> Self {
        LoginLimiter {
            policy,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The longest remaining block among `keys`, if any is blocked.
    pub fn retry_after(&self, keys: &[LimitKey], now: Instant) -> Option<Duration> {
        let entries = self.lock();
        keys.iter()
            .filter_map(|key| entries.get(key)?.retry_after(now))
            .max()
    }

    pub fn record_failure(&self, keys: &[LimitKey], now: Instant) {
        let mut entries = self.lock();
        if entries.len() > SWEEP_ABOVE {
            entries.retain(|_, entry| !entry.is_stale(now, &self.policy));
        }
        for key in keys {
            entries
                .entry(key.clone())
                .or_insert_with(|| Entry::new(now))
                .record_failure(now, &self.policy);
        }
    }

    /// A successful login clears the username's count (not the IP's, so a
    /// valid account cannot be used to reset an address that sprays others).
    pub fn record_success(&self, username: &str) {
        self.lock().remove(&LimitKey::Username(username.to_owned()));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<LimitKey, Entry>> {
        // A poisoned map only means another thread panicked mid-update of a
        // counter; the counts are still usable.
        self.entries
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

    #[test]
    fn ip_and_username_are_limited_independently() {
        let limiter = LoginLimiter::new(POLICY);
        let t0 = Instant::now();
        let ip = LimitKey::Ip("192.0.2.1".parse().unwrap());
        for name in ["a", "b", "c"] {
            limiter.record_failure(&[ip.clone(), LimitKey::Username(name.into())], t0);
        }
        // The address sprayed three accounts: it is blocked, they are not.
        assert!(limiter.retry_after(std::slice::from_ref(&ip), t0).is_some());
        assert!(
            limiter
                .retry_after(&[LimitKey::Username("a".into())], t0)
                .is_none()
        );
        let other_ip = LimitKey::Ip("192.0.2.2".parse().unwrap());
        assert!(
            limiter
                .retry_after(&[other_ip, LimitKey::Username("a".into())], t0)
                .is_none()
        );
    }

    #[test]
    fn success_clears_the_username_but_not_the_address() {
        let limiter = LoginLimiter::new(POLICY);
        let t0 = Instant::now();
        let ip = LimitKey::Ip("192.0.2.1".parse().unwrap());
        let user = LimitKey::Username("alice".into());
        for _ in 0..2 {
            limiter.record_failure(&[ip.clone(), user.clone()], t0);
        }
        limiter.record_success("alice");
        limiter.record_failure(&[ip.clone(), user.clone()], t0);
        assert!(limiter.retry_after(&[user], t0).is_none());
        assert!(limiter.retry_after(&[ip], t0).is_some());
    }
}
