//! Accounts, sessions and tokens (SPEC §2 "Users and auth").
//!
//! - [`service::AuthService`] does the work: login, refresh rotation with
//!   reuse detection, logout, authenticating a bearer token or a cookie.
//! - [`graphql`] exposes it (`login`, `refreshToken`, `logout`, `me`,
//!   `users`, `createUser`, `changePassword`).
//! - [`oidc`]: OIDC login against one identity provider (its settings,
//!   routes and GraphQL fields), ending in the same session as `login`.
//! - [`ratelimit`], [`tokens`], [`password`], [`cookie`] are the pure parts.

pub mod cookie;
pub mod graphql;
pub mod keys;
pub mod oidc;
pub mod password;
pub mod ratelimit;
pub mod revocation;
pub mod service;
pub mod tokens;

pub use entity::user::Role;
use uuid::Uuid;

use crate::error::{AppError, AppResult};

/// The authenticated caller of a request or WebSocket connection.
#[derive(Debug, Clone)]
pub struct Viewer {
    pub user_id: Uuid,
    pub username: String,
    pub role: Role,
    pub session_id: Uuid,
}

impl Viewer {
    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }

    /// Whose tasks and events this viewer may see.
    pub fn audience(&self) -> crate::jobs::Audience {
        if self.is_admin() {
            crate::jobs::Audience::Everyone
        } else {
            crate::jobs::Audience::Owner(self.user_id)
        }
    }

    /// Passes only for admins.
    pub fn require_admin(&self) -> AppResult<&Self> {
        if self.is_admin() {
            Ok(self)
        } else {
            Err(AppError::Forbidden(
                "this operation requires the ADMIN role",
            ))
        }
    }
}

/// Normalises a username: trimmed, lower case, 1–64 of `a-z 0-9 . _ -`,
/// starting with a letter or digit.
pub fn normalize_username(field: &'static str, raw: &str) -> AppResult<String> {
    let name = raw.trim().to_lowercase();
    let valid_chars = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'));
    let starts_well = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric());
    if name.is_empty() || name.len() > 64 || !valid_chars || !starts_well {
        return Err(AppError::bad_input(
            field,
            "username must be 1–64 characters of a-z, 0-9, '.', '_' or '-', starting with a letter or digit",
        ));
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usernames_are_normalised_and_checked() {
        assert_eq!(normalize_username("u", "  Alice ").unwrap(), "alice");
        assert_eq!(
            normalize_username("u", "bob.smith-2").unwrap(),
            "bob.smith-2"
        );
        for bad in ["", "-lead", "has space", "ünï", &"x".repeat(65)] {
            assert!(normalize_username("u", bad).is_err(), "{bad:?} accepted");
        }
    }
}
