//! The public metadata cache (seed 003, "Public metadata cache"): key =
//! provider + normalized request fingerprint, the payload, an expiry.
//! Hard limits: [`MAX_ENTRIES`] entries **and** [`MAX_BYTES`] bytes of
//! serialized UTF-8 payload; inserting evicts the least recently used
//! entries until both hold. A payload larger than the byte cap is served
//! but never cached. Only public answers come here: the service never
//! offers it a personal query, and a fingerprint holds no token.
//!
//! The clock is passed in, so the rules are tested without waiting.

use std::{collections::BTreeMap, num::NonZeroUsize, sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use lru::LruCache;
use reqwest::header::HeaderMap;

use super::provider::ProviderKind;
use crate::httpc::retry::parse_http_date;

pub const MAX_ENTRIES: usize = 1024;
pub const MAX_BYTES: usize = 32 * 1024 * 1024;
/// How long an answer is kept when the provider's headers do not say.
pub const DEFAULT_TTL: Duration = Duration::from_secs(6 * 3600);

/// The cache key of a public request: the provider, the kind of lookup and
/// its parameters, normalized so that parameter order, letter case and
/// whitespace do not matter (`search=" One  Piece"` is `search="one
/// piece"`), hashed (SHA-256) so a key's size is fixed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Fingerprint(String);

impl Fingerprint {
    pub fn new<'a>(
        provider: ProviderKind,
        kind: &str,
        params: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Self {
        let params: BTreeMap<String, String> = params
            .into_iter()
            .map(|(name, value)| (normalize(name), normalize(value)))
            .collect();
        let mut canonical = format!("{}\n{}", provider.as_str(), normalize(kind));
        for (name, value) in &params {
            // Lengths first: no value can imitate a separator.
            canonical.push_str(&format!("\n{}:{name}={}:{value}", name.len(), value.len()));
        }
        Fingerprint(crate::digest::sha256_hex_bytes(canonical.as_bytes()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Lower case, trimmed, inner runs of whitespace as one space.
fn normalize(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// How long an answer may be kept, from its headers: `s-maxage` or
/// `max-age` when positive, else a future `Expires`, else
/// [`DEFAULT_TTL`]. `None` (not cached) for `Cache-Control: no-store`.
/// `no-cache` and `private` do not stop it: the cache is the gateway's
/// own, and only public answers enter it.
pub fn ttl_from(headers: &HeaderMap, now: DateTime<Utc>) -> Option<Duration> {
    let control = headers
        .get_all("cache-control")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|directive| directive.trim().to_ascii_lowercase())
        .collect::<Vec<_>>();
    if control.iter().any(|directive| directive == "no-store") {
        return None;
    }
    let age = |name: &str| {
        control.iter().find_map(|directive| {
            let (key, value) = directive.split_once('=')?;
            (key.trim() == name)
                .then(|| value.trim().trim_matches('"').parse::<u64>().ok())
                .flatten()
        })
    };
    if let Some(seconds) = age("s-maxage")
        .or_else(|| age("max-age"))
        .filter(|s| *s > 0)
    {
        return Some(Duration::from_secs(seconds));
    }
    let expires = headers
        .get("expires")
        .and_then(|value| value.to_str().ok())
        .and_then(parse_http_date)
        .and_then(|at| (at - now).to_std().ok())
        .filter(|wait| !wait.is_zero());
    Some(expires.unwrap_or(DEFAULT_TTL))
}

struct Entry {
    payload: Arc<str>,
    expires_at: DateTime<Utc>,
}

/// The cache itself: least recently used first out, both limits enforced
/// on every insert.
pub struct MetadataCache {
    entries: LruCache<Fingerprint, Entry>,
    bytes: usize,
    max_entries: usize,
    max_bytes: usize,
}

/// What the cache holds, for metrics and the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub entries: usize,
    pub bytes: usize,
}

impl Default for MetadataCache {
    fn default() -> Self {
        MetadataCache::with_limits(MAX_ENTRIES, MAX_BYTES)
    }
}

impl MetadataCache {
    pub fn with_limits(max_entries: usize, max_bytes: usize) -> Self {
        let capacity = NonZeroUsize::new(max_entries.max(1)).expect("at least one");
        MetadataCache {
            entries: LruCache::new(capacity),
            bytes: 0,
            max_entries: capacity.get(),
            max_bytes,
        }
    }

    /// The payload under `key` if it has not expired at `now`.
    pub fn get(&mut self, key: &Fingerprint, now: DateTime<Utc>) -> Option<Arc<str>> {
        let expired = self.entries.peek(key)?.expires_at <= now;
        if expired {
            self.remove(key);
            return None;
        }
        self.entries.get(key).map(|entry| entry.payload.clone())
    }

    /// Keeps `payload` under `key` until `now + ttl`, evicting the least
    /// recently used entries until both limits hold. Returns whether it
    /// was kept (a payload over the byte cap is not).
    pub fn insert(
        &mut self,
        key: Fingerprint,
        payload: Arc<str>,
        ttl: Duration,
        now: DateTime<Utc>,
    ) -> bool {
        let size = payload.len();
        self.remove(&key);
        if size > self.max_bytes || ttl.is_zero() {
            return false;
        }
        let expires_at = now + ttl;
        while self.entries.len() >= self.max_entries || self.bytes + size > self.max_bytes {
            match self.entries.pop_lru() {
                Some((_, evicted)) => self.bytes -= evicted.payload.len(),
                None => break,
            }
        }
        self.bytes += size;
        self.entries.put(
            key,
            Entry {
                payload,
                expires_at,
            },
        );
        true
    }

    fn remove(&mut self, key: &Fingerprint) {
        if let Some(entry) = self.entries.pop(key) {
            self.bytes -= entry.payload.len();
        }
    }

    pub fn usage(&self) -> Usage {
        Usage {
            entries: self.entries.len(),
            bytes: self.bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    fn key(n: usize) -> Fingerprint {
        Fingerprint::new(ProviderKind::Anilist, "media", [("id", &*n.to_string())])
    }

    fn now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).unwrap()
    }

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn order_case_and_whitespace_do_not_change_the_fingerprint() {
        let a = Fingerprint::new(
            ProviderKind::Anilist,
            "search",
            [("search", "One Piece"), ("type", "MANGA")],
        );
        let b = Fingerprint::new(
            ProviderKind::Anilist,
            " Search ",
            [("TYPE", " manga"), ("search", "  one\t piece ")],
        );
        assert_eq!(a, b);
        let other_value = Fingerprint::new(
            ProviderKind::Anilist,
            "search",
            [("search", "One Piece!"), ("type", "MANGA")],
        );
        assert_ne!(a, other_value);
        let other_provider = Fingerprint::new(
            ProviderKind::Kavita,
            "search",
            [("search", "One Piece"), ("type", "MANGA")],
        );
        assert_ne!(a, other_provider);
        // A value cannot pose as two parameters.
        let joined = Fingerprint::new(ProviderKind::Anilist, "x", [("a", "1\nb=2")]);
        let split = Fingerprint::new(ProviderKind::Anilist, "x", [("a", "1"), ("b", "2")]);
        assert_ne!(joined, split);
        assert_eq!(a.as_str().len(), 64);
    }

    #[test]
    fn the_entry_limit_evicts_the_least_recently_used() {
        let mut cache = MetadataCache::with_limits(3, 1000);
        for n in 0..3 {
            assert!(cache.insert(key(n), "x".into(), HOUR, now()));
        }
        // 0 is used, so 1 is the oldest.
        assert!(cache.get(&key(0), now()).is_some());
        cache.insert(key(3), "x".into(), HOUR, now());
        assert!(cache.get(&key(1), now()).is_none());
        assert!(cache.get(&key(0), now()).is_some());
        assert_eq!(
            cache.usage(),
            Usage {
                entries: 3,
                bytes: 3
            }
        );
    }

    #[test]
    fn the_byte_limit_evicts_until_both_hold() {
        let mut cache = MetadataCache::with_limits(10, 100);
        for n in 0..4 {
            cache.insert(key(n), "a".repeat(25).into(), HOUR, now());
        }
        assert_eq!(
            cache.usage(),
            Usage {
                entries: 4,
                bytes: 100
            }
        );
        // 60 more bytes push out the three oldest (75 bytes), not more.
        cache.insert(key(9), "b".repeat(60).into(), HOUR, now());
        assert_eq!(
            cache.usage(),
            Usage {
                entries: 2,
                bytes: 85
            }
        );
        assert!(cache.get(&key(3), now()).is_some());
        assert!(cache.get(&key(0), now()).is_none());
    }

    #[test]
    fn a_payload_over_the_byte_cap_is_not_cached_and_evicts_nothing() {
        let mut cache = MetadataCache::with_limits(10, 100);
        cache.insert(key(0), "a".repeat(50).into(), HOUR, now());
        assert!(!cache.insert(key(1), "b".repeat(101).into(), HOUR, now()));
        assert!(cache.get(&key(1), now()).is_none());
        assert!(cache.get(&key(0), now()).is_some());
        assert_eq!(cache.usage().bytes, 50);
    }

    #[test]
    fn replacing_a_key_keeps_the_byte_count_true() {
        let mut cache = MetadataCache::with_limits(10, 100);
        cache.insert(key(0), "a".repeat(50).into(), HOUR, now());
        cache.insert(key(0), "b".repeat(20).into(), HOUR, now());
        assert_eq!(
            cache.usage(),
            Usage {
                entries: 1,
                bytes: 20
            }
        );
    }

    #[test]
    fn an_expired_entry_is_a_miss_and_is_dropped() {
        let mut cache = MetadataCache::with_limits(10, 100);
        cache.insert(key(0), "a".into(), Duration::from_secs(60), now());
        let later = now() + Duration::from_secs(59);
        assert!(cache.get(&key(0), later).is_some());
        let expired = now() + Duration::from_secs(60);
        assert!(cache.get(&key(0), expired).is_none());
        assert_eq!(
            cache.usage(),
            Usage {
                entries: 0,
                bytes: 0
            }
        );
    }

    #[test]
    fn expiry_follows_the_providers_cache_headers() {
        let with = |pairs: &[(&'static str, &str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.append(*name, HeaderValue::from_str(value).unwrap());
            }
            ttl_from(&map, now())
        };
        assert_eq!(with(&[]), Some(DEFAULT_TTL));
        assert_eq!(
            with(&[("Cache-Control", "public, max-age=120")]),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            with(&[("Cache-Control", "max-age=120, s-maxage=30")]),
            Some(Duration::from_secs(30))
        );
        assert_eq!(with(&[("Cache-Control", "no-store")]), None);
        assert_eq!(
            with(&[("Cache-Control", "no-cache, private")]),
            Some(DEFAULT_TTL)
        );
        let expires = (now() + Duration::from_secs(300))
            .format("%a, %d %b %Y %H:%M:%S GMT")
            .to_string();
        assert_eq!(
            with(&[("Expires", &expires)]),
            Some(Duration::from_secs(300))
        );
        assert_eq!(
            with(&[("Expires", "Thu, 01 Jan 1970 00:00:00 GMT")]),
            Some(DEFAULT_TTL)
        );
    }
}
