//! The one SHA-256 helper: token hashes, payload hashes and generated item
//! ids all go through it.

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
    hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
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
    }
}
