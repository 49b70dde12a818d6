//! Token formats.
//!
//! - Access tokens are HS256 JWTs naming the user (`sub`) and the session
//!   (`sid`); they live `TRELLIS_ACCESS_TOKEN_TTL` seconds and are checked
//!   against the session on each request, so logout ends them at once.
//! - Refresh tokens and session-cookie secrets are opaque random strings
//!   (256 bits); only their SHA-256 is stored.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use chrono::{DateTime, Utc};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

const ISSUER: &str = "trellis";

#[derive(Debug, Serialize, Deserialize)]
pub struct AccessClaims {
    pub sub: Uuid,
    pub sid: Uuid,
    pub iat: i64,
    pub exp: i64,
    pub iss: String,
}

/// Signing and verification keys for access tokens.
pub struct AccessTokenKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
}

impl std::fmt::Debug for AccessTokenKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AccessTokenKeys([redacted])")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AccessTokenError {
    #[error("access token expired")]
    Expired,
    #[error("invalid access token")]
    Invalid,
}

impl AccessTokenKeys {
    pub fn new(secret: &[u8]) -> anyhow::Result<Self> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[ISSUER]);
        validation.set_required_spec_claims(&["exp", "iss", "sub"]);
        // All verifiers are our own processes; expiry means expiry.
        validation.leeway = 0;
        Ok(AccessTokenKeys {
            encoding: EncodingKey::from_secret(secret)?,
            decoding: DecodingKey::from_secret(secret)?,
            validation,
        })
    }

    pub fn mint(
        &self,
        user_id: Uuid,
        session_id: Uuid,
        now: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> anyhow::Result<String> {
        let claims = AccessClaims {
            sub: user_id,
            sid: session_id,
            iat: now.timestamp(),
            exp: expires_at.timestamp(),
            iss: ISSUER.to_owned(),
        };
        Ok(jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &self.encoding,
        )?)
    }

    pub fn verify(&self, token: &str) -> Result<AccessClaims, AccessTokenError> {
        jsonwebtoken::decode::<AccessClaims>(token, &self.decoding, &self.validation)
            .map(|data| data.claims)
            .map_err(|error| match error.kind() {
                jsonwebtoken::errors::ErrorKind::ExpiredSignature => AccessTokenError::Expired,
                _ => AccessTokenError::Invalid,
            })
    }
}

/// A fresh 256-bit random token, `<prefix>_<base64url>`. The prefix makes
/// leaked tokens recognisable to secret scanners.
pub fn random_token(prefix: &str) -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!("{prefix}_{}", URL_SAFE_NO_PAD.encode(bytes))
}

/// SHA-256 of an opaque token, hex encoded: what the database stores.
/// A fast hash is right here: the tokens carry 256 bits of entropy.
pub fn token_hash(token: &str) -> String {
    crate::digest::sha256_hex(&[token])
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Duration;

    #[test]
    fn minted_token_verifies_and_names_user_and_session() {
        let keys = AccessTokenKeys::new(&[7u8; 32]).unwrap();
        let (user, session) = (Uuid::new_v4(), Uuid::new_v4());
        let now = Utc::now();
        let token = keys
            .mint(user, session, now, now + Duration::minutes(5))
            .unwrap();
        let claims = keys.verify(&token).unwrap();
        assert_eq!((claims.sub, claims.sid), (user, session));
    }

    #[test]
    fn expired_and_foreign_tokens_are_rejected() {
        let keys = AccessTokenKeys::new(&[7u8; 32]).unwrap();
        let now = Utc::now();
        let old = keys
            .mint(
                Uuid::new_v4(),
                Uuid::new_v4(),
                now - Duration::minutes(10),
                now - Duration::seconds(1),
            )
            .unwrap();
        assert!(matches!(keys.verify(&old), Err(AccessTokenError::Expired)));

        let other = AccessTokenKeys::new(&[8u8; 32]).unwrap();
        let foreign = other
            .mint(
                Uuid::new_v4(),
                Uuid::new_v4(),
                now,
                now + Duration::minutes(5),
            )
            .unwrap();
        assert!(matches!(
            keys.verify(&foreign),
            Err(AccessTokenError::Invalid)
        ));
        assert!(matches!(
            keys.verify("not.a.jwt"),
            Err(AccessTokenError::Invalid)
        ));
    }

    #[test]
    fn random_tokens_are_distinct_and_hash_stably() {
        let (a, b) = (random_token("trt"), random_token("trt"));
        assert_ne!(a, b);
        assert!(a.starts_with("trt_") && a.len() == 4 + 43);
        assert_eq!(token_hash(&a), token_hash(&a));
        assert_eq!(token_hash(&a).len(), 64);
    }
}
