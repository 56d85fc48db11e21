//! Passwords: checked for length, hashed with Argon2id (RFC 9106) at the `argon2` crate's
//! default cost (19 MiB, 2 passes, 1 lane: OWASP's recommended minimum), always off the
//! async runtime and under one bounded budget shared by log-in, registration and password
//! changes: half the cores hash at once (the rest keep serving games), a few more wait at
//! most [`MAX_WAIT`], and beyond that the work is refused at once ([`HashingFailed::Busy`],
//! answered `503` with `Retry-After`) instead of queueing without end. Callers hash while
//! holding no database connection or lock.
//!
//! A log-in for a name without a password (or without an account) spends none of that
//! budget: it waits as long as a verification recently took ([`HashBudget::pretend_verify`])
//! and answers no, so a spray of unknown names cannot crowd out the accounts that exist.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

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

/// Why hashing failed: the budget is full (retry shortly), or a fault.
#[derive(Clone, Debug, thiserror::Error)]
pub enum HashingFailed {
    #[error("password hashing is at capacity; retry shortly")]
    Busy,
    #[error("password hashing failed: {0}")]
    Fault(String),
}

/// Hashes that may wait for a slot by default; one more is refused at once.
pub const MAX_WAITING: usize = 16;
/// Longest a hash waits for a slot by default before it is refused.
pub const MAX_WAIT: Duration = Duration::from_secs(2);

/// The one budget for Argon2 work of an application: `slots` hashes at once, at most
/// `max_waiting` more waiting, none longer than `max_wait`. Clones share it.
#[derive(Clone, Debug)]
pub struct HashBudget {
    running: Arc<Semaphore>,
    waiting: Arc<AtomicUsize>,
    max_waiting: usize,
    max_wait: Duration,
    /// How long one Argon2 run took lately, in microseconds (a moving average; 0 before
    /// the first).
    typical_micros: Arc<AtomicU64>,
}

/// What [`HashBudget::pretend_verify`] waits before any Argon2 run was timed.
const FIRST_TYPICAL: Duration = Duration::from_millis(50);

impl Default for HashBudget {
    /// Half the cores (at least one) hash at once, so the rest keep serving games.
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Self::new((cores / 2).max(1), MAX_WAITING, MAX_WAIT)
    }
}

/// Counts one waiter while it lives.
struct Waiting(Arc<AtomicUsize>);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl HashBudget {
    pub fn new(slots: usize, max_waiting: usize, max_wait: Duration) -> Self {
        Self {
            running: Arc::new(Semaphore::new(slots.max(1))),
            waiting: Arc::new(AtomicUsize::new(0)),
            max_waiting,
            max_wait,
            typical_micros: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The answer to a password offered for a name that has none (or no account): no, after
    /// about as long as a verification takes, without running Argon2 or taking a slot.
    pub async fn pretend_verify(&self) -> bool {
        let wait = match self.typical_micros.load(Ordering::Relaxed) {
            0 => FIRST_TYPICAL,
            micros => Duration::from_micros(micros),
        };
        tokio::time::sleep(wait).await;
        metrics::counter!("statki_password_checks_pretended_total").increment(1);
        false
    }

    /// Folds one timed Argon2 run into the typical duration (an eighth of the way; the
    /// first run sets it).
    fn timed(&self, took: Duration) {
        let took = u64::try_from(took.as_micros()).unwrap_or(u64::MAX).max(1);
        let _ = self
            .typical_micros
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
                Some(if old == 0 {
                    took
                } else {
                    old - old / 8 + took / 8
                })
            });
    }

    /// Runs `work` on a blocking thread once a slot is free; refused when the budget is full.
    async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> Result<T, HashingFailed> + Send + 'static,
    ) -> Result<T, HashingFailed> {
        let slot = match self.running.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                let max = self.max_waiting;
                self.waiting
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                        (n < max).then_some(n + 1)
                    })
                    .map_err(|_| busy())?;
                let waiting = Waiting(self.waiting.clone());
                let slot =
                    tokio::time::timeout(self.max_wait, self.running.clone().acquire_owned())
                        .await
                        .map_err(|_| busy())?
                        .map_err(|e| HashingFailed::Fault(e.to_string()))?;
                drop(waiting);
                slot
            }
        };
        metrics::counter!("statki_password_hashes_total").increment(1);
        // The slot goes with the work: a caller that gives up does not free it early.
        let started = std::time::Instant::now();
        let outcome = tokio::task::spawn_blocking(move || {
            let _slot = slot;
            work()
        })
        .await
        .map_err(|e| HashingFailed::Fault(e.to_string()))?;
        self.timed(started.elapsed());
        outcome
    }

    /// An Argon2id PHC string for `password`, with a fresh random salt.
    pub async fn hash(&self, password: &Password) -> Result<String, HashingFailed> {
        let password = password.0.clone();
        self.run(move || hash_now(&password)).await
    }

    /// Whether `password` matches `hash`. Without a hash it checks a dummy one (same cost)
    /// and answers no.
    pub async fn verify(
        &self,
        password: &Password,
        hash: Option<String>,
    ) -> Result<bool, HashingFailed> {
        let password = password.0.clone();
        self.run(move || verify_now(&password, hash.as_deref()))
            .await
    }
}

fn busy() -> HashingFailed {
    metrics::counter!("statki_password_hashes_refused_total").increment(1);
    HashingFailed::Busy
}

/// The hash checked when a name has no password (or no account), so the answer takes as
/// long as for a wrong password.
static DUMMY: LazyLock<Result<String, HashingFailed>> = LazyLock::new(|| {
    let random: [u8; 16] = rand::random();
    hash_now(&hex::encode(random))
});

fn hash_now(password: &str) -> Result<String, HashingFailed> {
    let salt = SaltString::encode_b64(&rand::random::<[u8; 16]>())
        .map_err(|e| HashingFailed::Fault(e.to_string()))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|e| HashingFailed::Fault(e.to_string()))
}

fn verify_now(password: &str, hash: Option<&str>) -> Result<bool, HashingFailed> {
    let (hash, real) = match hash {
        Some(hash) => (hash, true),
        None => (DUMMY.as_ref().map_err(Clone::clone)?.as_str(), false),
    };
    let parsed = PasswordHash::new(hash).map_err(|e| HashingFailed::Fault(e.to_string()))?;
    let matches = Argon2::default()
        .verify_password(password.as_bytes(), &parsed)
        .is_ok();
    Ok(real && matches)
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

    async fn hash(password: &Password) -> Result<String, HashingFailed> {
        HashBudget::default().hash(password).await
    }

    async fn verify(password: &Password, hash: Option<String>) -> Result<bool, HashingFailed> {
        HashBudget::default().verify(password, hash).await
    }

    #[tokio::test]
    async fn a_pretended_check_takes_no_slot_and_as_long_as_a_real_one() {
        let budget = HashBudget::new(1, 0, Duration::from_millis(10));
        let password = Password::new("correct horse".into()).expect("length");
        let hash = budget.hash(&password).await.expect("hash");
        let started = std::time::Instant::now();
        let real = budget.verify(&password, Some(hash.clone())).await;
        let real_took = started.elapsed();
        assert_eq!(real.ok(), Some(true));
        // Every slot taken: a real check is refused, a pretended one still answers no.
        let _held = budget
            .running
            .clone()
            .try_acquire_owned()
            .expect("the slot");
        assert!(matches!(
            budget.verify(&password, Some(hash)).await,
            Err(HashingFailed::Busy)
        ));
        let started = std::time::Instant::now();
        assert!(!budget.pretend_verify().await);
        let pretended = started.elapsed();
        assert!(
            pretended * 4 >= real_took && pretended <= real_took * 4 + Duration::from_millis(50),
            "pretended {pretended:?}, real {real_took:?}"
        );
    }

    #[tokio::test]
    async fn a_full_budget_refuses_at_once() {
        let budget = HashBudget::new(1, 1, Duration::from_secs(10));
        let password = Password::new("correct horse".into()).expect("length");
        let started = std::time::Instant::now();
        let results = futures::future::join_all((0..6).map(|_| budget.hash(&password))).await;
        let busy = results
            .iter()
            .filter(|r| matches!(r, Err(HashingFailed::Busy)))
            .count();
        assert_eq!(busy, 4, "one running, one waiting");
        assert!(started.elapsed() < Duration::from_secs(5));
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
