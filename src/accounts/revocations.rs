//! Which tokens a replica still accepts, without a database query per request.
//!
//! Each replica caches, per player it has seen, the instant from which their tokens are
//! valid (`players.tokens_valid_from`; never revoked = the beginning of time). A miss
//! reads the row once; a player that does not exist is never cached, so their token is
//! refused by a read each time (only the holder of the signing secret can make one).
//!
//! A revocation commits a new instant and notifies [`TOKENS_CHANNEL`]; every replica's
//! live listener (see `live`) re-reads that player's row the moment PostgreSQL delivers
//! it and applies what the database says. A notification is only ever a hint naming a
//! player: any role that can connect can `NOTIFY`, so its payload's instant is never
//! trusted (a forged one costs one row read). Deleting a player notifies too (a trigger),
//! and the cache then remembers the player as gone, so their tokens stop at once.
//! The instant only moves forward, so the cache keeps the latest of what it read and what
//! it was told, and a read that raced a notification cannot bring an old value back. While
//! the listener is down, notifications are lost: the cache is then bypassed (every request
//! reads the row), and it is emptied when the listener is back, before it is trusted again;
//! a read begun before that is not stored.
//!
//! "At once" on every replica: each replica, having applied a revocation, acknowledges it
//! on [`APPLIED_CHANNEL`]; the revoking request answers only when every listening replica
//! (counted by their listening connections) has, or after a bounded wait.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use sqlx::PgPool;
use tokio::sync::watch;
use uuid::Uuid;

use crate::auth::Verified;
use crate::store::{self, StoreError};

/// The channel revocations are announced on, as `player_id:valid_from_micros`.
pub const TOKENS_CHANNEL: &str = "statki_tokens";
/// The channel each replica acknowledges an applied revocation on, with the same payload.
pub const APPLIED_CHANNEL: &str = "statki_tokens_applied";

/// "Never revoked": every issue instant (and a token without one) is at or after it.
const NEVER: i64 = i64::MIN;
/// "The player was deleted": cached so that their tokens are refused as unknown.
const GONE: i64 = i64::MAX;

/// Why a verified token is not accepted.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("the player in the token does not exist")]
    UnknownPlayer,
    #[error("this token was revoked; log in again")]
    Revoked,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A replica's cache of token validity. Cheap to clone; every clone is the same cache.
#[derive(Clone)]
pub struct Revocations {
    inner: Arc<Inner>,
}

struct Inner {
    /// Where a player's row is read on a miss.
    pool: PgPool,
    state: RwLock<State>,
    /// Bumped on every revocation applied or acknowledged here: wakes the waiters.
    applied: watch::Sender<u64>,
    /// Acknowledgements counted for the revocations this replica is waiting on.
    acks: Mutex<HashMap<(Uuid, i64), usize>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Counts the acknowledgements of one revocation while it lives.
pub struct AckWait {
    revocations: Revocations,
    key: (Uuid, i64),
}

impl AckWait {
    /// Waits (at most `limit`) until `expected` replicas have acknowledged the revocation.
    /// Returns whether they all did.
    pub async fn wait(self, expected: usize, limit: Duration) -> bool {
        let inner = &self.revocations.inner;
        let mut changes = inner.applied.subscribe();
        let all = async {
            loop {
                if lock(&inner.acks)
                    .get(&self.key)
                    .is_some_and(|&n| n >= expected)
                {
                    return;
                }
                if changes.changed().await.is_err() {
                    return;
                }
            }
        };
        tokio::time::timeout(limit, all).await.is_ok()
    }
}

impl Drop for AckWait {
    fn drop(&mut self) {
        lock(&self.revocations.inner.acks).remove(&self.key);
    }
}

#[derive(Default)]
struct State {
    /// Whether notifications are being received, so the cache may be trusted.
    listening: bool,
    /// Bumped whenever the cache is emptied; a read begun under an older generation is
    /// not stored.
    generation: u64,
    valid_from: HashMap<Uuid, i64>,
}

impl Revocations {
    /// An empty cache reading misses from `pool`; not trusted until the listener says so.
    pub fn new(pool: PgPool) -> Self {
        Self {
            inner: Arc::new(Inner {
                pool,
                state: RwLock::new(State::default()),
                applied: watch::channel(0).0,
                acks: Mutex::new(HashMap::new()),
            }),
        }
    }
}

fn micros(at: Option<chrono::DateTime<chrono::Utc>>) -> i64 {
    at.map_or(NEVER, |at| at.timestamp_micros())
}

impl Revocations {
    fn read(&self) -> RwLockReadGuard<'_, State> {
        // Every critical section leaves the map consistent.
        self.inner
            .state
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.inner
            .state
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Accepts `token` if its player exists and it was issued at or after the player's
    /// last revocation (a token without `iat` only while there was none).
    pub async fn admit(&self, token: Verified) -> Result<(), Refused> {
        let issued = token.issued_micros.unwrap_or(NEVER);
        let cached = {
            let state = self.read();
            (
                state.listening,
                state.generation,
                state.valid_from.get(&token.player).copied(),
            )
        };
        let valid_from = match cached {
            (true, _, Some(valid_from)) => valid_from,
            (listening, generation, _) => {
                let loaded = store::accounts::tokens_valid_from(&self.inner.pool, token.player)
                    .await?
                    .ok_or(Refused::UnknownPlayer)?;
                let loaded = micros(loaded);
                if listening {
                    self.learn(token.player, loaded, generation)
                } else {
                    loaded
                }
            }
        };
        if valid_from == GONE {
            return Err(Refused::UnknownPlayer);
        }
        if issued < valid_from {
            return Err(Refused::Revoked);
        }
        Ok(())
    }

    /// Stores a value read from the database unless the cache was emptied since the read
    /// began; returns the latest known value.
    fn learn(&self, player: Uuid, valid_from: i64, generation: u64) -> i64 {
        let mut state = self.write();
        if state.generation != generation || !state.listening {
            return valid_from;
        }
        let entry = state.valid_from.entry(player).or_insert(valid_from);
        *entry = (*entry).max(valid_from);
        *entry
    }

    /// A change to `player`'s tokens was announced: reads their row and applies what the
    /// database says (never the announcement's payload). Returns the instant read, as
    /// microseconds (`None`: the player does not exist, and is now cached as gone).
    pub async fn reread(&self, player: Uuid) -> Result<Option<i64>, StoreError> {
        let loaded = store::accounts::tokens_valid_from(&self.inner.pool, player).await?;
        match loaded {
            Some(valid_from) => {
                let valid_from = micros(valid_from);
                self.revoked(player, valid_from);
                Ok(Some(valid_from))
            }
            None => {
                self.revoked(player, GONE);
                Ok(None)
            }
        }
    }

    /// `player`'s tokens are valid from `valid_from` (µs), as read from the database.
    fn revoked(&self, player: Uuid, valid_from: i64) {
        {
            let mut state = self.write();
            let entry = state.valid_from.entry(player).or_insert(valid_from);
            *entry = (*entry).max(valid_from);
        }
        self.inner.applied.send_modify(|count| *count += 1);
    }

    /// Drops what is cached for `player` (a re-read failed); a read begun before is not
    /// stored.
    pub fn forget(&self, player: Uuid) {
        let mut state = self.write();
        state.generation += 1;
        state.valid_from.remove(&player);
    }

    /// The listener went down (`false`) or (re)connected (`true`). Either way anything
    /// cached may have missed a notification, so the cache starts empty.
    pub fn listening(&self, listening: bool) {
        let mut state = self.write();
        state.listening = listening;
        state.generation += 1;
        state.valid_from.clear();
    }

    /// Starts counting acknowledgements of the revocation of `player` at `valid_from`
    /// (call before the revocation commits, so none is missed). Dropping the guard stops.
    pub fn expect_acks(&self, player: Uuid, valid_from: i64) -> AckWait {
        lock(&self.inner.acks).insert((player, valid_from), 0);
        AckWait {
            revocations: self.clone(),
            key: (player, valid_from),
        }
    }

    /// A replica announced on [`APPLIED_CHANNEL`] that it applied this revocation.
    pub fn acknowledged(&self, player: Uuid, valid_from: i64) {
        if let Some(count) = lock(&self.inner.acks).get_mut(&(player, valid_from)) {
            *count += 1;
        } else {
            return;
        }
        self.inner.applied.send_modify(|count| *count += 1);
    }

    /// Resolves once this replica learns that `token` was revoked: ends the event streams
    /// opened with it. (While the listener is down nothing is learnt; the stream's next
    /// reconnection is refused instead.)
    pub fn until_revoked(&self, token: Verified) -> impl Future<Output = ()> + Send + 'static {
        let this = self.clone();
        let mut changes = self.inner.applied.subscribe();
        let issued = token.issued_micros.unwrap_or(NEVER);
        async move {
            loop {
                let revoked = this
                    .read()
                    .valid_from
                    .get(&token.player)
                    .is_some_and(|&valid_from| issued < valid_from || valid_from == GONE);
                if revoked {
                    return;
                }
                if changes.changed().await.is_err() {
                    return std::future::pending().await;
                }
            }
        }
    }

    /// Whether `player`'s validity is cached here (a revocation must then be re-read).
    pub fn knows(&self, player: Uuid) -> bool {
        self.read().valid_from.contains_key(&player)
    }

    /// Players cached here (for tests and metrics).
    pub fn cached(&self) -> usize {
        self.read().valid_from.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_late_read_never_undoes_a_newer_revocation() {
        let cache = Revocations::new(unreachable_pool());
        cache.listening(true);
        let player = Uuid::new_v4();
        let generation = cache.read().generation;
        cache.revoked(player, 2_000);
        assert_eq!(cache.learn(player, 1_000, generation), 2_000);
        assert_eq!(cache.read().valid_from[&player], 2_000);
    }

    #[tokio::test]
    async fn a_read_begun_before_a_reconnect_is_not_stored() {
        let cache = Revocations::new(unreachable_pool());
        cache.listening(true);
        let player = Uuid::new_v4();
        let generation = cache.read().generation;
        cache.listening(false);
        cache.listening(true);
        assert_eq!(cache.learn(player, 1_000, generation), 1_000);
        assert_eq!(cache.cached(), 0);
    }

    /// A pool that fails on first use: nothing answers on port 1.
    fn unreachable_pool() -> PgPool {
        sqlx::postgres::PgPoolOptions::new()
            .acquire_timeout(Duration::from_millis(200))
            .connect_lazy("postgres://nobody@127.0.0.1:1/none")
            .expect("lazy pool")
    }

    fn token(player: Uuid, issued_micros: Option<i64>) -> Verified {
        Verified {
            player,
            issued_micros,
        }
    }

    #[tokio::test]
    async fn a_cached_player_is_judged_without_the_database() {
        let cache = Revocations::new(unreachable_pool());
        cache.listening(true);
        let player = Uuid::new_v4();
        cache.revoked(player, 1_000);
        assert!(cache.admit(token(player, Some(1_000))).await.is_ok());
        assert!(matches!(
            cache.admit(token(player, Some(999))).await,
            Err(Refused::Revoked)
        ));
        assert!(matches!(
            cache.admit(token(player, None)).await,
            Err(Refused::Revoked)
        ));
        // Not cached, or not listening: the database is asked (and here fails).
        let stranger = Uuid::new_v4();
        assert!(matches!(
            cache.admit(token(stranger, Some(1))).await,
            Err(Refused::Store(_))
        ));
        cache.listening(false);
        assert!(matches!(
            cache.admit(token(player, Some(1_000))).await,
            Err(Refused::Store(_))
        ));
    }

    #[tokio::test]
    async fn a_revocation_waits_for_every_expected_acknowledgement() {
        let cache = Revocations::new(unreachable_pool());
        let player = Uuid::new_v4();
        cache.acknowledged(player, 5);
        let wait = cache.expect_acks(player, 5);
        cache.acknowledged(player, 5);
        cache.acknowledged(player, 6);
        cache.acknowledged(player, 5);
        assert!(wait.wait(2, Duration::from_secs(1)).await);
        let wait = cache.expect_acks(player, 7);
        cache.acknowledged(player, 7);
        assert!(!wait.wait(2, Duration::from_millis(50)).await, "one of two");
        assert!(
            lock(&cache.inner.acks).is_empty(),
            "nothing kept after waiting"
        );
    }

    #[tokio::test]
    async fn a_deleted_player_is_refused_as_unknown() {
        let cache = Revocations::new(unreachable_pool());
        cache.listening(true);
        let player = Uuid::new_v4();
        cache.revoked(player, GONE);
        assert!(matches!(
            cache.admit(token(player, Some(1_000))).await,
            Err(Refused::UnknownPlayer)
        ));
        let generation = cache.read().generation;
        assert_eq!(cache.learn(player, 5, generation), GONE, "a late read");
    }

    #[tokio::test]
    async fn nothing_is_stored_while_not_listening() {
        let cache = Revocations::new(unreachable_pool());
        let player = Uuid::new_v4();
        let generation = cache.read().generation;
        cache.learn(player, 1_000, generation);
        assert_eq!(cache.cached(), 0);
    }
}
