//! The server-held secret every token MAC is keyed with: access tokens
//! (HS256), Google Reader tokens and stored Fever keys. It is
//! `TRELLIS_JWT_SECRET` when set, else the key file `<data dir>/instance.key`,
//! created `0600` on first start — never the database, so a dump of the
//! database alone cannot forge a token or brute-force a reader password
//! offline. Several API processes must share it (set `TRELLIS_JWT_SECRET`).

use std::path::Path;

use anyhow::Context;
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use chacha20poly1305::{
    XChaCha20Poly1305, XNonce,
    aead::{Aead, KeyInit, Payload},
};
use hmac::{Hmac, Mac};
use secrecy::{ExposeSecret, SecretString};
use sha2::Sha256;

use crate::config::Config;

/// The key file's name in the data directory.
pub const KEY_FILE: &str = "instance.key";

type HmacSha256 = Hmac<Sha256>;

/// A credential from the environment: never printed (`Debug` says
/// `[redacted]`), never returned.
#[derive(Clone)]
pub struct Credential(SecretString);

impl Credential {
    /// The credential, for the one request header or body that needs it.
    pub fn expose(&self) -> &str {
        self.0.expose_secret()
    }
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Credential([redacted])")
    }
}

impl std::str::FromStr for Credential {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let value = value.trim();
        if value.is_empty() {
            return Err("empty".into());
        }
        Ok(Credential(SecretString::from(value.to_owned())))
    }
}

/// The prefix of every sealed value: the format's version, so a later
/// algorithm can be told apart from this one.
const SEALED_PREFIX: &str = "v1.";
const NONCE_LEN: usize = 24;

/// Why a sealed value could not be opened. Neither says more than that:
/// which one happened is all a caller may act on.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SealError {
    /// Not something [`ServerSecret::seal`] wrote.
    #[error("the sealed value is malformed")]
    Malformed,
    /// Written under another server secret or another label, or altered
    /// since.
    #[error(
        "the sealed value does not open with this server's secret (another key, another use, or altered)"
    )]
    Forged,
}

pub struct ServerSecret(Vec<u8>);

impl std::fmt::Debug for ServerSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServerSecret([redacted])")
    }
}

impl ServerSecret {
    /// A secret for unit tests elsewhere in the crate.
    #[cfg(test)]
    pub fn for_tests(secret: &str) -> Self {
        ServerSecret(secret.as_bytes().to_vec())
    }

    /// `TRELLIS_JWT_SECRET`, or the key file (created on first start).
    pub fn load(config: &Config) -> anyhow::Result<Self> {
        match &config.jwt_secret {
            Some(secret) => Ok(ServerSecret(secret.expose_secret().as_bytes().to_vec())),
            None => Self::from_key_file(&config.data_dir.join(KEY_FILE)),
        }
    }

    fn from_key_file(path: &Path) -> anyhow::Result<Self> {
        if !path.exists() {
            // Written whole under another name, then linked into place: of
            // concurrent first starts one wins, and nobody reads half a key.
            let mut pending = path.as_os_str().to_owned();
            pending.push(format!(".{}", std::process::id()));
            let pending = std::path::PathBuf::from(pending);
            crate::datadir::create_private_file(&pending)?;
            std::fs::write(&pending, super::tokens::random_token("key"))
                .with_context(|| format!("writing {}", pending.display()))?;
            let linked = std::fs::hard_link(&pending, path);
            let _ = std::fs::remove_file(&pending);
            match linked {
                Ok(()) => tracing::info!(path = %path.display(), "created the instance key file"),
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(error) => {
                    return Err(error).with_context(|| format!("creating {}", path.display()));
                }
            }
        }
        crate::datadir::warn_if_open(&[path.to_path_buf()]);
        let key = std::fs::read_to_string(path)
            .with_context(|| format!("reading the instance key file {}", path.display()))?;
        let key = key.trim();
        anyhow::ensure!(
            key.len() >= 32,
            "the instance key file {} holds fewer than 32 characters",
            path.display()
        );
        Ok(ServerSecret(key.as_bytes().to_vec()))
    }

    /// The secret itself: the access tokens' HS256 key (so tokens signed
    /// with `TRELLIS_JWT_SECRET` keep verifying).
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }

    /// A 32-byte key for `label`'s use alone, derived from the secret, so
    /// a value kept for one use never verifies or opens as another's.
    fn derived_key(&self, label: &str) -> [u8; 32] {
        let mut derive =
            <HmacSha256 as Mac>::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        derive.update(b"trellis/");
        derive.update(label.as_bytes());
        derive.finalize().into_bytes().into()
    }

    /// An HMAC-SHA256 of `parts` (each length-prefixed) under a key derived
    /// for `label` alone, hex encoded.
    pub fn mac_hex(&self, label: &str, parts: &[&[u8]]) -> String {
        let key = self.derived_key(label);
        let mut mac =
            <HmacSha256 as Mac>::new_from_slice(&key).expect("HMAC takes keys of any length");
        for part in parts {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        mac.finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

impl ServerSecret {
    /// Encrypts a secret to keep at rest (a provider's token, an API key):
    /// XChaCha20-Poly1305 under a key derived for `label` (which is also
    /// the associated data), with a random nonce. The result is printable
    /// (`v1.` + base64url), so it fits a text column; only this server's
    /// secret opens it, and only for the same `label`.
    pub fn seal(&self, label: &str, plaintext: &[u8]) -> String {
        let cipher = XChaCha20Poly1305::new(&self.derived_key(&seal_label(label)).into());
        let nonce: [u8; NONCE_LEN] = rand::random();
        let sealed = cipher
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: plaintext,
                    aad: label.as_bytes(),
                },
            )
            .expect("XChaCha20-Poly1305 encrypts any message that fits in memory");
        let mut bytes = Vec::with_capacity(NONCE_LEN + sealed.len());
        bytes.extend_from_slice(&nonce);
        bytes.extend_from_slice(&sealed);
        format!("{SEALED_PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes))
    }

    /// Decrypts what [`seal`](Self::seal) wrote for the same `label`.
    pub fn open(&self, label: &str, sealed: &str) -> Result<Vec<u8>, SealError> {
        let encoded = sealed
            .strip_prefix(SEALED_PREFIX)
            .ok_or(SealError::Malformed)?;
        let bytes = URL_SAFE_NO_PAD
            .decode(encoded)
            .map_err(|_| SealError::Malformed)?;
        if bytes.len() < NONCE_LEN + 16 {
            return Err(SealError::Malformed);
        }
        let (nonce, ciphertext) = bytes.split_at(NONCE_LEN);
        let cipher = XChaCha20Poly1305::new(&self.derived_key(&seal_label(label)).into());
        cipher
            .decrypt(
                XNonce::from_slice(nonce),
                Payload {
                    msg: ciphertext,
                    aad: label.as_bytes(),
                },
            )
            .map_err(|_| SealError::Forged)
    }
}

/// Sealing keys live apart from MAC keys: a label used for both never
/// shares a key.
fn seal_label(label: &str) -> String {
    format!("seal/{label}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_depend_on_secret_label_and_every_part() {
        let a = ServerSecret(b"a".repeat(32));
        let b = ServerSecret(b"b".repeat(32));
        let mac = a.mac_hex("fever", &[b"key"]);
        assert_eq!(mac.len(), 64);
        assert_eq!(mac, a.mac_hex("fever", &[b"key"]));
        assert_ne!(mac, b.mac_hex("fever", &[b"key"]));
        assert_ne!(mac, a.mac_hex("greader", &[b"key"]));
        assert_ne!(
            a.mac_hex("x", &[b"ab", b"c"]),
            a.mac_hex("x", &[b"a", b"bc"])
        );
    }

    #[test]
    fn a_sealed_secret_opens_only_with_its_key_and_label() {
        let a = ServerSecret(b"a".repeat(32));
        let b = ServerSecret(b"b".repeat(32));
        let sealed = a.seal("kavita.api_key", b"hunter2");
        assert!(sealed.starts_with("v1."));
        assert!(!sealed.contains("hunter2"));
        assert_eq!(a.open("kavita.api_key", &sealed).unwrap(), b"hunter2");
        assert_ne!(
            sealed,
            a.seal("kavita.api_key", b"hunter2"),
            "a fresh nonce each time"
        );
        assert_eq!(b.open("kavita.api_key", &sealed), Err(SealError::Forged));
        assert_eq!(a.open("anilist.token", &sealed), Err(SealError::Forged));
        assert_eq!(
            a.open("kavita.api_key", "hunter2"),
            Err(SealError::Malformed)
        );
        assert_eq!(a.open("kavita.api_key", "v1.!!"), Err(SealError::Malformed));
        assert_eq!(
            a.open("kavita.api_key", "v1.AAAA"),
            Err(SealError::Malformed)
        );
        // One flipped bit anywhere is refused.
        let mut bytes = URL_SAFE_NO_PAD.decode(&sealed[3..]).unwrap();
        for index in [0, NONCE_LEN, bytes.len() - 1] {
            bytes[index] ^= 1;
            let tampered = format!("v1.{}", URL_SAFE_NO_PAD.encode(&bytes));
            assert_eq!(a.open("kavita.api_key", &tampered), Err(SealError::Forged));
            bytes[index] ^= 1;
        }
        assert_eq!(a.open("x", &a.seal("x", b"")).unwrap(), b"");
    }

    #[cfg(unix)]
    #[test]
    fn the_key_file_is_created_private_once_and_read_back() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(KEY_FILE);
        let first = ServerSecret::from_key_file(&path).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let again = ServerSecret::from_key_file(&path).unwrap();
        assert_eq!(first.bytes(), again.bytes());
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no leftovers"
        );
    }
}
