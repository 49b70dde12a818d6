//! `independent-actions.json` in the data directory (seed 003, "Recovery
//! and storage state"): the gateway's origin and its last valid capability
//! manifest (what each provider supports, instance-wide: no user, key or
//! credential), in a bounded envelope authenticated with HMAC-SHA256 under
//! a key derived from the server secret.
//!
//! A file that is too large, truncated, tampered with, of another version,
//! another origin or another server's key is rejected whole — logged,
//! never partly loaded — and replaced. The file is written atomically
//! (0600) whenever the manifest changes, including when support is
//! removed. Only admission of new events reads the saved manifest;
//! delivery always asks the provider fresh (`super::delivery`).

use std::path::Path;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{
    provider::{GatewayFeature, ProviderKind},
    service::Providers,
};
use crate::auth::keys::ServerSecret;

/// The file's name in the data directory.
pub const FILE: &str = "independent-actions.json";
/// The largest file read: anything larger is rejected unread.
pub const MAX_BYTES: u64 = 64 * 1024;
const VERSION: u32 = 1;
const MAC_LABEL: &str = "gateway/independent-actions";

/// The instance's manifest as saved: per provider, each feature's support.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SavedManifest {
    pub protocol_version: i32,
    pub providers: Vec<SavedProvider>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SavedProvider {
    pub provider: ProviderKind,
    pub configured: bool,
    pub features: Vec<SavedFeature>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SavedFeature {
    pub feature: String,
    pub supported: bool,
    pub limitation: Option<String>,
}

impl SavedManifest {
    /// The manifest the providers give now.
    pub fn current(providers: &Providers) -> Self {
        SavedManifest {
            protocol_version: super::service::PROTOCOL_VERSION,
            providers: providers
                .all()
                .map(|provider| SavedProvider {
                    provider: provider.kind(),
                    configured: provider.configured(),
                    features: provider
                        .features()
                        .into_iter()
                        .map(|support| SavedFeature {
                            feature: feature_name(support.feature).to_owned(),
                            supported: support.supported,
                            limitation: support.limitation.map(str::to_owned),
                        })
                        .collect(),
                })
                .collect(),
        }
    }

    /// Whether the manifest says `provider` supports `feature`.
    pub fn supports(&self, provider: ProviderKind, feature: GatewayFeature) -> bool {
        self.providers
            .iter()
            .filter(|saved| saved.provider == provider && saved.configured)
            .flat_map(|saved| saved.features.iter())
            .any(|saved| saved.feature == feature_name(feature) && saved.supported)
    }
}

fn feature_name(feature: GatewayFeature) -> &'static str {
    match feature {
        GatewayFeature::PublicMetadata => "PUBLIC_METADATA",
        GatewayFeature::Progress => "PROGRESS",
        GatewayFeature::Rating => "RATING",
        GatewayFeature::WantToRead => "WANT_TO_READ",
        GatewayFeature::Removal => "REMOVAL",
        GatewayFeature::ScrobbleFromKavita => "SCROBBLE_FROM_KAVITA",
    }
}

/// What the MAC covers, serialized in this field order.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Signed {
    version: u32,
    origin: String,
    saved_at: DateTime<Utc>,
    manifest: SavedManifest,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Envelope {
    version: u32,
    origin: String,
    saved_at: DateTime<Utc>,
    manifest: SavedManifest,
    mac: String,
}

/// Why a saved file was not loaded.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Rejected {
    #[error("it is larger than {MAX_BYTES} bytes")]
    TooLarge,
    #[error("it is not a readable envelope (truncated or damaged)")]
    Unreadable,
    #[error("it is of version {0}, not {VERSION}")]
    Version(u32),
    #[error("it belongs to another gateway ({0})")]
    Foreign(String),
    #[error("its authentication does not match (tampered with, or another server's key)")]
    BadMac,
}

fn mac(secret: &ServerSecret, signed: &Signed) -> String {
    // Our own structs serialize to JSON deterministically (field order is
    // the declaration order), so the bytes signed are the bytes checked.
    let bytes = serde_json::to_vec(signed).expect("the manifest serializes");
    secret.mac_hex(MAC_LABEL, &[&bytes])
}

/// The envelope's bytes for `manifest`.
pub fn seal(
    secret: &ServerSecret,
    origin: &str,
    manifest: &SavedManifest,
    now: DateTime<Utc>,
) -> Vec<u8> {
    let signed = Signed {
        version: VERSION,
        origin: origin.to_owned(),
        saved_at: now,
        manifest: manifest.clone(),
    };
    let envelope = Envelope {
        mac: mac(secret, &signed),
        version: signed.version,
        origin: signed.origin,
        saved_at: signed.saved_at,
        manifest: signed.manifest,
    };
    serde_json::to_vec_pretty(&envelope).expect("the envelope serializes")
}

/// The manifest in `bytes`, if it is whole, ours and untouched.
pub fn open(secret: &ServerSecret, origin: &str, bytes: &[u8]) -> Result<SavedManifest, Rejected> {
    if bytes.len() as u64 > MAX_BYTES {
        return Err(Rejected::TooLarge);
    }
    let envelope: Envelope = serde_json::from_slice(bytes).map_err(|_| Rejected::Unreadable)?;
    if envelope.version != VERSION {
        return Err(Rejected::Version(envelope.version));
    }
    if envelope.origin != origin {
        return Err(Rejected::Foreign(
            envelope.origin.chars().take(200).collect(),
        ));
    }
    let signed = Signed {
        version: envelope.version,
        origin: envelope.origin,
        saved_at: envelope.saved_at,
        manifest: envelope.manifest,
    };
    if !crate::digest::constant_time_eq(mac(secret, &signed).as_bytes(), envelope.mac.as_bytes()) {
        return Err(Rejected::BadMac);
    }
    Ok(signed.manifest)
}

/// Loads the saved manifest from `dir` (none, or rejected: logged), then
/// saves `current` if it differs, and returns the manifest admission uses:
/// the current one (a valid new manifest always replaces the saved one).
pub fn reconcile(
    dir: &Path,
    secret: &ServerSecret,
    origin: &str,
    current: SavedManifest,
) -> SavedManifest {
    let path = dir.join(FILE);
    let saved = match std::fs::metadata(&path) {
        Err(_) => None,
        Ok(meta) if meta.len() > MAX_BYTES => {
            tracing::warn!(path = %path.display(), reason = %Rejected::TooLarge, "the saved gateway state was rejected");
            None
        }
        Ok(_) => match std::fs::read(&path).map(|bytes| open(secret, origin, &bytes)) {
            Ok(Ok(manifest)) => Some(manifest),
            Ok(Err(reason)) => {
                tracing::warn!(path = %path.display(), %reason, "the saved gateway state was rejected");
                None
            }
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "the saved gateway state could not be read");
                None
            }
        },
    };
    if saved.as_ref() != Some(&current) {
        let bytes = seal(secret, origin, &current, Utc::now());
        if let Err(error) = crate::datadir::atomic_write(&path, &bytes, 0o600) {
            tracing::warn!(path = %path.display(), %error, "the gateway state could not be saved");
        }
    }
    current
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(text: &str) -> ServerSecret {
        ServerSecret::for_tests(text)
    }

    fn manifest() -> SavedManifest {
        SavedManifest {
            protocol_version: 1,
            providers: vec![SavedProvider {
                provider: ProviderKind::Anilist,
                configured: true,
                features: vec![SavedFeature {
                    feature: "REMOVAL".into(),
                    supported: true,
                    limitation: Some("bare entries only".into()),
                }],
            }],
        }
    }

    #[test]
    fn a_sealed_manifest_opens_with_the_same_key_and_origin() {
        let key = secret("a-server-secret-of-enough-length-000");
        let bytes = seal(&key, "https://trellis.example", &manifest(), Utc::now());
        assert_eq!(
            open(&key, "https://trellis.example", &bytes),
            Ok(manifest())
        );
        assert!(manifest().supports(ProviderKind::Anilist, GatewayFeature::Removal));
        assert!(!manifest().supports(ProviderKind::Kavita, GatewayFeature::Removal));
        let text = String::from_utf8(bytes).unwrap();
        assert!(!text.contains("a-server-secret"));
    }

    #[test]
    fn every_flipped_byte_is_rejected() {
        let key = secret("a-server-secret-of-enough-length-000");
        let bytes = seal(&key, "o", &manifest(), Utc::now());
        for at in 0..bytes.len() {
            let mut tampered = bytes.clone();
            tampered[at] ^= 0x01;
            assert!(
                open(&key, "o", &tampered).is_err(),
                "a flip at byte {at} was accepted"
            );
        }
    }

    #[test]
    fn truncated_foreign_oversized_and_other_keys_are_rejected() {
        let key = secret("a-server-secret-of-enough-length-000");
        let bytes = seal(&key, "o", &manifest(), Utc::now());
        assert_eq!(
            open(&key, "o", &bytes[..bytes.len() / 2]),
            Err(Rejected::Unreadable)
        );
        assert!(matches!(
            open(&key, "elsewhere", &bytes),
            Err(Rejected::Foreign(_))
        ));
        let other = secret("another-server-secret-of-length-111");
        assert_eq!(open(&other, "o", &bytes), Err(Rejected::BadMac));
        let huge = vec![b' '; MAX_BYTES as usize + 1];
        assert_eq!(open(&key, "o", &huge), Err(Rejected::TooLarge));
    }

    #[test]
    fn reconcile_replaces_a_tampered_file_and_a_changed_manifest() {
        let dir = tempfile::tempdir().unwrap();
        let key = secret("a-server-secret-of-enough-length-000");
        let path = dir.path().join(FILE);
        std::fs::write(&path, b"{ not json").unwrap();
        let used = reconcile(dir.path(), &key, "o", manifest());
        assert_eq!(used, manifest());
        assert_eq!(
            open(&key, "o", &std::fs::read(&path).unwrap()),
            Ok(manifest())
        );
        // Support removed: the new manifest replaces the saved one.
        let mut fewer = manifest();
        fewer.providers[0].features[0].supported = false;
        reconcile(dir.path(), &key, "o", fewer.clone());
        assert_eq!(open(&key, "o", &std::fs::read(&path).unwrap()), Ok(fewer));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
    }
}
