//! Idempotency keys, the one module: a player's key claims one request inside the request's
//! own transaction, and a retry with the same key gets the first answer back.

use serde::{Serialize, Serializer};
use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{AppError, Result};
use crate::store::idempotency;

/// An `Idempotency-Key` and a digest of the request it was first used with.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Idempotency {
    pub key: String,
    pub request_hash: String,
}

/// A use case's answer: computed now, or the first answer replayed for a retried
/// `Idempotency-Key`. It serialises as the answer itself either way.
#[derive(Clone, Debug)]
pub enum Answer<T> {
    Fresh(T),
    Replayed(Value),
}

impl<T> Answer<T> {
    /// The answer computed now, if it was not a replay.
    pub fn fresh(self) -> Option<T> {
        match self {
            Answer::Fresh(answer) => Some(answer),
            Answer::Replayed(_) => None,
        }
    }
}

impl<T: Serialize> Serialize for Answer<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Answer::Fresh(answer) => answer.serialize(serializer),
            Answer::Replayed(stored) => stored.serialize(serializer),
        }
    }
}

/// Claims the request's key in `tx`. A key already used gives the first answer (or why it
/// cannot be given); the caller returns it and its transaction rolls back. The claim waits
/// for a concurrent claimant to commit, and each statement sees what committed before it,
/// so the stored answer is read on the same connection.
pub(crate) async fn claim_or_replay(
    tx: &mut PgConnection,
    actor: Uuid,
    idempotency: Option<&Idempotency>,
) -> Result<Option<Value>> {
    let Some(key) = idempotency else {
        return Ok(None);
    };
    if idempotency::claim(&mut *tx, actor, &key.key, &key.request_hash).await?
        || idempotency::reclaim_expired(&mut *tx, actor, &key.key, &key.request_hash).await?
    {
        return Ok(None);
    }
    replay(tx, actor, key).await.map(Some)
}

/// Whether `actor`'s `key` already has its answer stored: a request under it is a retry,
/// answered with that answer (or refused, for another request under the same key).
pub(crate) async fn answered(
    db: impl sqlx::PgExecutor<'_>,
    actor: Uuid,
    key: &str,
) -> Result<bool> {
    Ok(matches!(
        idempotency::get(db, actor, key).await?,
        Some((_, Some(_)))
    ))
}

/// The first answer given under an already claimed key.
pub(crate) async fn replay(tx: &mut PgConnection, actor: Uuid, key: &Idempotency) -> Result<Value> {
    answer_of(idempotency::get(&mut *tx, actor, &key.key).await?, key)
}

/// The first answer given under an already claimed key of a command on `match_id` (these
/// keys live with the match: see [`idempotency`]).
pub(crate) async fn replay_on_match(
    tx: &mut PgConnection,
    match_id: Uuid,
    actor: Uuid,
    key: &Idempotency,
) -> Result<Value> {
    answer_of(
        idempotency::get_on_match(&mut *tx, match_id, actor, &key.key).await?,
        key,
    )
}

fn answer_of(stored: Option<(String, Option<Value>)>, key: &Idempotency) -> Result<Value> {
    match stored {
        Some((hash, _)) if hash != key.request_hash => Err(AppError::IdempotencyMismatch),
        Some((_, Some(response))) => Ok(response),
        _ => Err(AppError::IdempotencyInProgress),
    }
}

/// Records `answer` under the request's key, in the request's transaction.
pub(crate) async fn remember<T: Serialize>(
    tx: &mut PgConnection,
    actor: Uuid,
    idempotency: Option<&Idempotency>,
    answer: &T,
) -> Result<()> {
    if let Some(key) = idempotency {
        idempotency::finish(&mut *tx, actor, &key.key, &to_json(answer)?).await?;
    }
    Ok(())
}

pub(crate) fn to_json<T: Serialize>(value: &T) -> Result<Value> {
    serde_json::to_value(value).map_err(|e| AppError::Corrupt(e.to_string()))
}
