//! Which tokens a replica still accepts, without a database query per request.
//!
//! Each replica caches, per player it has seen, the instant from which their tokens are
//! valid (`players.tokens_valid_from`; never revoked = the beginning of time). A miss
//! reads the row once; a player that does not exist is never cached, so their token is
//! refused by a read each time (only the holder of the signing secret can make one).
//!
//! A revocation commits a new instant and notifies [`TOKENS_CHANNEL`]; every replica's
//! live listener (see `live`) applies it to its cache the moment PostgreSQL delivers it.
//! The instant only moves forward, so the cache keeps the latest of what it read and what
//! it was told, and a read that raced a notification cannot bring an old value back. While
//! the listener is down, notifications are lost: the cache is then bypassed (every request
//! reads the row), and it is emptied when the listener is back, before it is trusted again;
//! a read begun before that is not stored.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use sqlx::PgPool;
use tokio::sync::watch;
use uuid::Uuid;

use crate::auth::Verified;
use crate::store::{self, StoreError};

/// The channel revocations are announced on, as `player_id:valid_from_micros`.
pub const TOKENS_CHANNEL: &str = "statki_tokens";

/// "Never revoked": every issue instant (and a token without one) is at or after it.
const NEVER: i64 = i64::MIN;

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
    state: RwLock<State>,
    /// Counts revocations applied, so a revoking request can wait for its own.
    applied: watch::Sender<u64>,
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

impl Default for Revocations {
    fn default() -> Self {
        Self {
            inner: Arc::new(Inner {
                state: RwLock::new(State::default()),
                applied: watch::channel(0).0,
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
    pub async fn admit(&self, pool: &PgPool, token: Verified) -> Result<(), Refused> {
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
                let loaded = store::accounts::tokens_valid_from(pool, token.player)
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

    /// A revocation was announced: `player`'s tokens are valid from `valid_from` (µs).
    pub fn revoked(&self, player: Uuid, valid_from: i64) {
        {
            let mut state = self.write();
            let entry = state.valid_from.entry(player).or_insert(valid_from);
            *entry = (*entry).max(valid_from);
        }
        self.inner.applied.send_modify(|count| *count += 1);
    }

    /// The listener went down (`false`) or (re)connected (`true`). Either way anything
    /// cached may have missed a notification, so the cache starts empty.
    pub fn listening(&self, listening: bool) {
        let mut state = self.write();
        state.listening = listening;
        state.generation += 1;
        state.valid_from.clear();
    }

    /// Waits (at most `limit`) until this replica has applied a revocation of `player` up
    /// to `valid_from`, so the revoking request answers only once its own replica refuses
    /// the old tokens. Returns at once when the cache is bypassed anyway.
    pub async fn applied(&self, player: Uuid, valid_from: i64, limit: Duration) -> bool {
        let mut changes = self.inner.applied.subscribe();
        let wait = async {
            loop {
                {
                    let state = self.read();
                    let seen = state
                        .valid_from
                        .get(&player)
                        .is_some_and(|&v| v >= valid_from);
                    if seen || !state.listening {
                        return;
                    }
                }
                if changes.changed().await.is_err() {
                    return;
                }
            }
        };
        tokio::time::timeout(limit, wait).await.is_ok()
    }

    /// Players cached here (for tests and metrics).
    pub fn cached(&self) -> usize {
        self.read().valid_from.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_late_read_never_undoes_a_newer_revocation() {
        let cache = Revocations::default();
        cache.listening(true);
        let player = Uuid::new_v4();
        let generation = cache.read().generation;
        cache.revoked(player, 2_000);
        assert_eq!(cache.learn(player, 1_000, generation), 2_000);
        assert_eq!(cache.read().valid_from[&player], 2_000);
    }

    #[test]
    fn a_read_begun_before_a_reconnect_is_not_stored() {
        let cache = Revocations::default();
        cache.listening(true);
        let player = Uuid::new_v4();
        let generation = cache.read().generation;
        cache.listening(false);
        cache.listening(true);
        assert_eq!(cache.learn(player, 1_000, generation), 1_000);
        assert_eq!(cache.cached(), 0);
    }

    #[test]
    fn nothing_is_stored_while_not_listening() {
        let cache = Revocations::default();
        let player = Uuid::new_v4();
        let generation = cache.read().generation;
        cache.learn(player, 1_000, generation);
        assert_eq!(cache.cached(), 0);
    }
}
