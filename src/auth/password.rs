//! Password hashing with argon2id (OWASP parameters: 19 MiB, 2 passes).
//! Hashing is CPU-bound; callers run it on the blocking pool.

use argon2::{
    Argon2, PasswordHash, PasswordHasher, PasswordVerifier,
    password_hash::{SaltString, rand_core::OsRng},
};

use crate::error::{AppError, AppResult};

pub const MIN_LEN: usize = 8;
/// Bounds the work one login can cost the server.
pub const MAX_LEN: usize = 1024;

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

/// [`hash`] off the async runtime (argon2 takes tens of milliseconds).
pub async fn hash_blocking(password: secrecy::SecretString) -> AppResult<String> {
    use secrecy::ExposeSecret;
    tokio::task::spawn_blocking(move || hash(password.expose_secret()))
        .await
        .map_err(AppError::internal)?
        .map_err(AppError::internal)
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

/// A valid hash of a random password, verified against when the username is
/// unknown so that response time does not reveal which accounts exist.
pub fn decoy_hash() -> &'static str {
    static DECOY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DECOY.get_or_init(|| {
        let random = super::tokens::random_token("decoy");
        // Hashing a fresh random string cannot fail short of the OS RNG failing,
        // which `random_token` would already have hit.
        hash(&random).unwrap_or_default()
    })
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

    #[test]
    fn policy_rejects_short_and_huge_passwords() {
        assert!(validate_new("password", "short").is_err());
        assert!(validate_new("password", &"x".repeat(MAX_LEN + 1)).is_err());
        assert!(validate_new("password", "long enough").is_ok());
    }
}
