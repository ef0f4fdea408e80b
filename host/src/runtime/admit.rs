//! What a third-party component must be before it is compiled: the digest
//! of its bytes (pinned in the config), and optionally a minisign signature
//! by a key the operator trusts. Both are judged on the bytes read once
//! into memory, the same bytes that are then compiled: nothing re-reads the
//! path between the check and the use.

use sha2::{Digest, Sha256};

/// How many hex digits of a digest an audit line carries.
pub const SHORT_DIGEST: usize = 12;

/// The SHA-256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Why a signature does not admit a file.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("its signature {0} cannot be read: {1}")]
    Missing(String, String),
    #[error("its signature {0} is not a minisign signature: {1}")]
    Malformed(String, String),
    #[error("its signature {0} was made by a key not in [trust] keys")]
    UntrustedKey(String),
    #[error(
        "its signature {0} does not verify: the file (or the signature) changed since it was signed"
    )]
    Invalid(String),
    #[error(
        "its signature {0} is a legacy (not prehashed) minisign signature: sign it again with \
         minisign 0.8 or later"
    )]
    Legacy(String),
}

/// Checks `signature` (the text of `<file>.minisig`, shown as `shown`)
/// over `wasm` against each trusted key. Returns the signature's trusted
/// comment.
pub fn verify_signature(
    wasm: &[u8],
    signature: &str,
    shown: &str,
    keys: &[String],
) -> Result<String, SignatureError> {
    let signature = minisign_verify::Signature::decode(signature)
        .map_err(|e| SignatureError::Malformed(shown.into(), e.to_string()))?;
    let mut error = SignatureError::UntrustedKey(shown.into());
    for key in keys {
        let Ok(key) = minisign_verify::PublicKey::from_base64(key) else {
            continue;
        };
        match key.verify(wasm, &signature, false) {
            Ok(()) => return Ok(signature.trusted_comment().to_string()),
            Err(minisign_verify::Error::UnexpectedKeyId) => {}
            Err(minisign_verify::Error::UnexpectedAlgorithm) => {
                error = SignatureError::Legacy(shown.into())
            }
            Err(_) => error = SignatureError::Invalid(shown.into()),
        }
    }
    Err(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_is_sha256() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    /// A signature made as the minisign tool makes it verifies with its
    /// key only, and only over the very bytes signed.
    #[test]
    fn signatures_verify_by_key_and_bytes() {
        let pair = minisign::KeyPair::generate_unencrypted_keypair().unwrap();
        let other = minisign::KeyPair::generate_unencrypted_keypair().unwrap();
        let data = b"\0asm\x0d\0\x01\0 component bytes";
        let sig = minisign::sign(Some(&pair.pk), &pair.sk, &data[..], None, None)
            .unwrap()
            .into_string();
        let key = pair.pk.to_base64();
        let foreign = other.pk.to_base64();
        assert!(verify_signature(data, &sig, "s", std::slice::from_ref(&key)).is_ok());
        assert!(verify_signature(data, &sig, "s", &[foreign.clone(), key.clone()]).is_ok());
        assert_eq!(
            verify_signature(data, &sig, "s", &[foreign]),
            Err(SignatureError::UntrustedKey("s".into()))
        );
        let mut changed = data.to_vec();
        changed[9] ^= 1;
        assert_eq!(
            verify_signature(&changed, &sig, "s", std::slice::from_ref(&key)),
            Err(SignatureError::Invalid("s".into()))
        );
        assert!(matches!(
            verify_signature(data, "not a signature", "s", &[key]),
            Err(SignatureError::Malformed(..))
        ));
    }
}
