//! The server-held secret every token MAC is keyed with: access tokens
//! (HS256), Google Reader tokens and stored Fever keys. It is
//! `TRELLIS_JWT_SECRET` when set, else the key file `<data dir>/instance.key`,
//! created `0600` on first start — never the database, so a dump of the
//! database alone cannot forge a token or brute-force a reader password
//! offline. Several API processes must share it (set `TRELLIS_JWT_SECRET`).

use std::path::Path;

use anyhow::Context;
use hmac::{Hmac, Mac};
use secrecy::ExposeSecret;
use sha2::Sha256;

use crate::config::Config;

/// The key file's name in the data directory.
pub const KEY_FILE: &str = "instance.key";

type HmacSha256 = Hmac<Sha256>;

pub struct ServerSecret(Vec<u8>);

impl std::fmt::Debug for ServerSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServerSecret([redacted])")
    }
}

impl ServerSecret {
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

    /// An HMAC-SHA256 of `parts` (each length-prefixed) under a key derived
    /// for `label` alone, hex encoded.
    pub fn mac_hex(&self, label: &str, parts: &[&[u8]]) -> String {
        let mut derive =
            HmacSha256::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        derive.update(b"trellis/");
        derive.update(label.as_bytes());
        let key = derive.finalize().into_bytes();
        let mut mac = HmacSha256::new_from_slice(&key).expect("HMAC takes keys of any length");
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
