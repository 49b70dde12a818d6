//! Password hashing with argon2id (OWASP parameters: 19 MiB, 2 passes).
//! Hashing is CPU-bound and memory-hungry; [`Hashing`] runs it on the
//! blocking pool, a bounded number at a time.

use std::{sync::Arc, time::Duration};

use argon2::{
    Argon2, PasswordHash, PasswordHasher, PasswordVerifier,
    password_hash::{SaltString, rand_core::OsRng},
};

use secrecy::{ExposeSecret, SecretString};
use tokio::sync::Semaphore;

use crate::error::{AppError, AppResult};

pub const MIN_LEN: usize = 8;
/// Bounds the work one login can cost the server.
pub const MAX_LEN: usize = 1024;

/// What an account created by an OIDC login has for a password hash: no
/// PHC string, so no password ever matches it.
pub const NO_PASSWORD: &str = "!oidc";

/// Checks a new password against the policy.
pub fn validate_new(field: &'static str, password: &str) -> AppResult<()> {
    let chars = password.chars().count();
    if chars < MIN_LEN {
        return Err(AppError::bad_input(
            field,
            format!("password must be at least {MIN_LEN} characters"),
        ));
    }
    if password.len() > MAX_LEN {
        return Err(AppError::bad_input(
            field,
            format!("password must be at most {MAX_LEN} bytes"),
        ));
    }
    Ok(())
}

pub fn hash(password: &str) -> anyhow::Result<String> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|error| anyhow::anyhow!("hashing password: {error}"))
}

/// True when `password` matches the stored PHC string. A malformed stored
/// hash never matches.
pub fn verify(password: &str, stored: &str) -> bool {
    if password.len() > MAX_LEN {
        return false;
    }
    PasswordHash::new(stored)
        .map(|parsed| {
            Argon2::default()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok()
        })
        .unwrap_or(false)
}

/// How much argon2 work one process runs at once ([`Hashing`]).
#[derive(Debug, Clone, Copy)]
pub struct HashingSettings {
    /// Hashes in flight at once. Each holds 19 MiB and a core: more than
    /// the cores only adds memory, not throughput.
    pub concurrency: usize,
    /// How long a caller waits for a free slot before `RATE_LIMITED`.
    pub wait: Duration,
}

/// The one way to run argon2 in this process: every hash and verification
/// (logins, reader-API logins, password changes, new accounts) takes a slot
/// of one semaphore, so a burst of logins queues briefly and is then refused
/// instead of holding 19 MiB per request on the blocking pool (up to 512
/// threads). The slot is held by the blocking task itself, so a request
/// that is cancelled mid-hash frees it only when the hash is done.
#[derive(Debug)]
pub struct Hashing {
    slots: Arc<Semaphore>,
    wait: Duration,
    /// A valid hash of a random password, verified against when there is no
    /// stored hash, so that response time does not reveal which accounts
    /// exist. Computed once, at start-up.
    decoy: Arc<str>,
}

impl Hashing {
    /// Computes the decoy hash on the blocking pool.
    pub async fn new(settings: HashingSettings) -> anyhow::Result<Self> {
        let random = super::tokens::random_token("decoy");
        let decoy = tokio::task::spawn_blocking(move || hash(&random)).await??;
        Ok(Hashing {
            slots: Arc::new(Semaphore::new(settings.concurrency.max(1))),
            wait: settings.wait,
            decoy: decoy.into(),
        })
    }

    /// Whether `candidate` matches `stored`; with no stored hash, the decoy
    /// is verified (and the answer is false). `RATE_LIMITED` when no slot
    /// frees up in time.
    pub async fn verify(&self, candidate: &str, stored: Option<&str>) -> AppResult<bool> {
        let known = stored.is_some();
        let stored: Arc<str> = stored.map_or_else(|| self.decoy.clone(), Arc::from);
        let candidate = SecretString::from(candidate);
        let matches = self
            .run(move || verify(candidate.expose_secret(), &stored))
            .await?;
        Ok(known && matches)
    }

    /// The PHC string of a new password.
    pub async fn hash(&self, password: SecretString) -> AppResult<String> {
        self.run(move || hash(password.expose_secret()))
            .await?
            .map_err(AppError::internal)
    }

    async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> AppResult<T> {
        let slot = tokio::time::timeout(self.wait, self.slots.clone().acquire_owned())
            .await
            .map_err(|_| {
                metrics::counter!("trellis_password_hash_refused_total").increment(1);
                AppError::RateLimited { retry_after: 1 }
            })?
            // The semaphore is never closed.
            .map_err(AppError::internal)?;
        tokio::task::spawn_blocking(move || {
            let _slot = slot;
            work()
        })
        .await
        .map_err(AppError::internal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_verifies_only_the_same_password() {
        let stored = hash("correct horse battery").unwrap();
        assert!(stored.starts_with("$argon2id$"));
        assert!(verify("correct horse battery", &stored));
        assert!(!verify("correct horse batterY", &stored));
        assert!(!verify("anything", "not-a-phc-string"));
    }

    fn settings(concurrency: usize, wait_ms: u64) -> HashingSettings {
        HashingSettings {
            concurrency,
            wait: Duration::from_millis(wait_ms),
        }
    }

    #[tokio::test]
    async fn a_caller_finding_every_slot_taken_is_rate_limited() {
        let hashing = Hashing::new(settings(1, 0)).await.unwrap();
        let held = hashing.slots.clone().acquire_owned().await.unwrap();
        let refused = hashing.verify("guess", None).await;
        assert!(
            matches!(refused, Err(AppError::RateLimited { .. })),
            "{refused:?}"
        );
        drop(held);
        assert!(!hashing.verify("guess", None).await.unwrap());
    }

    #[tokio::test]
    async fn the_decoy_never_matches_and_stored_hashes_do() {
        let hashing = Hashing::new(settings(2, 1000)).await.unwrap();
        let stored = hashing
            .hash(SecretString::from("correct horse battery"))
            .await
            .unwrap();
        assert!(
            hashing
                .verify("correct horse battery", Some(&stored))
                .await
                .unwrap()
        );
        assert!(!hashing.verify("correct horse battery", None).await.unwrap());
        assert_eq!(hashing.slots.available_permits(), 2, "slots come back");
    }

    #[test]
    fn policy_rejects_short_and_huge_passwords() {
        assert!(validate_new("password", "short").is_err());
        assert!(validate_new("password", &"x".repeat(MAX_LEN + 1)).is_err());
        assert!(validate_new("password", "long enough").is_ok());
    }
}
