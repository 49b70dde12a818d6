//! Login throttling: at most `max_attempts` failed logins per key within
//! `window`, after which the key is blocked for `block` (Fusion's defaults:
//! 10 / 60 s / 300 s). Keys are the client IP and the username, checked
//! together: per address strict, per username lenient.
//!
//! - An address that fails `max_attempts` times is blocked, whatever
//!   usernames it tried: one host spraying many accounts gets nowhere.
//! - A username that failed `max_attempts` times (from anywhere) is blocked
//!   for addresses that failed recently themselves. An address with no
//!   recent failures still gets `fresh_address_attempts` more tries at it
//!   per window, all such addresses together: a stranger who types wrong
//!   passwords for your name cannot lock you out of your own login, and a
//!   botnet of fresh addresses gets only that small extra budget.
//! - Each secret has its own budget ([`Realm`]): the account password (web
//!   login, `changePassword`, `setReaderPassword`), the reader password
//!   as Google Reader's `ClientLogin` and as Fever's key, and OIDC callbacks
//!   whose id_token was refused (per address). A reader app with
//!   a stale password fails on its own protocol's count and cannot lock its
//!   owner out of the web login.
//!
//! An attempt is counted when it starts, before any password work
//! ([`LoginLimiter::reserve`]), so parallel guesses cannot all slip in
//! before the first is counted; one that succeeds gives its count back.
//!
//! The policy ([`plan`], [`Entry`]) is pure and takes the clock as an
//! argument; the [`LoginLimiter`] only adds a lock and a bound on memory:
//! keys live in a TTL cache of at most [`MAX_TRACKED_KEYS`], so a spray
//! from many addresses cannot grow it without limit.
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
    /// Extra failures per window a blocked username allows addresses with
    /// no recent failures (0: a blocked username is blocked for everyone).
    pub fresh_address_attempts: u32,
    pub window: Duration,
    pub block: Duration,
}

/// The secret an attempt guesses at; each has its own budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Realm {
    /// The account password: `login`, `changePassword`, `setReaderPassword`.
    Account,
    /// The reader password, through Google Reader's `ClientLogin`.
    GoogleReader,
    /// The reader password, as a Fever API key.
    Fever,
    /// OIDC callbacks whose id_token was refused (no username: per address).
    Oidc,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LimitKey {
    Ip(Realm, IpAddr),
    Username(Realm, String),
    /// A blocked username's extra budget for addresses with no recent failures.
    FreshAddresses(Realm, String),
}

impl LimitKey {
    fn budget(&self, policy: &LoginPolicy) -> u32 {
        match self {
            LimitKey::FreshAddresses(..) => policy.fresh_address_attempts,
            LimitKey::Ip(..) | LimitKey::Username(..) => policy.max_attempts,
        }
    }
}

/// One credential check about to run.
#[derive(Debug, Clone, Copy)]
pub struct Attempt<'a> {
    pub realm: Realm,
    pub ip: IpAddr,
    /// Normalised (trimmed, lower case); Fever keys name no user.
    pub username: Option<&'a str>,
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

    /// Whether the key failed within the current window or is blocked.
    pub fn failed_recently(&self, now: Instant, policy: &LoginPolicy) -> bool {
        self.retry_after(now).is_some()
            || (self.failures > 0 && now.duration_since(self.window_start) < policy.window)
    }

    /// Counts a failed attempt; the `max`-th failure within one window
    /// starts a block.
    pub fn record_failure(&mut self, now: Instant, max: u32, policy: &LoginPolicy) {
        if self.blocked_until.is_some_and(|until| until <= now)
            || now.duration_since(self.window_start) >= policy.window
        {
            *self = Entry::new(now);
        }
        self.failures += 1;
        if self.failures >= max {
            self.blocked_until = Some(now + policy.block);
        }
    }

    /// Gives back an attempt counted by [`Entry::record_failure`] that
    /// turned out not to be a failure, if it was counted in the current
    /// window (`counted_in`); a block that only that attempt started ends.
    pub fn refund(&mut self, counted_in: Instant, max: u32) {
        if self.window_start != counted_in || self.failures == 0 {
            return;
        }
        self.failures -= 1;
        if self.failures < max {
            self.blocked_until = None;
        }
    }
}

/// Which keys an attempt is counted against, or how long it must wait:
/// a blocked address waits; a blocked username waits unless the address
/// has no recent failures and the username's fresh-address budget is not
/// spent. `entry` reads a key's current count.
pub fn plan(
    attempt: &Attempt<'_>,
    entry: impl Fn(&LimitKey) -> Option<Entry>,
    now: Instant,
    policy: &LoginPolicy,
) -> Result<Vec<LimitKey>, Duration> {
    let ip = LimitKey::Ip(attempt.realm, attempt.ip);
    let ip_entry = entry(&ip);
    if let Some(wait) = ip_entry.and_then(|e| e.retry_after(now)) {
        return Err(wait);
    }
    let Some(name) = attempt.username else {
        return Ok(vec![ip]);
    };
    let username = LimitKey::Username(attempt.realm, name.to_owned());
    let Some(user_wait) = entry(&username).and_then(|e| e.retry_after(now)) else {
        return Ok(vec![ip, username]);
    };
    let fresh_address = !ip_entry.is_some_and(|e| e.failed_recently(now, policy));
    if !fresh_address || policy.fresh_address_attempts == 0 {
        return Err(user_wait);
    }
    let fresh = LimitKey::FreshAddresses(attempt.realm, name.to_owned());
    match entry(&fresh).and_then(|e| e.retry_after(now)) {
        Some(fresh_wait) => Err(fresh_wait.min(user_wait)),
        None => Ok(vec![ip, fresh]),
    }
}

/// Most keys tracked at once; past it the cache evicts the least useful.
pub const MAX_TRACKED_KEYS: u64 = 100_000;

/// An attempt counted in advance; settle it with [`LoginLimiter::succeeded`]
/// or [`LoginLimiter::refund`], or drop it to leave it counted as a failure.
#[derive(Debug)]
pub struct Reservation {
    realm: Realm,
    username: Option<String>,
    /// Each key with the start of the window it was counted in.
    counted: Vec<(LimitKey, Instant)>,
}

#[derive(Debug)]
pub struct LoginLimiter {
    policy: LoginPolicy,
    /// Serialises read-modify-write of several keys at once (an attempt is
    /// allowed only if its keys allow it together).
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

    /// Counts an attempt before it is checked ([`plan`]), or tells how long
    /// the caller must wait.
    pub fn reserve(&self, attempt: &Attempt<'_>, now: Instant) -> Result<Reservation, Duration> {
        let _decide = self.lock();
        let keys = plan(attempt, |key| self.entries.get(key), now, &self.policy)?;
        let counted = keys
            .into_iter()
            .map(|key| {
                let mut entry = self.entries.get(&key).unwrap_or_else(|| Entry::new(now));
                entry.record_failure(now, key.budget(&self.policy), &self.policy);
                self.entries.insert(key.clone(), entry);
                (key, entry.window_start)
            })
            .collect();
        Ok(Reservation {
            realm: attempt.realm,
            username: attempt.username.map(str::to_owned),
            counted,
        })
    }

    /// The attempt was not a guess after all (the check failed for another
    /// reason): its count is given back.
    pub fn refund(&self, reservation: Reservation) {
        let _decide = self.lock();
        self.give_back(reservation.counted);
    }

    /// A successful login clears the username's counts (not the address's,
    /// so a valid account cannot be used to reset an address that sprays
    /// others) and gives back the attempt's count on the address.
    pub fn succeeded(&self, reservation: Reservation) {
        let _decide = self.lock();
        if let Some(name) = reservation.username {
            self.entries
                .invalidate(&LimitKey::Username(reservation.realm, name.clone()));
            self.entries
                .invalidate(&LimitKey::FreshAddresses(reservation.realm, name));
        }
        self.give_back(
            reservation
                .counted
                .into_iter()
                .filter(|(key, _)| matches!(key, LimitKey::Ip(..))),
        );
    }

    fn give_back(&self, counted: impl IntoIterator<Item = (LimitKey, Instant)>) {
        for (key, counted_in) in counted {
            if let Some(mut entry) = self.entries.get(&key) {
                entry.refund(counted_in, key.budget(&self.policy));
                self.entries.insert(key, entry);
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
        fresh_address_attempts: 2,
        window: Duration::from_secs(60),
        block: Duration::from_secs(300),
    };

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    fn from(last: u8, username: Option<&str>) -> Attempt<'_> {
        Attempt {
            realm: Realm::Account,
            ip: std::net::Ipv4Addr::new(192, 0, 2, last).into(),
            username,
        }
    }

    #[test]
    fn blocks_on_the_max_th_failure_within_the_window() {
        let t0 = Instant::now();
        let mut entry = Entry::new(t0);
        entry.record_failure(t0, 3, &POLICY);
        entry.record_failure(t0 + secs(1), 3, &POLICY);
        assert_eq!(entry.retry_after(t0 + secs(1)), None);
        entry.record_failure(t0 + secs(2), 3, &POLICY);
        assert_eq!(entry.retry_after(t0 + secs(2)), Some(secs(300)));
        assert_eq!(entry.retry_after(t0 + secs(102)), Some(secs(200)));
    }

    #[test]
    fn failures_spread_over_more_than_a_window_never_block() {
        let t0 = Instant::now();
        let mut entry = Entry::new(t0);
        for i in 0..10 {
            entry.record_failure(t0 + secs(i * 31), 3, &POLICY);
            assert_eq!(entry.retry_after(t0 + secs(i * 31)), None, "attempt {i}");
        }
    }

    #[test]
    fn block_ends_and_counting_starts_afresh() {
        let t0 = Instant::now();
        let mut entry = Entry::new(t0);
        for _ in 0..3 {
            entry.record_failure(t0, 3, &POLICY);
        }
        let after_block = t0 + secs(300);
        assert_eq!(entry.retry_after(after_block), None);
        entry.record_failure(after_block, 3, &POLICY);
        assert_eq!(entry.retry_after(after_block), None);
        assert_eq!(entry.failures, 1);
    }

    #[test]
    fn a_refund_from_an_earlier_window_changes_nothing() {
        let t0 = Instant::now();
        let mut entry = Entry::new(t0);
        entry.record_failure(t0, 3, &POLICY);
        let later = t0 + secs(61);
        entry.record_failure(later, 3, &POLICY);
        entry.refund(t0, 3);
        assert_eq!(entry.failures, 1);
        entry.refund(later, 3);
        assert_eq!(entry.failures, 0);
    }

    #[test]
    fn an_address_spraying_many_usernames_is_blocked_and_they_are_not() {
        let limiter = LoginLimiter::new(POLICY);
        let t0 = Instant::now();
        for name in ["a", "b", "c"] {
            drop(limiter.reserve(&from(1, Some(name)), t0).unwrap());
        }
        assert_eq!(
            limiter.reserve(&from(1, Some("d")), t0).unwrap_err(),
            secs(300)
        );
        assert!(limiter.reserve(&from(2, Some("a")), t0).is_ok());
    }

    #[test]
    fn parallel_attempts_past_the_limit_are_refused_before_any_check() {
        let limiter = LoginLimiter::new(POLICY);
        let t0 = Instant::now();
        // Three attempts in flight at once, none settled yet: the fourth waits.
        let mut in_flight: Vec<_> = (0..3)
            .map(|_| limiter.reserve(&from(1, Some("a")), t0).unwrap())
            .collect();
        assert_eq!(
            limiter.reserve(&from(1, Some("a")), t0).unwrap_err(),
            secs(300)
        );
        // One of them was the right password: the block it completed ends.
        limiter.succeeded(in_flight.pop().unwrap());
        assert!(limiter.reserve(&from(1, Some("a")), t0).is_ok());
    }

    #[test]
    fn success_clears_the_username_and_gives_the_address_its_attempt_back() {
        let limiter = LoginLimiter::new(POLICY);
        let t0 = Instant::now();
        for _ in 0..2 {
            drop(limiter.reserve(&from(1, Some("alice")), t0).unwrap());
        }
        limiter.succeeded(limiter.reserve(&from(1, Some("alice")), t0).unwrap());
        // The address keeps its two failures: one more blocks it.
        drop(limiter.reserve(&from(1, Some("bob")), t0).unwrap());
        assert!(limiter.reserve(&from(1, None), t0).is_err());
        assert!(limiter.reserve(&from(2, Some("alice")), t0).is_ok());
    }

    #[test]
    fn a_blocked_username_lets_fresh_addresses_through_on_a_small_budget() {
        let limiter = LoginLimiter::new(POLICY);
        let t0 = Instant::now();
        // A stranger at .1 blocks alice.
        for _ in 0..3 {
            drop(limiter.reserve(&from(1, Some("alice")), t0).unwrap());
        }
        // Alice at home (.2, no failures) still gets in.
        let home = limiter.reserve(&from(2, Some("alice")), t0).unwrap();
        limiter.succeeded(home);
        assert!(
            limiter.reserve(&from(3, Some("alice")), t0).is_ok(),
            "success lifts the block"
        );
    }

    #[test]
    fn fresh_addresses_together_get_only_the_extra_budget() {
        let limiter = LoginLimiter::new(POLICY);
        let t0 = Instant::now();
        for _ in 0..3 {
            drop(limiter.reserve(&from(1, Some("alice")), t0).unwrap());
        }
        // A botnet of fresh addresses: two more guesses, then nobody.
        drop(limiter.reserve(&from(10, Some("alice")), t0).unwrap());
        drop(limiter.reserve(&from(11, Some("alice")), t0).unwrap());
        assert_eq!(
            limiter.reserve(&from(12, Some("alice")), t0).unwrap_err(),
            secs(300)
        );
        // An address that failed recently never had the extra budget.
        assert!(limiter.reserve(&from(10, Some("alice")), t0).is_err());
    }

    #[test]
    fn an_address_with_recent_failures_is_held_to_the_username_block() {
        let limiter = LoginLimiter::new(POLICY);
        let t0 = Instant::now();
        drop(limiter.reserve(&from(2, Some("bob")), t0).unwrap());
        for _ in 0..3 {
            drop(limiter.reserve(&from(1, Some("alice")), t0).unwrap());
        }
        assert!(limiter.reserve(&from(2, Some("alice")), t0).is_err());
        // A window later the address is fresh again.
        assert!(
            limiter
                .reserve(&from(2, Some("alice")), t0 + secs(61))
                .is_ok()
        );
    }

    #[test]
    fn without_an_extra_budget_a_blocked_username_is_blocked_for_everyone() {
        let limiter = LoginLimiter::new(LoginPolicy {
            fresh_address_attempts: 0,
            ..POLICY
        });
        let t0 = Instant::now();
        for _ in 0..3 {
            drop(limiter.reserve(&from(1, Some("alice")), t0).unwrap());
        }
        assert!(limiter.reserve(&from(2, Some("alice")), t0).is_err());
    }

    #[test]
    fn each_realm_has_its_own_budget() {
        let limiter = LoginLimiter::new(POLICY);
        let t0 = Instant::now();
        let reader = Attempt {
            realm: Realm::GoogleReader,
            ..from(1, Some("alice"))
        };
        for _ in 0..3 {
            drop(limiter.reserve(&reader, t0).unwrap());
        }
        assert!(limiter.reserve(&reader, t0).is_err());
        assert!(limiter.reserve(&from(1, Some("alice")), t0).is_ok());
    }

    #[test]
    fn a_spray_from_many_addresses_keeps_the_map_bounded() {
        let limiter = LoginLimiter::new(POLICY);
        let t0 = Instant::now();
        for n in 0..(MAX_TRACKED_KEYS + 5_000) {
            let attempt = Attempt {
                realm: Realm::Account,
                ip: std::net::Ipv6Addr::from(u128::from(n)).into(),
                username: None,
            };
            drop(limiter.reserve(&attempt, t0).unwrap());
        }
        limiter.entries.run_pending_tasks();
        assert!(limiter.entries.entry_count() <= MAX_TRACKED_KEYS);
    }
}
