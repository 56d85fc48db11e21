//! Idempotency keys: a player's key claims one request; its first answer is replayed.
//!
//! Keys are scoped by player. Registration has no player yet: its keys live under
//! [`REGISTRATION_SCOPE`], a key space no player can share.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgExecutor;
use uuid::Uuid;

use super::StoreError;

/// The scope of registration keys: the nil id, which the schema forbids as a player id.
pub const REGISTRATION_SCOPE: Uuid = Uuid::nil();
/// How long a key is remembered: a retry later than this is a new request, and the
/// housekeeping step deletes the key.
pub const KEY_LIFETIME: chrono::TimeDelta = chrono::TimeDelta::hours(24);

/// Claims `key` for this request inside the caller's transaction. Returns false when the
/// key was already used (a concurrent claimant waits here until the first commits); see
/// [`reclaim_expired`] for a key older than [`KEY_LIFETIME`].
pub async fn claim(
    db: impl PgExecutor<'_>,
    player: Uuid,
    key: &str,
    request_hash: &str,
) -> Result<bool, StoreError> {
    let claimed = sqlx::query(
        "INSERT INTO idempotency_keys (player_id, key, request_hash) VALUES ($1, $2, $3)
         ON CONFLICT (player_id, key) DO NOTHING",
    )
    .bind(player)
    .bind(key)
    .bind(request_hash)
    .execute(db)
    .await?;
    Ok(claimed.rows_affected() == 1)
}

/// A player's key, as the write path gives it back.
pub struct KeyRef<'a> {
    pub player: Uuid,
    pub key: &'a str,
}

/// The first answer to record under a claimed key.
pub struct Answer<'a> {
    pub player: Uuid,
    pub key: &'a str,
    pub response: &'a Value,
}

pub(super) struct KeyColumns<'a> {
    pub players: Vec<Uuid>,
    pub keys: Vec<&'a str>,
}

impl<'a> KeyColumns<'a> {
    pub(super) fn of(keys: &[KeyRef<'a>]) -> Self {
        KeyColumns {
            players: keys.iter().map(|k| k.player).collect(),
            keys: keys.iter().map(|k| k.key).collect(),
        }
    }
}

pub(super) struct AnswerColumns<'a> {
    pub players: Vec<Uuid>,
    pub keys: Vec<&'a str>,
    pub responses: Vec<&'a Value>,
}

impl<'a> AnswerColumns<'a> {
    pub(super) fn of(answers: &[Answer<'a>]) -> Self {
        AnswerColumns {
            players: answers.iter().map(|a| a.player).collect(),
            keys: answers.iter().map(|a| a.key).collect(),
            responses: answers.iter().map(|a| a.response).collect(),
        }
    }
}

/// A key to claim for one request.
pub struct Claim<'a> {
    pub player: Uuid,
    pub key: &'a str,
    pub request_hash: &'a str,
}

/// Claims several keys in one statement, in (player, key) order so two transactions
/// claiming overlapping keys wait for each other in the same order and never deadlock.
/// Returns which of `claims` were claimed here (the others were used before).
pub async fn claim_many(
    db: impl PgExecutor<'_>,
    claims: &[Claim<'_>],
) -> Result<Vec<bool>, StoreError> {
    let players: Vec<Uuid> = claims.iter().map(|c| c.player).collect();
    let keys: Vec<&str> = claims.iter().map(|c| c.key).collect();
    let hashes: Vec<&str> = claims.iter().map(|c| c.request_hash).collect();
    let rows: Vec<(Uuid, String)> = sqlx::query_as(
        "INSERT INTO idempotency_keys (player_id, key, request_hash)
         SELECT player_id, key, request_hash
         FROM UNNEST($1::uuid[], $2::text[], $3::text[]) AS c(player_id, key, request_hash)
         ORDER BY player_id, key
         ON CONFLICT (player_id, key) DO NOTHING
         RETURNING player_id, key",
    )
    .bind(&players)
    .bind(&keys)
    .bind(&hashes)
    .fetch_all(db)
    .await?;
    let claimed: std::collections::HashSet<(Uuid, String)> = rows.into_iter().collect();
    Ok(claims
        .iter()
        .map(|c| claimed.contains(&(c.player, c.key.to_owned())))
        .collect())
}

/// Claims a used key afresh for this request when it is older than [`KEY_LIFETIME`]: it
/// is forgotten, so the request is a new one. Returns whether it was claimed. Only asked
/// after [`claim`] found the key used, so the common path costs nothing more.
pub async fn reclaim_expired(
    db: impl PgExecutor<'_>,
    player: Uuid,
    key: &str,
    request_hash: &str,
) -> Result<bool, StoreError> {
    let reclaimed = sqlx::query(
        "UPDATE idempotency_keys
         SET request_hash = $3, response = NULL, created_at = clock_timestamp()
         WHERE player_id = $1 AND key = $2 AND created_at < clock_timestamp() - $4::interval",
    )
    .bind(player)
    .bind(key)
    .bind(request_hash)
    .bind(KEY_LIFETIME)
    .execute(db)
    .await?;
    Ok(reclaimed.rows_affected() == 1)
}

/// Records the answer for a claimed key, in the same transaction as the command.
pub async fn finish(
    db: impl PgExecutor<'_>,
    player: Uuid,
    key: &str,
    response: &Value,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE idempotency_keys SET response = $3 WHERE player_id = $1 AND key = $2")
        .bind(player)
        .bind(key)
        .bind(response)
        .execute(db)
        .await?;
    Ok(())
}

/// The request hash and stored answer of a used key.
pub async fn get(
    db: impl PgExecutor<'_>,
    player: Uuid,
    key: &str,
) -> Result<Option<(String, Option<Value>)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT request_hash, response FROM idempotency_keys WHERE player_id = $1 AND key = $2",
    )
    .bind(player)
    .bind(key)
    .fetch_optional(db)
    .await?)
}

/// One batch of the key purge (see [`purge`]).
pub const PURGE_KEYS: &str = "DELETE FROM idempotency_keys WHERE (player_id, key) IN (
         SELECT player_id, key FROM idempotency_keys WHERE created_at < $1
         ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)";

/// Deletes up to `batch` keys created before `before`, oldest first; returns how many.
/// Safe for any number of replicas at once: rows another deleter holds are skipped.
pub async fn purge(
    db: impl PgExecutor<'_>,
    before: DateTime<Utc>,
    batch: i64,
) -> Result<u64, StoreError> {
    let deleted = sqlx::query(PURGE_KEYS)
        .bind(before)
        .bind(batch)
        .execute(db)
        .await?;
    Ok(deleted.rows_affected())
}

/// Records first answers under their claimed keys and gives back `releases`, as the batch
/// statement of [`super::matches::write`] does; for the write on Citus
/// ([`super::citus::write`]), where the keys stay on the coordinator.
pub(super) async fn record(
    conn: &mut sqlx::PgConnection,
    answers: &[Answer<'_>],
    releases: &[KeyRef<'_>],
) -> Result<(), StoreError> {
    if !answers.is_empty() {
        let answers = AnswerColumns::of(answers);
        sqlx::query(
            "UPDATE idempotency_keys SET response = a.response
             FROM UNNEST($1::uuid[], $2::text[], $3::jsonb[]) AS a(player_id, key, response)
             WHERE idempotency_keys.player_id = a.player_id AND idempotency_keys.key = a.key",
        )
        .bind(&answers.players)
        .bind(&answers.keys)
        .bind(&answers.responses)
        .execute(&mut *conn)
        .await?;
    }
    if !releases.is_empty() {
        let releases = KeyColumns::of(releases);
        sqlx::query(
            "DELETE FROM idempotency_keys USING UNNEST($1::uuid[], $2::text[]) AS r(player_id, key)
             WHERE idempotency_keys.player_id = r.player_id AND idempotency_keys.key = r.key",
        )
        .bind(&releases.players)
        .bind(&releases.keys)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}
