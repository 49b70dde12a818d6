//! The one SHA-256 helper: token hashes, payload hashes, generated item
//! ids and the docs mirror's asset addresses all go through it.

use sha2::{Digest, Sha256};

/// Lower-case hex SHA-256 of `parts`, separated by NUL bytes (so `["ab",
/// "c"]` and `["a", "bc"]` differ). One part is its plain SHA-256.
pub fn sha256_hex(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            hasher.update([0u8]);
        }
        hasher.update(part.as_bytes());
    }
    hex(&hasher.finalize())
}

/// Lower-case hex SHA-256 of raw bytes (downloaded files: the docs
/// mirror's content-addressed assets).
/// Whether `a` and `b` are equal, compared in time independent of where
/// the first difference is (for secrets: signatures, tags, MACs).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub fn sha256_hex_bytes(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vector_and_separated_parts() {
        assert_eq!(
            sha256_hex(&["abc"]),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_ne!(sha256_hex(&["ab", "c"]), sha256_hex(&["a", "bc"]));
        assert_eq!(sha256_hex_bytes(b"abc"), sha256_hex(&["abc"]));
        assert_eq!(
            sha256_hex_bytes(&[]),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
