//! Passwords: checked for length, hashed with Argon2id (RFC 9106) at the `argon2` crate's
//! default cost (19 MiB, 2 passes, 1 lane: OWASP's recommended minimum), always off the
//! async runtime and a few at a time, so log-ins can neither stall requests nor exhaust
//! memory.

use std::sync::LazyLock;

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use tokio::sync::Semaphore;

/// Fewest characters of a password.
pub const MIN_CHARS: usize = 8;
/// Most characters of a password.
pub const MAX_CHARS: usize = 128;

/// A password of acceptable length. Never printed: its `Debug` is redacted.
#[derive(Clone)]
pub struct Password(String);

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Password(<hidden>)")
    }
}

/// Why a password was not accepted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a password has {MIN_CHARS} to {MAX_CHARS} characters")]
pub struct BadLength;

impl Password {
    /// A password for setting: 8–128 characters.
    pub fn new(password: String) -> Result<Self, BadLength> {
        let count = password.chars().count();
        if (MIN_CHARS..=MAX_CHARS).contains(&count) {
            Ok(Self(password))
        } else {
            Err(BadLength)
        }
    }

    /// A password offered at log-in, checked against a hash whatever its length: a length
    /// refusal would answer differently (and faster) than a wrong password.
    pub fn offered(password: String) -> Self {
        Self(password)
    }
}

/// Why hashing failed: a fault, never the caller's.
#[derive(Clone, Debug, thiserror::Error)]
#[error("password hashing failed: {0}")]
pub struct HashingFailed(String);

/// Hashes running at once; each holds 19 MiB and a core.
static SLOTS: LazyLock<Semaphore> = LazyLock::new(|| {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    Semaphore::new(cores)
});

/// The hash checked when a name has no password (or no account), so the answer takes as
/// long as for a wrong password.
static DUMMY: LazyLock<Result<String, HashingFailed>> = LazyLock::new(|| {
    let random: [u8; 16] = rand::random();
    hash_now(&hex::encode(random))
});

fn hash_now(password: &str) -> Result<String, HashingFailed> {
    let salt = SaltString::encode_b64(&rand::random::<[u8; 16]>())
        .map_err(|e| HashingFailed(e.to_string()))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|e| HashingFailed(e.to_string()))
}

fn verify_now(password: &str, hash: Option<&str>) -> Result<bool, HashingFailed> {
    let (hash, real) = match hash {
        Some(hash) => (hash, true),
        None => (DUMMY.as_ref().map_err(Clone::clone)?.as_str(), false),
    };
    let parsed = PasswordHash::new(hash).map_err(|e| HashingFailed(e.to_string()))?;
    let matches = Argon2::default()
        .verify_password(password.as_bytes(), &parsed)
        .is_ok();
    Ok(real && matches)
}

async fn off_runtime<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, HashingFailed> + Send + 'static,
) -> Result<T, HashingFailed> {
    let _slot = SLOTS
        .acquire()
        .await
        .map_err(|e| HashingFailed(e.to_string()))?;
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| HashingFailed(e.to_string()))?
}

/// An Argon2id PHC string for `password`, with a fresh random salt.
pub async fn hash(password: &Password) -> Result<String, HashingFailed> {
    let password = password.0.clone();
    off_runtime(move || hash_now(&password)).await
}

/// Whether `password` matches `hash`. Without a hash it checks a dummy one (same cost) and
/// answers no.
pub async fn verify(password: &Password, hash: Option<String>) -> Result<bool, HashingFailed> {
    let password = password.0.clone();
    off_runtime(move || verify_now(&password, hash.as_deref())).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_are_counted_in_characters() {
        assert!(
            Password::new("ąćęłńóśź".into()).is_ok(),
            "8 characters, 16 bytes"
        );
        assert_eq!(Password::new("1234567".into()).err(), Some(BadLength));
        assert!(Password::new("x".repeat(MAX_CHARS)).is_ok());
        assert_eq!(
            Password::new("x".repeat(MAX_CHARS + 1)).err(),
            Some(BadLength)
        );
    }

    #[tokio::test]
    async fn a_hash_is_argon2id_salted_and_verifies_only_its_password() {
        let password = Password::new("correct horse".into()).expect("length");
        let first = hash(&password).await.expect("hash");
        let second = hash(&password).await.expect("hash");
        assert!(
            first.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
            "{first}"
        );
        assert_ne!(first, second, "a fresh salt each time");
        assert!(!first.contains("correct horse"));
        assert!(
            verify(&password, Some(first.clone()))
                .await
                .expect("verify")
        );
        let wrong = Password::offered("correct horsE".into());
        assert!(!verify(&wrong, Some(first)).await.expect("verify"));
        assert!(
            !verify(&password, None).await.expect("verify"),
            "no hash never matches"
        );
    }

    #[test]
    fn a_password_is_never_printed() {
        let password = Password::new("hunter2hunter2".into()).expect("length");
        assert!(!format!("{password:?}").contains("hunter2"));
    }
}
